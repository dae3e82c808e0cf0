"""Migration 0015_query_speed: the base views join only the dimension rows a query reads, and
dnscamp_ns_ms gives the float8 the numeric arithmetic gave, for every pair of bigints."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collectors.ingest import ingest
from db import migrate
from db.migrations.views import view_sql
from tests.local.test_migrations import _fixture_records, _insert_result
from tests.local.test_sql_examples import gen
from tests.scaffolding.demo_data import load_demo
from tests.store_util import ingest_with_old_code

pytestmark = pytest.mark.local
INT64 = st.integers(-(2**63), 2**63 - 1)


def _plan(conn: psycopg.Connection, query: str) -> str:
    return "\n".join(r[0] for r in conn.execute("EXPLAIN " + query))


def _rows_now_and_at(conn: psycopg.Connection, view: str, revision: str) -> tuple[list, list]:
    """Every row of ``view`` as it is now and as ``revision`` defined it (created as the scratch
    view ``<view>_old``): every column as text (jsonb and floats compare exactly so), in id order."""
    conn.execute(view_sql(revision, view).replace(f"VIEW {view} AS", f"VIEW {view}_old AS"))
    cols = [r[0] for r in conn.execute("SELECT column_name FROM information_schema.columns "
                                       "WHERE table_name = %s ORDER BY ordinal_position", (view,))]
    select = "SELECT " + ", ".join(f"{col}::text" for col in cols) + " FROM {} ORDER BY id"
    return conn.execute(select.format(view)).fetchall(), conn.execute(select.format(f"{view}_old")).fetchall()


@pytest.mark.parametrize(
    ("query", "absent", "present"),
    [
        # a per-transport question reads dns_shapes only: contexts and environments are not joined
        ("SELECT transport, count(*) FROM v_dns_query WHERE status = 'ok' GROUP BY 1",
         ("contexts", "environments"), ("dns_shapes",)),
        # total_ms is read from dns_queries' own columns; the generic branch reads its kind by index
        ("SELECT campaign, avg(total_ms) FROM v_dns_query GROUP BY 1", ("environments", "dns_shapes"),
         ("contexts", "kind_started")),
        ("SELECT tool_versions FROM v_dns_query", (), ("environments",)),
        # kind is read from the tables (0025): a count per kind joins no dimension
        ("SELECT kind, count(*) FROM v_results GROUP BY 1", ("environments", "ingest_batches", "contexts"), ()),
        ("SELECT kind, campaign, count(*) FROM v_results GROUP BY 1, 2", ("environments", "ingest_batches"), ("contexts",)),
        ("SELECT browser, avg(plt_ms) FROM v_page_load GROUP BY 1", ("environments", "contexts"), ()),
        ("SELECT seed FROM v_page_load", (), ("environments",)),
    ],
)  # fmt: skip
def test_views_join_only_what_a_query_reads(empty_db, query, absent, present):
    with psycopg.connect(empty_db) as c:
        c.execute("SELECT dnscamp_ensure_partitions(now())")  # without a partition the plan is empty
        plan = _plan(c, query)
    for table in absent:
        assert f" on {table} " not in plan and not any(f"{table}_pkey" in line for line in plan.splitlines()), plan
    for table in present:
        assert table in plan, plan


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pairs=st.lists(st.tuples(st.one_of(st.none(), INT64, st.integers(0, 2**62)),
                                st.one_of(st.none(), INT64, st.integers(0, 2**62))), min_size=1, max_size=40))  # fmt: skip
def test_ns_ms_equals_the_numeric_difference(db_url, pairs):
    edges = [(2**63 - 1, 0), (0, 2**63 - 1), (2**63 - 1, -(2**63)), (-(2**63), 2**63 - 1), (5, 5), (3, 10**18)]
    pairs = pairs + edges
    with psycopg.connect(db_url) as c:
        rows = c.execute(
            "SELECT dnscamp_ns_ms(a, b), (a::numeric - b)::float8 / 1e6 FROM unnest(%s::bigint[], %s::bigint[]) AS u(a, b)",
            ([a for a, _ in pairs], [b for _, b in pairs]),
        ).fetchall()
    assert [r[0] for r in rows] == [r[1] for r in rows]


def test_v_dns_query_is_0015s_view_flattened(fresh_db, tmp_path):
    """0024 wrote v_dns_query without WITH: a query's plan scans the tables with no subquery scan
    of the view above them, and the view gives every row and column that 0015's definition
    gives, over typed rows (the demo data and a generated campaign) and bodies stored whole in
    generic_results (a value of another type, a missing key)."""
    load_demo(fresh_db)
    gen.generate(tmp_path, seed=24, dns_queries_n=1500, page_loads_n=10, atlas_n=10, campaign="flat")
    gen.load(tmp_path, fresh_db, workers=1)
    rec = next(r for r in _fixture_records() if r["kind"] == "dns_query")
    odd = [{**rec["body"], "t_start": "late"}, {k: v for k, v in rec["body"].items() if k != "answers"},
           {**rec["body"], "port": 1e300, "transport": ["doh"]}]
    with psycopg.connect(fresh_db) as c:
        for body in odd:
            _insert_result(c, {**rec, "body": body}, "flat")
        assert c.execute("SELECT count(*) FROM generic_results WHERE kind = 'dns_query'").fetchone()[0] >= len(odd)
        new, old = _rows_now_and_at(c, "v_dns_query", "0015_query_speed")
        assert len(new) > 1500 and new == old
        query = "SELECT transport, percentile_cont(0.5) WITHIN GROUP (ORDER BY total_ms) FROM {} GROUP BY 1"
        new, old = _plan(c, query.format("v_dns_query")), _plan(c, query.format("v_dns_query_old"))
    assert "Subquery Scan on v_dns_query_old" in old and "Result" in old  # the whole projection, every row
    assert "Subquery Scan on v_dns_query" not in new and "Result" not in new and "dns_queries" in new, new


def test_v_results_reads_kind_from_its_tables_as_0015_did_from_contexts(fresh_db, tmp_path):
    """0025 reads v_results.kind from dns_queries (always dns_query) and generic_results (its
    kind column) instead of the context: every row and column is what 0015's definition gives,
    over ingested records of every kind (the demo data, a generated campaign) and records
    written through the results view (a dns_query body stored whole, a ping)."""
    load_demo(fresh_db)
    gen.generate(tmp_path, seed=25, dns_queries_n=400, page_loads_n=60, atlas_n=10, campaign="kinds")
    gen.load(tmp_path, fresh_db, workers=1)
    recs = _fixture_records()
    dns = next(r for r in recs if r["kind"] == "dns_query")
    written = [{**dns, "body": {**dns["body"], "t_start": "late"}}, *(r for r in recs if r["kind"] != "dns_query")]
    with psycopg.connect(fresh_db) as c:
        for rec in written:
            _insert_result(c, rec, "kinds")
        kinds = {k for (k,) in c.execute("SELECT DISTINCT kind FROM generic_results")}
        assert {"dns_query", "page_load"} <= kinds and len(kinds) >= 3, kinds
        new, old = _rows_now_and_at(c, "v_results", "0015_query_speed")
        assert len(new) > 460 and new == old
        query = "SELECT kind, date_trunc('day', started_at), count(*) FROM {} GROUP BY 1, 2"
        new, old = _plan(c, query.format("v_results")), _plan(c, query.format("v_results_old"))
    assert "contexts" in old and "contexts" not in new, new


def _sa(url: str) -> str:
    return url.replace("postgresql://", "postgresql+psycopg://", 1)


def _v_dns_query_rows(conn: psycopg.Connection) -> list:
    cols = [r[0] for r in conn.execute("SELECT column_name FROM information_schema.columns "
                                       "WHERE table_name = 'v_dns_query' ORDER BY ordinal_position")]
    return conn.execute("SELECT " + ", ".join(f"{c}::text" for c in cols) + " FROM v_dns_query ORDER BY id").fetchall()


def test_v_dns_query_is_one_union_of_single_tables(fresh_db, tmp_path):
    """0026 gives every dns_query stored whole in generic_results a dns_shapes row and reads
    v_dns_query as one union of single tables with the joins above it. Bodies stored whole before
    the upgrade (by ingest: a per-record key absent; through the results view: a value of another
    type, answers absent, a huge port and a list transport) get their shapes at the upgrade, and
    the view gives the rows it gave before, ingested or inserted after it too (equal to 0024's
    definition, which 0025 kept); a question's plan has no subquery scan and joins dns_shapes once."""
    load_demo(fresh_db)
    gen.generate(tmp_path, seed=26, dns_queries_n=600, page_loads_n=10, atlas_n=10, campaign="shaped")
    gen.load(tmp_path, fresh_db, workers=1)
    rec = next(r for r in _fixture_records() if r["kind"] == "dns_query")
    odd = [{**rec["body"], "t_start": "late"}, {k: v for k, v in rec["body"].items() if k != "answers"},
           {**rec["body"], "port": 1e300, "transport": ["doh"]}]
    dropped = [{k: v for k, v in rec["body"].items() if k != key} for key in ("t_connected", "sequence", "answers")]

    def misfits(name: str) -> Path:  # valid records whose bodies do not fit dns_queries (stored whole), and a typed one
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps({**rec, "id": str(uuid.uuid4()), "campaign": "shaped", "body": b}) + "\n"
                                for b in [*dropped, rec["body"]]))
        return path

    migrate.downgrade(_sa(fresh_db), "0025_results_kind")
    # records an older dnscamp ingested at 0025 (its generic_results rows without shape_id)
    assert ingest_with_old_code([misfits("before")], fresh_db, tmp_path / "code") == len(dropped) + 1
    with psycopg.connect(fresh_db) as c:
        for body in odd:
            _insert_result(c, {**rec, "body": body}, "shaped")
        before = _v_dns_query_rows(c)
    migrate.upgrade(_sa(fresh_db), "head")
    with psycopg.connect(fresh_db) as c:
        assert _v_dns_query_rows(c) == before
        assert c.execute("SELECT count(*), count(shape_id) FROM generic_results WHERE kind = 'dns_query'").fetchone() == (
            len(odd) + len(dropped),) * 2
        # a dropped key's body has the shape of the typed record it came from
        assert c.execute("SELECT count(DISTINCT shape_id) FROM generic_results WHERE kind = 'dns_query' "
                         "AND shape_id IN (SELECT shape_id FROM dns_queries)").fetchone()[0] >= 1
    assert ingest([misfits("after")], fresh_db, workers=1).ingested == len(dropped) + 1
    with psycopg.connect(fresh_db) as c:
        for body in odd:
            _insert_result(c, {**rec, "body": body}, "shaped")
        assert c.execute("SELECT count(*) FILTER (WHERE shape_id IS NULL) FROM generic_results "
                         "WHERE kind = 'dns_query'").fetchone()[0] == 0
        new, old = _rows_now_and_at(c, "v_dns_query", "0024_flat_dns_query")
        assert len(new) == len(before) + len(odd) + len(dropped) + 1 and new == old
        plan = _plan(c, "SELECT resolver, transport, avg((status <> 'ok')::int) FROM v_dns_query GROUP BY 1, 2")
        old_plan = _plan(c, "SELECT resolver, transport, avg((status <> 'ok')::int) FROM v_dns_query_old GROUP BY 1, 2")
    assert "Subquery Scan" in old_plan and plan.count("dns_shapes") == 1, old_plan
    assert "Subquery Scan" not in plan and "contexts" not in plan and "generic_results" in plan, plan
