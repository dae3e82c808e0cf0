"""The intervals and counts the dashboards show, on the real Postgres as the role Grafana uses:

- the medians' 95 % intervals read from rollup histograms (dashboards.panels.hist_quantiles) are
  the order statistics vantage_agent.stats.median_ci_rank names, for any histograms
  (hypothesis), and cover a known population median at least 95 % of the time on simulated
  lognormal samples (scipy draws them);
- on a generated campaign (bench/gen_campaign.py): the failure rates' bounds are
  vantage_agent.stats.wilson of the counts shown beside them; the region and vantage small
  multiples split the queries and loads exactly by where v_contexts places each vantage, with
  each median between its bounds; the runs' annotations span each run's records; a region that
  is not in the list, or any text in any variable (hypothesis), gives empty panels, never an
  SQL error."""

from __future__ import annotations

import importlib.util
import math
from collections import Counter, defaultdict
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats as sps

import dashboards
from dashboards.expand import expand, resolve
from dashboards.panels import hist_quantiles
from tests.local.test_dashboards_sql import BUILT, run_panels
from tests.store_util import grafana_url
from vantage_agent import stats

pytestmark = pytest.mark.local
ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("gen_campaign_intervals", ROOT / "bench" / "gen_campaign.py")
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)
END = datetime.fromisoformat(gen.END.replace("Z", "+00:00")).astimezone(timezone.utc)
MONTH = (END - timedelta(days=30), END)


def _medians(conn, sums_sql: str, params) -> dict[int, tuple]:
    """{group: (p50, p50_lo, p50_hi, n)} of hist_quantiles over ``sums_sql`` (g, bucket, n)."""
    sql = f"SELECT g, p50, p50_lo, p50_hi, hist_n FROM ({hist_quantiles(sums_sql, 'g', {'p50': 0.5}, median='p50')}) q"
    return {r[0]: r[1:] for r in conn.execute(sql, params).fetchall()}


histograms = st.lists(st.dictionaries(st.integers(0, 600), st.integers(1, 40), min_size=1, max_size=25),
                      min_size=1, max_size=6)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(hs=histograms)
def test_the_median_interval_from_histograms_is_the_order_statistics_stats_names(db_url, hs):
    groups, buckets, counts = [], [], []
    for g, h in enumerate(hs):
        for b, n in h.items():
            groups.append(g), buckets.append(b), counts.append(n)
    with psycopg.connect(grafana_url(db_url)) as c:
        got = _medians(c, "SELECT g, bucket, n FROM unnest(%s::int[], %s::int[], %s::numeric[]) AS u(g, bucket, n)",
                       (groups, buckets, counts))
        value = dict(c.execute("SELECT b, dnscamp_hist_value(b) FROM generate_series(0, 600) AS b").fetchall())
    assert got.keys() == set(range(len(hs)))
    for g, h in enumerate(hs):
        ranked = sorted(b for b, n in h.items() for _ in range(n))  # each value, in order
        n = len(ranked)
        p50, lo, hi, hist_n = got[g]
        assert hist_n == n and p50 == value[ranked[math.ceil(n / 2) - 1]]
        j = stats.median_ci_rank(n)
        if j is None:
            assert lo is None and hi is None
        else:
            assert (lo, hi) == (value[ranked[j - 1]], value[ranked[n - j]])
            assert lo <= p50 <= hi


def test_the_median_interval_covers_the_population_median_on_simulated_samples(db_url):
    """400 samples of 40 lognormal values (scipy), each bucketed by the rollups' own function:
    the interval read from each sample's histogram holds the population median at least 95 %
    of the time, less the binomial noise of 400 trials."""
    dist = sps.lognorm(s=0.8, scale=30.0)  # median 30 ms, a long right tail as resolution times have
    samples, size = 400, 40
    values = dist.rvs(size=(samples, size), random_state=np.random.default_rng(7))
    groups = np.repeat(np.arange(samples), size)
    with psycopg.connect(grafana_url(db_url)) as c:
        got = _medians(c, """SELECT g, dnscamp_hist_bucket(v) AS bucket, count(*) AS n
                             FROM unnest(%s::int[], %s::float8[]) AS u(g, v) GROUP BY 1, 2""",
                       (groups.tolist(), values.ravel().tolist()))
    truth = dist.median()
    covered = sum(lo <= truth <= hi for _, lo, hi, _ in got.values())
    assert all(n == size for *_, n in got.values()) and len(got) == samples
    # at least 95 % in expectation (order statistics: 96.2 % at n = 40); 3 standard errors below
    assert covered / samples >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / samples), covered
    assert covered < samples  # an interval that always covers would be too wide to mean anything


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gen")
    gen.generate(out, dns_queries_n=3_000, page_loads_n=2_000, atlas_n=0, seed=11, campaign="gen")
    return out


@pytest.fixture()
def store(generated, empty_db):
    assert gen.load(generated, empty_db, workers=1)["records"]["ingested"] == 5_000
    return empty_db


def _panel(results, dashboard: str, start: str):
    (key,) = [k for k in results if k[0] == dashboard and k[1].startswith(start)]
    cols, rows = results[key]
    return [dict(zip(cols, r)) for r in rows]


def test_rates_carry_the_wilson_interval_of_the_counts_beside_them(store):
    r = run_panels(store, {"campaign": ("gen",)}, MONTH)
    checked = 0
    for title, k in (("Failure rate with counts", "failed"), ("Page-load failure rate", "failed"), ("Top failing names", "failed")):
        rows = _panel(r, "dnscamp-failures.json", title)
        assert rows, title
        for row in rows:
            lo, hi = stats.wilson(int(row[k]), int(row["n"]))
            assert (row["failure_rate_lo"], row["failure_rate_hi"]) == pytest.approx((lo, hi), abs=1e-12)
            assert lo <= row["failure_rate"] <= hi
            checked += 1
    assert checked > 50


def test_region_and_vantage_small_multiples_split_the_records_by_where_they_were_measured(store):
    with psycopg.connect(store) as c:
        dns = c.execute("SELECT region, vantage_id, transport FROM v_dns_query WHERE status = 'ok' AND started_at >= %s",
                        (MONTH[0],)).fetchall()
        loads = c.execute("SELECT region, vantage_id, dns_mode FROM v_page_load WHERE status = 'ok' AND started_at >= %s",
                          (MONTH[0],)).fetchall()
        regions = sorted({x[0] for x in dns + loads})
    assert len(regions) == 5
    with psycopg.connect(grafana_url(store)) as c:  # the region variable lists v_contexts' regions
        variables = resolve(c, BUILT["dnscamp-dns.json"], {"campaign": ("gen",)}, *MONTH)
    assert list(variables["region"].options) == regions
    assert sorted(variables["vantage"].options) == sorted({x[1] for x in dns + loads})
    total = Counter()
    for region in regions:
        r = run_panels(store, {"campaign": ("gen",), "region": (region,)}, MONTH)
        rows = _panel(r, "dnscamp-dns.json", "Median resolution time per transport in")
        want = Counter(t for reg, _, t in dns if reg == region)
        assert {row["transport"]: row["n"] for row in rows} == want
        total += want
        for row in rows:
            assert row["p50_lo_ms"] <= row["p50_ms"] <= row["p50_hi_ms"] and row["p90_ms"] <= row["p99_ms"]
        rows = _panel(r, "dnscamp-pageloads.json", "Median PLT per DNS mode in")
        assert {row["dns_mode"]: row["n"] for row in rows} == Counter(m for reg, _, m in loads if reg == region)
        # the vantage variable follows the region: the by-vantage row shows only this region's
        rows = _panel(r, "dnscamp-dns.json", "Median resolution time per transport at")
        assert {row["transport"]: row["n"] for row in rows} == want
    assert total == Counter(t for *_, t in dns) and len([reg for reg in regions if any(d[0] == reg for d in dns)]) >= 4
    vantage = sorted({x[1] for x in dns})[0]
    rows = _panel(run_panels(store, {"campaign": ("gen",), "vantage": (vantage,)}, MONTH), "dnscamp-dns.json",
                  "Median resolution time per transport at")
    assert {row["transport"]: row["n"] for row in rows} == Counter(t for _, v, t in dns if v == vantage)


def test_a_region_or_vantage_not_in_the_list_gives_empty_panels(store):
    for selected in ({"region": ("x'); DROP VIEW v_contexts; --",)}, {"vantage": ("no-such-vantage",)}):
        r = run_panels(store, {"campaign": ("gen",), **selected}, MONTH)
        for dashboard in ("dnscamp-dns.json", "dnscamp-pageloads.json"):
            for key, (_, rows) in r.items():
                if key[0] == dashboard:
                    assert not rows, key
    with psycopg.connect(grafana_url(store)) as c:
        assert c.execute("SELECT count(*) FROM v_contexts WHERE campaign = 'gen'").fetchone()[0] > 0


def test_the_runs_annotations_span_each_runs_records(store):
    data = BUILT["dnscamp-dns.json"]
    sql = data["annotations"]["list"][0]["target"]["rawSql"]
    with psycopg.connect(grafana_url(store)) as c:
        variables = resolve(c, data, {"campaign": ("gen",)}, *MONTH)
        cur = c.execute(expand(sql, variables, *MONTH))
        got = [dict(zip([d.name for d in cur.description], r)) for r in cur.fetchall()]
    with psycopg.connect(store) as c:
        want = c.execute("SELECT run, min(started_at), max(started_at), count(*) FROM v_results "
                         "WHERE kind IN ('dns_query', 'page_load') GROUP BY run").fetchall()
    assert len(got) == len(want) > 0
    by_run = {w[0]: w[1:] for w in want}
    for a in got:
        run = a["text"].split()[1]
        first, last, n = by_run[run]
        assert (a["time"], a["timeend"], a["tags"]) == (first, last, "gen") and f"{n} records" in a["text"]
    # a range before the campaign: no annotation
    before = (MONTH[0] - timedelta(days=60), MONTH[0] - timedelta(days=40))
    with psycopg.connect(grafana_url(store)) as c:
        assert c.execute(expand(sql, variables, *before)).fetchall() == []


def test_the_paired_difference_and_connection_modes_show_their_n(store):
    r = run_panels(store, {"campaign": ("gen",)}, MONTH)
    rows = _panel(r, "dnscamp-pageloads.json", "Paired PLT difference to Do53")
    assert rows and all(row["pairs"] >= 1 and row["loads"] >= row["pairs"] for row in rows)
    assert not any(row["comparison"].startswith("system") for row in rows)
    with_interval = [row for row in rows if row["diff_lo_ms"] is not None]
    assert all(row["pairs"] >= 6 and row["diff_lo_ms"] <= row["diff_ms"] <= row["diff_hi_ms"] for row in with_interval)
    per_group = defaultdict(int)
    for row in _panel(r, "dnscamp-dns.json", "Median resolution time: fresh"):
        for m in ("fresh", "reuse", "resume"):
            per_group[m] += row[f"{m}_n"] or 0
    with psycopg.connect(store) as c:
        ok = c.execute("SELECT count(*) FROM v_dns_query WHERE status = 'ok' AND total_ms IS NOT NULL "
                       "AND started_at >= %s", (MONTH[0],)).fetchone()[0]
    assert sum(per_group.values()) == ok


# any text a variable might be set to (a URL parameter, a typo, an attack), NUL left out: a
# PostgreSQL query string cannot hold it, whatever quoting
values = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=30)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(variable=st.sampled_from(["campaign", "region", "vantage", "profile", "transport", "dns_mode", "resolver", "browser"]),
       value=values)
def test_any_value_not_in_a_list_gives_empty_panels_never_an_error(store, variable, value):
    with psycopg.connect(grafana_url(store)) as c:
        for name in ("dnscamp-dns.json", "dnscamp-failures.json", "dnscamp-pageloads.json"):
            data = BUILT[name]
            if variable not in {v["name"] for v in data["templating"]["list"]}:
                continue
            variables = resolve(c, data, {"campaign": ("gen",), variable: (value,)}, *MONTH)
            known = value in variables[variable].options or (variable == "campaign" and value == "gen")
            for p in dashboards.panel_list(data):
                sql = p["targets"][0]["rawSql"]
                rows = c.execute(expand(sql, variables, *MONTH)).fetchall()
                if f"${{{variable}:sqlstring}}" in sql:  # a panel the variable filters
                    assert known or not rows, (name, p["title"], value)
