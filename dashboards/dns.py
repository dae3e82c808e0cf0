"""Dashboard 1, DNS response times: per transport x resolver x network profile, the median and
p90 over time, their distributions, multiples of the access RTT and bytes per resolution, with
fresh, reused and resumed connections side by side. Successful queries only (failures are the
failure dashboard's)."""

from __future__ import annotations

from vantage_agent.dns.registry import TRANSPORTS

from dashboards.panels import (bar_panel, heatmap_panel, histogram_panel, new_dashboard, table_panel, time_series,
                               where, xy_panel)

UID = "dnscamp-dns"
VARS = ("campaign", "region", "vantage", "profile", "resolver", "transport")
W = where(*VARS) + "\n  AND status = 'ok'"
# how the query's connection was set up: reused (no handshake), resumed (TLS/QUIC resumption), fresh
CONN = "CASE WHEN connection_reused THEN 'reuse' WHEN resumed THEN 'resume' ELSE 'fresh' END"
MODES = ("fresh", "reuse", "resume")
SERIES = "transport || ' · ' || coalesce(resolver, 'none') || ' · ' || coalesce(network_profile, 'none')"
HEAT_BOUNDS = [2 ** k for k in range(14)]  # 1 ms .. 8192 ms, log2 buckets (le), then +Inf


def _by_mode(expr: str, suffix: str) -> str:
    return ",\n       ".join(f"percentile_cont(0.5) WITHIN GROUP (ORDER BY {expr}) FILTER (WHERE conn = '{m}') AS {m}_{suffix}"
                              for m in MODES)


def _heat_sql() -> str:
    cols, prev = [], None
    for b in HEAT_BOUNDS:
        cond = f"total_ms <= {b}" if prev is None else f"total_ms > {prev} AND total_ms <= {b}"
        cols.append(f'count(*) FILTER (WHERE {cond}) AS "{b}"')
        prev = b
    cols.append(f'count(*) FILTER (WHERE total_ms > {prev}) AS "+Inf"')
    return f"""
SELECT $__timeGroup(started_at, $__interval) AS time,
       {(',' + chr(10) + '       ').join(cols)}
FROM v_dns_query
{W}
GROUP BY 1
ORDER BY 1"""


def dashboard():
    over_time = f"""
SELECT t.time, t.series || ' ' || s.stat AS metric, s.value_ms
FROM (
  SELECT $__timeGroup(started_at, $__interval) AS time, {SERIES} AS series,
         percentile_cont(0.5) WITHIN GROUP (ORDER BY total_ms) AS p50,
         percentile_cont(0.9) WITHIN GROUP (ORDER BY total_ms) AS p90
  FROM v_dns_query
  {W}
  GROUP BY 1, 2
) t CROSS JOIN LATERAL (VALUES ('p50', t.p50), ('p90', t.p90)) AS s(stat, value_ms)
ORDER BY 1, 2"""
    by_mode = f"""
SELECT transport,
       {_by_mode('total_ms', 'ms')}
FROM (SELECT *, {CONN} AS conn FROM v_dns_query
{W}) q
GROUP BY transport
ORDER BY transport"""
    detail = f"""
SELECT transport, coalesce(resolver, 'none') AS resolver, coalesce(network_profile, 'none') AS profile, conn,
       count(*) AS n,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY total_ms) AS p50_ms,
       percentile_cont(0.9) WITHIN GROUP (ORDER BY total_ms) AS p90_ms,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY handshake_ms) AS handshake_p50_ms,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY exchange_ms) AS exchange_p50_ms,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY total_rtt_multiple) AS rtt_multiple_p50,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY total_ip_bytes) AS ip_bytes_p50,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY total_packets) AS packets_p50
FROM (SELECT *, {CONN} AS conn FROM v_dns_query
{W}) q
GROUP BY 1, 2, 3, 4
ORDER BY 1, 2, 3, 4"""
    per_transport = ",\n       ".join(f"CASE WHEN transport = '{t}' THEN total_ms END AS \"{t}\"" for t in TRANSPORTS)
    distribution = f"""
SELECT {per_transport}
FROM v_dns_query
{W}"""
    cdf = f"""
SELECT series, total_ms, cdf
FROM (
  SELECT transport || ' ' || conn AS series, total_ms,
         cume_dist() OVER w AS cdf, row_number() OVER w AS i, count(*) OVER (PARTITION BY transport, conn) AS n
  FROM (SELECT transport, total_ms, {CONN} AS conn FROM v_dns_query
{W}) q
  WINDOW w AS (PARTITION BY transport, conn ORDER BY total_ms)
) c
WHERE i % greatest(n / 200, 1) = 0 OR i = n  -- at most ~200 points per curve
ORDER BY series, total_ms"""
    rtt = f"""
SELECT transport,
       {_by_mode('total_rtt_multiple', 'rtt')}
FROM (SELECT *, {CONN} AS conn FROM v_dns_query
{W}) q
GROUP BY transport
ORDER BY transport"""
    wire = f"""
SELECT transport,
       {_by_mode('total_ip_bytes', 'bytes')}
FROM (SELECT *, {CONN} AS conn FROM v_dns_query
{W}) q
GROUP BY transport
ORDER BY transport"""
    modes = {f"{m}_ms": (m, "ms") for m in MODES}
    rows = [
        ("Resolution time", [
            time_series("Median and p90 resolution time", """
Question: how long does a resolution take, per transport, resolver and network profile, and does it
drift over the campaign? total_ms = response - start (handshakes included), median and p90 per
time bucket.""", over_time),
            bar_panel("Median resolution time: fresh / reuse / resume", """
Question: what does connection setup cost each transport? Median total_ms of queries on a fresh
connection, a reused one, and a resumed TLS/QUIC session, side by side.""", by_mode, modes, unit="ms"),
        ]),
        ("Distributions", [
            histogram_panel("Distribution of resolution times per transport", """
Question: how are resolution times spread per transport (tails, modes)? Each transport's total_ms.""",
                            distribution, {t: (t, None) for t in TRANSPORTS}),
            xy_panel("CDF of resolution time per transport and connection", """
Question: what share of queries finish within x ms? cume_dist() over total_ms per transport and
connection mode (Grafana has no CDF panel; thinned to ~200 points per curve).""",
                     cdf, {"total_ms": ("resolution time", "ms"), "cdf": ("share of queries", "percentunit")},
                     series_by="series"),
            heatmap_panel("Resolution time over time (log2 buckets)", """
Question: does the distribution move over time? Counts of queries per time bucket and log2 bucket of
total_ms (the bucket's upper bound in ms).""", _heat_sql()),
        ]),
        ("Cost in round trips and bytes", [
            bar_panel("Resolution time in multiples of the access RTT", """
Question: how many access-link round trips does a resolution cost per transport and connection
mode? Median total_ms / access_rtt_ms (testbed profiles carry the configured access RTT).""",
                      rtt, {f"{m}_rtt": (m, "x") for m in MODES}),
            bar_panel("Bytes on the wire per resolution", """
Question: how many bytes does one resolution put on the wire (IP + transport headers included),
fresh vs reused connections? Median total_ip_bytes.""", wire, {f"{m}_bytes": (m, "decbytes") for m in MODES}),
            table_panel("Per transport × resolver × profile × connection", """
Question: the numbers behind the charts: count, median and p90 total time, median handshake and
exchange time, RTT multiple, IP bytes and packets per group.""", detail, {
                "transport": ("transport", None), "resolver": ("resolver", None), "profile": ("profile", None),
                "conn": ("connection", None), "n": ("queries", None), "p50_ms": ("median", "ms"), "p90_ms": ("p90", "ms"),
                "handshake_p50_ms": ("median handshake", "ms"), "exchange_p50_ms": ("median exchange", "ms"),
                "rtt_multiple_p50": ("median RTT multiple", "x"), "ip_bytes_p50": ("median IP bytes", "decbytes"),
                "packets_p50": ("median packets", None)}),
        ]),
    ]
    return new_dashboard(UID, "DNS response times", __doc__.split("\n\n")[0], VARS, rows)
