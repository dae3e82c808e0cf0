"""`dnscamp sql`: the same query on the store (reader role) and on DuckDB over the archive
gives the same rows, view by view and for the documented dashboard queries."""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import math
import os
import re
from datetime import datetime
from pathlib import Path

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from dnscamp.cli import app
from dnscamp.commands.sql import run_query
from dnscamp.opendata import archive as arc
from dnscamp.opendata import duck
from tests.scaffolding.demo_data import CAMPAIGN, load_demo
from tests.store_util import copy_of_template, drop_database

pytestmark = pytest.mark.local
runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("gen_campaign", ROOT / "bench" / "gen_campaign.py")
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)

# dashboard-style queries (bench/archive_bench.py times them): each must run unchanged on both
QUERIES = {
    "p50_total_ms_per_transport_7d": """
        SELECT transport, count(*) AS n,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY total_ms) AS p50_total_ms
        FROM v_dns_query
        WHERE status = 'ok' AND started_at >= (SELECT max(started_at) FROM v_dns_query) - INTERVAL '7 days'
        GROUP BY transport ORDER BY transport""",
    "failure_rate_resolver_transport_30d": """
        SELECT resolver, transport, count(*) AS n,
               avg(CASE WHEN status = 'ok' THEN 0.0 ELSE 1.0 END) AS failure_rate
        FROM v_dns_query
        WHERE started_at >= (SELECT max(started_at) FROM v_dns_query) - INTERVAL '30 days'
        GROUP BY resolver, transport ORDER BY resolver, transport""",
    "failures_by_status": "SELECT kind, status, sum(n) AS n FROM v_failures GROUP BY 1, 2 ORDER BY 1, 2",
    "page_load_plt": """
        SELECT browser, http, dns_transport, count(*) AS n, avg(plt_ms) AS plt
        FROM v_page_load GROUP BY 1, 2, 3 ORDER BY 1, 2, 3""",
}


def _norm(v):
    if isinstance(v, datetime):
        return v.timestamp()
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True)
    if v is not None and type(v).__name__ in ("UUID", "Decimal"):
        return str(v) if type(v).__name__ == "UUID" else float(v)
    return v


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, (int, float)) or isinstance(b, float) and isinstance(a, (int, float)):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(a, str) and isinstance(b, str) and a != b and a[:1] in "[{":
        return json.loads(a) == json.loads(b)  # JSON text: the same value, maybe spelled otherwise
    return a == b


def assert_same_rows(pg: tuple, dk: tuple, what: str) -> None:
    (pcols, prows), (dcols, drows) = pg, dk
    assert pcols == dcols, what
    assert len(prows) == len(drows), (what, len(prows), len(drows))
    for pr, dr in zip(prows, drows):
        for col, a, b in zip(pcols, map(_norm, pr), map(_norm, dr)):
            assert _same(a, b), (what, col, a, b, pr[0])


@pytest.fixture(scope="module")
def both(db_url, tmp_path_factory):
    """The demo campaign and a small generated one (records and Atlas results, stored by the
    normal ingest paths) in a store, and the archive of both; one per module (the tests only
    read), in a database copied from the session's template as fresh_db does."""
    name = f"t_sqlcli_{os.getpid()}"
    url = copy_of_template(name)
    tmp = tmp_path_factory.mktemp("sqlcli")
    load_demo(url)
    gen.generate(tmp / "gen", seed=5, dns_queries_n=2000, page_loads_n=300, atlas_n=1500, campaign=CAMPAIGN)
    gen.load(tmp / "gen", url, workers=1)
    with psycopg.connect(url) as c:
        arc.write(c, CAMPAIGN, str(tmp / "arch"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DNSCAMP_DATABASE_NAME", name)
        yield str(tmp / "arch")
    drop_database(name)


def test_every_archived_view_gives_the_stores_rows(both):
    m = json.loads((Path(both) / "manifest.json").read_text())
    assert duck.unresolved(m) == {}  # every column of v_results, v_dns_query, v_page_load, v_ping
    order_by = {"v_failures": "campaign, kind, vantage_id, network_profile, status", "v_atlas_ping": "raw_id",
                "v_quicsocks_savings": "campaign, prb_id"}  # fmt: skip
    for view in ("v_results", "v_dns_query", "v_page_load", "v_ping", "v_failures", "v_atlas_ping", "v_atlas_dns",
                 "v_quicsocks_savings"):  # fmt: skip
        cols = [c for c, _ in m["views"][view] if not (view == "v_results" and c == "ingested_at")]
        order = order_by.get(view, "id")
        q = f"SELECT {', '.join(cols)} FROM {view} WHERE campaign LIKE '{CAMPAIGN}%' ORDER BY {order}"
        pg = run_query(q)
        assert pg[1], view
        assert_same_rows(pg, run_query(q, both), view)


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_dashboard_queries_run_unchanged_on_both(both, name):
    pg = run_query(QUERIES[name])
    assert pg[1]
    assert_same_rows(pg, run_query(QUERIES[name], both), name)


def test_sql_cli_formats_and_errors(both):
    q = "SELECT transport, count(*) AS n FROM v_dns_query GROUP BY 1 ORDER BY 1"
    r = runner.invoke(app, ["sql", "--archive", both, q, "--format", "csv"])
    assert r.exit_code == 0, r.stderr
    rows = list(csv.reader(io.StringIO(r.stdout)))
    assert rows[0] == ["transport", "n"] and [x[0] for x in rows[1:]] == ["do53", "doh", "doh3", "doq", "dot"]
    r2 = runner.invoke(app, ["sql", q, "--format", "json"])  # the store, as the reader
    assert r2.exit_code == 0, r2.stderr
    assert json.loads(r2.stdout) == [{"transport": t, "n": int(n)} for t, n in rows[1:]]
    r = runner.invoke(app, ["sql", "--archive", both, q])
    assert r.exit_code == 0 and r.stdout.splitlines()[0].split() == ["transport", "|", "n"] and "(5 rows)" in r.stdout
    r = runner.invoke(app, ["sql", "SELECT count(*) FROM results"])  # the reader sees the views only
    assert r.exit_code == 2 and "permission denied" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = runner.invoke(app, ["sql", "--archive", both, "SELECT nope FROM v_results"])
    assert r.exit_code == 2 and r.stderr.startswith("dnscamp: sql: ")
    r = runner.invoke(app, ["sql", q, "--format", "xml"])
    assert r.exit_code == 2 and "--format" in r.stderr


def _guide_examples() -> list[tuple[str, str]]:
    from tests.local.test_sql_examples import examples

    return examples()


@pytest.mark.parametrize("title,sql", _guide_examples(), ids=[t.split(".")[0] for t, _ in _guide_examples()])
def test_docs_sql_examples_run_unchanged_on_the_archive(both, title, sql):
    """docs/sql.md's examples: the same text on the store and on the archive, the same rows
    (an example over views the archive does not hold is refused by DuckDB, not answered wrongly)."""
    pg = run_query(sql)
    m = json.loads((Path(both) / "manifest.json").read_text())
    archived = set(duck.view_sql(m, sorted(m["kinds"]))) | {"v_failures"} | set(m["view_defs"]) - {"v_atlas_credits"}
    used = set(re.findall(r"\bv_[a-z_]+\b", sql))
    if not used <= archived:
        r = runner.invoke(app, ["sql", "--archive", both, sql])
        assert r.exit_code == 2 and "does not exist" in r.stderr, (used - archived, r.stderr)
        return
    assert_same_rows(pg, run_query(sql, both), title)


def test_archive_bench_exact_floor_on_both(both):
    """bench/archive_bench.py's `exact_floor` (the exact p50 per transport on both engines,
    and percentile_cont alone over the same values): it runs on a store and its archive, both
    engines agree (it asserts so), and its temporary table holds the window's ok records."""
    import sys

    from db import engine

    sys.path.insert(0, str(ROOT / "bench"))
    import archive_bench

    name = os.environ["DNSCAMP_DATABASE_NAME"]
    out = archive_bench.exact_floor(engine.database_url("owner", dbname=name), engine.database_url("reader", dbname=name),
                                         CAMPAIGN, Path(both), runs=1)  # fmt: skip
    assert list(out) == list(archive_bench.FLOOR_WINDOWS)
    for window, lo in archive_bench.FLOOR_WINDOWS.items():
        n = run_query(f"SELECT count(*) FROM v_dns_query WHERE campaign = '{CAMPAIGN}' AND status = 'ok' "
                      f"AND started_at >= TIMESTAMPTZ '{lo}'")[1][0][0]  # fmt: skip
        assert out[window]["values"] == n > 0, window
        assert all(out[window][k] > 0 for k in ("duckdb_ms", "postgres_view_ms", "parallel_collect_ms",
                                                 "alone_one_group_ms", "alone_per_transport_ms"))  # fmt: skip


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(q=st.sampled_from([0.0, 1.0, 0.5, 0.9, 0.99]) | st.floats(0.0, 1.0))
def test_rollup_guided_exact_equals_percentile_cont(both, q):
    """bench/archive_bench.py's `guided_exact` (the rollup's histogram, then only the buckets
    holding the quantile's ranks) gives percentile_cont's value bit for bit, any q, without
    falling back."""
    import sys

    from db import engine

    sys.path.insert(0, str(ROOT / "bench"))
    import archive_bench

    with psycopg.connect(engine.database_url("reader", dbname=os.environ["DNSCAMP_DATABASE_NAME"])) as rc:
        for lo in archive_bench.FLOOR_WINDOWS.values():
            got, fell_back = archive_bench.guided_exact(rc, CAMPAIGN, lo, q)
            want = rc.execute("SELECT transport, count(total_ms), percentile_cont(%s) WITHIN GROUP (ORDER BY total_ms) "
                              "FROM v_dns_query WHERE campaign = %s AND status = 'ok' AND started_at >= %s::timestamptz "
                              "GROUP BY 1 ORDER BY 1", (q, CAMPAIGN, lo)).fetchall()  # fmt: skip
            assert want and got == want, (q, lo)
            assert fell_back == []


def test_rollup_guided_exact_falls_back_when_the_counts_disagree(both, monkeypatch):
    """A slice that misses a value (as a value bucketed differently at ingest would) does not
    give a wrong figure: the transport is answered by percentile_cont and named."""
    import sys

    from db import engine

    sys.path.insert(0, str(ROOT / "bench"))
    import archive_bench

    lo = archive_bench.FLOOR_WINDOWS["30 days"]
    with psycopg.connect(engine.database_url("reader", dbname=os.environ["DNSCAMP_DATABASE_NAME"])) as rc:
        exact, _ = archive_bench.guided_exact(rc, CAMPAIGN, lo)
        first = exact[0][0]
        # drop the first transport's smallest fetched value from the slice
        monkeypatch.setattr(archive_bench, "GUIDED_SLICE", archive_bench.GUIDED_SLICE.replace(
            "AND ({ranges})", f"AND ({{ranges}}) AND NOT (transport = '{first}' AND total_ms = (SELECT min(total_ms) "
            f"FROM v_dns_query WHERE campaign = %(campaign)s AND status = 'ok' AND started_at >= %(t0)s::timestamptz "
            f"AND transport = '{first}' AND total_ms >= %(lo0)s AND total_ms < %(hi0)s))"))  # fmt: skip
        got, fell_back = archive_bench.guided_exact(rc, CAMPAIGN, lo)
    assert fell_back == [first]
    assert got == exact


def test_a_query_over_the_archive_sees_what_it_would_with_every_view_created(both):
    """`sql --archive` creates only the views a query names and what they read: each one read
    alone gives the rows it gives beside all the others, a query over the catalog gets all of
    them, and a misspelt name fails with the error it gets when all of them exist."""
    import duckdb

    full = duck.connect(both)
    names = [r[0] for r in full.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal ORDER BY 1").fetchall()]
    assert {"v_results", "v_dns_query", "v_failures", "atlas_ping", "atlas_ping_latest", "v_quicsocks_savings"} <= set(names)
    for name in names:
        q = f"SELECT * FROM {name.upper() if name.startswith('v_') else name} ORDER BY ALL"
        cur = full.execute(q)
        assert_same_rows(([d[0] for d in cur.description], cur.fetchall()), duck.run(both, q), name)
    source, manifest = arc.verified(both, checksums=False)
    relations = duck._relations(source, manifest)
    assert duck.reached(relations, "SELECT 1") == set()
    assert duck.reached(relations, 'SELECT count(*) FROM "v_failures"') == {
        "v_failures", "v_results", *(r.name for r in relations if r.name.startswith("_k_"))}
    assert duck.reached(relations, "SELECT * FROM v_quicsocks_savings") >= {"atlas_ping_latest", "atlas_ping"}
    q = "SELECT table_name FROM information_schema.tables ORDER BY 1"
    assert duck.run(both, q)[1] == full.execute(q).fetchall()
    with pytest.raises(duckdb.CatalogException) as want:
        full.execute("SELECT * FROM v_dns_queries")
    with pytest.raises(duckdb.CatalogException) as got:
        duck.run(both, "SELECT * FROM v_dns_queries")
    assert str(got.value) == str(want.value) and "v_dns_query" in str(got.value)
