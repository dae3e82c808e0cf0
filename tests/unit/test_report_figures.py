"""The report's figures and tables on hand-made rows (no store): the paper's numbers land beside
ours where the paper gives them, SVGs are vector, and values from the store are escaped."""

from __future__ import annotations

import io

import matplotlib
import pytest

from dnscamp.site import build, figures

pytestmark = pytest.mark.unit


def svg(fig) -> str:
    buf = io.StringIO()
    with matplotlib.rc_context(build.SVG_RC):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    return buf.getvalue()


def test_rtt_multiples_table_puts_the_papers_medians_beside_ours():
    rows = [{"profile": p, "transport": t, "n": 3, "rtt_multiple_p50": 2.0, "rtt_multiple_p50_lo": None,
             "rtt_multiple_p50_hi": None, "rtt_multiple_min": 1.5, "rtt_multiple_max": 2.5}
            for p in ("fiber", "all", "4g") for t in ("doh", "dot", "do53")]
    rows[0].update(n=9, rtt_multiple_p50_lo=1.75, rtt_multiple_p50_hi=2.25)
    head, out = figures.table_rtt_multiples(rows)
    cell = {(r[0], r[1]): dict(zip(head, r)) for r in out}
    assert cell[("all", "doh")]["paper: median"] == 3.43 and cell[("all", "do53")]["paper: median"] == 1.03
    assert cell[("fiber", "doh")]["paper: median"] == 3.71 and cell[("4g", "doh")]["paper: median"] == 3.12
    assert cell[("fiber", "do53")]["paper: median"] is None  # the paper gives DoUDP only over all technologies
    assert cell[("4g", "dot")]["paper: expected"] is None and cell[("4g", "doh")]["paper: expected"] == 3
    assert [r[0] for r in out][:3] == ["all"] * 3  # the overall rows first, then profiles by delay
    # the interval beside every median; none (a dash) where n < 6 leaves none
    assert cell[("fiber", "doh")]["ours: 95 % interval"] == "1.75–2.25" and cell[("fiber", "doh")]["n"] == 9
    assert cell[("4g", "doh")]["ours: 95 % interval"] is None


def test_table_ii_at_our_medians_beside_the_papers_example():
    medians = {"rtt_dns_ms": 10.0, "rtt_server_ms": 20.0, "rtt_direct_ms": 40.0, "status_quo_ms": 50.0,
               "proposal_ms": 30.0, "status_quo_retry_ms": 90.0, "proposal_retry_ms": 50.0}
    r = {"probes": 5, **{f"{k}_p50": v for k, v in medians.items()}, **{f"{k}_p50_lo": None for k in medians},
         **{f"{k}_p50_hi": None for k in medians}}
    head, out = figures.table_ii([r])
    assert out[0][0] == "probes: 5"
    assert out[2] == ["w/o stateless retry", "50.0", "30.0", 90, 60]
    assert out[3] == ["with stateless retry", "90.0", "50.0", 150, 90]
    r.update(probes=20, status_quo_ms_p50_lo=45.0, status_quo_ms_p50_hi=55.5)
    assert figures.table_ii([r])[1][2][1] == "50.0 (45.0–55.5)"


def test_plt_difference_table_pairs_conditions_with_the_paper():
    # rows as the pairs' CDF query gives them: every point of a group carries its n and median
    rows = [{"profile": "4g-www", "mode": "doh:cloudflare", "transport": "doh", "baseline": "do53:isp", "n": 30,
             "diff_ms_p50": 30.0, "diff_ms_p50_lo": 12.0, "diff_ms_p50_hi": 41.5},
            {"profile": "fiber", "mode": "dot:isp", "transport": "dot", "baseline": "do53:isp", "n": 1, "diff_ms_p50": -5.0,
             "diff_ms_p50_lo": None, "diff_ms_p50_hi": None}]
    head, out = figures.table_plt_diff(rows + rows[:1])
    assert out == [["fiber", "dot:isp", "do53:isp", 1, -5.0, None, None],
                   ["4g-www", "doh:cloudflare", "do53:isp", 30, 30.0, "12.0–41.5", 58]]  # one line per group
    labels = [r["series"] for r in figures._pair_series(rows)]
    assert labels == ["doh:cloudflare vs do53:isp", "dot:isp"]  # the baseline named where it is another resolver


def test_shares_and_outcomes_tables():
    r = {"probes": 4}
    for k in figures.PAPER_001_SHARES:
        r.update({k: 0.25, f"{k}_lo": 0.046, f"{k}_hi": 0.699})  # Wilson for 1 of 4
    head, out = figures.table_quicsocks_shares([r])
    assert out[0] == ["probes (ISP resolver)", 4, 474]
    assert ["saving ≥ 10 ms", "25.0% (4.6–69.9%)", "36.7%"] in out and ["RTT_DNS < 10 ms", "25.0% (4.6–69.9%)", "60.0%"] in out
    rows = [{"profile": "3g", "transport": "doh", "status": "ok", "n": 3, "share": 0.75, "share_lo": 0.301, "share_hi": 0.954},
            {"profile": "3g", "transport": "doh", "status": "page_load_timeout", "n": 1, "share": 0.25, "share_lo": 0.046,
             "share_hi": 0.699}]
    head, out = figures.table_page_outcomes(rows)
    assert head == ["profile", "transport", "loads", "ok", "page_load_timeout", "paper: successful"]
    assert out == [["3g", "doh", 4, "75.0% (30.1–95.4%)", "25.0% (4.6–69.9%)", "20.1%"]]


def test_heat_maps_are_vector_and_leave_missing_cells_blank():
    rows = [{"profile": "fiber", "transport": "doh", "rtt_multiple_p50": 3.2, "n": 17},
            {"profile": "4g", "transport": "doq", "rtt_multiple_p50": 2.1, "n": 8}]
    text = svg(figures.draw_rtt_heatmap(rows))
    assert "<image" not in text and "3.20" in text and "2.10" in text and "nan" not in text
    assert "n=17" in text and "n=8" in text  # every cell says how many queries its median is of
    rows = [{"profile": "4g", "url": "https://www.single.test/", "browser": "chromium", "mode": m, "baseline": "do53:isp",
             "n": 3, "do53_n": 4, "increase_pct": v} for m, v in (("doh:isp", 12.5), ("dot:isp", -3.0))]
    text = svg(figures.draw_plt_heatmap(rows))
    assert "n=3/4" in text
    assert "<image" not in text and "+12.5%" in text and "-3.0%" in text and "single.test" in text
    assert "doh:isp vs do53:isp (chromium)" in text


def test_cdfs_draw_every_series_even_of_one_point():
    # rows as ecdf_sql gives them: n is the group's size, not the points drawn
    rows = [{"profile": "fiber", "transport": "do53", "n": 1, "total_ms": 15.0, "cdf": 1.0},
            {"profile": "fiber", "transport": "doh", "n": 5000, "total_ms": 45.0, "cdf": 0.5},
            {"profile": "fiber", "transport": "doh", "n": 5000, "total_ms": 60.0, "cdf": 1.0},
            {"profile": "4g", "transport": "doh", "n": 1, "total_ms": 300.0, "cdf": 1.0}]
    text = svg(figures.draw_resolution(rows))
    assert "profile fiber" in text and "profile 4g" in text and "doh (n=5000)" in text and "do53 (n=1)" in text
    assert figures.ecdf_points([3, None, 1, 2]) == (3, [(1.0, 1 / 3), (2.0, 2 / 3), (3.0, 1.0)])


def test_values_from_the_store_are_escaped_and_formatted():
    html = build.html_table(["<b>col</b>"], [["<script>alert(1)</script>"], [1234.5678], [0.123456], [None], [2.0]])
    assert "<script>" not in html and "&lt;script&gt;" in html and "&lt;b&gt;col&lt;/b&gt;" in html
    # the column has a fraction below 1000 (0.12), so its whole 2.0 shows as 2.00 too
    assert "<td>1235</td>" in html and "<td>0.12</td>" in html and "<td>—</td>" in html and "<td>2.00</td>" in html
    whole = build.html_table(["a", "b", "c"], [[300.0, 308.3, 3.0], [1094.4, 300.0, float("nan")], [2.0, None, 1.0]])
    assert "<td>300</td><td>308.30</td><td>3</td>" in whole  # a column of whole floats stays whole
    assert "<td>1094</td><td>300.00</td><td>nan</td>" in whole and "<td>2</td><td>—</td><td>1</td>" in whole
    assert build.slug("a/b c") == "a-b-c" and build.slug("..") == "campaign"
