"""Every panel's and variable's SQL, as Grafana would send it (dashboards/expand.py: variables
then macros), runs on the real Postgres as dnscamp_grafana (the provisioned datasource's role,
migration 0029: aggregate views only), returns the columns its field config names, and
returns rows for the demo campaign (tests/fixtures/demo). The demo has no failures, no S3
objects and no quarantined lines: the three panels that show only those are empty on it (and
asserted so), and are checked with the v1 fixtures' failure records and a real S3 collection
(moto) of a shipped object with a broken line."""

from __future__ import annotations

import gzip
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import boto3
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws

import dashboards
from collectors import s3
from collectors.ingest import ingest
from dashboards.expand import expand, resolve
from vantage_agent.stats import median_interval, wilson
from db import engine
from tests.scaffolding.demo_data import ATLAS_CAMPAIGN, CAMPAIGN, load_demo
from tests.store_util import grafana_url

pytestmark = pytest.mark.local
BUILT = dashboards.build()
V1 = Path(__file__).resolve().parents[1] / "fixtures" / "results" / "v1"
DEMO_RANGE = (datetime(2026, 11, 23, 21, 0, tzinfo=timezone.utc), datetime(2026, 11, 23, 22, 0, tzinfo=timezone.utc))
# panels that show only what the demo campaign has none of (failures, S3 objects, quarantine)
EMPTY_ON_DEMO = {("dnscamp-failures.json", "Top failing names"),
                 ("dnscamp-health.json", "Last upload per vantage (S3 collector)"),
                 ("dnscamp-health.json", "Quarantined lines by reason")}
NUMERIC = (int, float, Decimal)


def reader_url(owner_url: str) -> str:
    url = owner_url.replace("postgres@", f"{engine.READER}@", 1)
    assert url != owner_url
    return url


def named_columns(panel: dict) -> set[str]:
    """The columns a panel's field config and options name."""
    names = {o["matcher"]["options"] for o in panel.get("fieldConfig", {}).get("overrides", [])
             if o["matcher"]["id"] == "byName"}
    for s in panel.get("options", {}).get("series", []):
        names |= {s[axis]["matcher"]["options"] for axis in ("x", "y") if axis in s}
    for t in panel.get("transformations", []):
        if t["id"] == "partitionByValues":
            names |= set(t["options"]["fields"])
    for layer in panel.get("options", {}).get("layers", []):  # geomap: where and how big each marker is
        loc = layer.get("location", {})
        names |= {loc[k] for k in ("latitude", "longitude") if k in loc}
        names |= {v["field"] for v in layer.get("config", {}).get("style", {}).values() if isinstance(v, dict) and "field" in v}
    return names


def run_panels(url: str, selected: dict[str, tuple[str, ...]], time_range) -> dict[tuple[str, str], tuple[list, list]]:
    """{(dashboard, panel title): (column names, rows)} of every panel, its variables resolved
    first, run as Grafana's role."""
    out = {}
    with psycopg.connect(grafana_url(url)) as c:
        for name, data in BUILT.items():
            variables = resolve(c, data, selected, *time_range)
            for p in dashboards.panel_list(data):
                cur = c.execute(expand(p["targets"][0]["rawSql"], variables, *time_range))
                out[(name, p["title"])] = ([d.name for d in cur.description], cur.fetchall())
    return out


def shape_problems(results, built=BUILT) -> list[str]:
    """Panels whose result lacks what the panel reads."""
    bad = []
    panels = {(n, p["title"]): p for n, d in built.items() for p in dashboards.panel_list(d)}
    for key, (cols, rows) in results.items():
        p = panels[key]
        if p["type"] in ("timeseries", "heatmap"):
            values = [c for c in cols if c not in ("time", "metric")]
            need = {"time", "metric"} if p["type"] == "timeseries" else {"time"}
            if not need <= set(cols) or not values or (p["type"] == "timeseries" and len(values) != 1):
                bad.append(f"{key}: columns {cols}")
            if any(not isinstance(r[cols.index(v)], (*NUMERIC, type(None))) for r in rows for v in values):
                bad.append(f"{key}: non-numeric values")
        elif missing := named_columns(p) - set(cols):
            bad.append(f"{key}: field config names {sorted(missing)}, query returns {cols}")
        if p["type"] == "xychart":  # auto mapping: each partition's first number is x, the next y
            parts = {f for t in p.get("transformations", []) for f in t["options"].get("fields", [])}
            xy = [c for c in cols if c not in parts]
            if len(xy) != 2 or any(not isinstance(r[cols.index(c)], (*NUMERIC, type(None))) for r in rows for c in xy):
                bad.append(f"{key}: an XY chart needs exactly two number columns beside {sorted(parts)}: {cols}")
    return bad


@pytest.fixture()
def demo_db(empty_db):
    load_demo(empty_db)
    return empty_db


def test_every_panel_runs_as_grafanas_role_and_returns_the_demo_campaigns_rows(demo_db):
    results = run_panels(demo_db, {"campaign": (CAMPAIGN,), "atlas_campaign": (ATLAS_CAMPAIGN,)}, DEMO_RANGE)
    assert len(results) == sum(len(dashboards.panel_list(d)) for d in BUILT.values()) >= 25
    assert shape_problems(results) == []
    empty = {(name, title) for (name, title), (_, rows) in results.items() if not rows}
    assert empty == EMPTY_ON_DEMO


def test_the_shape_check_catches_a_panel_naming_a_column_its_query_lacks(demo_db):
    import copy

    results = run_panels(demo_db, {"campaign": (CAMPAIGN,)}, DEMO_RANGE)
    built = copy.deepcopy(BUILT)
    table = next(p for p in dashboards.panel_list(built["dnscamp-dns.json"]) if p["type"] == "table")
    table["fieldConfig"]["overrides"][0]["matcher"]["options"] = "no_such_column"
    ts = next(p for p in dashboards.panel_list(built["dnscamp-health.json"]) if p["type"] == "timeseries")
    key = ("dnscamp-health.json", ts["title"])
    results[key] = (results[key][0] + ["extra"], [(*r, 1) for r in results[key][1]])  # two value columns
    bad = shape_problems(results, built)
    assert len(bad) == 2 and "no_such_column" in bad[0] and "columns" in bad[1]


def test_the_demo_numbers_come_through(demo_db):
    r = run_panels(demo_db, {"campaign": (CAMPAIGN,), "atlas_campaign": (ATLAS_CAMPAIGN,)}, DEMO_RANGE)
    cols, rows = r[("dnscamp-dns.json", "Per transport × resolver × profile × connection")]
    assert sum(row[cols.index("n")] for row in rows) == 60  # the demo's 60 DNS queries, none failed
    cols, rows = r[("dnscamp-pageloads.json", "PLT per DNS mode × browser × condition")]
    assert sum(row[cols.index("n")] for row in rows) == 48
    cols, rows = r[("dnscamp-quicsocks.json", "Table I terms per probe")]
    assert len(rows) == 16  # the probes behind an ISP resolver the demo analysed
    assert all(abs(row[cols.index("saving_ms")] - (row[cols.index("rtt_direct_ms")] - row[cols.index("rtt_server_ms")]))
               < 1e-9 for row in rows)
    cols, rows = r[("dnscamp-health.json", "Per vantage: units run, last measurement, ingest lag")]
    assert [row[cols.index("vantage_id")] for row in rows] == ["testbed"] and rows[0][cols.index("records")] == 113
    row = dict(zip(cols, rows[0]))  # no failure in 113 records: a share of 0 that could still be 3.3 %
    assert (row["failed"], row["failed_share"], row["failed_share_lo"]) == (0, 0, 0)
    assert row["failed_share_hi"] == pytest.approx(wilson(0, 113)[1], abs=1e-12) and 0.03 < row["failed_share_hi"] < 0.035
    cols, rows = r[("dnscamp-failures.json", "Failure rate with counts")]  # from the hourly rollup
    assert {row[cols.index("failed")] for row in rows} == {0} and sum(row[cols.index("n")] for row in rows) == 60


def test_variables_filter_and_survive_hostile_values(demo_db):
    r = run_panels(demo_db, {"campaign": (CAMPAIGN,), "transport": ("doh",), "profile": ("4g",)}, DEMO_RANGE)
    cols, rows = r[("dnscamp-dns.json", "Per transport × resolver × profile × connection")]
    assert rows and {(row[0], row[2]) for row in rows} == {("doh", "4g")}
    with psycopg.connect(demo_db) as c:
        want = c.execute("SELECT count(*) FROM v_dns_query WHERE campaign = %s AND transport = 'doh' "
                         "AND network_profile = '4g'", (CAMPAIGN,)).fetchone()[0]
    assert sum(row[cols.index("n")] for row in rows) == want > 0
    # a value with quotes is a value, not SQL: nothing matches it, nothing breaks
    r = run_panels(demo_db, {"campaign": ("x'); DROP VIEW v_results; --",)}, DEMO_RANGE)
    by_campaign = {(n, p["title"]) for n, d in BUILT.items() for p in dashboards.panel_list(d)
                   if "${campaign:sqlstring}" in p["targets"][0]["rawSql"]}
    assert len(by_campaign) > 20 and all(not r[k][1] for k in by_campaign)
    with psycopg.connect(demo_db) as c:
        assert c.execute("SELECT count(*) FROM v_results").fetchone()[0] == 113


def test_a_time_range_without_records_gives_empty_panels(demo_db):
    """The hourly rollup counts the hours starting in the range, the daily rollups (and the
    variables read from them) every UTC day the range touches."""
    later = (DEMO_RANGE[1], DEMO_RANGE[1] + timedelta(hours=1))  # the hour after the demo's
    r = run_panels(demo_db, {}, later)
    assert not r[("dnscamp-dns.json", "Median, p90 and p99 resolution time")][1]
    assert r[("dnscamp-pageloads.json", "PLT distribution per DNS transport")][1]  # the demo's day
    assert r[("dnscamp-dns.json", "Per transport × resolver × profile × connection")][1]
    r = run_panels(demo_db, {}, (later[0] + timedelta(days=1), later[1] + timedelta(days=1)))
    assert not r[("dnscamp-dns.json", "Median, p90 and p99 resolution time")][1]
    assert not r[("dnscamp-pageloads.json", "PLT distribution per DNS transport")][1]
    assert not r[("dnscamp-dns.json", "Per transport × resolver × profile × connection")][1]


def _ship_with_a_broken_line(client, bucket: str) -> str:
    lines = (V1 / "dns_query.jsonl").read_text().splitlines()
    body = "\n".join([*lines[:3], "{not json", *lines[3:]]) + "\n"
    key = "results/fixtures/testbed-fiber/r1/u-dns.jsonl.gz"
    client.put_object(Bucket=bucket, Key=key, Body=gzip.compress(body.encode()))
    return key


def test_failure_and_collection_panels_with_failures_objects_and_quarantine(empty_db, tmp_path):
    """The v1 fixtures' failures (timeout, servfail, http_error; a page load's dns_error) and a
    real S3 collection: the shipped object's broken line is quarantined under its key."""
    ingest([V1 / "page_load.jsonl"], empty_db, workers=1)
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="results")
        key = _ship_with_a_broken_line(client, "results")
        stats = s3.collect("s3://results/results/", empty_db, client=client, workdir=tmp_path)
    assert stats.collected == 1 and stats.ingested == 13 and stats.quarantined == 1
    now = datetime.now(timezone.utc)
    r = run_panels(empty_db, {}, (datetime(2026, 11, 22, tzinfo=timezone.utc), now + timedelta(hours=1)))
    assert shape_problems(r) == []
    for key_ in EMPTY_ON_DEMO:
        assert r[key_][1], key_
    cols, rows = r[("dnscamp-failures.json", "Top failing names")]
    assert {(row[0], row[cols.index("commonest_status")]) for row in rows} == {
        ("drop.example.test.", "timeout"), ("servfail.example.test.", "servfail"), ("http500.example.test.", "http_error")}
    cols, rows = r[("dnscamp-failures.json", "Failures by status per transport")]
    by = {row[0]: dict(zip(cols, row)) for row in rows}
    assert by["do53"]["timeout"] == by["do53"]["servfail"] == by["doh"]["http_error"] == 1
    # the rates come from the hourly rollup (v_dns_hourly): the same counts as the records say
    cols, rows = r[("dnscamp-failures.json", "Failure rate with counts")]
    with psycopg.connect(empty_db) as c:
        exact = c.execute("SELECT transport, coalesce(resolver, 'none'), coalesce(network_profile, 'none'), count(*),"
                          " count(*) FILTER (WHERE status <> 'ok') FROM v_dns_query GROUP BY 1, 2, 3").fetchall()
    assert sorted((*row[:3], row[cols.index("n")], row[cols.index("failed")]) for row in rows) == sorted(exact)
    assert sum(row[cols.index("failed")] for row in rows) == 3
    cols, rows = r[("dnscamp-failures.json", "Page-load failures by status per browser")]
    assert {row[0]: row[cols.index("dns_error")] for row in rows}["firefox"] == 1
    cols, rows = r[("dnscamp-health.json", "Last upload per vantage (S3 collector)")]
    assert [(row[0], row[1], row[cols.index("quarantined")]) for row in rows] == [("fixtures", "testbed-fiber", 1)]
    cols, rows = r[("dnscamp-health.json", "Quarantined lines by reason")]
    assert sum(row[cols.index("lines")] for row in rows) == 1
    with psycopg.connect(reader_url(empty_db)) as c:
        assert c.execute("SELECT campaign, vantage_id FROM v_quarantine").fetchall() == [("fixtures", "testbed-fiber")]
        assert key in c.execute("SELECT source_file FROM v_quarantine").fetchone()[0]
    with psycopg.connect(grafana_url(empty_db)) as c:  # Grafana's role: the counts, never the file
        assert c.execute("SELECT campaign, vantage_id, lines FROM v_quarantine_counts").fetchall() == [
            ("fixtures", "testbed-fiber", 1)]
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute("SELECT source_file FROM v_quarantine")


def test_the_reader_cannot_read_the_tables_behind_the_views(demo_db):
    for url in (reader_url(demo_db), grafana_url(demo_db)):
        with psycopg.connect(url) as c:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                c.execute("SELECT count(*) FROM results")


def test_quicsocks_medians_and_shares_carry_n_and_their_intervals(demo_db):
    """The savings table against the stats module's own intervals over the probes' savings as
    the reader reads them (the Table I rows)."""
    r = run_panels(demo_db, {"campaign": (CAMPAIGN,), "atlas_campaign": (ATLAS_CAMPAIGN,)}, DEMO_RANGE)
    cols, rows = r[("dnscamp-quicsocks.json", "Median saving and probes saving at least 10 / 30 ms")]
    by = {row[0]: dict(zip(cols, row)) for row in rows}
    with psycopg.connect(reader_url(demo_db)) as c:
        savings = [x for (x,) in c.execute("SELECT saving_ms FROM v_quicsocks_savings WHERE campaign = %s AND isp_resolver"
                                           " AND saving_ms IS NOT NULL", (ATLAS_CAMPAIGN,))]
    assert set(by) == {"without retry", "with retry"} and len(savings) == 16
    for series, factor in (("without retry", 1), ("with retry", 2)):
        got, values = by[series], sorted(factor * x for x in savings)
        assert got["probes"] == 16
        assert got["median_ms"] == pytest.approx(values[7])  # percentile_disc(0.5): the lower middle
        assert (got["median_lo_ms"], got["median_hi_ms"]) == pytest.approx(median_interval(values))
        assert got["median_lo_ms"] <= got["median_ms"] <= got["median_hi_ms"]
        for t in (10, 30):
            k = sum(v >= t for v in values)
            assert got[f"saving_{t}ms"] == k and got[f"share_{t}ms"] == pytest.approx(k / 16)
            assert (got[f"share_{t}ms_lo"], got[f"share_{t}ms_hi"]) == pytest.approx(wilson(k, 16))
    cols, rows = r[("dnscamp-quicsocks.json", "CDF of per-probe savings")]
    assert {row[0] for row in rows} == {"without retry (n = 16)", "with retry (n = 16)"}


def test_quicsocks_shows_one_atlas_campaign_the_latest_first(demo_db):
    """Its variable lists the Atlas campaigns latest first (what Grafana selects on opening) and
    selects one: a second campaign's probes never mix into the first's panels."""
    with psycopg.connect(demo_db) as c:
        last = c.execute("SELECT max(last_result) FROM v_atlas_credits WHERE campaign = %s", (ATLAS_CAMPAIGN,)).fetchone()[0]
        for msm, label, when in ((900001, "older", last - timedelta(days=30)), (900002, "newer", last + timedelta(days=1))):
            c.execute("INSERT INTO atlas_measurements (msm_id, campaign, role) VALUES (%s, %s, 'probe_server')",
                      (msm, label))
            c.execute("INSERT INTO atlas_results_raw (campaign, msm_id, prb_id, timestamp, type, status, raw)"
                      " VALUES (%s, %s, 7, %s, 'ping', 'ok', '{\"sent\": 3, \"size\": 48}')", (label, msm, when))
            c.execute("INSERT INTO atlas_discovery (campaign, prb_id, resolver, method) VALUES (%s, 7, '192.0.2.53', 'whoami')",
                      (label,))
    data = BUILT["dnscamp-quicsocks.json"]
    [var] = data["templating"]["list"]
    assert (var["name"], var["multi"], var["includeAll"], var["sort"]) == ("atlas_campaign", False, False, 0)
    with psycopg.connect(grafana_url(demo_db)) as c:
        options = resolve(c, data, {}, *DEMO_RANGE)["atlas_campaign"].options
    assert options == ("newer", ATLAS_CAMPAIGN, "older")
    r = run_panels(demo_db, {"atlas_campaign": ("newer",)}, DEMO_RANGE)
    assert r[("dnscamp-quicsocks.json", "Median saving and probes saving at least 10 / 30 ms")][1] == []  # no pings yet
    r = run_panels(demo_db, {"atlas_campaign": (ATLAS_CAMPAIGN,)}, DEMO_RANGE)
    assert len(r[("dnscamp-quicsocks.json", "Table I terms per probe")][1]) == 16


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.text(min_size=1, max_size=40).filter(lambda v: v != ATLAS_CAMPAIGN and "\x00" not in v))
def test_quicsocks_and_health_panels_take_any_atlas_campaign_value_as_a_value(demo_db, value):
    """Whatever a URL puts in ?var-atlas_campaign= (quotes, backslashes, SQL, $, non-ASCII): every
    panel that filters on it runs as Grafana's role, without an error, and shows nothing."""
    data = {k: BUILT[k] for k in ("dnscamp-quicsocks.json", "dnscamp-health.json")}
    with psycopg.connect(grafana_url(demo_db)) as c:
        for d in data.values():
            variables = resolve(c, d, {"atlas_campaign": (value,), "campaign": (CAMPAIGN,)}, *DEMO_RANGE)
            for p in dashboards.panel_list(d):
                sql = p["targets"][0]["rawSql"]
                if "${atlas_campaign:sqlstring}" not in sql:
                    continue
                rows = c.execute(expand(sql, variables, *DEMO_RANGE)).fetchall()
                assert all(v in (None, 0) for r in rows for v in r), (p["title"], rows)
