"""Dashboard 1, DNS response times: per transport x resolver x network profile, the median and
p90 over time, their distributions, multiples of the access RTT and bytes per resolution, with
fresh, reused and resumed connections side by side. Successful queries only (failures are the
failure dashboard's)."""

from __future__ import annotations

import math

from vantage_agent.dns.registry import TRANSPORTS

from dashboards.panels import (bar_panel, cdf_sql, heatmap_panel, histogram_panel, new_dashboard, table_panel, time_series,
                               where, xy_panel)

UID = "dnscamp-dns"
VARS = ("campaign", "region", "vantage", "profile", "resolver", "transport")
W = where(*VARS) + "\n  AND status = 'ok'"
# over the rollup's histograms (v_dns_hourly_hist: ok queries per hour x vantage x profile x
# resolver x transport and log bucket of total_ms, 2 % wide); the vantage variable carries the
# region selection, the time range applies to whole hours
HW = where("campaign", "vantage", "profile", "resolver", "transport", time="hour")
BIN = 12  # buckets of the rollup per bin of the distribution panel: 1.02^12 = 1.27 x wide
# how the query's connection was set up: reused (no handshake), resumed (TLS/QUIC resumption), fresh
CONN = "CASE WHEN connection_reused THEN 'reuse' WHEN resumed THEN 'resume' ELSE 'fresh' END"
MODES = ("fresh", "reuse", "resume")
SERIES = "transport || ' · ' || coalesce(resolver, 'none') || ' · ' || coalesce(network_profile, 'none')"
HEAT_BOUNDS = [2 ** k for k in range(14)]  # 1 ms .. 8192 ms, log2 buckets (le), then +Inf


def _by_mode(expr: str, suffix: str) -> str:
    return ",\n       ".join(f"percentile_cont(0.5) WITHIN GROUP (ORDER BY {expr}) FILTER (WHERE conn = '{m}') AS {m}_{suffix}"
                              for m in MODES)


def _last_bucket(bound_ms: float) -> int:
    """The last rollup bucket whose middle value (dnscamp_hist_value: 0.001 * 1.02^(b - 0.5)) is at
    most ``bound_ms``."""
    return math.floor(math.log(bound_ms / 0.001) / math.log(1.02) + 0.5)


def _heat_sql() -> str:
    # a rollup bucket (2 % wide) goes to the log2 bucket of its middle value; the sums per hour
    # and bucket come first, so the time grouping and the bucket tests run on those, not on
    # every histogram entry
    cols, prev = [], None
    for b in HEAT_BOUNDS:
        k = _last_bucket(b)
        cond = f"bucket <= {k}" if prev is None else f"bucket > {prev} AND bucket <= {k}"
        cols.append(f'coalesce(sum(n) FILTER (WHERE {cond}), 0) AS "{b}"')
        prev = k
    cols.append(f'coalesce(sum(n) FILTER (WHERE bucket > {prev}), 0) AS "+Inf"')
    return f"""
SELECT $__timeGroup(hour, $__interval) AS time,
       {(',' + chr(10) + '       ').join(cols)}
FROM (SELECT hour, bucket, sum(n) AS n
      FROM v_dns_hourly_hist
      {HW}
      GROUP BY 1, 2) h
GROUP BY 1
ORDER BY 1"""


def _quantiles_sql(groups: dict[str, str], qs: dict[str, float]) -> str:
    """Percentiles per group (alias: SQL expression over v_dns_hourly_hist) read from the summed
    histograms in one pass: the first bucket whose running count reaches ceil(q * total) (nearest
    rank, as dnscamp_hist_quantile), at its middle value: within 1 % of percentile_disc over the
    records. One sort of the (group, bucket) sums, in byte order (COLLATE "C": the series' order
    does not matter here), and no function call per group."""
    keys = ", ".join(groups)
    exprs = ", ".join(f"{e} AS {a}" for a, e in groups.items())
    picks = ",\n         ".join(
        f"dnscamp_hist_value(min(bucket) FILTER (WHERE cum >= greatest(ceil({q} * total), 1))) AS {name}"
        for name, q in qs.items())
    return f"""
  SELECT {keys},
         {picks}
  FROM (SELECT {keys}, bucket, sum(n) OVER (PARTITION BY {keys} ORDER BY bucket) AS cum,
               sum(n) OVER (PARTITION BY {keys}) AS total
        FROM (SELECT {exprs}, bucket, sum(n) AS n
              FROM v_dns_hourly_hist
              {HW}
              GROUP BY {keys}, bucket) b) c
  GROUP BY {keys}"""


def dashboard():
    qs = _quantiles_sql({"time": "$__timeGroup(hour, $__interval)", "series": f'({SERIES}) COLLATE "C"'},
                        {"p50": 0.5, "p90": 0.9})
    over_time = f"""
SELECT t.time, t.series || ' ' || s.stat AS metric, s.value_ms
FROM ({qs}
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
    # pre-bucketed for Grafana's histogram (xMin, xMax and one count per transport: it draws
    # them as they are): BIN rollup buckets per bin, so the bins' edges are the rollup's own
    per_transport = ",\n       ".join(f"coalesce(sum(n) FILTER (WHERE transport = '{t}'), 0) AS \"{t}\"" for t in TRANSPORTS)
    distribution = f"""
SELECT CASE WHEN bin < 0 THEN 0 ELSE 0.001 * power(1.02::float8, bin * {BIN}) END AS "xMin",
       0.001 * power(1.02::float8, (bin + 1) * {BIN}) AS "xMax",
       {per_transport}
FROM (SELECT CASE WHEN bucket = 0 THEN -1 ELSE (bucket - 1) / {BIN} END AS bin, transport, n
      FROM v_dns_hourly_hist
      {HW}
      ) h
GROUP BY bin
ORDER BY bin"""
    cdf = cdf_sql("transport || ' ' || conn", "total_ms", f"(SELECT transport, total_ms, {CONN} AS conn FROM v_dns_query\n{W}) q")
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
time bucket (at least an hour), read from the hourly rollup's histograms (within 1 % of the exact
percentile_disc; docs/sql.md).""", over_time),
            bar_panel("Median resolution time: fresh / reuse / resume", """
Question: what does connection setup cost each transport? Median total_ms of queries on a fresh
connection, a reused one, and a resumed TLS/QUIC session, side by side.""", by_mode, modes, unit="ms"),
        ]),
        ("Distributions", [
            histogram_panel("Distribution of resolution times per transport", """
Question: how are resolution times spread per transport (tails, modes)? Queries per bin of total_ms
(27 % wide on a log scale, the hourly rollup's histogram buckets summed) per transport.""",
                            distribution, {t: (t, None) for t in TRANSPORTS}),
            xy_panel("CDF of resolution time per transport and connection", """
Question: what share of queries finish within x ms? The share of queries at or below each of ~200
values of total_ms per transport and connection mode (percentile_disc at 0.5 % steps: cume_dist() to
0.5 %; Grafana has no CDF panel).""",
                     cdf, {"total_ms": ("resolution time", "ms"), "cdf": ("share of queries", "percentunit")},
                     series_by="series"),
            heatmap_panel("Resolution time over time (log2 buckets)", """
Question: does the distribution move over time? Counts of queries per time bucket (at least an hour)
and log2 bucket of total_ms (the bucket's upper bound in ms), from the hourly rollup's histograms (a
2 %-wide rollup bucket counts in the log2 bucket of its middle value).""", _heat_sql()),
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
