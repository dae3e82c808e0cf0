"""Rollups of migration 0017 (the dashboards at 10 M records): dns_hourly_status,
dns_conn_daily, page_load_daily and atlas_ping_latest, as ingest maintains them, equal what the
base views give for the same records: after ingest in many batches, after re-ingest (duplicates
add nothing), after rows inserted into / deleted from the ``results`` view, after `dnscamp
archive restore` into an empty store; percentiles read from them within 1 % of the exact ones;
v_quicsocks_savings gives the rows of its definition over every ping (0005's)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import uuid
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collectors import read as read_mod
from collectors.ingest import ingest
from db.migrations import views as frozen
from tests.store_util import copy_of_template, drop_database

pytestmark = pytest.mark.local
ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "tests" / "fixtures" / "results"
_spec = importlib.util.spec_from_file_location("gen_campaign_daily", ROOT / "bench" / "gen_campaign.py")
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)

DNS_KEY = "day, campaign, vantage_id, network_profile, resolver, transport, connection"
PL_KEY = "day, campaign, vantage_id, network_profile, browser, dns_mode, dns_transport, http, status"
HOUR_KEY = "hour, campaign, vantage_id, network_profile, resolver, transport"
MEASURES = ("total_ms", "handshake_ms", "exchange_ms", "total_rtt_multiple", "total_ip_bytes")

# What the rollups must hold, from the base views (the panels' CONN expression).
DNS_BASE = f"""
WITH r AS (SELECT date_trunc('day', started_at, 'UTC') AS day, campaign, vantage_id, network_profile, resolver, transport,
                  CASE WHEN connection_reused THEN 'reuse' WHEN resumed THEN 'resume' ELSE 'fresh' END AS connection,
                  status, total_packets, {', '.join(MEASURES)}
           FROM v_dns_query)
"""
CHECKS = {
    "status": (f"SELECT {HOUR_KEY}, status, n FROM v_dns_hourly_status",
               f"SELECT date_trunc('hour', started_at, 'UTC') AS hour, campaign, vantage_id, network_profile, resolver, "
               f"transport, status, count(*) FROM v_dns_query WHERE status <> 'ok' GROUP BY 1, 2, 3, 4, 5, 6, 7"),
    "conn": (f"SELECT {DNS_KEY}, n, failures, timed, total_packets FROM v_dns_conn_daily",
             DNS_BASE + f"SELECT {DNS_KEY}, count(*), count(*) FILTER (WHERE status <> 'ok'), "
             "count(total_ms) FILTER (WHERE status = 'ok'), COALESCE(sum(total_packets) FILTER (WHERE status = 'ok'), 0) "
             f"FROM r GROUP BY {DNS_KEY}"),
    "conn_hist": (f"SELECT {DNS_KEY}, measure, bucket, n FROM v_dns_conn_daily_hist",
                  DNS_BASE + f"SELECT {DNS_KEY}, m.measure, least(dnscamp_hist_bucket(m.v), 32767), count(*) FROM r CROSS JOIN LATERAL "
                  f"(VALUES {', '.join(f'({m!r}, {m})' for m in MEASURES)}) AS m(measure, v) "
                  f"WHERE status = 'ok' AND m.v IS NOT NULL GROUP BY {DNS_KEY}, 8, 9"),
    "page_load": (f"SELECT {PL_KEY}, n, timed, min_plt_ms, max_plt_ms FROM v_page_load_daily",
                  f"SELECT date_trunc('day', started_at, 'UTC') AS day, campaign, vantage_id, network_profile, browser, "
                  f"dns_mode, dns_transport, http, status, count(*), count(plt_ms), min(plt_ms), max(plt_ms) "
                  f"FROM v_page_load GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9"),
    "page_load_hist": (f"SELECT {PL_KEY}, bucket, n FROM v_page_load_daily_hist",
                       f"SELECT date_trunc('day', started_at, 'UTC') AS day, campaign, vantage_id, network_profile, "
                       f"browser, dns_mode, dns_transport, http, status, least(dnscamp_hist_bucket(plt_ms), 32767), count(*) "
                       f"FROM v_page_load WHERE plt_ms IS NOT NULL GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10"),
}  # fmt: skip


def _rows(c, sql: str) -> list[tuple]:
    return sorted(c.execute(sql).fetchall(), key=repr)


def check(url: str) -> dict[str, int]:
    """Every rollup view equals its base-view query; the failure statuses add up to dns_hourly's
    failures. Returns the rows compared per check."""
    sizes = {}
    with psycopg.connect(url) as c:
        for name, (rollup, base) in CHECKS.items():
            got, want = _rows(c, rollup), _rows(c, base)
            assert got == want, f"{name}: rollup differs from the base view ({len(got)} / {len(want)} rows)"
            sizes[name] = len(got)
        assert c.execute(f"""SELECT count(*) FROM v_dns_hourly h FULL JOIN
                             (SELECT {HOUR_KEY}, sum(n) AS n FROM dns_hourly_status GROUP BY {HOUR_KEY}) s
                             USING ({HOUR_KEY}) WHERE h.failures IS DISTINCT FROM COALESCE(s.n, 0)
                             AND (h.failures > 0 OR s.n IS NOT NULL)""").fetchone()[0] == 0
    return sizes


def _savings_equal_old_definition(url: str) -> int:
    """v_quicsocks_savings against its definition over every ping (0005's frozen SQL as a temp view)."""
    old = frozen.view_sql("0005_atlas", "v_quicsocks_savings").replace(
        "CREATE OR REPLACE VIEW v_quicsocks_savings", "CREATE TEMPORARY VIEW old_savings")
    assert old.count("old_savings") == 1
    with psycopg.connect(url) as c:
        c.execute(old)
        got, want = _rows(c, "SELECT * FROM v_quicsocks_savings"), _rows(c, "SELECT * FROM old_savings")
        assert got == want
        assert c.execute("SELECT count(*) FROM atlas_ping_latest").fetchone()[0] == c.execute(
            "SELECT count(DISTINCT (campaign, msm_id, prb_id, dst_addr)) FROM atlas_ping "
            "WHERE status = 'ok' AND avg_ms IS NOT NULL").fetchone()[0]  # one row per key: no more
    return sum(r[8] is not None and r[10] is not None for r in got)


@contextmanager
def scratch_db():
    """A new database copied from the session's migrated, empty one (as conftest's empty_db)."""
    name = f"daily_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    try:
        yield copy_of_template(name)
    finally:
        drop_database(name)


def ingest_mixed_batches(campaign: Path, tmp_path: Path, url: str) -> None:
    """Batches of stored and new records: the campaign's dense DNS file interleaved line by line
    with 1,500 new queries (the parsers' sums are for whole batches: only the new may count)."""
    old = (campaign / "records" / "dns-dense.jsonl").read_bytes().splitlines(keepends=True)
    new = [gen.orjson.dumps(r) + b"\n" for r in gen.dns_queries(
        1500, np.random.default_rng(8), "daily", gen.END, vantages=gen.VANTAGES[:3], resolvers=gen.RESOLVERS[:2], days=2)]
    (tmp_path / "mixed").mkdir()
    (tmp_path / "mixed" / "m.jsonl").write_bytes(b"".join(x for pair in zip(old, new) for x in pair))
    assert ingest([tmp_path / "mixed"], url, workers=1).ingested == 1500


def copy_through_results_view(c: psycopg.Connection, ids: list) -> None:
    """Copies of the records ``ids`` as campaign 'copied', inserted through the results view
    (its triggers store them whole, in generic_results)."""
    c.execute("INSERT INTO results (id, schema, kind, campaign, run, unit, vantage_id, provider, region, "
              "network_profile, started_at, status, error, env, body) SELECT gen_random_uuid(), schema, kind, "
              "'copied', run, unit, vantage_id, provider, region, network_profile, started_at, status, error, env, "
              "body FROM results WHERE id = ANY(%s)", (ids,))  # fmt: skip


def ingest_generated_in_batches(directory: Path, n: int, seed: int, batch: int, split: int, check) -> None:
    """The hypothesis properties' case: n * 5 generated queries and n page loads, in ``split``
    files cut into batches of ``batch`` bytes, into a new database; then ``check`` on it."""
    rng = np.random.default_rng(seed)
    for kind, fn, k in (("dns", gen.dns_queries, n * 5), ("pl", gen.page_loads, n)):
        recs = [gen.orjson.dumps(r) for r in fn(k, rng, "hyp", gen.END)]
        for i in range(split):
            (directory / f"{kind}{i}.jsonl").write_bytes(b"".join(r + b"\n" for r in recs[i::split]))
    old = read_mod.BATCH_BYTES
    with scratch_db() as url:
        try:
            read_mod.BATCH_BYTES = batch
            assert ingest([directory], url, workers=1).ingested == n * 6
        finally:
            read_mod.BATCH_BYTES = old
        check(url)


@pytest.fixture()
def campaign(tmp_path):
    out = tmp_path / "gen"
    gen.generate(out, dns_queries_n=0, page_loads_n=1500, atlas_n=3000, seed=7, campaign="daily")
    # queries dense enough that a rollup row holds many, from several batches: 2 days, 3 vantages, 2 resolvers
    recs = gen.dns_queries(5000, np.random.default_rng(7), "daily", gen.END, vantages=gen.VANTAGES[:3],
                           resolvers=gen.RESOLVERS[:2], days=2)  # fmt: skip
    (out / "records" / "dns-dense.jsonl").write_bytes(b"".join(gen.orjson.dumps(r) + b"\n" for r in recs))
    shutil.copytree(RESULTS / "v1", out / "records" / "v1", ignore=shutil.ignore_patterns("invalid"))
    shutil.copytree(RESULTS / "hostile", out / "records" / "hostile")
    return out


def test_rollups_equal_the_base_views_through_every_write_path(empty_db, campaign, monkeypatch, tmp_path):
    monkeypatch.setattr(read_mod, "BATCH_BYTES", 96 << 10)  # many batches: rows of one key in several
    gen.load(campaign, empty_db, workers=1)
    sizes = check(empty_db)
    assert sizes["conn"] > 100 and sizes["conn_hist"] > 2000 and sizes["page_load"] > 100 and sizes["status"] > 30
    with psycopg.connect(empty_db) as c:
        assert {r[0] for r in c.execute("SELECT DISTINCT connection FROM dns_conn_daily")} == {"fresh", "reuse", "resume"}
        assert c.execute("SELECT max(n) FROM dns_conn_daily").fetchone()[0] > 20
    assert _savings_equal_old_definition(empty_db) > 100

    # re-ingest: duplicates add nothing
    stats = ingest([campaign / "records"], empty_db, workers=1)
    assert stats.ingested == 0 and stats.duplicates > 5000
    assert check(empty_db) == sizes

    # batches of stored and new records: only the new counted (the parsers' sums are for whole batches)
    ingest_mixed_batches(campaign, tmp_path, empty_db)
    sizes = check(empty_db)

    # the results view's triggers: copies counted, deleted rows uncounted (the page-load extremes recomputed)
    with psycopg.connect(empty_db) as c:
        ids = [r[0] for r in c.execute("SELECT id FROM v_results WHERE kind IN ('dns_query', 'page_load') "
                                       "AND campaign = 'daily' ORDER BY id LIMIT 400")]  # fmt: skip
        copy_through_results_view(c, ids[:150])
        c.execute("DELETE FROM results WHERE id = ANY(%s)", (ids[150:],))
        c.execute("DELETE FROM results WHERE campaign = 'copied' AND kind = 'page_load' AND id IN "
                  "(SELECT id FROM results WHERE campaign = 'copied' AND kind = 'page_load' LIMIT 5)")
    after = check(empty_db)
    assert after["conn"] > 100 and after != sizes
    with psycopg.connect(empty_db) as c:  # the copies are stored whole: the rollups' generic branch
        assert c.execute("SELECT count(*) FROM generic_results WHERE kind = 'dns_query'").fetchone()[0] > 50

    # pings deleted (a raw result's cascade) and updated: the latest of what is left
    with psycopg.connect(empty_db) as c:
        c.execute("DELETE FROM atlas_results_raw WHERE id IN (SELECT raw_id FROM atlas_ping_latest ORDER BY raw_id LIMIT 40)")
        c.execute("UPDATE atlas_ping SET status = 'timeout' WHERE raw_id IN "
                  "(SELECT raw_id FROM atlas_ping_latest ORDER BY raw_id DESC LIMIT 20)")
    _savings_equal_old_definition(empty_db)


def test_archive_restore_rebuilds_the_rollups(empty_db, campaign, tmp_path):
    """`dnscamp archive` then `archive restore` (twice: idempotent) into an empty store: the
    same rollups as the store the archive came from."""
    from dnscamp.opendata import archive

    gen.load(campaign, empty_db, workers=1)
    with psycopg.connect(empty_db) as c:
        archive.write(c, "daily", str(tmp_path / "arch"))  # the records' campaign (Atlas's is "daily/atlas")
    with scratch_db() as url:
        archive.restore(str(tmp_path / "arch"), url, workers=1)
        archive.restore(str(tmp_path / "arch"), url, workers=1)
        sizes = check(url)
        assert sizes["conn"] > 100 and sizes["page_load"] > 100
        for q in ("SELECT sum(n), sum(failures), sum(total_packets), sum(timed) FROM v_dns_conn_daily WHERE campaign = 'daily'",
                  "SELECT sum(n), sum(timed), min(min_plt_ms), max(max_plt_ms) FROM v_page_load_daily WHERE campaign = 'daily'"):
            with psycopg.connect(url) as a, psycopg.connect(empty_db) as b:
                assert a.execute(q).fetchone() == b.execute(q).fetchone()


def test_percentiles_from_the_daily_rollups_are_within_one_percent(empty_db, campaign):
    gen.load(campaign, empty_db, workers=1)
    q = """SELECT transport, connection, dnscamp_hist_quantile(array_agg(bucket ORDER BY bucket), array_agg(n ORDER BY bucket), %s)
           FROM (SELECT transport, connection, bucket, sum(n) AS n FROM v_dns_conn_daily_hist
                 WHERE measure = %s AND campaign = 'daily' GROUP BY 1, 2, 3) h GROUP BY 1, 2"""
    exact = """SELECT transport, CASE WHEN connection_reused THEN 'reuse' WHEN resumed THEN 'resume' ELSE 'fresh' END,
                      percentile_disc(%s) WITHIN GROUP (ORDER BY {m})
               FROM v_dns_query WHERE status = 'ok' AND {m} IS NOT NULL AND campaign = 'daily' GROUP BY 1, 2"""
    with psycopg.connect(empty_db) as c:
        for m in MEASURES:
            for p in (0.5, 0.9):
                approx = {(t, k): v for t, k, v in c.execute(q, (p, m))}
                want = {(t, k): v for t, k, v in c.execute(exact.format(m=m), (p,))}
                assert set(approx) == set(want) and len(want) >= 4, m
                for key, v in want.items():
                    assert abs(approx[key] - v) <= 0.01 * abs(v) + 1e-9, (m, p, key, approx[key], v)
        plt = dict(c.execute("SELECT dns_transport, dnscamp_hist_quantile(array_agg(bucket ORDER BY bucket), "
                             "array_agg(n ORDER BY bucket), 0.5) FROM (SELECT dns_transport, bucket, sum(n) AS n "
                             "FROM v_page_load_daily_hist WHERE status = 'ok' GROUP BY 1, 2) h GROUP BY 1"))
        plt_exact = dict(c.execute("SELECT dns_transport, percentile_disc(0.5) WITHIN GROUP (ORDER BY plt_ms) "
                                   "FROM v_page_load WHERE status = 'ok' AND plt_ms IS NOT NULL GROUP BY 1"))
    assert set(plt) == set(plt_exact) and len(plt) >= 3
    assert all(abs(plt[k] - v) <= 0.01 * v for k, v in plt_exact.items()), (plt, plt_exact)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    n=st.integers(1, 60),
    seed=st.integers(0, 2**31),
    batch=st.sampled_from([4 << 10, 32 << 10, 8 << 20]),
    split=st.integers(1, 3),
)
def test_any_records_in_any_batches_roll_up_as_the_base_views_say(db_url, tmp_path_factory, n, seed, batch, split):
    """Generated queries and page loads (every status of the generator, every connection mode),
    in one to three files cut into batches of any size, into a new database each time."""
    ingest_generated_in_batches(tmp_path_factory.mktemp("hyp"), n, seed, batch, split, check)
