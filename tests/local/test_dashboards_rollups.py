"""The panels that read the hourly rollup's histograms or thin their CDFs (docs/dashboards.md
"How the panels query") against the records they summarise, on a small generated campaign
(bench/gen_campaign.py, stored by the normal ingest path): percentiles within the histogram's
documented 1 % of percentile_disc, every ok query counted once in the distribution's bins and
in the heatmap, CDF points at most 0.5 % below the exact cume_dist()."""

from __future__ import annotations

import bisect
import importlib.util
import math
from collections import defaultdict
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


@pytest.fixture()
def panels(tmp_path, fresh_db):
    gen.generate(tmp_path, dns_queries_n=4_000, page_loads_n=0, atlas_n=0, seed=5, campaign="gen")
    assert gen.load(tmp_path, fresh_db, workers=1)["records"]["ingested"] == 4_000
    # $__interval 1 min (expand's default): each rollup hour is its own time bucket
    r = run_panels(fresh_db, {"campaign": ("gen",)}, (END - timedelta(days=30), END))
    with psycopg.connect(fresh_db) as c:
        ok = c.execute(f"SELECT started_at, transport || ' · ' || coalesce(resolver, 'none') || ' · ' || "
                       f"coalesce(network_profile, 'none'), transport, {CONN}, total_ms FROM v_dns_query "
                       f"WHERE status = 'ok' AND total_ms IS NOT NULL").fetchall()
    assert len(ok) > 3_000
    return r, ok


def _rank(values: list[float], q: float) -> float:
    """percentile_disc: the smallest value whose cume_dist reaches q."""
    return sorted(values)[max(math.ceil(q * len(values)), 1) - 1]


def test_percentiles_over_time_are_within_one_percent_of_the_records(panels):
    r, ok = panels
    cols, rows = r[("dnscamp-dns.json", "Median and p90 resolution time")]
    groups = defaultdict(list)
    for started, series, _, _, ms in ok:
        hour = started.astimezone(timezone.utc).replace(minute=0, second=0, microsecond=0)
        groups[(int(hour.timestamp()), series)].append(ms)
    got = {(int(t), m): v for t, m, v in rows}
    want = {(t, f"{s} {stat}"): _rank(v, q) for (t, s), v in groups.items() for stat, q in (("p50", 0.5), ("p90", 0.9))}
    assert got.keys() == want.keys()
    worst = max(abs(got[k] / want[k] - 1) for k in want)
    assert worst <= 0.01, worst
    assert worst > 0  # read from the histogram, not the records


def test_distribution_and_heatmap_count_every_ok_query_once(panels):
    r, ok = panels
    per_transport = defaultdict(int)
    per_hour = defaultdict(int)
    for started, _, transport, _, _ in ok:
        per_transport[transport] += 1
        per_hour[int(started.astimezone(timezone.utc).replace(minute=0, second=0, microsecond=0).timestamp())] += 1
    cols, rows = r[("dnscamp-dns.json", "Distribution of resolution times per transport")]
    assert cols[:2] == ["xMin", "xMax"]  # Grafana's pre-bucketed histogram frame
    assert all(a < b for a, b, *_ in rows) and all(rows[i][1] == pytest.approx(rows[i + 1][0]) or rows[i][1] < rows[i + 1][0]
                                                   for i in range(len(rows) - 1))
    assert {t: sum(row[cols.index(t)] for row in rows) for t in per_transport} == per_transport
    assert sum(sum(row[2:]) for row in rows) == len(ok)  # transports without queries count 0
    # each query in the bin its total_ms falls in (bins are unions of whole rollup buckets)
    edges = [row[0] for row in rows] + [rows[-1][1]]
    for _, _, transport, _, ms in ok[:500]:
        i = bisect.bisect_right(edges, ms) - 1
        assert 0 <= i < len(rows) and rows[i][cols.index(transport)] > 0
    cols, rows = r[("dnscamp-dns.json", "Resolution time over time (log2 buckets)")]
    assert {int(row[0]): sum(row[1:]) for row in rows} == per_hour


def test_cdf_points_are_at_most_half_a_percent_below_cume_dist(panels):
    r, ok = panels
    values = defaultdict(list)
    for _, _, transport, conn, ms in ok:
        values[f"{transport} {conn}"].append(ms)
    for v in values.values():
        v.sort()
    cols, rows = r[("dnscamp-dns.json", "CDF of resolution time per transport and connection")]
    assert cols == ["series", "total_ms", "cdf"] and {row[0] for row in rows} == values.keys()
    for series, ms, cdf in rows:
        v = values[series]
        exact = bisect.bisect_right(v, ms) / len(v)  # cume_dist() of that value
        assert exact - 1 / 200 - 1e-9 <= cdf <= exact + 1e-9, (series, ms, cdf, exact)
    for series, v in values.items():  # each curve ends at its largest value, at 1
        assert max((row[1], row[2]) for row in rows if row[0] == series) == (v[-1], 1.0)
