"""Dashboard 1, DNS response times: per transport x resolver x network profile, the median and
p90 over time, their distributions, multiples of the access RTT and bytes per resolution, with
fresh, reused and resumed connections side by side. Successful queries only (failures are the
failure dashboard's)."""

from __future__ import annotations

import math

from vantage_agent.dns.registry import TRANSPORTS

from dashboards.panels import (bar_panel, heatmap_panel, hist_bins, hist_cdf, hist_quantiles, histogram_panel, new_dashboard,
                               table_panel, time_series, where, xy_panel)

UID = "dnscamp-dns"
VARS = ("campaign", "region", "vantage", "profile", "resolver", "transport")
# Every panel reads a rollup (docs/dashboards.md "How the panels query"): the vantage variable
# carries the region selection (the rollups have vantages, not regions). v_dns_hourly_hist: ok
# queries per hour x vantage x profile x resolver x transport and 2 % log bucket of total_ms;
# the range applies to whole hours (an hour starting in it counts whole).
ROLLUP_VARS = ("campaign", "vantage", "profile", "resolver", "transport")
HW = where(*ROLLUP_VARS, time="hour")
# v_dns_conn_daily(_hist): the same per UTC day and connection mode (connection: fresh, reuse,
# resume), histograms of total_ms, handshake_ms, exchange_ms, total_rtt_multiple and
# total_ip_bytes; whole UTC days (every day the range touches: panels.DAYS)
DW = where(*ROLLUP_VARS, time="day")
# *Median and p90 over time* and the heatmap read whole UTC days when the range is longer than
# HOURLY_MAX: at "All", 160 series x 720 hours of histograms took 7.6 s of CPU over 30 days at
# 10 M records, and 2 days of hours still 0.64 s.
# Each branch's condition is a constant once Grafana has put the range in: the planner drops
# the other branch.
HOURLY_MAX = "1 day"
_SPAN = "$__timeTo()::timestamptz - $__timeFrom()::timestamptz"
SHORT_RANGE = f"{_SPAN} <= interval '{HOURLY_MAX}'"
LONG_RANGE = f"{_SPAN} > interval '{HOURLY_MAX}'"
MODES = ("fresh", "reuse", "resume")  # v_dns_conn_daily's connection: reused (no handshake), resumed, fresh
SERIES = "transport || ' · ' || coalesce(resolver, 'none') || ' · ' || coalesce(network_profile, 'none')"
HEAT_BOUNDS = [2 ** k for k in range(14)]  # 1 ms .. 8192 ms, log2 buckets (le), then +Inf
MEASURES = {"total_ms": "p50_ms", "handshake_ms": "handshake_p50_ms", "exchange_ms": "exchange_p50_ms",
            "total_rtt_multiple": "rtt_multiple_p50", "total_ip_bytes": "ip_bytes_p50"}  # detail table: measure -> median column


def _conn_sums(keys: dict[str, str], measure: str | None) -> str:
    """(keys, [measure,] bucket, n): v_dns_conn_daily_hist summed per group and bucket, of one
    ``measure`` or (None) of every measure the detail table shows."""
    cols = ", ".join(f"{e} AS {a}" for a, e in keys.items())
    which = f"measure = '{measure}'" if measure else f"measure IN ({', '.join(repr(m) for m in MEASURES)})"
    extra = "" if measure else "measure, "
    return f"""SELECT {cols}, {extra}bucket, sum(n) AS n
              FROM v_dns_conn_daily_hist
              {DW}
                AND {which}
              GROUP BY {", ".join(keys)}, {extra}bucket"""


def _by_mode(measure: str, suffix: str) -> str:
    """Per transport, the median of ``measure`` per connection mode, one column each."""
    qs = hist_quantiles(_conn_sums({"transport": "transport", "conn": "connection"}, measure), "transport, conn", {"p50": 0.5})
    cols = ",\n       ".join(f"max(p50) FILTER (WHERE conn = '{m}') AS {m}_{suffix}" for m in MODES)
    return f"""
SELECT transport,
       {cols}
FROM ({qs}
) q
GROUP BY transport
ORDER BY transport"""


def _by_time(keys: str, groups: int) -> str:
    """(time, ``keys``, n) histogram sums for the panels over time: per time bucket of at least an
    hour from the hourly rollup when the range is at most HOURLY_MAX, per UTC day from the daily
    one beyond it. ``keys``: the select list after time (its last item the bucket), ``groups``:
    how many items it has."""
    by = ", ".join(str(i) for i in range(1, groups + 2))
    return f"""SELECT $__timeGroup(hour, $__interval) AS time, {keys}, sum(n) AS n
              FROM v_dns_hourly_hist
              {HW}
                AND {SHORT_RANGE}
              GROUP BY {by}
              UNION ALL
              SELECT extract(epoch FROM day) AS time, {keys}, sum(n) AS n
              FROM v_dns_conn_daily_hist
              {DW}
                AND measure = 'total_ms'
                AND {LONG_RANGE}
              GROUP BY {by}"""


def _last_bucket(bound_ms: float) -> int:
    """The last rollup bucket whose middle value (dnscamp_hist_value: 0.001 * 1.02^(b - 0.5)) is at
    most ``bound_ms``."""
    return math.floor(math.log(bound_ms / 0.001) / math.log(1.02) + 0.5)


def _heat_sql() -> str:
    # a rollup bucket (2 % wide) goes to the log2 bucket of its middle value; the sums per time
    # bucket and rollup bucket come first, so the bucket tests run on those, not on every
    # histogram entry
    cols, prev = [], None
    for b in HEAT_BOUNDS:
        k = _last_bucket(b)
        cond = f"bucket <= {k}" if prev is None else f"bucket > {prev} AND bucket <= {k}"
        cols.append(f'coalesce(sum(n) FILTER (WHERE {cond}), 0) AS "{b}"')
        prev = k
    cols.append(f'coalesce(sum(n) FILTER (WHERE bucket > {prev}), 0) AS "+Inf"')
    return f"""
SELECT time,
       {(',' + chr(10) + '       ').join(cols)}
FROM ({_by_time("bucket", 1)}
      ) h
GROUP BY 1
ORDER BY 1"""


def dashboard():
    # the series in byte order (COLLATE "C": their order does not matter to the window)
    qs = hist_quantiles(_by_time(f'({SERIES}) COLLATE "C" AS series, bucket', 2), "time, series", {"p50": 0.5, "p90": 0.9})
    over_time = f"""
SELECT t.time, t.series || ' ' || s.stat AS metric, s.value_ms
FROM ({qs}
) t CROSS JOIN LATERAL (VALUES ('p50', t.p50), ('p90', t.p90)) AS s(stat, value_ms)
ORDER BY 1, 2"""
    group = {"transport": "transport", "resolver": "coalesce(resolver, 'none')",
             "profile": "coalesce(network_profile, 'none')", "conn": "connection"}
    keys = ", ".join(group)
    picks = [f"max(h.p50) FILTER (WHERE h.measure = '{m}') AS {col}" for m, col in MEASURES.items()]
    picks.insert(1, "max(h.p90) FILTER (WHERE h.measure = 'total_ms') AS p90_ms")
    picks = ",\n       ".join(picks)
    conn_keys = ", ".join(f"{e} AS {a}" for a, e in group.items())
    detail = f"""
WITH h AS ({hist_quantiles(_conn_sums(group, None), keys + ", measure", {"p50": 0.5, "p90": 0.9})}
), c AS (
  SELECT {conn_keys},
         sum(n - failures) AS n, sum(total_packets)::float8 / nullif(sum(n - failures), 0) AS packets_mean
  FROM v_dns_conn_daily
  {DW}
  GROUP BY {keys}
)
SELECT c.transport, c.resolver, c.profile, c.conn, c.n,
       {picks},
       c.packets_mean
FROM c
LEFT JOIN h USING ({keys})
WHERE c.n > 0
GROUP BY c.transport, c.resolver, c.profile, c.conn, c.n, c.packets_mean
ORDER BY 1, 2, 3, 4"""
    distribution = hist_bins({t: f"transport = '{t}'" for t in TRANSPORTS}, "v_dns_conn_daily_hist",
                             DW + "\n        AND measure = 'total_ms'")
    cdf = hist_cdf("transport || ' ' || connection", "total_ms", "v_dns_conn_daily_hist", DW + "\n        AND measure = 'total_ms'")
    by_mode, rtt, wire = _by_mode("total_ms", "ms"), _by_mode("total_rtt_multiple", "rtt"), _by_mode("total_ip_bytes", "bytes")
    modes = {f"{m}_ms": (m, "ms") for m in MODES}
    rows = [
        ("Resolution time", [
            time_series("Median and p90 resolution time", """
Question: how long does a resolution take, per transport, resolver and network profile, and does it
drift over the campaign? total_ms = response - start (handshakes included), median and p90 per
time bucket: at least an hour (the hourly rollup) for a range of up to a day, a UTC day (the daily
rollup) for a longer one; read from the rollups' histograms (within 1 % of the exact
percentile_disc; docs/sql.md).""", over_time),
            bar_panel("Median resolution time: fresh / reuse / resume", """
Question: what does connection setup cost each transport? Median total_ms of queries on a fresh
connection, a reused one, and a resumed TLS/QUIC session, side by side (the daily rollup's
histograms: whole days, within 1 % of the exact median).""", by_mode, modes, unit="ms"),
        ]),
        ("Distributions", [
            histogram_panel("Distribution of resolution times per transport", """
Question: how are resolution times spread per transport (tails, modes)? Queries per bin of total_ms
(27 % wide on a log scale, the daily rollup's histogram buckets summed; whole days) per transport.""",
                            distribution, {t: (t, None) for t in TRANSPORTS}),
            xy_panel("CDF of resolution time per transport and connection", """
Question: what share of queries finish within x ms? The share of queries below x per transport and
connection mode, exact at every edge of the daily rollup's 2 % buckets of total_ms (whole days;
Grafana has no CDF panel).""",
                     cdf, {"total_ms": ("resolution time", "ms"), "cdf": ("share of queries", "percentunit")},
                     series_by="series"),
            heatmap_panel("Resolution time over time (log2 buckets)", """
Question: does the distribution move over time? Counts of queries per time bucket and log2 bucket of
total_ms (the bucket's upper bound in ms): at least an hour (the hourly rollup) for a range of up to
a day, a UTC day (the daily rollup) for a longer one; a 2 %-wide rollup bucket counts in the log2
bucket of its middle value.""", _heat_sql()),
        ]),
        ("Cost in round trips and bytes", [
            bar_panel("Resolution time in multiples of the access RTT", """
Question: how many access-link round trips does a resolution cost per transport and connection
mode? Median total_ms / access_rtt_ms (testbed profiles carry the configured access RTT), from the
daily rollup's histograms (whole days, within 1 %).""",
                      rtt, {f"{m}_rtt": (m, "x") for m in MODES}),
            bar_panel("Bytes on the wire per resolution", """
Question: how many bytes does one resolution put on the wire (IP + transport headers included),
fresh vs reused connections? Median total_ip_bytes (daily rollup: whole days, within 1 %).""", wire, {f"{m}_bytes": (m, "decbytes") for m in MODES}),
            table_panel("Per transport × resolver × profile × connection", """
Question: the numbers behind the charts: count of ok queries, median and p90 total time, median
handshake and exchange time, RTT multiple and IP bytes (from the daily rollup's histograms: whole
days, within 1 % of the exact percentiles), and the mean packets per query per group.""", detail, {
                "transport": ("transport", None), "resolver": ("resolver", None), "profile": ("profile", None),
                "conn": ("connection", None), "n": ("queries", None), "p50_ms": ("median", "ms"), "p90_ms": ("p90", "ms"),
                "handshake_p50_ms": ("median handshake", "ms"), "exchange_p50_ms": ("median exchange", "ms"),
                "rtt_multiple_p50": ("median RTT multiple", "x"), "ip_bytes_p50": ("median IP bytes", "decbytes"),
                "packets_mean": ("mean packets", None)}),
        ]),
    ]
    return new_dashboard(UID, "DNS response times", __doc__.split("\n\n")[0], VARS, rows)
