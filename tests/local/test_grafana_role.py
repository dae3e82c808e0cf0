"""The dashboards' role dnscamp_grafana (migration 0029) on a real store: it reads the aggregate
views and nothing that names an address, an object or a record; it and dnscamp_reader carry the
limits docs/store.md "Roles and limits" gives, a downgrade takes them off and an upgrade puts
them back; a query that would run for minutes is cancelled at the role's statement_timeout, and
the role cannot lift its ceiling on temporary files."""

from __future__ import annotations

import ipaddress
import re
import time

import psycopg
import pytest

from db import engine, migrate
from tests.scaffolding.demo_data import ATLAS_CAMPAIGN, CAMPAIGN, load_demo
from tests.store_util import role_url

pytestmark = pytest.mark.local

AGGREGATE_VIEWS = {
    "v_dns_hourly", "v_dns_hourly_hist", "v_dns_hourly_status", "v_dns_conn_daily", "v_dns_conn_daily_hist",
    "v_dns_name_daily", "v_page_load_daily", "v_page_load_daily_hist", "v_page_load_url_daily_hist",
    "v_ingest_daily", "v_ingest_lag_hist", "v_unit_daily", "v_contexts", "v_atlas_credits", "v_atlas_probes",
    "v_quarantine_counts",
}
# views it reads some columns of, and the columns it must never read there
PARTLY = {"v_quicsocks_savings": {"probe_addr", "resolver", "configured_resolver"},
          "v_collected_objects": {"bucket", "key", "etag"}}
RECORD_VIEWS = {"v_results", "v_dns_query", "v_page_load", "v_ping", "v_atlas_ping", "v_atlas_dns", "v_failures",
                "v_quarantine", "v_run_completeness"}
# what a column name says about its content: an address, a file or object name, raw text (a
# rollup's "resolver" is the spec's resolver name, its "bucket" a histogram bucket)
ADDRESSY = re.compile(r"addr|configured_resolver|source_file|^key$|etag|^raw")
LIMITS = {  # docs/store.md "Roles and limits"
    engine.GRAFANA: (10, {"statement_timeout": "15s", "work_mem": "16MB", "idle_in_transaction_session_timeout": "30s",
                          "temp_file_limit": "256MB"}),
    engine.READER: (20, {"statement_timeout": "30min", "work_mem": "64MB",
                         "idle_in_transaction_session_timeout": "10min", "temp_file_limit": "10GB"}),
}


def _columns(conn) -> dict[str, list[str]]:
    """{view: its columns} of every v_* view of the store, read as the owner."""
    out: dict[str, list[str]] = {}
    for view, col in conn.execute("SELECT table_name, column_name FROM information_schema.columns "
                                  "WHERE table_schema = 'public' AND table_name LIKE 'v\\_%' ORDER BY table_name, ordinal_position"):
        out.setdefault(view, []).append(col)
    return out


def _readable_columns(url: str, columns: dict[str, list[str]]) -> set[tuple[str, str]]:
    """The (view, column) pairs that ``url``'s role can select, one query each."""
    out = set()
    with psycopg.connect(url, autocommit=True) as c:
        for view, cols in columns.items():
            for col in cols:
                try:
                    c.execute(f'SELECT "{col}" FROM {view} LIMIT 1').fetchall()
                except psycopg.errors.InsufficientPrivilege:
                    continue
                out.add((view, col))
    return out


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _address_values(url: str, pairs: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """The (view, column) pairs among ``pairs`` of which a value is an IP address, read as ``url``."""
    out = set()
    with psycopg.connect(url) as c:
        for view, col in sorted(pairs):
            values = c.execute(f'SELECT DISTINCT "{col}"::text FROM {view} WHERE "{col}" IS NOT NULL LIMIT 10000').fetchall()
            if any(_is_address(v) for (v,) in values):
                out.add((view, col))
    return out


@pytest.fixture()
def demo_db(empty_db):
    load_demo(empty_db)
    return empty_db


def test_it_reads_exactly_the_aggregate_columns_and_no_address(demo_db):
    """Every column of every view, one query each as dnscamp_grafana: what it can read is the
    aggregate views whole, and the QuicSocks and collection views without addresses and names."""
    with psycopg.connect(demo_db) as c:
        columns = _columns(c)
    assert AGGREGATE_VIEWS | set(PARTLY) | RECORD_VIEWS <= set(columns)
    g = role_url(demo_db, engine.GRAFANA)
    readable = _readable_columns(g, columns)
    want = {(v, col) for v in AGGREGATE_VIEWS for col in columns[v]}
    want |= {(v, col) for v, hidden in PARTLY.items() for col in columns[v] if col not in hidden}
    assert readable == want
    assert not [(v, col) for v, col in readable if ADDRESSY.search(col)]
    # the oracle is not vacuous: the reader reads the same columns and the addresses besides
    hidden = {(v, col) for v, cols in PARTLY.items() for col in cols}
    assert hidden <= _readable_columns(role_url(demo_db, engine.READER), columns)
    # nor does any value it can read hold an address, where the reader's do (the probes')
    assert _address_values(g, readable) == set()
    assert {v for v, _ in _address_values(role_url(demo_db, engine.READER), hidden)} == {"v_quicsocks_savings"}
    with psycopg.connect(g) as c:  # and the demo's rows come through
        assert c.execute("SELECT sum(records) FROM v_contexts WHERE campaign = %s", (CAMPAIGN,)).fetchone()[0] == 113
        assert c.execute("SELECT count(*) FROM v_quicsocks_savings WHERE campaign = %s AND isp_resolver",
                         (ATLAS_CAMPAIGN,)).fetchone()[0] == 16  # naming the columns: saving_ms etc. are granted
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute("SELECT * FROM v_quicsocks_savings")  # * names the addresses too


@pytest.mark.parametrize("view", sorted(RECORD_VIEWS))
def test_it_cannot_read_a_record_view(empty_db, view):
    with psycopg.connect(role_url(empty_db, engine.GRAFANA)) as c:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute(f"SELECT 1 FROM {view} LIMIT 1")


def test_it_cannot_read_any_table_or_compatibility_view(empty_db):
    with psycopg.connect(empty_db) as c:
        tables = [r[0] for r in c.execute(
            "SELECT format('%I', c.relname) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'public' AND NOT c.relispartition AND (c.relkind IN ('r', 'p') "
            "OR c.relkind IN ('v', 'm') AND c.relname NOT LIKE 'v\\_%')")]  # 0012's results view too
    assert {"results", "quarantine", "dns_queries", "contexts", "atlas_discovery", "alembic_version"} <= set(tables)
    refused = []
    with psycopg.connect(role_url(empty_db, engine.GRAFANA), autocommit=True) as c:
        for t in tables:
            try:
                c.execute(f"SELECT 1 FROM {t} LIMIT 1")
            except psycopg.errors.InsufficientPrivilege:
                refused.append(t)
    assert refused == tables


def test_quarantine_reaches_it_as_counts_only(empty_db):
    with psycopg.connect(empty_db) as c:
        for line, src in enumerate(("s3://b/results/www20/aws-fiber/r-1/u-7.jsonl.gz", "/var/spool/x.jsonl",
                                    "/var/spool/x.jsonl")):
            c.execute("INSERT INTO quarantine (source_file, line, reason, raw) VALUES (%s, %s, 'invalid JSON: x', 'zz')",
                      (src, line))
    with psycopg.connect(role_url(empty_db, engine.GRAFANA)) as c:
        rows = c.execute("SELECT campaign, vantage_id, run, reason_class, lines FROM v_quarantine_counts ORDER BY 1").fetchall()
        assert rows == [("www20", "aws-fiber", "r-1", "invalid JSON", 1), (None, None, None, "invalid JSON", 2)]
        names = [d.name for d in c.execute("SELECT * FROM v_quarantine_counts LIMIT 0").description]
        assert not [n for n in names if ADDRESSY.search(n) or n in ("line", "reason")]


def _settings(conn, role: str) -> tuple[int, dict[str, str]]:
    limit, config = conn.execute("SELECT rolconnlimit, rolconfig FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
    return limit, dict(s.split("=", 1) for s in config or [])


def test_the_limits_come_with_the_migration_and_go_with_its_downgrade(fresh_db):
    """Role settings are cluster-wide: the test ends with them as the head sets them."""
    sa_url = fresh_db.replace("postgresql://", "postgresql+psycopg://", 1)
    migrate.downgrade(sa_url, "0028_interval_functions")
    with psycopg.connect(fresh_db) as c:
        assert {role: _settings(c, role) for role in LIMITS} == {role: (-1, {}) for role in LIMITS}
    migrate.upgrade(sa_url)
    with psycopg.connect(fresh_db) as c:
        assert {role: _settings(c, role) for role in LIMITS} == LIMITS
    for role, (_, want) in LIMITS.items():  # what a new session of the role starts with
        with psycopg.connect(role_url(fresh_db, role)) as c:
            assert {k: c.execute(f"SHOW {k}").fetchone()[0] for k in want} == want
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                c.execute("SET temp_file_limit = -1")  # a ceiling: only a superuser lifts it


def test_a_query_that_would_run_for_minutes_is_cancelled_at_the_timeout(empty_db):
    with psycopg.connect(role_url(empty_db, engine.GRAFANA)) as c:
        timeout = c.execute("SELECT setting::int / 1000.0 FROM pg_settings WHERE name = 'statement_timeout'").fetchone()[0]
        assert 0 < timeout <= 60
        t0 = time.monotonic()
        with pytest.raises(psycopg.errors.QueryCanceled, match="statement timeout"):
            c.execute("SELECT pg_sleep(600)")
        assert float(timeout) <= time.monotonic() - t0 < float(timeout) + 10


def test_its_connections_are_limited(empty_db):
    url = role_url(empty_db, engine.GRAFANA)
    with psycopg.connect(empty_db) as c:
        limit = c.execute("SELECT rolconnlimit FROM pg_roles WHERE rolname = %s", (engine.GRAFANA,)).fetchone()[0]
    assert 0 < limit <= 20
    conns = [psycopg.connect(url) for _ in range(limit)]
    try:
        with pytest.raises(psycopg.OperationalError, match="too many connections for role"):
            psycopg.connect(url)
    finally:
        for c in conns:
            c.close()


def test_the_store_gives_the_grafana_role_a_url_and_a_password(db_url):
    url = engine.database_url("grafana")
    assert f"{engine.GRAFANA}@" in url and "password" not in url.split("?")[0]
    with psycopg.connect(url) as c:
        assert c.execute("SELECT current_user").fetchone()[0] == engine.GRAFANA
