"""The report at scale and honest (dnscamp/report.py, dnscamp/site, docs/report.md): a whole
campaign read from the rollups agrees with the records (counts exactly, medians and their
intervals within the histograms' 1 %), one run read from its records gives what the rollups
give when the campaign is that run, the intervals are vantage_agent.stats' (order statistics,
Wilson), hostile campaign names return nothing and break no query, and every figure's
dashboard link names a panel of the generated dashboards."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg.conninfo import conninfo_to_dict

from db import engine
from dnscamp import report
from dnscamp.site import build as site
from dnscamp.site import figures
from tests.scaffolding.demo_data import CAMPAIGN, RUN, load_demo
from vantage_agent import stats

pytestmark = pytest.mark.local
ROOT = Path(__file__).resolve().parents[2]
HIST_ERROR = 0.01  # a value read from the rollups' 2 % log buckets: within 1 % of the exact order statistic
_spec = importlib.util.spec_from_file_location("gen_campaign_report", ROOT / "bench" / "gen_campaign.py")
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)

# Every query of the report: the overview's sections and every seed's items.
QUERIES = [(name, sql) for name, _, _, sql in report.SECTIONS] + [(i.slug, i.sql) for s in figures.SEEDS for i in s.items]


def reader_of(owner_url: str) -> str:
    return engine.database_url("reader", dbname=conninfo_to_dict(owner_url)["dbname"])


def rows(conn: psycopg.Connection, sql: str, campaign: str, run: str | None) -> list[dict]:
    cols, rs = report.fetch(conn, sql, campaign, run)
    return [dict(zip(cols, r)) for r in rs]


def near(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return abs(float(a) - float(b)) <= HIST_ERROR * abs(float(b)) + 1e-9


def exact_dns(conn: psycopg.Connection, campaign: str, run: str | None) -> dict[tuple, dict]:
    """The dns_query section's figures computed from the records, each value with
    vantage_agent.stats (Python), keyed as the section's rows are."""
    sql = f"""SELECT COALESCE(network_profile, '(none)'), resolver, transport, {report.DNS_CONNECTION}, status, total_ms
              FROM v_dns_query WHERE {report.RUN_FILTER}"""
    groups: dict[tuple, dict] = {}
    for *key, status, ms in conn.execute(sql, {"campaign": campaign, "run": run}):
        g = groups.setdefault(tuple(key), {"queries": 0, "failures": 0, "values": []})
        g["queries"] += 1
        g["failures"] += status != "ok"
        if status == "ok" and ms is not None:
            g["values"].append(float(ms))
    for g in groups.values():
        v = sorted(g["values"])
        g["median"] = v[(len(v) + 1) // 2 - 1] if v else None  # nearest rank, as percentile_disc(0.5)
        g["interval"] = stats.median_interval(v)
        g["wilson"] = stats.wilson(g["failures"], g["queries"])
    return groups


def check_dns_section(conn: psycopg.Connection, campaign: str, run: str | None) -> int:
    sql = next(sql for name, _, _, sql in report.SECTIONS if name == "dns_query")
    got = {(r["profile"], r["resolver"], r["transport"], r["connection"]): r for r in rows(conn, sql, campaign, run)}
    want = exact_dns(conn, campaign, run)
    assert set(got) == set(want) and got
    with_interval = 0
    for key, w in want.items():
        r = got[key]
        assert (r["queries"], r["failures"], r["timed"] or 0) == (w["queries"], w["failures"], len(w["values"])), key
        assert (r["failure_rate_lo"], r["failure_rate_hi"]) == pytest.approx(w["wilson"], abs=1e-12), key
        assert near(r["total_ms_p50"], w["median"]), key
        lo, hi = w["interval"] or (None, None)
        assert near(r["total_ms_p50_lo"], lo) and near(r["total_ms_p50_hi"], hi), (key, r, w["interval"])
        with_interval += w["interval"] is not None
    return with_interval


def test_a_whole_campaign_from_the_rollups_agrees_with_its_records(empty_db, tmp_path):
    """Generated records (bench/gen_campaign.py: failures of every kind, four profiles, many runs):
    counts equal, medians and the bounds of their 95 % interval within the histograms' 1 % of the
    order statistics vantage_agent.stats picks from the records, Wilson's interval equal; one run
    read from its records agrees the same way with that run's records."""
    gen.generate(tmp_path, seed=33, dns_queries_n=6000, page_loads_n=1500, atlas_n=400, campaign="gen")
    gen.load(tmp_path, empty_db, workers=1)
    with psycopg.connect(reader_of(empty_db)) as conn:
        assert check_dns_section(conn, "gen", None) > 20  # most groups hold enough queries for an interval
        runs = [r[0] for r in conn.execute(
            "SELECT run FROM v_dns_query WHERE campaign = 'gen' GROUP BY run ORDER BY count(*) DESC, run LIMIT 2")]
        assert len(runs) == 2
        for run in runs:
            check_dns_section(conn, "gen", run)  # a run holds too few queries per group for an interval

        # the paired PLT difference: its interval is the order statistics of the pairs themselves
        pairs: dict[tuple, list[float]] = {}
        for r in rows(conn, figures.PLT_PAIRS, "gen", None):
            pairs.setdefault((r["profile"], r["mode"], r["transport"], r["baseline"]), []).append(float(r["diff_ms"]))
        medians = rows(conn, figures.SQL_PLT_DIFF, "gen", None)  # CDF points, each with its group's median
        assert medians and {(r["profile"], r["mode"], r["transport"], r["baseline"]) for r in medians} == set(pairs)
        assert not any(r["mode"].startswith("system") for r in medians)  # system has no Do53 pair
        checked = 0
        for r in medians:
            p = sorted(pairs[(r["profile"], r["mode"], r["transport"], r["baseline"])])
            assert r["n"] == len(p) and r["diff_ms_p50"] == pytest.approx(p[(len(p) + 1) // 2 - 1])
            ci = stats.median_interval(p)
            assert (r["diff_ms_p50_lo"], r["diff_ms_p50_hi"]) == (pytest.approx(ci[0]), pytest.approx(ci[1])) if ci \
                else (r["diff_ms_p50_lo"], r["diff_ms_p50_hi"]) == (None, None)
            checked += ci is not None
        assert checked > 0

        # page-load outcomes: counts from the daily rollup, each share with Wilson's interval
        exact = {}
        for prof, tr, status, n in conn.execute(
                "SELECT COALESCE(network_profile, '(none)'), dns_transport, status, count(*) FROM v_page_load"
                " WHERE campaign = 'gen' GROUP BY 1, 2, 3"):
            exact[(prof, tr, status)] = n
        out = rows(conn, figures.SQL_PAGE_OUTCOMES, "gen", None)
        assert {(r["profile"], r["transport"], r["status"]): r["n"] for r in out} == exact
        for r in out:
            loads = sum(n for (p, t, _), n in exact.items() if (p, t) == (r["profile"], r["transport"]))
            assert r["loads"] == loads
            assert (r["share_lo"], r["share_hi"]) == pytest.approx(stats.wilson(r["n"], loads), abs=1e-12)

        # a CDF from the histograms: exact fractions at each bucket's upper edge
        cdf = rows(conn, figures.SQL_RESOLUTION, "gen", None)
        values = {}
        for prof, tr, ms in conn.execute("SELECT COALESCE(network_profile, '(none)'), transport, total_ms FROM v_dns_query"
                                         " WHERE campaign = 'gen' AND status = 'ok' AND total_ms IS NOT NULL"):
            values.setdefault((prof, tr), []).append(float(ms))
        for r in cdf[:: max(1, len(cdf) // 200)]:
            v = values[(r["profile"], r["transport"])]
            assert r["n"] == len(v)
            below = sum(x < r["total_ms"] * (1 - 1e-9) for x in v) / len(v)
            at = sum(x < r["total_ms"] * (1 + 1e-9) for x in v) / len(v)
            assert below - 1e-12 <= r["cdf"] <= at + 1e-12, r  # the fraction of values below the edge


@pytest.fixture()
def demo_reader(empty_db):
    load_demo(empty_db)
    return reader_of(empty_db)


def test_one_run_from_its_records_reads_as_the_rollups_do(demo_reader):
    """The demo campaign is one run: the run's records put into the rollups' buckets give every
    figure and table exactly what the rollups give for the whole campaign."""
    with psycopg.connect(demo_reader) as conn:
        assert conn.execute("SELECT count(DISTINCT run) FROM v_results WHERE campaign = %s", (CAMPAIGN,)).fetchone() == (1,)
        for name, sql in QUERIES:
            whole = report.fetch(conn, sql, CAMPAIGN, None)
            one = report.fetch(conn, sql, CAMPAIGN, RUN)
            assert whole == one and whole[1], name


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(alphabet=st.sampled_from("d'\"%_\\;-/ \x00\u2028e*fault"), max_size=12) | st.just("default/"))
def test_hostile_campaign_names_return_nothing_and_break_no_query(demo_reader, name):
    name = name.replace("\x00", "")  # a NUL cannot reach the server through libpq at all
    with psycopg.connect(demo_reader) as conn:
        for q, sql in QUERIES:
            cols, rs = report.fetch(conn, sql, name, None)
            assert cols and (rs == [] or name == CAMPAIGN), (q, name)
            assert report.fetch(conn, sql, name, "x'; --")[1] == [], (q, name)


def test_every_figure_links_to_a_panel_of_the_generated_dashboards():
    panels = site.panel_ids()
    generated = {}
    for f in (ROOT / "dashboards" / "provisioning" / "dashboards").glob("*.json"):
        d = json.loads(f.read_text())
        generated[d["uid"]] = d
    refs = [(i.slug, i.panel) for s in figures.SEEDS for i in s.items] + list(site.OVERVIEW_PANELS.items())
    assert all(ref is not None for _, ref in refs)
    for slug, ref in refs:
        url = site.panel_url(panels, ref, "https://g.test/", "a b&c")
        assert url is not None, (slug, ref)  # the pattern names a panel that exists
        m = re.fullmatch(r"https://g\.test/d/([\w-]+)\?viewPanel=(\d+)&var-campaign=a\+b%26c", url)
        assert m and m[1] == ref[0], url
        flat = []

        def walk(ps):
            for p in ps:
                flat.append(p)
                walk(p.get("panels", []))

        walk(generated[ref[0]]["panels"])
        panel = next(p for p in flat if p.get("id") == int(m[2]))  # the id is the generated JSON's
        assert panel["type"] != "row" and re.search(ref[1], panel["title"], re.IGNORECASE), (slug, panel["title"])
    assert site.panel_url(panels, ("dnscamp-dns", "no such panel title"), "https://g.test", "c") is None


def test_the_report_raises_its_own_limits_over_the_roles(demo_reader, tmp_path):
    """A reader connection whose defaults would cancel every query (statement_timeout 1 ms, as a
    role's limits could): the report sets its own for its connection and builds."""
    tight = demo_reader + "&options=" + "-c%20statement_timeout%3D1%20-c%20work_mem%3D64kB"
    with psycopg.connect(tight) as conn:
        with pytest.raises(psycopg.errors.QueryCanceled):  # the defaults alone do cancel
            conn.execute("SELECT pg_sleep(0.05)")
    index = site.build(tight, tmp_path / "site", CAMPAIGN)
    assert index.is_file() and "No data" not in (tmp_path / "site" / "seed-002.html").read_text()
