"""The panels that read the rollups (docs/dashboards.md "How the panels query") against the records
they summarise, on a small generated campaign (bench/gen_campaign.py, stored by the normal ingest
path): percentiles within the histograms' documented 1 % of percentile_disc (over time: hours for
a short range, UTC days for a long one; per connection mode; per page-load condition), counts
equal to the records' (ok queries, failures per status, page loads), every ok query counted once
in the distribution's bins and in the heatmap, CDF points exact at the buckets' edges."""

from __future__ import annotations

import bisect
import importlib.util
import math
import re
from collections import Counter, defaultdict
from datetime import datetime, timedelta, timezone
from pathlib import Path

import psycopg
import pytest

from tests.local.test_dashboards_sql import run_panels

pytestmark = pytest.mark.local
ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("gen_campaign_rollups", ROOT / "bench" / "gen_campaign.py")
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)
END = datetime.fromisoformat(gen.END.replace("Z", "+00:00")).astimezone(timezone.utc)
CONN = "CASE WHEN connection_reused THEN 'reuse' WHEN resumed THEN 'resume' ELSE 'fresh' END"
SERIES = "transport || ' · ' || coalesce(resolver, 'none') || ' · ' || coalesce(network_profile, 'none')"
MONTH = (END - timedelta(days=30), END)


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gen")
    gen.generate(out, dns_queries_n=4_000, page_loads_n=1_000, atlas_n=0, seed=5, campaign="gen")
    return out


@pytest.fixture()
def store(generated, empty_db):
    assert gen.load(generated, empty_db, workers=1)["records"]["ingested"] == 5_000
    with psycopg.connect(empty_db) as c:
        dns = c.execute(f"SELECT started_at, {SERIES}, transport, {CONN}, status, total_ms, total_rtt_multiple, "
                        f"total_ip_bytes, coalesce(resolver, 'none'), coalesce(network_profile, 'none'), total_packets "
                        f"FROM v_dns_query").fetchall()
        loads = c.execute("SELECT started_at, dns_mode, browser, coalesce(network_profile, 'none'), http, dns_transport, "
                          "status, plt_ms FROM v_page_load").fetchall()
    assert len(dns) == 4_000 and len(loads) == 1_000
    return empty_db, dns, loads


def _rank(values: list[float], q: float) -> float:
    """percentile_disc: the smallest value whose cume_dist reaches q."""
    return sorted(values)[max(math.ceil(q * len(values)), 1) - 1]


def _within_1pct(got: dict, want: dict) -> float:
    assert got.keys() == want.keys()
    worst = max(abs(got[k] / want[k] - 1) for k in want if want[k])
    assert worst <= 0.01, worst
    return worst


def _trunc(t: datetime, unit: str) -> int:
    t = t.astimezone(timezone.utc).replace(minute=0, second=0, microsecond=0)
    return int((t.replace(hour=0) if unit == "day" else t).timestamp())


def _one_day(dns) -> tuple[datetime, datetime]:
    """The UTC day of the last query: a range of at most dashboards.dns.HOURLY_MAX (the hourly
    branch) with rows."""
    day = datetime.fromtimestamp(_trunc(max(r[0] for r in dns), "day"), timezone.utc)
    return day, day + timedelta(days=1)


def _ok(dns, lo=MONTH[0]):
    return [r for r in dns if r[4] == "ok" and r[5] is not None and r[0] >= lo]


def _named(metric: str) -> tuple[str, int]:
    """A series name "<name> (n=<count>)" split in two."""
    m = re.fullmatch(r"(.*) \(n=(\d+)\)", metric)
    assert m, metric
    return m.group(1), int(m.group(2))


@pytest.mark.parametrize("unit", ["day", "hour"])
def test_percentiles_over_time_are_within_one_percent_of_the_records(store, unit):
    """A long range reads UTC days (the daily rollup), a short one hours (the hourly rollup):
    one point per (day or hour, series), each within 1 % of percentile_disc of its records, the
    median between its interval's bounds, each series named with its count over the range."""
    url, dns, _ = store
    time_range = MONTH if unit == "day" else _one_day(dns)
    # $__interval 1 min (expand's default): each rollup hour is its own time bucket
    cols, rows = run_panels(url, {"campaign": ("gen",)}, time_range)[("dnscamp-dns.json", "Median, p90 and p99 resolution time")]
    groups, counts = defaultdict(list), Counter()
    for started, series, *_rest in _ok(dns, time_range[0]):
        groups[(_trunc(started, unit), series)].append(_rest[3])
        counts[series] += 1
    assert len(groups) > 20
    got, n_of = {}, {}
    for t, metric, v in rows:
        name, n = _named(metric)
        got[(int(t), name)] = v
        series = name.rsplit(" p", 1)[0]
        assert n_of.setdefault(series, n) == n  # one n per series
    assert n_of == dict(counts)
    want = {(t, f"{s} {stat}"): _rank(v, q) for (t, s), v in groups.items()
            for stat, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))}
    assert _within_1pct({k: v for k, v in got.items() if k in want}, want) > 0  # read from a histogram, not the records
    bounded = 0
    for (t, s), v in groups.items():
        lo, hi = got.get((t, f"{s} p50 lo")), got.get((t, f"{s} p50 hi"))
        assert (lo is None) == (hi is None) == (len(v) < 6)  # no interval below 6 queries
        if lo is not None:
            assert lo <= got[(t, f"{s} p50")] <= hi
            bounded += 1
    assert bounded == sum(len(v) >= 6 for v in groups.values())  # (this small campaign: few per hour or day)
    times = {t for t, _ in got}
    assert all(t % 3_600 == 0 for t in times)
    assert all(t % 86_400 == 0 for t in times) == (unit == "day")


def test_connection_mode_panels_are_within_one_percent_and_count_every_ok_query(store):
    """Per transport, resolver and profile (not pooled), each connection mode's median within
    1 %, its n exact and the median inside its interval."""
    url, dns, _ = store
    r = run_panels(url, {"campaign": ("gen",)}, MONTH)
    ok = _ok(dns)
    for title, col, suffix in (("Median resolution time: fresh / reuse / resume", 5, "ms"),
                               ("Resolution time in multiples of the access RTT", 6, "rtt"),
                               ("Bytes on the wire per resolution", 7, "bytes")):
        cols, rows = r[("dnscamp-dns.json", title)]
        assert cols[0] == "group"
        values = defaultdict(list)
        for row in ok:
            if row[col] is not None:
                values[(f"{row[2]} · {row[8]} · {row[9]}", row[3])].append(float(row[col]))
        by = {(row[0], m): {k.removeprefix(f"{m}_"): v for k, v in zip(cols, row) if k.startswith(f"{m}_")}
              for row in rows for m in ("fresh", "reuse", "resume")}
        got = {k: v[suffix] for k, v in by.items() if v[suffix] is not None}
        _within_1pct(got, {k: _rank(v, 0.5) for k, v in values.items()})
        assert {k: v["n"] for k, v in by.items() if v["n"] is not None} == {k: len(v) for k, v in values.items()}
        inside = [v["lo"] <= v[suffix] <= v["hi"] for k, v in by.items() if v["lo"] is not None]
        assert inside and all(inside)
    cols, rows = r[("dnscamp-dns.json", "Per transport × resolver × profile × connection")]
    by = defaultdict(list)
    for row in [d for d in dns if d[4] == "ok"]:
        by[(row[2], row[8], row[9], row[3])].append(row)
    table = {tuple(row[:4]): dict(zip(cols, row)) for row in rows}
    assert {k: t["n"] for k, t in table.items()} == {k: len(v) for k, v in by.items()}
    _within_1pct({k: t["p90_ms"] for k, t in table.items()}, {k: _rank([x[5] for x in v], 0.9) for k, v in by.items()})
    _within_1pct({k: t["p99_ms"] for k, t in table.items()}, {k: _rank([x[5] for x in v], 0.99) for k, v in by.items()})
    _within_1pct({k: t["rtt_multiple_p50"] for k, t in table.items()}, {k: _rank([x[6] for x in v], 0.5) for k, v in by.items()})
    assert {k: t["packets_mean"] for k, t in table.items()} == pytest.approx(
        {k: sum(x[10] for x in v) / len(v) for k, v in by.items()})


def test_failure_status_stacks_count_the_records(store):
    url, dns, loads = store
    r = run_panels(url, {"campaign": ("gen",)}, MONTH)
    failed = Counter((d[2], d[4]) for d in dns if d[4] != "ok" and d[0] >= MONTH[0])
    assert len({s for _, s in failed}) >= 5  # the generator's taxonomy mix
    cols, rows = r[("dnscamp-failures.json", "Failures by status per transport")]
    got = {(row[0], c): row[i] for row in rows for i, c in enumerate(cols) if i and row[i] and c != "n"}
    assert got == dict(failed)
    assert {row[0] for row in rows} == {d[2] for d in dns}  # a bar per transport, failed or not
    # each bar's n: every record of the transport in the range (the tooltip's)
    assert {row[0]: row[cols.index("n")] for row in rows} == Counter(d[2] for d in dns if d[0] >= MONTH[0])
    cols, rows = r[("dnscamp-failures.json", "Page-load failures by status per browser")]
    got = {(row[0], c): row[i] for row in rows for i, c in enumerate(cols) if i and row[i] and c != "n"}
    assert got == dict(Counter((lo[2], lo[6]) for lo in loads if lo[6] != "ok" and lo[0] >= MONTH[0])) != {}
    cols, rows = r[("dnscamp-failures.json", "Page-load failure rate per browser and DNS mode")]
    n = Counter((lo[2], lo[1], lo[3]) for lo in loads if lo[0] >= MONTH[0])
    assert {tuple(row[:3]): row[cols.index("n")] for row in rows} == dict(n)


def test_page_load_panels_are_within_one_percent_of_the_records(store):
    url, _, loads = store
    r = run_panels(url, {"campaign": ("gen",)}, MONTH)
    ok = defaultdict(list)
    for started, mode, browser, profile, http, _, status, plt in loads:
        if status == "ok" and plt is not None and started >= MONTH[0]:
            ok[(mode, browser, profile, http)].append(plt)
    cols, rows = r[("dnscamp-pageloads.json", "PLT per DNS mode × browser × condition")]
    table = {tuple(row[:4]): dict(zip(cols, row)) for row in rows}
    assert {k: t["n"] for k, t in table.items()} == {k: len(v) for k, v in ok.items()}
    assert {k: (t["min_ms"], t["max_ms"]) for k, t in table.items()} == {k: (min(v), max(v)) for k, v in ok.items()}
    _within_1pct({k: t["p50_ms"] for k, t in table.items()}, {k: _rank(v, 0.5) for k, v in ok.items()})
    _within_1pct({k: t["p90_ms"] for k, t in table.items()}, {k: _rank(v, 0.9) for k, v in ok.items()})
    cols, rows = r[("dnscamp-pageloads.json", "PLT distribution per DNS transport")]
    assert sum(sum(row[2:]) for row in rows) == sum(len(v) for v in ok.values())


def test_distribution_and_heatmap_count_every_ok_query_once(store):
    """Over a month the heatmap's columns are UTC days (the daily rollup), over a day hours."""
    url, dns, _ = store
    r = run_panels(url, {"campaign": ("gen",)}, MONTH)
    ok = _ok(dns)
    per_transport, per_day = Counter(row[2] for row in ok), Counter(_trunc(row[0], "day") for row in ok)
    cols, rows = r[("dnscamp-dns.json", "Distribution of resolution times per transport")]
    assert cols[:2] == ["xMin", "xMax"]  # Grafana's pre-bucketed histogram frame
    assert all(a < b for a, b, *_ in rows) and all(rows[i][1] == pytest.approx(rows[i + 1][0]) or rows[i][1] < rows[i + 1][0]
                                                   for i in range(len(rows) - 1))
    assert {t: sum(row[cols.index(t)] for row in rows) for t in per_transport} == per_transport
    assert sum(sum(row[2:]) for row in rows) == len(ok)  # transports without queries count 0
    # each query in the bin its total_ms falls in (bins are unions of whole rollup buckets)
    edges = [row[0] for row in rows] + [rows[-1][1]]
    for row in ok[:500]:
        i = bisect.bisect_right(edges, row[5]) - 1
        assert 0 <= i < len(rows) and rows[i][cols.index(row[2])] > 0
    # the heatmap: per UTC day over a month, per hour over a day
    cols, rows = r[("dnscamp-dns.json", "Resolution time over time (log2 buckets), $transport")]
    assert {int(row[0]): sum(row[1:]) for row in rows} == per_day
    day = _one_day(dns)
    cols, rows = run_panels(url, {"campaign": ("gen",)}, day)[("dnscamp-dns.json", "Resolution time over time (log2 buckets), $transport")]
    assert {int(row[0]): sum(row[1:]) for row in rows} == Counter(_trunc(row[0], "hour") for row in _ok(dns, day[0])) != {}


def test_cdf_points_are_the_exact_share_below_each_bucket_edge(store):
    url, dns, _ = store
    r = run_panels(url, {"campaign": ("gen",)}, MONTH)
    values = defaultdict(list)
    for row in _ok(dns):
        values[f"{row[2]} {row[3]}"].append(row[5])
    for v in values.values():
        v.sort()
    cols, rows = r[("dnscamp-dns.json", "CDF of resolution time per transport and connection")]
    assert cols == ["series", "total_ms", "cdf"]
    assert {_named(row[0]) for row in rows} == {(k, len(v)) for k, v in values.items()}  # each curve named with its n
    rows = [(_named(s)[0], ms, cdf) for s, ms, cdf in rows]
    for series, ms, cdf in rows:
        v = values[series]
        assert cdf == pytest.approx(bisect.bisect_left(v, ms) / len(v), abs=1e-9), (series, ms)  # share below the edge
    for series, v in values.items():  # each curve ends at 1, at the edge above its largest value
        last = max((row[1], row[2]) for row in rows if row[0] == series)
        assert last[1] == pytest.approx(1.0) and v[-1] < last[0] <= v[-1] * 1.02 + 1e-9
