"""Dashboard 1, DNS response times: per transport x resolver x network profile, the median and
p90 over time, their distributions, multiples of the access RTT and bytes per resolution, with
fresh, reused and resumed connections side by side. Successful queries only (failures are the
failure dashboard's)."""

from __future__ import annotations

import math

from vantage_agent.dns.registry import TRANSPORTS

from dashboards.panels import (DAILY, HOURLY, bar_panel, heatmap_panel, hist_bins, hist_cdf, hist_quantiles, MEDIAN_TABLE_TIPS, median_table, histogram_panel,
                               new_dashboard, table_panel, time_series, where, xy_panel)

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
DETAIL_MEDIANS = {"handshake_p50_ms": ("median handshake", "ms"), "exchange_p50_ms": ("median exchange", "ms"),
                  "rtt_multiple_p50": ("median RTT multiple", "x"), "ip_bytes_p50": ("median IP bytes", "decbytes")}
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


GROUP = "transport || ' · ' || coalesce(resolver, 'none') || ' · ' || coalesce(network_profile, 'none')"


def _by_mode(measure: str, suffix: str) -> str:
    """Per transport, resolver and profile (not pooled: a transport's connection cost depends
    on the resolver and the access link), the median of ``measure`` per connection mode, one
    column each, with its 95 % interval and n (``<mode>_lo``, ``<mode>_hi``, ``<mode>_n``)."""
    qs = hist_quantiles(_conn_sums({"grp": GROUP, "conn": "connection"}, measure), "grp, conn", {"p50": 0.5}, median="p50")
    names = {"p50": suffix, "p50_lo": "lo", "p50_hi": "hi", "hist_n": "n"}  # column of hist_quantiles -> suffix
    cols = ",\n       ".join(f"max({c}) FILTER (WHERE conn = '{m}') AS {m}_{sfx}" for m in MODES for c, sfx in names.items())
    return f"""
SELECT grp AS "group",
       {cols}
FROM ({qs}
) q
GROUP BY grp
ORDER BY grp"""


def _mode_columns(suffix: str, unit: str) -> tuple[dict, tuple[str, ...]]:
    """The bars (median per mode) and the tooltip's columns (interval, n) of a _by_mode panel."""
    cols: dict = {"group": ("transport · resolver · profile", None)}
    tips = []
    for m in MODES:
        cols |= {f"{m}_{suffix}": (m, unit), f"{m}_lo": (f"{m} 95 % CI low", unit), f"{m}_hi": (f"{m} 95 % CI high", unit),
                 f"{m}_n": (f"{m} n", "none")}
        tips += [f"{m}_lo", f"{m}_hi", f"{m}_n"]
    return cols, tuple(tips)


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


# the small multiples: one row per selected region, one per selected vantage (repeated rows)
REGION_W = where("campaign", "region", *ROLLUP_VARS[1:], time="day")


def _per_transport(where_sql: str) -> str:
    """Per transport: ok queries, the median total_ms with its 95 % interval, p90 and p99
    (the daily rollup's histograms under ``where_sql``)."""
    return median_table(f"""SELECT transport, bucket, sum(n) AS n
              FROM v_dns_conn_daily_hist
              {where_sql}
                AND measure = 'total_ms'
              GROUP BY 1, 2""", "transport", "transport", "queries")[0]


PER_TRANSPORT_COLUMNS = median_table("", "transport", "transport", "queries")[1]
PER_TRANSPORT_TIPS = MEDIAN_TABLE_TIPS


def dashboard():
    # the series in byte order (COLLATE "C": their order does not matter to the window)
    qs = hist_quantiles(_by_time(f'({SERIES}) COLLATE "C" AS series, bucket', 2), "time, series",
                        {"p50": 0.5, "p90": 0.9, "p99": 0.99}, median="p50")
    # each series' n over the range in its legend name; the median's interval as two dashed series
    over_time = f"""
SELECT t.time, t.series || ' ' || s.stat || ' (n=' || t.series_n || ')' AS metric, s.value_ms
FROM (SELECT *, sum(hist_n) OVER (PARTITION BY series) AS series_n FROM ({qs}
) q) t
CROSS JOIN LATERAL (VALUES ('p50', t.p50), ('p50 lo', t.p50_lo), ('p50 hi', t.p50_hi), ('p90', t.p90), ('p99', t.p99))
  AS s(stat, value_ms)
WHERE s.value_ms IS NOT NULL
ORDER BY 1, 2"""
    group = {"transport": "transport", "resolver": "coalesce(resolver, 'none')",
             "profile": "coalesce(network_profile, 'none')", "conn": "connection"}
    keys = ", ".join(group)
    # each median with its interval: <col> and <col> with p50 -> p50_lo / p50_hi
    picks = [f"max(h.{c}) FILTER (WHERE h.measure = '{m}') AS {col.replace('p50', c)}"
             for m, col in MEASURES.items() for c in ("p50", "p50_lo", "p50_hi")]
    picks[3:3] = ["max(h.p90) FILTER (WHERE h.measure = 'total_ms') AS p90_ms",
                  "max(h.p99) FILTER (WHERE h.measure = 'total_ms') AS p99_ms"]
    picks = ",\n       ".join(picks)
    conn_keys = ", ".join(f"{e} AS {a}" for a, e in group.items())
    detail = f"""
WITH h AS ({hist_quantiles(_conn_sums(group, None), keys + ", measure", {"p50": 0.5, "p90": 0.9, "p99": 0.99}, median="p50")}
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
    (modes, mode_tips), (rtt_cols, rtt_tips), (wire_cols, wire_tips) = (
        _mode_columns("ms", "ms"), _mode_columns("rtt", "x"), _mode_columns("bytes", "decbytes"))
    rows = [
        ("Resolution time", [
            time_series("Median, p90 and p99 resolution time", """
Question: how long does a resolution take, per transport, resolver and network profile, and does it
drift over the campaign? total_ms = response - start (handshakes included), median (with its
distribution-free 95 % interval, dashed: lo and hi), p90 and p99 per time bucket: at least an hour
(the hourly rollup) for a range of up to a day, a UTC day (the daily rollup) for a longer one; read
from the rollups' histograms (within 1 % of the exact percentile_disc; docs/sql.md "Intervals").
Each series' name ends in its number of ok queries over the range (n).""", over_time, interval=HOURLY),
            bar_panel("Median resolution time: fresh / reuse / resume", """
Question: what does connection setup cost each transport, to each resolver, on each access
profile? Median total_ms of queries on a fresh connection, a reused one, and a resumed TLS/QUIC
session, side by side per transport · resolver · profile (the daily rollup's histograms: whole
days, within 1 % of the exact median); the tooltip gives each median's 95 % interval and n.""",
                      by_mode, modes, unit="ms", interval=DAILY, tooltip_only=mode_tips),
        ]),
        ("Distributions", [
            histogram_panel("Distribution of resolution times per transport", """
Question: how are resolution times spread per transport (tails, modes)? Queries per bin of total_ms
(27 % wide on a log scale, drawn on a log axis: the daily rollup's histogram buckets summed; whole
days) per transport; the legend sums each transport's queries (n).""",
                            distribution, {t: (t, None) for t in TRANSPORTS}, interval=DAILY),
            xy_panel("CDF of resolution time per transport and connection", """
Question: what share of queries finish within x ms? The share of queries below x (log axis) per
transport and connection mode, exact at every edge of the daily rollup's 2 % buckets of total_ms
(whole days; Grafana has no CDF panel); each curve's name ends in its number of queries (n).""",
                     cdf, {"total_ms": ("resolution time", "ms"), "cdf": ("share of queries", "percentunit")},
                     series_by="series", interval=DAILY, log_x=True),
            heatmap_panel("Resolution time over time (log2 buckets), $transport", """
Question: does the distribution move over time? One heatmap per transport (repeated by the
transport variable: transports are not pooled): counts of queries per time bucket and log2 bucket
of total_ms (the bucket's upper bound in ms): at least an hour (the hourly rollup) for a range of up
to a day, a UTC day (the daily rollup) for a longer one; a 2 %-wide rollup bucket counts in the log2
bucket of its middle value.""", _heat_sql(), interval=HOURLY, repeat="transport"),
        ]),
        ("Cost in round trips and bytes", [
            bar_panel("Resolution time in multiples of the access RTT", """
Question: how many access-link round trips does a resolution cost per transport, resolver, profile
and connection mode? Median total_ms / access_rtt_ms (testbed profiles carry the configured access
RTT), from the daily rollup's histograms (whole days, within 1 %); the tooltip gives each
median's 95 % interval and n.""", rtt, rtt_cols, interval=DAILY, tooltip_only=rtt_tips),
            bar_panel("Bytes on the wire per resolution", """
Question: how many bytes does one resolution put on the wire (IP + transport headers included),
fresh vs reused connections? Median total_ip_bytes per transport, resolver and profile (daily
rollup: whole days, within 1 %), with its 95 % interval and n in the tooltip.""", wire, wire_cols,
                      interval=DAILY, tooltip_only=wire_tips),
            table_panel("Per transport × resolver × profile × connection", """
Question: the numbers behind the charts: count of ok queries (n), median total time, p90 and p99,
median handshake and exchange time, RTT multiple and IP bytes, each median with its
distribution-free 95 % interval (from the daily rollup's histograms: whole days, within 1 % of the exact percentiles),
and the mean packets per query per group.""", detail, {
                "transport": ("transport", None), "resolver": ("resolver", None), "profile": ("profile", None),
                "conn": ("connection", None), "n": ("queries", None), "p50_ms": ("median", "ms"),
                "p50_lo_ms": ("median 95 % CI low", "ms"), "p50_hi_ms": ("median 95 % CI high", "ms"),
                "p90_ms": ("p90", "ms"), "p99_ms": ("p99", "ms"),
                **{col.replace("p50", c): (f"{head}{tail}", unit)
                   for col, (head, unit) in DETAIL_MEDIANS.items()
                   for c, tail in (("p50", ""), ("p50_lo", " 95 % CI low"), ("p50_hi", " 95 % CI high"))},
                "packets_mean": ("mean packets", None)}, interval=DAILY),
        ]),
        ("By region: $region", [
            bar_panel("Median resolution time per transport in $region", """
Question: does a global campaign's answer hold in every region? Median total_ms per transport of
the vantages in this region (one row per selected region), with its 95 % interval, p90, p99 and
n in the tooltip (the daily rollup: whole days). Pooled over the
selected resolvers and profiles: narrow them with the variables to compare like with like.""", _per_transport(REGION_W), PER_TRANSPORT_COLUMNS,
                      unit="ms", interval=DAILY, tooltip_only=PER_TRANSPORT_TIPS, w=24, h=7),
        ], "region"),
        ("By vantage: $vantage", [
            bar_panel("Median resolution time per transport at $vantage", """
Question: is one vantage point different (its access link, its resolvers)? Median total_ms per
transport at this vantage (one row per selected vantage), with its 95 % interval, p90, p99 and n
in the tooltip (the daily rollup: whole days). Pooled over the
selected resolvers and profiles: narrow them with the variables to compare like with like.""", _per_transport(DW), PER_TRANSPORT_COLUMNS,
                      unit="ms", interval=DAILY, tooltip_only=PER_TRANSPORT_TIPS, w=24, h=7),
        ], "vantage"),
    ]
    return new_dashboard(UID, "DNS response times", __doc__.split("\n\n")[0], VARS, rows)
