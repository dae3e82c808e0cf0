"""Dashboard 3, page loads: page-load time (PLT) distributions per DNS mode and browser for each
network condition, each DNS mode's paired difference to Do53 to the same resolver (the
presentation of paper 002: the same page, browser and condition loaded with each DNS transport),
HTTP/2 against HTTP/3, and the same per region and per vantage. Successful loads only."""

from __future__ import annotations

from vantage_agent.pageload.dnsmode import TRANSPORTS

from dashboards.panels import (DAILY, FILTERS, bar_panel, hist_bins, hist_cdf, hist_quantiles, MEDIAN_TABLE_TIPS, median_table, histogram_panel, new_dashboard,
                               table_panel, where, xy_panel)

UID = "dnscamp-pageloads"
VARS = ("campaign", "region", "vantage", "profile", "browser", "dns_mode")
# the daily rollups (v_page_load_daily: loads per UTC day x campaign x vantage x profile x
# browser x DNS mode x DNS transport x HTTP version x status, with min and max PLT; _hist: their
# histograms of plt_ms, 2 % log buckets; v_page_load_url_daily_hist: the successful loads' the same
# per page url as well). The vantage variable carries the region selection; whole UTC days (every
# day the range touches: panels.DAYS).
DW = where("campaign", "vantage", "profile", "browser", "dns_mode", time="day") + "\n  AND status = 'ok'"
# the pairs against Do53: every DNS mode (the Do53 side is not one the variable selects), the
# selected ones compared (PAIRED_MODES)
PW = where("campaign", "vantage", "profile", "browser", time="day")
REGION_W = where("campaign", "region", "vantage", "profile", "browser", "dns_mode", time="day") + "\n  AND status = 'ok'"
BASE = "do53"  # the transport every other one is compared with
OTHERS = [t for t in TRANSPORTS if t != BASE]
HTTP = ("h2", "h3")
# a page-load cell: the loads the pairs compare (the same day, vantage, profile, browser, HTTP
# version and page); the daily rollup's finest grain: runs are not kept in it (one vantage's
# runs of one day are one cell)
CELL = ("day", "campaign", "vantage_id", "profile", "browser", "http", "url")


def _paired() -> str:
    """The paired PLT difference to Do53 (as dnscamp/site/figures.py plt_vs_do53 pairs them):
    per cell (CELL) the median PLT of each DNS mode minus the median PLT of Do53 to the same
    resolver (the alias after the mode's ':') in the same cell, or, where the cell has no Do53 to
    that resolver, of each Do53 it has (as 002 compares every configuration with the local Do53);
    then, per DNS mode, its Do53 baseline, browser and profile, the median of those paired differences with its distribution-free 95 % interval
    (percentile_disc at dnscamp_median_ci_q_lo / _q_hi of the number of pairs) and the number of
    pairs. The system mode has no resolver alias and no pair: it stands apart (its PLT is in the
    table)."""
    cell = ", ".join(CELL)
    on, on_e = (" AND ".join(f"{t}.{c} = m.{c}" for c in CELL) for t in ("d", "e"))
    medians = hist_quantiles(f"""SELECT {cell}, dns_mode, dns_transport, bucket, sum(n) AS n
              FROM (SELECT day, campaign, vantage_id, coalesce(network_profile, 'none') AS profile, browser,
                           coalesce(http, '') AS http, url, dns_mode, dns_transport, bucket, n
                    FROM v_page_load_url_daily_hist
                    {PW}
                   ) u
              GROUP BY {cell}, dns_mode, dns_transport, bucket""", f"{cell}, dns_mode, dns_transport", {"p50": 0.5},
                             with_n=True)
    return f"""
WITH m AS ({medians}
), sel AS (
  SELECT DISTINCT dns_mode FROM m
  WHERE dns_transport NOT IN ('{BASE}', 'system')
  AND {FILTERS["dns_mode"]}
), p AS (
  SELECT m.dns_mode || ' vs ' || d.dns_mode || ' · ' || m.browser || ' · ' || m.profile AS comparison, m.p50 - d.p50 AS diff_ms,
         m.hist_n, d.hist_n AS do53_n,
         count(*) OVER (PARTITION BY m.dns_mode, d.dns_mode, m.browser, m.profile) AS pairs
  FROM m
  JOIN sel ON sel.dns_mode = m.dns_mode
  JOIN m AS d ON {on}
   AND d.dns_transport = '{BASE}'
   AND (split_part(d.dns_mode, ':', 2) = split_part(m.dns_mode, ':', 2) OR NOT EXISTS (
         SELECT 1 FROM m AS e
         WHERE {on_e}
           AND e.dns_transport = '{BASE}' AND split_part(e.dns_mode, ':', 2) = split_part(m.dns_mode, ':', 2)))
)
SELECT comparison,
       percentile_disc(0.5) WITHIN GROUP (ORDER BY diff_ms) AS diff_ms,
       percentile_disc(dnscamp_median_ci_q_lo(pairs)) WITHIN GROUP (ORDER BY diff_ms) AS diff_lo_ms,
       percentile_disc(dnscamp_median_ci_q_hi(pairs)) WITHIN GROUP (ORDER BY diff_ms) AS diff_hi_ms,
       pairs, sum(hist_n) AS loads, sum(do53_n) AS do53_loads
FROM p
GROUP BY comparison, pairs
ORDER BY 1"""


def _per_mode(where_sql: str) -> str:
    """Per DNS mode: ok loads, the median PLT with its 95 % interval, p90 and p99 (the daily
    rollup's histograms under ``where_sql``)."""
    return median_table(f"""SELECT dns_mode, bucket, sum(n) AS n
              FROM v_page_load_daily_hist
              {where_sql}
              GROUP BY 1, 2""", "dns_mode", "DNS mode", "loads")[0]


PER_MODE_COLUMNS = median_table("", "dns_mode", "DNS mode", "loads")[1]
PER_MODE_TIPS = MEDIAN_TABLE_TIPS


def dashboard():
    keys = "dns_mode, browser, profile, http"
    pq = hist_quantiles(f"""SELECT dns_mode, browser, coalesce(network_profile, 'none') AS profile, http, bucket, sum(n) AS n
              FROM v_page_load_daily_hist
              {DW}
              GROUP BY 1, 2, 3, 4, 5""", keys, {"p50": 0.5, "p90": 0.9, "p99": 0.99}, median="p50")
    plt = f"""
WITH h AS ({pq}
), c AS (
  SELECT dns_mode, browser, coalesce(network_profile, 'none') AS profile, http,
         sum(n) AS n, min(min_plt_ms) AS min_ms, max(max_plt_ms) AS max_ms
  FROM v_page_load_daily
  {DW}
  GROUP BY 1, 2, 3, 4
)
SELECT c.dns_mode, c.browser, c.profile, c.http, c.n, h.p50 AS p50_ms, h.p50_lo AS p50_lo_ms, h.p50_hi AS p50_hi_ms,
       h.p90 AS p90_ms, h.p99 AS p99_ms, c.min_ms, c.max_ms
FROM c
LEFT JOIN h ON h.dns_mode = c.dns_mode AND h.browser = c.browser AND h.profile = c.profile AND h.http IS NOT DISTINCT FROM c.http
ORDER BY 3, 2, 1, 4"""
    dist = hist_bins({t: f"dns_transport = '{t}'" for t in TRANSPORTS}, "v_page_load_daily_hist", DW)
    cdf = hist_cdf("dns_mode || ' · ' || browser", "plt_ms", "v_page_load_daily_hist", DW)
    cond = "dns_mode || ' · ' || browser || ' · ' || coalesce(network_profile, 'none')"
    hq = hist_quantiles(f"""SELECT {cond} AS condition, http, bucket, sum(n) AS n
              FROM v_page_load_daily_hist
              {DW}
                AND http IN ({", ".join(f"'{h}'" for h in HTTP)})
              GROUP BY 1, 2, 3""", "condition, http", {"p50": 0.5}, median="p50")
    h2h3_cols = ",\n       ".join(f"max(h.{c}) FILTER (WHERE h.http = '{h}') AS {h}{sfx}"
                                  for h in HTTP for c, sfx in (("p50", "_ms"), ("p50_lo", "_lo_ms"), ("p50_hi", "_hi_ms")))
    h2h3_n = ",\n         ".join(f"coalesce(sum(n) FILTER (WHERE http = '{h}'), 0) AS {h}_n" for h in HTTP)
    h2h3 = f"""
WITH h AS ({hq}
), c AS (
  SELECT {cond} AS condition,
         {h2h3_n}
  FROM v_page_load_daily
  {DW}
  GROUP BY 1
)
SELECT c.condition,
       {h2h3_cols},
       {", ".join(f"c.{h}_n" for h in HTTP)}
FROM c
LEFT JOIN h USING (condition)
GROUP BY {", ".join(["c.condition"] + [f"c.{h}_n" for h in HTTP])}
ORDER BY 1"""
    h2h3_columns = {"condition": ("DNS mode · browser · profile", None)}
    for h, name in zip(HTTP, ("HTTP/2", "HTTP/3")):
        h2h3_columns |= {f"{h}_ms": (name, "ms"), f"{h}_lo_ms": (f"{name} median 95 % CI low", "ms"),
                         f"{h}_hi_ms": (f"{name} median 95 % CI high", "ms"), f"{h}_n": (f"{name} loads", "none")}
    rows = [
        ("Page-load time", [
            histogram_panel("PLT distribution per DNS transport", """
Question: how are page-load times spread with each DNS transport? Successful loads per bin of plt_ms
(loadEventEnd; bins 27 % wide on a log scale, drawn on a log axis: the daily rollup's 2 % buckets
summed, whole days), one series per DNS transport of the browser; the legend sums each
transport's loads (n).""", dist, {t: (t, None) for t in TRANSPORTS}, interval=DAILY),
            xy_panel("CDF of PLT per DNS mode and browser", """
Question: what share of loads finish within x ms, per DNS mode and browser? The share of loads below
x (log axis) per curve, exact at every edge of the daily rollup's 2 % buckets of plt_ms (whole
days); each curve's name ends in its number of loads (n).""", cdf,
                     {"plt_ms": ("page-load time", "ms"), "cdf": ("share of loads", "percentunit")}, series_by="series",
                     interval=DAILY, log_x=True),
            table_panel("PLT per DNS mode × browser × condition", """
Question: the distribution's numbers per DNS mode, browser, network profile and HTTP version: count
(n), median with its distribution-free 95 % interval, p90 and p99 (the daily rollup's histograms:
within 1 % of the exact percentiles), min and max PLT; whole days. The system mode (the OS
resolver) is here: it has no pair against Do53.""", plt, {
                "dns_mode": ("DNS mode", None), "browser": ("browser", None), "profile": ("profile", None),
                "http": ("HTTP", None), "n": ("loads", None), "p50_ms": ("median", "ms"),
                "p50_lo_ms": ("median 95 % CI low", "ms"), "p50_hi_ms": ("median 95 % CI high", "ms"),
                "p90_ms": ("p90", "ms"), "p99_ms": ("p99", "ms"),
                "min_ms": ("min", "ms"), "max_ms": ("max", "ms")}, interval=DAILY),
        ]),
        ("Against Do53", [
            bar_panel("Paired PLT difference to Do53 per DNS mode", """
Question: does an encrypted transport slow page loads down compared with Do53 to the same resolver?
Paired as the report's figure pairs them (000 Fig. 8, 002 Figs. 2 and 4): in each cell (the same
UTC day, vantage, profile, browser, HTTP version and page; the daily rollup keeps no runs) the
median PLT with the DNS mode minus the median PLT with Do53 to the same resolver (the alias after
the ':'; where a cell has none, each Do53 it has); per DNS mode, Do53 baseline, browser and profile
the median of those paired differences (positive:
slower than Do53), with its distribution-free 95 % interval and the number of pairs and loads in
the tooltip. The system mode has no pair (PLT table above).""", _paired(), {
                "comparison": ("DNS mode vs Do53 · browser · profile", None), "diff_ms": ("median paired difference", "ms"),
                "diff_lo_ms": ("95 % CI low", "ms"), "diff_hi_ms": ("95 % CI high", "ms"), "pairs": ("pairs", "none"),
                "loads": ("loads", "none"), "do53_loads": ("Do53 loads", "none")},
                      unit="ms", interval=DAILY, tooltip_only=("diff_lo_ms", "diff_hi_ms", "pairs", "loads", "do53_loads"),
                      w=24, h=11),
            bar_panel("HTTP/2 vs HTTP/3", """
Question: does HTTP/3 load pages faster than HTTP/2 under each DNS mode, browser and condition?
Median PLT per HTTP version (empty where a campaign did not load that version), with each
median's 95 % interval and the loads in the tooltip (the daily rollup: whole days, medians
within 1 %).""", h2h3, h2h3_columns, interval=DAILY,
                      tooltip_only=tuple(c for c in h2h3_columns if c.endswith(("_lo_ms", "_hi_ms", "_n"))), w=24),
        ]),
        ("By region: $region", [
            bar_panel("Median PLT per DNS mode in $region", """
Question: does a global campaign's answer hold in every region? Median PLT per DNS mode of the
vantages in this region (one row per selected region), with its 95 % interval, p90, p99 and n in
the tooltip (the daily rollup: whole days). Pooled over the
selected browsers, profiles and HTTP versions: narrow them with the variables to compare like with like.""", _per_mode(REGION_W), PER_MODE_COLUMNS, unit="ms",
                      interval=DAILY, tooltip_only=PER_MODE_TIPS, w=24, h=7),
        ], "region"),
        ("By vantage: $vantage", [
            bar_panel("Median PLT per DNS mode at $vantage", """
Question: is one vantage point different? Median PLT per DNS mode at this vantage (one row per
selected vantage), with its 95 % interval, p90, p99 and n in the tooltip (the daily rollup: whole
days). Pooled over the
selected browsers, profiles and HTTP versions: narrow them with the variables to compare like with like.""", _per_mode(DW), PER_MODE_COLUMNS, unit="ms", interval=DAILY, tooltip_only=PER_MODE_TIPS, w=24, h=7),
        ], "vantage"),
    ]
    return new_dashboard(UID, "Page loads", __doc__.split("\n\n")[0], VARS, rows)
