"""Rollups of migration 0018 (the Campaign health dashboard and the Atlas credits at
10 M records): ingest_daily, unit_daily and atlas_credit_sums equal what the base views give
for the same records, through every path that stores or removes them: ingest in many small
batches, re-ingest (duplicates add nothing), a batch stored row by row after Postgres refused
one of its rows, rows inserted into / deleted from the ``results`` view, `dnscamp archive` +
`archive restore`, the migration's backfill (0017 -> head with records stored), Atlas results
in blocks and one by one, deleted and updated; the ingest-lag median read from the histograms
is within 1 % of percentile_disc; v_atlas_credits gives the rows of its definition over every
raw result (0011's)."""

from __future__ import annotations

import importlib.util
import shutil
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collectors import parse as parse_mod
from collectors import read as read_mod
from collectors.ingest import ingest
from db import migrate
from db.migrations import views as frozen
from tests.local.test_ingest import _forge_timestamp
from tests.local.test_rollups_daily import copy_through_results_view, ingest_generated_in_batches, scratch_db

pytestmark = pytest.mark.local
ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "tests" / "fixtures" / "results"
_spec = importlib.util.spec_from_file_location("gen_campaign_health", ROOT / "bench" / "gen_campaign.py")
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)

# rollup rows of one key: a batch's ingested_at stands for the batch (the results view's
# trigger makes a batch per row, all of one statement at one ingested_at)
KEY = "day, campaign, run, vantage_id, region, kind, ingested_at"
BASE = "(SELECT *, date_trunc('day', started_at, 'UTC') AS day, extract(epoch FROM ingested_at - started_at) AS lag FROM v_results) r"
CHECKS = {
    "ingest_daily": (f"SELECT {KEY}, sum(records)::bigint, sum(failed)::bigint, min(first_started), max(last_started), "
                     f"max(lag_max_s) FROM v_ingest_daily GROUP BY {KEY}",
                     f"SELECT {KEY}, count(*), count(*) FILTER (WHERE status <> 'ok'), min(started_at), max(started_at), "
                     f"max(lag) FROM {BASE} GROUP BY {KEY}"),
    "lag_hist": (f"SELECT {KEY}, bucket, sum(n)::bigint FROM v_ingest_lag_hist GROUP BY {KEY}, bucket",
                 f"SELECT {KEY}, dnscamp_hist_bucket16(lag::float8)::int, count(*) FROM {BASE} GROUP BY {KEY}, 8"),
    "units": ("SELECT day, campaign, vantage_id, region, kind, unit, records FROM v_unit_daily",
              f"SELECT day, campaign, vantage_id, region, kind, unit, count(*) FROM {BASE} "
              "GROUP BY 1, 2, 3, 4, 5, 6"),
}  # fmt: skip


def _rows(c, sql: str) -> list[tuple]:
    return sorted(c.execute(sql).fetchall(), key=repr)


def check(url: str) -> dict[str, int]:
    """Every health rollup view equals its base-view query, no row is empty, and
    v_atlas_credits equals 0011's definition over every raw result. Returns the rows compared."""
    sizes = {}
    old = frozen.view_sql("0011_dashboard_views", "v_atlas_credits").replace(
        "CREATE OR REPLACE VIEW v_atlas_credits", "CREATE TEMPORARY VIEW old_credits")
    with psycopg.connect(url) as c:
        for name, (rollup, base) in CHECKS.items():
            got, want = _rows(c, rollup), _rows(c, base)
            assert got == want, f"{name}: rollup differs from the base view ({len(got)} / {len(want)} rows)"
            sizes[name] = len(got)
        assert c.execute("SELECT count(*) FROM ingest_daily WHERE n <= 0 OR cardinality(lag_counts) = 0 "
                         "OR 0 >= ANY(lag_counts)").fetchone()[0] == 0
        assert c.execute("SELECT count(*) FROM unit_daily WHERE cardinality(units) = 0 OR 0 >= ANY(unit_counts)").fetchone()[0] == 0
        c.execute(old)
        got, want = _rows(c, "SELECT * FROM v_atlas_credits"), _rows(c, "SELECT * FROM old_credits")
        assert got == want, f"credits: {len(got)} / {len(want)} rows"
        sizes["credits"] = len(got)
        assert c.execute("SELECT count(*) FROM atlas_credit_sums WHERE results <= 0").fetchone()[0] == 0
    return sizes


@pytest.fixture()
def campaign(tmp_path):
    """Generated page loads and Atlas results, dense DNS queries (several batches per rollup row
    and day), and the v1 and hostile fixtures (every kind, records without a unit)."""
    out = tmp_path / "gen"
    gen.generate(out, dns_queries_n=0, page_loads_n=1500, atlas_n=3000, seed=11, campaign="health")
    recs = gen.dns_queries(4000, np.random.default_rng(11), "health", gen.END, vantages=gen.VANTAGES[:3],
                           resolvers=gen.RESOLVERS[:2], days=2)  # fmt: skip
    (out / "records" / "dns-dense.jsonl").write_bytes(b"".join(gen.orjson.dumps(r) + b"\n" for r in recs))
    shutil.copytree(RESULTS / "v1", out / "records" / "v1", ignore=shutil.ignore_patterns("invalid"))
    shutil.copytree(RESULTS / "hostile", out / "records" / "hostile")
    return out


def test_health_rollups_equal_the_base_views_through_every_write_path(empty_db, campaign, monkeypatch):
    monkeypatch.setattr(read_mod, "BATCH_BYTES", 64 << 10)  # many batches: a run's records in several
    gen.load(campaign, empty_db, workers=1)
    sizes = check(empty_db)
    assert sizes["ingest_daily"] > 200 and sizes["units"] > 500 and sizes["credits"] >= 4
    with psycopg.connect(empty_db) as c:
        kinds = {r[0] for r in c.execute("SELECT DISTINCT kind FROM v_ingest_daily")}
        assert {"dns_query", "page_load", "ping"} <= kinds
        # a context's records of one day in several batches, and rows of several records
        assert c.execute("SELECT max(k) FROM (SELECT count(*) AS k FROM ingest_daily GROUP BY day, ctx_id) x").fetchone()[0] > 1
        assert c.execute("SELECT max(n) FROM ingest_daily").fetchone()[0] >= 20

    # re-ingest: duplicates add nothing
    stats = ingest([campaign / "records"], empty_db, workers=1)
    assert stats.ingested == 0 and stats.duplicates > 5000
    assert check(empty_db) == sizes

    # the results view's triggers: copies counted, deleted rows uncounted (first / last recomputed)
    with psycopg.connect(empty_db) as c:
        ids = [r[0] for r in c.execute("SELECT id FROM v_results WHERE campaign = 'health' ORDER BY id LIMIT 300")]
        copy_through_results_view(c, ids[:100])
        c.execute("INSERT INTO results (id, schema, kind, campaign, run, unit, vantage_id, provider, region, "
                  "network_profile, started_at, status, error, env, body) SELECT gen_random_uuid(), schema, kind, "
                  "'copied', run, NULL, vantage_id, provider, NULL, network_profile, started_at, status, error, env, "
                  "body FROM results WHERE id = ANY(%s)", (ids[:10],))  # fmt: skip: no unit, no region
        c.execute("DELETE FROM results WHERE id = ANY(%s)", (ids[100:],))
        # the first and the last record of some rows
        c.execute("DELETE FROM results WHERE id IN (SELECT DISTINCT ON (ctx_id, batch_id) id FROM dns_queries "
                  "ORDER BY ctx_id, batch_id, started_at LIMIT 20)")
        c.execute("DELETE FROM results WHERE id IN (SELECT DISTINCT ON (ctx_id, batch_id) id FROM dns_queries "
                  "ORDER BY ctx_id, batch_id, started_at DESC LIMIT 20)")
        c.execute("DELETE FROM results WHERE campaign = 'copied' AND id IN "  # five copies that have a unit
                  "(SELECT id FROM results WHERE campaign = 'copied' AND unit IS NOT NULL LIMIT 5)")
    after = check(empty_db)
    assert after != sizes
    with psycopg.connect(empty_db) as c:
        assert c.execute("SELECT count(*) FROM v_results WHERE unit IS NULL").fetchone()[0] == 10

    # Atlas results deleted and updated; a measurement registered after its results
    with psycopg.connect(empty_db) as c:
        c.execute("DELETE FROM atlas_results_raw WHERE id IN (SELECT id FROM atlas_results_raw ORDER BY \"timestamp\" LIMIT 50)")
        c.execute("DELETE FROM atlas_results_raw WHERE id IN (SELECT id FROM atlas_results_raw ORDER BY \"timestamp\" DESC LIMIT 5)")
        c.execute("UPDATE atlas_results_raw SET campaign = 'moved', raw = raw || '{\"sent\": 7}' WHERE id IN "
                  "(SELECT id FROM atlas_results_raw WHERE type = 'ping' ORDER BY id LIMIT 30)")
        c.execute("DELETE FROM atlas_measurements WHERE msm_id = (SELECT min(msm_id) FROM atlas_measurements)")
    check(empty_db)
    with psycopg.connect(empty_db) as c:
        c.execute("INSERT INTO atlas_measurements (msm_id, campaign, role, target, definition) "
                  "SELECT msm_id, 'late', 'server_resolver', 'x', '{\"is_oneoff\": false}' FROM atlas_results_raw "
                  "WHERE msm_id NOT IN (SELECT msm_id FROM atlas_measurements) LIMIT 1")
        assert c.execute("SELECT count(*) FROM v_atlas_credits WHERE role = 'server_resolver' AND NOT charged").fetchone()[0] > 0
    check(empty_db)


def test_a_batch_stored_row_by_row_counts_each_record_once(empty_db, tmp_path, monkeypatch):
    """Postgres refuses one row of a batch (a started_at beyond timestamptz, forced into the
    binary row): the batch is stored again row by row, each stored record counted once."""
    good = (RESULTS / "v1" / "dns_query.jsonl").read_text().splitlines()[:4]
    monkeypatch.setattr(parse_mod, "_record", _forge_timestamp(parse_mod._record, bad_line=2))
    f = tmp_path / "t.jsonl"
    f.write_text("\n".join(good) + "\n")
    assert ingest([f], empty_db, workers=1).as_json() == {"ingested": 3, "duplicates": 0, "quarantined": 1}
    check(empty_db)
    with psycopg.connect(empty_db) as c:
        assert c.execute("SELECT sum(n) FROM ingest_daily").fetchone()[0] == 3


def test_archive_restore_rebuilds_the_health_rollups(empty_db, campaign, tmp_path):
    """`dnscamp archive` then `archive restore` (twice: idempotent) into an empty store."""
    from dnscamp.opendata import archive

    gen.load(campaign, empty_db, workers=1)
    with psycopg.connect(empty_db) as c:
        archive.write(c, "health", str(tmp_path / "arch"))
    with scratch_db() as url:
        archive.restore(str(tmp_path / "arch"), url, workers=1)
        archive.restore(str(tmp_path / "arch"), url, workers=1)
        sizes = check(url)
        assert sizes["ingest_daily"] > 100 and sizes["credits"] >= 4
        for q in ("SELECT kind, sum(records), sum(failed), min(first_started), max(last_started) FROM v_ingest_daily "
                  "WHERE campaign = 'health' GROUP BY 1 ORDER BY 1",
                  "SELECT count(*), count(DISTINCT unit), sum(records) FROM v_unit_daily WHERE campaign = 'health'",
                  "SELECT campaign, msm_id, type, results, credits FROM v_atlas_credits ORDER BY 1, 2, 3"):
            with psycopg.connect(url) as a, psycopg.connect(empty_db) as b:
                assert a.execute(q).fetchall() == b.execute(q).fetchall()


def test_the_upgrade_backfills_the_stored_records(fresh_db, campaign):
    """A store at 0017 with records (stored through ingest and the results view) upgrades to
    the head: the backfill gives what ingest gives."""
    gen.load(campaign, fresh_db, workers=1)
    with psycopg.connect(fresh_db) as c:
        c.execute("INSERT INTO results (id, schema, kind, campaign, run, unit, vantage_id, provider, region, "
                  "network_profile, started_at, status, error, env, body) SELECT gen_random_uuid(), schema, kind, "
                  "'copied', run, unit, vantage_id, provider, region, network_profile, started_at, status, error, env, "
                  "body FROM results WHERE kind = 'dns_query' LIMIT 50")  # fmt: skip
    before = check(fresh_db)
    sa_url = fresh_db.replace("postgresql://", "postgresql+psycopg://", 1)
    migrate.downgrade(sa_url, "0017_dashboard_rollups")
    with psycopg.connect(fresh_db) as c:
        assert c.execute("SELECT to_regclass('ingest_daily')").fetchone()[0] is None
    migrate.upgrade(sa_url)
    assert check(fresh_db) == before


def test_atlas_results_one_by_one_and_in_blocks_sum_the_same(empty_db, tmp_path):
    """The per-result path (block 0) and blocks of any size give the same sums."""
    from collectors.atlas_ingest import ingest_files

    out = tmp_path / "gen"
    gen.generate(out, dns_queries_n=0, page_loads_n=0, atlas_n=1200, seed=3, campaign="atl")
    files = sorted((out / "atlas").glob("results-*.jsonl"))
    results = []
    for block in (0, 7, 2000):
        with scratch_db() as url:
            ingest_files(files, url, campaign="atl", block=block)
            ingest_files(files, url, campaign="atl", block=block)  # duplicates: nothing more
            check(url)
            with psycopg.connect(url) as c:
                results.append(_rows(c, "SELECT * FROM atlas_credit_sums"))
    assert results[0] == results[1] == results[2] and len(results[0]) >= 3


def test_ingest_lag_median_from_the_histograms_is_within_one_percent(empty_db, campaign):
    gen.load(campaign, empty_db, workers=1)
    with psycopg.connect(empty_db) as c:
        approx = dict(c.execute("""SELECT vantage_id, dnscamp_hist_quantile(array_agg(bucket ORDER BY bucket),
                                          array_agg(n ORDER BY bucket), 0.5)
                                   FROM (SELECT vantage_id, bucket, sum(n) AS n FROM v_ingest_lag_hist GROUP BY 1, 2) h
                                   GROUP BY 1"""))  # fmt: skip
        exact = dict(c.execute("SELECT vantage_id, percentile_disc(0.5) WITHIN GROUP "
                               "(ORDER BY extract(epoch FROM ingested_at - started_at)) FROM v_results GROUP BY 1"))
    assert set(approx) == set(exact) and len(exact) >= 20
    for k, v in exact.items():
        assert abs(approx[k] - float(v)) <= 0.01 * abs(float(v)) + 1e-9, (k, approx[k], v)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    n=st.integers(1, 40),
    seed=st.integers(0, 2**31),
    batch=st.sampled_from([4 << 10, 32 << 10, 8 << 20]),
    split=st.integers(1, 3),
)
def test_any_records_in_any_batches_roll_up_as_the_base_views_say(db_url, tmp_path_factory, n, seed, batch, split):
    """Generated queries and page loads in one to three files cut into batches of any size."""
    ingest_generated_in_batches(tmp_path_factory.mktemp("hyp"), n, seed, batch, split, check)


# The panels as they read every record (dashboards/health.py before 0018), with percentile_disc
# (nearest rank, what the histograms approximate) for the medians' percentile_cont.
LAG = "extract(epoch FROM ingested_at - started_at)"
W = """WHERE $__timeFilter(started_at)
  AND campaign = ANY(ARRAY[${campaign:sqlstring}]::text[])
  AND vantage_id = ANY(ARRAY[${vantage:sqlstring}]::text[])"""
ON_RECORDS = {
    "Per vantage: units run, last measurement, ingest lag": f"""
SELECT vantage_id, coalesce(region, 'none') AS region, count(DISTINCT run) AS runs, count(DISTINCT unit) AS units,
       count(*) AS records, count(*) FILTER (WHERE status <> 'ok') AS failed, min(started_at) AS first_measured,
       max(started_at) AS last_measured, max(ingested_at) AS last_ingested,
       percentile_disc(0.5) WITHIN GROUP (ORDER BY {LAG}) AS lag_p50_s, max({LAG}) AS lag_max_s
FROM v_results {W} GROUP BY 1, 2 ORDER BY 1, 2""",
    "Units run per vantage": f"""
SELECT vantage_id, count(DISTINCT unit) FILTER (WHERE kind = 'dns_query') AS dns_units,
       count(DISTINCT unit) FILTER (WHERE kind = 'page_load') AS page_load_units,
       count(DISTINCT unit) FILTER (WHERE kind NOT IN ('dns_query', 'page_load')) AS other_units
FROM v_results {W} GROUP BY 1 ORDER BY 1""",
    "Ingest lag over time": f"""
SELECT $__timeGroup(started_at, $__interval) AS time, vantage_id AS metric,
       percentile_disc(0.5) WITHIN GROUP (ORDER BY {LAG}) AS lag_p50_s
FROM v_results {W} GROUP BY 1, 2 ORDER BY 1, 2""",
}  # fmt: skip
MEDIANS = {("Per vantage: units run, last measurement, ingest lag", 9), ("Ingest lag over time", 2)}  # column of the median


def test_the_health_panels_show_what_the_records_give(empty_db, campaign):
    """Over whole UTC days (1-day time buckets for the lag over time), the panels on the
    rollups show the records' counts, units, first / last / ingest times and greatest lag
    exactly, and their median lags within 1 %."""
    import dashboards
    from dashboards.expand import expand, resolve
    from tests.store_util import grafana_url, role_url
    from db import engine

    gen.load(campaign, empty_db, workers=1)
    data = dashboards.build()["dnscamp-health.json"]
    sql = {p["title"]: p["targets"][0]["rawSql"] for p in dashboards.panel_list(data)}
    end = datetime.fromisoformat(gen.END.replace("Z", "+00:00"))
    window = (end - timedelta(days=9), end - timedelta(days=2))  # 7 days, not every record
    with psycopg.connect(grafana_url(empty_db)) as c, psycopg.connect(role_url(empty_db, engine.READER)) as r:
        variables = resolve(c, data, {}, *window)
        for title, old in ON_RECORDS.items():
            assert "v_results" not in sql[title]  # the rollups, not every record
            # the panel's columns by name (it shows more: n, shares and their intervals)
            cur = c.execute(expand(sql[title], variables, *window, interval="1d"))
            names, got = [d.name for d in cur.description], cur.fetchall()
            cur = r.execute(expand(old, variables, *window, interval="1d"))  # the records: the reader's
            want_names, want = [d.name for d in cur.description], cur.fetchall()
            at = [names.index(n) if n in names else i for i, n in enumerate(want_names)]
            got = [tuple(r[k] for k in at) for r in got]
            assert len(want) >= 3 and [r[:2] for r in got] == [r[:2] for r in want], title
            for g, w in zip(got, want):
                for i, (a, b) in enumerate(zip(g, w)):
                    if (title, i) in MEDIANS:
                        assert abs(float(a) - float(b)) <= 0.01 * abs(float(b)) + 1e-9, (title, g, w)
                    else:
                        assert a == b, (title, i, g, w)
