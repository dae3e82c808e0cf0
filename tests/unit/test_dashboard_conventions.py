"""Grafana conventions and honest aggregates in the generated dashboards: rollup panels carry the
rollup's minimum interval, latency CDFs and pre-bucketed histograms a log x axis, every dashboard
links to the others and to the report and marks its runs, every median shown has its interval
and n beside it, every rate its Wilson interval, p99 stands wherever p90 does, distributions are
not pooled over transports, the region and vantage rows repeat per value, and the DNS, failure
and page-load panels read aggregate views only."""

from __future__ import annotations

import copy
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

import dashboards
from dashboards import panels
from dashboards.validate import errors

pytestmark = pytest.mark.unit
BUILT = dashboards.build()
MINE = ("dnscamp-dns.json", "dnscamp-failures.json", "dnscamp-pageloads.json")
# record-level views: one row per measurement (their size grows with the campaign, and they
# hold addresses); the panels read rollups, v_contexts and v_ingest_daily instead
RECORD_VIEWS = {"v_results", "v_dns_query", "v_page_load", "v_ping", "v_atlas_ping", "v_atlas_dns", "v_failures",
                "v_quarantine", "v_collected_objects"}
RELATIONS = re.compile(r"\b(?:FROM|JOIN)\s+(?:LATERAL\s+)?([A-Za-z_][A-Za-z0-9_]*)", re.IGNORECASE)


def _panels(name):
    return dashboards.panel_list(BUILT[name])


def _sql(p) -> str:
    return p["targets"][0]["rawSql"]


def _overrides(p) -> dict[str, dict[str, object]]:
    """{column: {property id: value}} of a panel's byName overrides."""
    return {o["matcher"]["options"]: {q["id"]: q["value"] for q in o["properties"]}
            for o in p.get("fieldConfig", {}).get("overrides", []) if o["matcher"]["id"] == "byName"}


def _columns(p) -> set[str]:
    return set(_overrides(p))


def test_rollup_panels_have_the_rollups_minimum_interval():
    checked = 0
    for name in MINE:
        for p in _panels(name):
            sql = _sql(p)
            hourly = "v_dns_hourly" in sql
            want = panels.HOURLY if hourly else panels.DAILY
            assert re.search(r"_daily|_hourly", sql), p["title"]
            assert p.get("interval") == want, (name, p["title"], p.get("interval"))
            checked += 1
    assert checked >= 20


def test_latency_cdfs_and_prebucketed_histograms_have_log_x_axes():
    seen = 0
    for name in MINE:
        for p in _panels(name):
            ov = _overrides(p)
            if p["type"] == "xychart":
                x = next(iter(ov))  # the chart's x: the first named column
                assert ov[x]["custom.scaleDistribution"] == {"type": "log", "log": 10}, p["title"]
                assert "custom.scaleDistribution" not in ov["cdf"]  # shares stay linear
                seen += 1
            if p["type"] == "histogram":
                assert '"xMin"' in _sql(p)
                assert ov["xMin"]["custom.scaleDistribution"]["type"] == "log", p["title"]
                assert p["options"]["legend"]["calcs"] == ["sum"]  # each series' n in the legend
                seen += 1
    assert seen == 4


def test_an_empty_panel_says_why():
    for name in MINE:
        for p in _panels(name):
            assert p["fieldConfig"]["defaults"]["noValue"] == panels.NO_DATA, p["title"]


def test_every_dashboard_links_to_the_others_and_to_the_report():
    for name, d in BUILT.items():
        by_type = {link["type"]: link for link in d["links"]}
        assert by_type["dashboards"]["tags"] == ["dnscamp"] and by_type["dashboards"]["keepTime"], name
        assert by_type["dashboards"]["includeVars"]
        assert by_type["link"]["url"] == panels.REPORT_URL and by_type["link"]["title"] == "Report"
        assert "dnscamp" in d["tags"]  # what the dashboards link selects


def test_runs_are_annotations_read_from_the_ingest_rollup():
    for name, d in BUILT.items():
        variables = {v["name"] for v in d["templating"]["list"]}
        annotations = d.get("annotations", {}).get("list", [])
        if "campaign" not in variables:
            assert not annotations, name
            continue
        (runs,) = annotations
        sql = runs["target"]["rawSql"]
        assert runs["name"] == "Runs" and runs["datasource"] == panels.DATASOURCE.to_json()
        assert set(RELATIONS.findall(sql)) == {"v_ingest_daily"} and "${campaign:sqlstring}" in sql
        assert {"time", "timeend", "text", "tags"} <= set(re.findall(r"\bAS (\w+)", sql))


def test_an_annotation_target_is_checked_against_the_sql_target_schema():
    d = copy.deepcopy(BUILT["dnscamp-dns.json"])
    assert errors(d) == []
    del d["annotations"]["list"][0]["target"]["rawSql"]
    assert any("rawSql" in e and "annotations/list/0/target" in e for e in errors(d))


def test_medians_carry_their_interval_and_n_rates_their_wilson_interval_and_p90_its_p99():
    medians = rates = 0
    for name in MINE:
        for p in _panels(name):
            cols = _columns(p)
            sql = _sql(p)
            for c in cols:
                if "p50" in c and not re.search("_(lo|hi)", c):
                    assert {c.replace("p50", "p50_lo"), c.replace("p50", "p50_hi")} <= cols, (name, p["title"], c)
                    medians += 1
                if c in ("fresh_ms", "reuse_ms", "resume_ms", "h2_ms", "h3_ms", "diff_ms"):
                    stem = c.removesuffix("_ms")
                    assert {f"{stem}_lo", f"{stem}_lo_ms"} & cols, (name, p["title"], c)
                    medians += 1
                if c == "failure_rate":
                    assert {"failure_rate_lo", "failure_rate_hi"} <= cols and "dnscamp_wilson_lo(" in sql
                    rates += 1
                if "p90" in c:
                    assert c.replace("p90", "p99") in cols, (name, p["title"], c)
            if "dnscamp_median_ci" in sql or "dnscamp_wilson" in sql:  # n in a column or the series' name
                assert {"n", "pairs"} & cols or any(c.endswith("_n") for c in cols) or "(n=" in sql, p["title"]
            # the interval comes from the store's functions, never a formula of its own
            assert "1.96" not in sql and "sqrt(" not in sql, p["title"]
    assert medians >= 10 and rates == 3
    series = [_sql(p) for name in MINE for p in _panels(name) if p["type"] in ("timeseries", "xychart")]
    assert series and all("(n=" in sql for sql in series)  # n in each series' legend name
    assert all("dnscamp_median_ci_rank" in sql or "dnscamp_wilson_lo" in sql
               for sql in series if "p50" in sql or "failure_rate" in sql)


def test_the_interval_bounds_series_are_drawn_dashed():
    ts = [p for name in MINE for p in _panels(name) if p["type"] == "timeseries"]
    assert len(ts) == 2
    for p in ts:
        (o,) = [o for o in p["fieldConfig"]["overrides"] if o["matcher"]["id"] == "byRegexp"]
        assert o["matcher"]["options"] == panels.BOUND_SERIES
        assert {q["id"] for q in o["properties"]} >= {"custom.lineStyle"}


def _js_regex(pattern: str) -> re.Pattern:
    assert pattern.startswith("/") and pattern.endswith("/")
    return re.compile(pattern[1:-1])


@given(name=st.text(min_size=1, max_size=40).filter(lambda s: "\n" not in s), n=st.integers(0, 10**9),
       stat=st.sampled_from(["p50", "p90", "p99", "rate"]))
def test_only_bound_series_match_the_dashed_style(name, n, stat):
    bound = _js_regex(panels.BOUND_SERIES)
    assert bound.search(f"{name} {stat} lo (n={n})") and bound.search(f"{name} hi (n={n})")
    assert not bound.search(f"{name} {stat} (n={n})")


def test_distributions_are_per_transport_and_connection_modes_per_resolver_and_profile():
    dns = {p["title"]: p for p in _panels("dnscamp-dns.json")}
    heat = next(p for t, p in dns.items() if p["type"] == "heatmap")
    assert heat.get("repeat") == "transport" and "$transport" in heat["title"]
    for title in ("Median resolution time: fresh / reuse / resume", "Resolution time in multiples of the access RTT",
                  "Bytes on the wire per resolution"):
        assert "coalesce(resolver, 'none')" in _sql(dns[title]) and "network_profile" in _sql(dns[title])
        assert _overrides(dns[title])["fresh_n"]["custom.hideFrom"] == panels.TOOLTIP_ONLY
    paired = next(p for p in _panels("dnscamp-pageloads.json") if p["title"].startswith("Paired PLT difference"))
    sql = _sql(paired)
    assert "split_part(d.dns_mode, ':', 2) = split_part(m.dns_mode, ':', 2)" in sql and "'system'" in sql
    assert "dnscamp_median_ci_q_lo(pairs)" in sql and "pairs" in _columns(paired)


@pytest.mark.parametrize("name", ["dnscamp-dns.json", "dnscamp-pageloads.json"])
def test_region_and_vantage_rows_repeat_per_value(name):
    rows = {p.get("repeat"): p for p in BUILT[name]["panels"] if p["type"] == "row" and p.get("repeat")}
    assert set(rows) == {"region", "vantage"}
    region_panels = [p for p in BUILT[name]["panels"] if "$region" in p.get("title", "") and p["type"] != "row"]
    assert region_panels and all(panels.FILTERS["region"] in _sql(p) for p in region_panels)


def test_the_panels_and_variables_read_no_record_view():
    for name in MINE:
        d = BUILT[name]
        sqls = [_sql(p) for p in dashboards.panel_list(d)] + [v["query"] for v in d["templating"]["list"]]
        for sql in sqls:
            assert not set(RELATIONS.findall(sql)) & RECORD_VIEWS, sql[:200]
        by_name = {v["name"]: v["query"] for v in d["templating"]["list"]}
        for v in ("campaign", "region", "vantage", "profile"):
            assert set(RELATIONS.findall(by_name[v])) == {"v_contexts"}, v


def test_hist_quantiles_names_a_median_only_at_one_half():
    sums = "SELECT g, bucket, n FROM t"
    assert "p50_lo" in panels.hist_quantiles(sums, "g", {"p50": 0.5}, median="p50")
    assert "g.hist_n" not in panels.hist_quantiles(sums, "g", {"p50": 0.5})
    assert "g.hist_n" in panels.hist_quantiles(sums, "g", {"p50": 0.5}, with_n=True)
    with pytest.raises(ValueError, match="not the median"):
        panels.hist_quantiles(sums, "g", {"p90": 0.9}, median="p90")
