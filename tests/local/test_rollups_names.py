"""Rollups of migration 0019 (the panels left over their targets at 10 M records):
dns_name_daily (records per day x vantage and resolver x transport x qname x status, *Top
failing names*) and page_load_url_daily (successful loads' plt_ms histograms per day x vantage
and page, *Paired PLT difference to Do53 per DNS mode*), as ingest maintains them, equal what the base views give
(counts exactly, percentiles within the histograms' 1 %): after ingest in many batches, re-ingest,
partly new batches, a batch stored row by row, rows inserted into / deleted from the ``results``
view, `dnscamp archive restore`, the upgrade's backfill, and random batches (hypothesis); the two
panels' SQL against the records."""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import datetime, timedelta, timezone

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dashboards
from collectors import read as read_mod
from collectors.ingest import ingest
from dashboards.expand import expand, resolve
from db import migrate
from tests.local.test_dashboards_sql import BUILT, reader_url
from tests.local.test_ingest import V1, _forge_timestamp
from tests.local.test_rollups_daily import (  # noqa: F401 (campaign: a fixture)
    campaign, copy_through_results_view, gen, ingest_generated_in_batches, ingest_mixed_batches, scratch_db)
from tests.store_util import ingest_with_old_code
from vantage_agent import stats

pytestmark = pytest.mark.local
PL_KEY = "day, campaign, vantage_id, network_profile, browser, dns_mode, dns_transport, http, url"
NAME_KEY = "day, campaign, vantage_id, network_profile, resolver, transport, qname, status"
CHECKS = {
    "names": (f"SELECT {NAME_KEY}, n FROM v_dns_name_daily",
              f"SELECT date_trunc('day', started_at, 'UTC') AS day, campaign, vantage_id, network_profile, resolver, "
              f"transport, qname, status, count(*) FROM v_dns_query GROUP BY 1, 2, 3, 4, 5, 6, 7, 8"),
    "page_urls": (f"SELECT {PL_KEY}, sum(n) FROM v_page_load_url_daily_hist GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9",
                  f"SELECT date_trunc('day', started_at, 'UTC') AS day, campaign, vantage_id, network_profile, browser, "
                  f"dns_mode, dns_transport, http, url, count(*) FROM v_page_load WHERE status = 'ok' AND plt_ms IS NOT NULL "
                  f"GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9"),
    "page_url_hist": (f"SELECT {PL_KEY}, bucket, n FROM v_page_load_url_daily_hist",
                      f"SELECT date_trunc('day', started_at, 'UTC') AS day, campaign, vantage_id, network_profile, "
                      f"browser, dns_mode, dns_transport, http, url, least(dnscamp_hist_bucket(plt_ms), 32767), count(*) "
                      f"FROM v_page_load WHERE status = 'ok' AND plt_ms IS NOT NULL GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10"),
}  # fmt: skip
PAIRED = ("dnscamp-pageloads.json", "Paired PLT difference to Do53 per DNS mode")
MY_PANELS = {("dnscamp-failures.json", "Top failing names"), PAIRED}
# the panel as it was over the records (0017), for ranges of whole UTC days
TOP_NAMES_EXACT = """
SELECT qname, transport, coalesce(resolver, 'none') AS resolver,
       count(*) FILTER (WHERE status <> 'ok') AS failed, count(*) AS n,
       count(*) FILTER (WHERE status <> 'ok')::float8 / count(*) AS failure_rate,
       mode() WITHIN GROUP (ORDER BY status) FILTER (WHERE status <> 'ok') AS commonest_status
FROM v_dns_query WHERE started_at >= %s AND started_at < %s
GROUP BY 1, 2, 3 HAVING count(*) FILTER (WHERE status <> 'ok') > 0
ORDER BY failed DESC, failure_rate DESC, 1, 2, 3 LIMIT 25"""


def _rows(c, sql: str) -> list[tuple]:
    return sorted(c.execute(sql).fetchall(), key=repr)


def check(url: str) -> dict[str, int]:
    """Every 0019 rollup equals its base-view query, and no row or entry holds nothing."""
    sizes = {}
    with psycopg.connect(url) as c:
        for name, (rollup, base) in CHECKS.items():
            got, want = _rows(c, rollup), _rows(c, base)
            assert got == want, f"{name}: rollup differs from the base view ({len(got)} / {len(want)} rows)"
            sizes[name] = len(got)
        assert c.execute("SELECT count(*) FROM dns_name_daily WHERE cardinality(keys) = 0 OR 0 = ANY(counts) "
                         "OR cardinality(keys) <> cardinality(counts)").fetchone()[0] == 0
        assert c.execute("SELECT count(*) FROM page_load_url_daily WHERE cardinality(keys) = 0 OR 0 = ANY(counts) "
                         "OR cardinality(keys) <> cardinality(counts)").fetchone()[0] == 0
    return sizes


def panels(url: str, time_range, selected=None) -> dict[tuple[str, str], tuple[list, list]]:
    """{(dashboard, title): (columns, rows)} of this rollup's panels, run as the reader (as Grafana sends them)."""
    out = {}
    with psycopg.connect(reader_url(url)) as c:
        for name, data in BUILT.items():
            variables = None
            for p in dashboards.panel_list(data):
                if (name, p["title"]) in MY_PANELS:
                    variables = variables or resolve(c, data, selected or {}, *time_range)
                    cur = c.execute(expand(p["targets"][0]["rawSql"], variables, *time_range))
                    out[(name, p["title"])] = ([d.name for d in cur.description], cur.fetchall())
    return out


def test_rollups_equal_the_base_views_through_every_write_path(empty_db, campaign, monkeypatch, tmp_path):  # noqa: F811
    monkeypatch.setattr(read_mod, "BATCH_BYTES", 96 << 10)  # many batches: rows of one key in several
    gen.load(campaign, empty_db, workers=1)
    sizes = check(empty_db)
    assert sizes["names"] > 300 and sizes["page_urls"] > 300 and sizes["page_url_hist"] > 500
    with psycopg.connect(empty_db) as c:  # a page row holds several keys
        assert c.execute("SELECT max(cardinality(keys)) FROM page_load_url_daily").fetchone()[0] > 1
    with psycopg.connect(empty_db) as c:  # a row holds many keys, with failures among them
        assert c.execute("SELECT max(cardinality(keys)) FROM dns_name_daily").fetchone()[0] > 20
        assert c.execute("SELECT count(DISTINCT status) FROM dns_name_keys").fetchone()[0] > 5

    stats = ingest([campaign / "records"], empty_db, workers=1)  # re-ingest: duplicates add nothing
    assert stats.ingested == 0 and stats.duplicates > 5000
    assert check(empty_db) == sizes

    # batches of stored and new records (the parsers' sums then go unused)
    ingest_mixed_batches(campaign, tmp_path, empty_db)
    sizes = check(empty_db)

    # the results view's triggers: copies counted (the generic branch: qname from the body), deleted rows uncounted
    with psycopg.connect(empty_db) as c:
        ids = [r[0] for r in c.execute("SELECT id FROM v_results WHERE kind IN ('dns_query', 'page_load') "
                                       "AND campaign = 'daily' ORDER BY id LIMIT 400")]  # fmt: skip
        copy_through_results_view(c, ids[:150])
        c.execute("DELETE FROM results WHERE id = ANY(%s)", (ids[150:],))
        c.execute("DELETE FROM results WHERE campaign = 'copied'")  # every record of a key: its rows go
        copy_through_results_view(c, ids[:100])
    after = check(empty_db)
    assert after != sizes
    with psycopg.connect(empty_db) as c:
        assert c.execute("SELECT count(*) FROM v_dns_name_daily WHERE campaign = 'copied'").fetchone()[0] > 10
        assert c.execute("SELECT count(*) FROM generic_results WHERE kind = 'dns_query'").fetchone()[0] > 20


def test_a_batch_stored_row_by_row_counts_each_record_once(empty_db, tmp_path, monkeypatch):
    """Postgres refuses one row of a batch: the batch is stored again row by row; the names
    rollup counts each stored record once (the first attempt's rows are gone with its rollback)."""
    import collectors.parse as cp

    good = (V1 / "dns_query.jsonl").read_text().splitlines()[:4]
    monkeypatch.setattr(cp, "_record", _forge_timestamp(cp._record, bad_line=2))
    f = tmp_path / "t.jsonl"
    f.write_text("\n".join(good) + "\n")
    assert ingest([f], empty_db, workers=1).as_json() == {"ingested": 3, "duplicates": 0, "quarantined": 1}
    assert check(empty_db)["names"] >= 1
    with psycopg.connect(empty_db) as c:
        assert c.execute("SELECT sum(n) FROM v_dns_name_daily").fetchone()[0] == 3


def test_archive_restore_rebuilds_the_rollups(empty_db, campaign, tmp_path):  # noqa: F811
    from dnscamp.opendata import archive

    gen.load(campaign, empty_db, workers=1)
    with psycopg.connect(empty_db) as c:
        archive.write(c, "daily", str(tmp_path / "arch"))
    with scratch_db() as url:
        archive.restore(str(tmp_path / "arch"), url, workers=1)
        archive.restore(str(tmp_path / "arch"), url, workers=1)
        sizes = check(url)
        assert sizes["names"] > 300 and sizes["page_urls"] > 300
        q = "SELECT status, sum(n) FROM v_dns_name_daily WHERE campaign = 'daily' GROUP BY 1 ORDER BY 1"
        with psycopg.connect(url) as a, psycopg.connect(empty_db) as b:
            assert a.execute(q).fetchall() == b.execute(q).fetchall()


def test_the_upgrade_fills_the_rollups_from_what_is_stored(fresh_db, campaign):  # noqa: F811
    """Down to 0018 (the tables go), records stored then (by an older dnscamp's ingest, 0017's
    functions), up again: the backfill gives what ingest would have."""
    sa_url = fresh_db.replace("postgresql://", "postgresql+psycopg://", 1)
    migrate.downgrade(sa_url, "0018_health_rollups")
    with psycopg.connect(fresh_db) as c:
        assert c.execute("SELECT to_regclass('dns_name_daily')").fetchone()[0] is None
    assert ingest_with_old_code([campaign / "records"], fresh_db, campaign.parent / "code") > 1000
    gen.load(campaign, fresh_db, records=False)  # the Atlas part
    with psycopg.connect(fresh_db) as c:  # a record stored whole (the generic branch) too
        c.execute("INSERT INTO results (id, schema, kind, campaign, run, unit, vantage_id, provider, region, "
                  "network_profile, started_at, status, error, env, body) SELECT gen_random_uuid(), schema, kind, "
                  "'copied', run, unit, vantage_id, provider, region, network_profile, started_at, status, error, env, "
                  "body FROM results WHERE kind IN ('dns_query', 'page_load') ORDER BY id LIMIT 60")  # fmt: skip
    migrate.upgrade(sa_url)
    sizes = check(fresh_db)
    assert sizes["names"] > 300 and sizes["page_urls"] > 300
    with psycopg.connect(fresh_db) as c:
        assert c.execute("SELECT count(*) FROM v_dns_name_daily WHERE campaign = 'copied'").fetchone()[0] > 0


def _day_range(c) -> tuple[datetime, datetime]:
    lo, hi = c.execute("SELECT min(started_at), max(started_at) FROM v_results").fetchone()
    lo = lo.astimezone(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    return lo, hi.astimezone(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)


def test_the_panels_give_what_the_records_say(empty_db, campaign):  # noqa: F811
    """Top failing names: the same rows as 0017's query over the records for whole UTC days
    (with each rate's Wilson interval beside it); the paired differences to Do53: the pairs the
    records give (same day, vantage, profile, browser, HTTP version and page; Do53 to the same
    resolver, else each Do53 of the cell), each
    median of the differences within the histograms' 1 % of the exact one."""
    gen.load(campaign, empty_db, workers=1)
    with psycopg.connect(empty_db) as c:
        lo, hi = _day_range(c)
        last = c.execute("SELECT date_trunc('day', max(started_at), 'UTC') FROM v_dns_query WHERE status <> 'ok'").fetchone()[0]
        exact = {d: c.execute(TOP_NAMES_EXACT, d).fetchall() for d in ((lo, hi), (last, last + timedelta(days=1)))}
        loads = c.execute("SELECT date_trunc('day', started_at, 'UTC'), vantage_id, coalesce(network_profile, 'none'), browser, "
                          "coalesce(http, ''), url, dns_mode, dns_transport, plt_ms FROM v_page_load "
                          "WHERE status = 'ok' AND plt_ms IS NOT NULL").fetchall()
    # a range ending at midnight touches the next day: end it a second before
    r = panels(empty_db, (lo, hi - timedelta(seconds=1)))
    cols, rows = r[("dnscamp-failures.json", "Top failing names")]
    wilson_cols = [cols.index("failure_rate_lo"), cols.index("failure_rate_hi")]
    plain = [tuple(v for i, v in enumerate(row) if i not in wilson_cols) for row in rows]
    assert plain == exact[(lo, hi)] and len(rows) == 25 and cols[-1] == "commonest_status"
    for row in rows:
        want = stats.wilson(row[cols.index("failed")], row[cols.index("n")])
        assert (row[wilson_cols[0]], row[wilson_cols[1]]) == pytest.approx(want, abs=1e-12)
    # a few hours: their whole UTC day
    day = panels(empty_db, (last + timedelta(hours=20), last + timedelta(hours=23)))[("dnscamp-failures.json", "Top failing names")]
    assert [tuple(v for i, v in enumerate(row) if i not in wilson_cols) for row in day[1]] == exact[(last, last + timedelta(days=1))]
    assert day[1]

    groups = defaultdict(list)
    for *key, plt in loads:
        groups[tuple(key)].append(plt)
    p50 = {k: sorted(v)[max(math.ceil(0.5 * len(v)), 1) - 1] for k, v in groups.items()}
    diffs, bound = defaultdict(list), defaultdict(float)
    for (day_, vantage, profile, browser, http, url, mode, transport), m in p50.items():
        if transport in ("do53", "system"):
            continue
        cell = (day_, vantage, profile, browser, http, url)
        bases = {b: d for (*c, b, t), d in p50.items() if t == "do53" and tuple(c) == cell}
        same = {b: d for b, d in bases.items() if b.split(":")[1] == mode.split(":")[1]}
        for base, d in (same or bases).items():  # Do53 to the same resolver, else every Do53 of the cell
            key = f"{mode} vs {base} · {browser} · {profile}"
            diffs[key].append(m - d)
            bound[key] = max(bound[key], 0.01 * (m + d))  # each median within 1 %
    cols, rows = r[PAIRED]
    got = {row[0]: dict(zip(cols, row)) for row in rows}
    assert got.keys() == diffs.keys() and len(got) > 10 and not any(k.startswith("system") for k in got)
    for key, v in diffs.items():
        assert got[key]["pairs"] == len(v)
        exact_median = sorted(v)[max(math.ceil(0.5 * len(v)), 1) - 1]
        assert abs(got[key]["diff_ms"] - exact_median) <= bound[key] + 1e-9, key
        if len(v) >= 6:
            assert got[key]["diff_lo_ms"] <= got[key]["diff_ms"] <= got[key]["diff_hi_ms"]
        else:
            assert got[key]["diff_lo_ms"] is None


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    n=st.integers(1, 60),
    seed=st.integers(0, 2**31),
    batch=st.sampled_from([4 << 10, 32 << 10, 8 << 20]),
    split=st.integers(1, 3),
)
def test_any_records_in_any_batches_roll_up_as_the_base_views_say(db_url, tmp_path_factory, n, seed, batch, split):
    """Generated queries (every status of the generator) and page loads, in one to three files
    cut into batches of any size, into a new database each time."""
    ingest_generated_in_batches(tmp_path_factory.mktemp("hypn"), n, seed, batch, split, check)
