"""Dashboard 3, page loads: page-load time (PLT) distributions per DNS mode and browser for each
network condition, each DNS mode's difference to Do53 per page (the presentation of
paper 002: the same page, browser and condition loaded with each DNS transport), and HTTP/2 against
HTTP/3. Successful loads only."""

from __future__ import annotations

from vantage_agent.pageload.dnsmode import TRANSPORTS

from dashboards.panels import (bar_panel, hist_bins, hist_cdf, hist_quantiles, histogram_panel, new_dashboard, table_panel,
                               where, xy_panel)

UID = "dnscamp-pageloads"
VARS = ("campaign", "region", "vantage", "profile", "browser", "dns_mode")
# the daily rollups (v_page_load_daily: loads per UTC day x campaign x vantage x profile x
# browser x DNS mode x DNS transport x HTTP version x status, with min and max PLT; _hist: their
# histograms of plt_ms, 2 % log buckets; v_page_load_url_daily_hist: the successful loads' the same
# per page url as well). The vantage variable carries the region selection; whole UTC days (every
# day the range touches: panels.DAYS).
DW = where("campaign", "vantage", "profile", "browser", "dns_mode", time="day") + "\n  AND status = 'ok'"
UW = where("campaign", "vantage", "profile", "browser", "dns_mode", time="day")  # v_page_load_url_daily_hist: ok loads only
BASE = "do53"  # the transport every other one is compared with
OTHERS = [t for t in TRANSPORTS if t != BASE]
HTTP = ("h2", "h3")
PAGE = "url || ' · ' || browser || ' · ' || coalesce(network_profile, 'none')"


def dashboard():
    keys = "dns_mode, browser, profile, http"
    pq = hist_quantiles(f"""SELECT dns_mode, browser, coalesce(network_profile, 'none') AS profile, http, bucket, sum(n) AS n
              FROM v_page_load_daily_hist
              {DW}
              GROUP BY 1, 2, 3, 4, 5""", keys, {"p50": 0.5, "p90": 0.9})
    plt = f"""
WITH h AS ({pq}
), c AS (
  SELECT dns_mode, browser, coalesce(network_profile, 'none') AS profile, http,
         sum(n) AS n, min(min_plt_ms) AS min_ms, max(max_plt_ms) AS max_ms
  FROM v_page_load_daily
  {DW}
  GROUP BY 1, 2, 3, 4
)
SELECT c.dns_mode, c.browser, c.profile, c.http, c.n, h.p50 AS p50_ms, h.p90 AS p90_ms, c.min_ms, c.max_ms
FROM c
LEFT JOIN h ON h.dns_mode = c.dns_mode AND h.browser = c.browser AND h.profile = c.profile AND h.http IS NOT DISTINCT FROM c.http
ORDER BY 3, 2, 1, 4"""
    dist = hist_bins({t: f"dns_transport = '{t}'" for t in TRANSPORTS}, "v_page_load_daily_hist", DW)
    cdf = hist_cdf("dns_mode || ' · ' || browser", "plt_ms", "v_page_load_daily_hist", DW)
    diffs = ",\n       ".join(f"max(m.p50) FILTER (WHERE m.dns_transport = '{t}') - d.p50 AS {t}_diff_ms" for t in OTHERS)
    page_keys = "url, browser, network_profile, http, dns_transport"
    page_p50 = hist_quantiles(f"""SELECT {page_keys}, bucket, sum(n) AS n
              FROM v_page_load_url_daily_hist
              {UW}
              GROUP BY 1, 2, 3, 4, 5, 6""", page_keys, {"p50": 0.5})
    vs_do53 = f"""
WITH m AS ({page_p50}
)
SELECT m.url || ' · ' || m.browser || ' · ' || coalesce(m.network_profile, 'none') || ' · ' || m.http AS page,
       {diffs}
FROM m
JOIN m AS d ON d.url = m.url AND d.browser = m.browser AND d.network_profile IS NOT DISTINCT FROM m.network_profile
           AND d.http = m.http AND d.dns_transport = 'do53'
GROUP BY m.url, m.browser, m.network_profile, m.http, d.p50
ORDER BY 1"""
    cond = "dns_mode || ' · ' || browser || ' · ' || coalesce(network_profile, 'none')"
    hq = hist_quantiles(f"""SELECT {cond} AS condition, http, bucket, sum(n) AS n
              FROM v_page_load_daily_hist
              {DW}
                AND http IN ({", ".join(f"'{h}'" for h in HTTP)})
              GROUP BY 1, 2, 3""", "condition, http", {"p50": 0.5})
    h2h3_cols = ",\n       ".join(f"max(h.p50) FILTER (WHERE h.http = '{h}') AS {h}_ms" for h in HTTP)
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
    rows = [
        ("Page-load time", [
            histogram_panel("PLT distribution per DNS transport", """
Question: how are page-load times spread with each DNS transport? Successful loads per bin of plt_ms
(loadEventEnd; bins 27 % wide on a log scale: the daily rollup's 2 % buckets summed, whole days), one
series per DNS transport of the browser.""", dist, {t: (t, None) for t in TRANSPORTS}),
            xy_panel("CDF of PLT per DNS mode and browser", """
Question: what share of loads finish within x ms, per DNS mode and browser? The share of loads below
x per curve, exact at every edge of the daily rollup's 2 % buckets of plt_ms (whole days).""", cdf, {"plt_ms": ("page-load time", "ms"), "cdf": ("share of loads", "percentunit")}, series_by="series"),
            table_panel("PLT per DNS mode × browser × condition", """
Question: the distribution's numbers per DNS mode, browser, network profile and HTTP version: count,
median and p90 (the daily rollup's histograms: within 1 % of the exact percentiles), min and max
PLT; whole days.""", plt, {
                "dns_mode": ("DNS mode", None), "browser": ("browser", None), "profile": ("profile", None),
                "http": ("HTTP", None), "n": ("loads", None), "p50_ms": ("median", "ms"), "p90_ms": ("p90", "ms"),
                "min_ms": ("min", "ms"), "max_ms": ("max", "ms")}),
        ]),
        ("Against Do53", [
            bar_panel("Median PLT difference to Do53 per page", """
Question: does an encrypted transport slow a page down compared with Do53, for the same page,
browser, condition and HTTP version? Median PLT with the transport minus median PLT with Do53
(positive: slower than Do53). Medians from the daily rollup of pages' histograms (whole UTC days,
each median within 1 % of the exact percentile_disc).""", vs_do53, {"page": ("page · browser · profile · HTTP", None)} |
                      {f"{t}_diff_ms": (t, "ms") for t in OTHERS}, w=24, h=11),
            bar_panel("HTTP/2 vs HTTP/3", """
Question: does HTTP/3 load pages faster than HTTP/2 under each DNS mode, browser and condition?
Median PLT per HTTP version (empty where a campaign did not load that version), with counts (the
daily rollup: whole days, medians within 1 %).""", h2h3,
                      {"condition": ("DNS mode · browser · profile", None), "h2_ms": ("HTTP/2", "ms"),
                       "h3_ms": ("HTTP/3", "ms"), "h2_n": ("HTTP/2 loads", None), "h3_n": ("HTTP/3 loads", None)}, w=24),
        ]),
    ]
    return new_dashboard(UID, "Page loads", __doc__.split("\n\n")[0], VARS, rows)
