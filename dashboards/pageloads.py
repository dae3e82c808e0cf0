"""Dashboard 3, page loads: page-load time (PLT) distributions per DNS mode and browser for each
network condition, each DNS mode's difference to Do53 per page (the presentation of
paper 002: the same page, browser and condition loaded with each DNS transport), and HTTP/2 against
HTTP/3. Successful loads only."""

from __future__ import annotations

from vantage_agent.pageload.dnsmode import TRANSPORTS

from dashboards.panels import (bar_panel, cdf_sql, histogram_panel, log_bins_sql, new_dashboard, table_panel, where,
                               xy_panel)

UID = "dnscamp-pageloads"
VARS = ("campaign", "region", "vantage", "profile", "browser", "dns_mode")
W = where(*VARS) + "\n  AND status = 'ok'"
OTHERS = [t for t in TRANSPORTS if t != "do53"]  # compared with Do53
HTTP = ("h2", "h3")
PAGE = "url || ' · ' || browser || ' · ' || coalesce(network_profile, 'none')"


def _narrow(*cols: str) -> str:
    """The selected loads' ``cols`` only, computed once (MATERIALIZED): otherwise the planner
    sorts the records with their whole jsonb body for the grouping (1.4 kB a row: the sort of
    a week's 23,000 loads went to disk) and reads the columns from it afterwards."""
    return f"WITH p AS MATERIALIZED (SELECT {', '.join(cols)} FROM v_page_load\n{W})"


def dashboard():
    plt = f"""
{_narrow("dns_mode", "browser", "network_profile", "http", "plt_ms")}
SELECT dns_mode, browser, coalesce(network_profile, 'none') AS profile, http,
       count(*) AS n,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY plt_ms) AS p50_ms,
       percentile_cont(0.9) WITHIN GROUP (ORDER BY plt_ms) AS p90_ms,
       min(plt_ms) AS min_ms, max(plt_ms) AS max_ms
FROM p
GROUP BY 1, 2, 3, 4
ORDER BY 3, 2, 1, 4"""
    dist = log_bins_sql("plt_ms", {t: f"dns_transport = '{t}'" for t in TRANSPORTS},
                        f"(SELECT dns_transport, plt_ms FROM v_page_load\n{W}) s")
    cdf = cdf_sql("dns_mode || ' · ' || browser", "plt_ms", f"(SELECT dns_mode, browser, plt_ms FROM v_page_load\n{W}) q")
    diffs = ",\n       ".join(f"max(m.p50) FILTER (WHERE m.dns_transport = '{t}') - d.p50 AS {t}_diff_ms" for t in OTHERS)
    vs_do53 = f"""
{_narrow("url", "browser", "network_profile", "http", "dns_transport", "plt_ms")},
m AS (
  SELECT url, browser, network_profile, http, dns_transport,
         percentile_cont(0.5) WITHIN GROUP (ORDER BY plt_ms) AS p50
  FROM p
  GROUP BY 1, 2, 3, 4, 5
)
SELECT m.url || ' · ' || m.browser || ' · ' || coalesce(m.network_profile, 'none') || ' · ' || m.http AS page,
       {diffs}
FROM m
JOIN m AS d ON d.url = m.url AND d.browser = m.browser AND d.network_profile IS NOT DISTINCT FROM m.network_profile
           AND d.http = m.http AND d.dns_transport = 'do53'
GROUP BY m.url, m.browser, m.network_profile, m.http, d.p50
ORDER BY 1"""
    h2h3_cols = ",\n       ".join(
        f"percentile_cont(0.5) WITHIN GROUP (ORDER BY plt_ms) FILTER (WHERE http = '{h}') AS {h}_ms" for h in HTTP)
    h2h3 = f"""
{_narrow("dns_mode", "browser", "network_profile", "http", "plt_ms")}
SELECT dns_mode || ' · ' || browser || ' · ' || coalesce(network_profile, 'none') AS condition,
       {h2h3_cols},
       count(*) FILTER (WHERE http = 'h2') AS h2_n,
       count(*) FILTER (WHERE http = 'h3') AS h3_n
FROM p
GROUP BY 1
ORDER BY 1"""
    rows = [
        ("Page-load time", [
            histogram_panel("PLT distribution per DNS transport", """
Question: how are page-load times spread with each DNS transport? Successful loads per bin of plt_ms
(loadEventEnd; bins 27 % wide on a log scale, counted in SQL), one series per DNS transport of the browser.""", dist, {t: (t, None) for t in TRANSPORTS}),
            xy_panel("CDF of PLT per DNS mode and browser", """
Question: what share of loads finish within x ms, per DNS mode and browser? The share of loads at or
below each of ~200 values of plt_ms per curve (percentile_disc at 0.5 % steps: cume_dist() to 0.5 %).""", cdf, {"plt_ms": ("page-load time", "ms"), "cdf": ("share of loads", "percentunit")}, series_by="series"),
            table_panel("PLT per DNS mode × browser × condition", """
Question: the distribution's numbers per DNS mode, browser, network profile and HTTP version: count,
median, p90, min and max PLT.""", plt, {
                "dns_mode": ("DNS mode", None), "browser": ("browser", None), "profile": ("profile", None),
                "http": ("HTTP", None), "n": ("loads", None), "p50_ms": ("median", "ms"), "p90_ms": ("p90", "ms"),
                "min_ms": ("min", "ms"), "max_ms": ("max", "ms")}),
        ]),
        ("Against Do53", [
            bar_panel("Median PLT difference to Do53 per page", """
Question: does an encrypted transport slow a page down compared with Do53, for the same page,
browser, condition and HTTP version? Median PLT with the transport minus median PLT with Do53
(positive: slower than Do53).""", vs_do53, {"page": ("page · browser · profile · HTTP", None)} |
                      {f"{t}_diff_ms": (t, "ms") for t in OTHERS}, w=24, h=11),
            bar_panel("HTTP/2 vs HTTP/3", """
Question: does HTTP/3 load pages faster than HTTP/2 under each DNS mode, browser and condition?
Median PLT per HTTP version (empty where a campaign did not load that version), with counts.""", h2h3,
                      {"condition": ("DNS mode · browser · profile", None), "h2_ms": ("HTTP/2", "ms"),
                       "h3_ms": ("HTTP/3", "ms"), "h2_n": ("HTTP/2 loads", None), "h3_n": ("HTTP/3 loads", None)}, w=24),
        ]),
    ]
    return new_dashboard(UID, "Page loads", __doc__.split("\n\n")[0], VARS, rows)
