"""Dashboard 2, failure rates: the error taxonomy (vantage_agent/errors.py) stacked per transport
and resolver, failure rates with their counts, over time, the names that fail most, and page
loads' failures per browser and DNS mode. A failure is a record whose status is not 'ok'."""

from __future__ import annotations

from vantage_agent.errors import OK, statuses

from dashboards.panels import DAILY, HOURLY, bar_panel, new_dashboard, table_panel, time_series, where

UID = "dnscamp-failures"
VARS = ("campaign", "region", "vantage", "profile", "resolver", "transport", "browser")
# top failing names: v_dns_name_daily (records per UTC day x campaign x vantage x profile x
# resolver x transport x qname x status), whole UTC days (every day the range touches)
NW = where("campaign", "vantage", "profile", "resolver", "transport", time="day")
# over the rollups: v_dns_hourly (records and failures per hour) and v_dns_hourly_status (failed
# records per hour and status, same keys); the vantage variable carries the region selection,
# the time range applies to whole hours
RW = where("campaign", "vantage", "profile", "resolver", "transport", time="hour")
# page loads: v_page_load_daily (loads per UTC day x ... x status), whole days; no resolver or transport
PW = where("campaign", "vantage", "profile", "browser", time="day")
FAILURES = sorted(s for s in statuses() if s != OK)  # the taxonomy's failure statuses
LIST = ", ".join(f"'{s}'" for s in FAILURES)


# a rate's Wilson 95 % interval (migration 0028), of k failures in n: `<alias>_lo`, `<alias>_hi`
def _wilson(k: str, n: str, alias: str = "failure_rate") -> str:
    return f"dnscamp_wilson_lo(({k})::bigint, ({n})::bigint) AS {alias}_lo, dnscamp_wilson_hi(({k})::bigint, ({n})::bigint) AS {alias}_hi"


RATE_COLUMNS = {"failure_rate": ("failure rate", "percentunit"), "failure_rate_lo": ("95 % CI low", "percentunit"),
                "failure_rate_hi": ("95 % CI high", "percentunit")}


def _stacked(title: str, description: str, group: str, alias: str, view: str, bars_from: str, w: str, interval: str):
    """Bars per ``group`` (shown as ``alias``), one stacked count per failure status, from
    ``view``, a rollup of (status, n) rows: a bar for each group the rollup of every record
    ``bars_from`` has in the range, zero for a group without failures; the group's n (all its
    records, failed or not) in the tooltip."""
    cols = [f"coalesce(sum(n) FILTER (WHERE status = '{s}'), 0) AS {s}" for s in FAILURES]
    cols.append(f"coalesce(sum(n) FILTER (WHERE status <> '{OK}' AND status NOT IN ({LIST})), 0) AS unclassified")
    names = [*FAILURES, "unclassified"]
    sep = ",\n       "
    sql = f"""
SELECT {alias},
       {sep.join(f"coalesce(f.{c}, 0) AS {c}" for c in names)},
       g.n
FROM (SELECT {group} AS {alias}, sum(n) AS n FROM {bars_from}
{w}
GROUP BY 1) g
LEFT JOIN (SELECT {group} AS {alias},
       {sep.join(cols)}
FROM {view}
{w}
  AND status <> '{OK}'
GROUP BY 1) f USING ({alias})
ORDER BY 1"""
    columns = ({alias: (alias, None)} | {s: (s, None) for s in FAILURES} | {"unclassified": ("status outside the taxonomy", None)}
               | {"n": ("records (n)", "none")})
    return bar_panel(title, description, sql, columns, stacked=True, interval=interval, tooltip_only=("n",))


def dashboard():
    rates = f"""
SELECT transport, coalesce(resolver, 'none') AS resolver, coalesce(network_profile, 'none') AS profile,
       sum(n) AS n,
       sum(failures) AS failed,
       sum(failures)::float8 / sum(n) AS failure_rate,
       {_wilson("sum(failures)", "sum(n)")}
FROM v_dns_hourly
{RW}
GROUP BY 1, 2, 3
ORDER BY failure_rate DESC, n DESC, 1, 2, 3"""
    # per time bucket and transport the rate and its Wilson interval (dashed: lo, hi); each
    # series' name ends in the transport's queries over the range (n)
    over_time = f"""
SELECT g.time, g.transport || ' ' || s.stat || ' (n=' || g.transport_n || ')' AS metric, s.failure_rate
FROM (SELECT time, transport, k, n, sum(n) OVER (PARTITION BY transport) AS transport_n
      FROM (SELECT $__timeGroup(hour, $__interval) AS time, transport, sum(failures)::bigint AS k, sum(n)::bigint AS n
            FROM v_dns_hourly
            {RW}
            GROUP BY 1, 2) h) g
CROSS JOIN LATERAL (VALUES ('rate', g.k::float8 / g.n), ('lo', dnscamp_wilson_lo(g.k, g.n)), ('hi', dnscamp_wilson_hi(g.k, g.n)))
  AS s(stat, failure_rate)
ORDER BY 1, 2"""
    # per (qname, transport, resolver) and status first, then the commonest failure status of
    # each: the most failed records, the first in status order among equals (as mode() picks)
    top_names = f"""
SELECT qname, transport, resolver,
       (sum(n) FILTER (WHERE status <> 'ok'))::bigint AS failed,
       sum(n)::bigint AS n,
       sum(n) FILTER (WHERE status <> 'ok')::float8 / sum(n) AS failure_rate,
       {_wilson("sum(n) FILTER (WHERE status <> 'ok')", "sum(n)")},
       (array_agg(status ORDER BY n DESC, status) FILTER (WHERE status <> 'ok'))[1] AS commonest_status
FROM (SELECT qname, transport, coalesce(resolver, 'none') AS resolver, status, sum(n) AS n
      FROM v_dns_name_daily
      {NW}
      GROUP BY 1, 2, 3, 4) s
GROUP BY 1, 2, 3
HAVING sum(n) FILTER (WHERE status <> 'ok') > 0
ORDER BY failed DESC, failure_rate DESC, 1, 2, 3
LIMIT 25"""
    page = f"""
SELECT browser, dns_mode, profile,
       sum(n) AS n,
       coalesce(sum(n) FILTER (WHERE status <> 'ok'), 0) AS failed,
       coalesce(sum(n) FILTER (WHERE status <> 'ok'), 0)::float8 / sum(n) AS failure_rate,
       {_wilson("coalesce(sum(n) FILTER (WHERE status <> 'ok'), 0)", "sum(n)")},
       (array_agg(status ORDER BY n DESC, status) FILTER (WHERE status <> 'ok'))[1] AS commonest_status
FROM (SELECT browser, dns_mode, coalesce(network_profile, 'none') AS profile, status, sum(n) AS n
      FROM v_page_load_daily
      {PW}
      GROUP BY 1, 2, 3, 4) s
GROUP BY 1, 2, 3
ORDER BY failure_rate DESC, n DESC, 1, 2, 3"""
    rows = [
        ("DNS failures", [
            _stacked("Failures by status per transport", """
Question: how does each transport fail? Count of DNS queries per failure status of the taxonomy
(vantage_agent/errors.py), stacked per transport (the hourly rollup: whole hours); the tooltip gives
the transport's records (n).""", "transport", "transport", "v_dns_hourly_status", "v_dns_hourly", RW, HOURLY),
            _stacked("Failures by status per resolver", """
Question: is one resolver the problem? The same counts stacked per resolver, with its records (n).""",
                     "coalesce(resolver, 'none')", "resolver", "v_dns_hourly_status", "v_dns_hourly", RW, HOURLY),
            table_panel("Failure rate with counts", """
Question: how often does each transport × resolver × profile fail, and out of how many queries?
failed / n, with both counts shown (a rate without its count hides small samples) and its Wilson
95 % interval (from the hourly rollup: whole hours).""", rates, {
                "transport": ("transport", None), "resolver": ("resolver", None), "profile": ("profile", None),
                "n": ("queries", None), "failed": ("failed", None)} | RATE_COLUMNS, interval=HOURLY),
            time_series("Failure rate over time per transport", """
Question: are failures bursts (an outage) or constant? failed / all queries per time bucket (at least
an hour) and transport, from the hourly rollup, with its Wilson 95 % interval (dashed: lo, hi);
each series' name ends in the transport's queries over the range (n).""",
                        over_time, unit="percentunit", interval=HOURLY),
            table_panel("Top failing names", """
Question: which names fail, over which transport and resolver, and how? The 25 (qname, transport,
resolver) with most failed queries, with their rate (Wilson 95 % interval) and commonest failure
status (the daily rollup of names: every UTC day the range touches).""", top_names, {
                "qname": ("name", None), "transport": ("transport", None), "resolver": ("resolver", None),
                "failed": ("failed", None), "n": ("queries", None)} | RATE_COLUMNS | {
                "commonest_status": ("commonest status", None)}, interval=DAILY),
        ]),
        ("Page-load failures", [
            table_panel("Page-load failure rate per browser and DNS mode", """
Question: which browser × DNS mode × profile fails page loads, how often, and how? failed / n with
both counts, its Wilson 95 % interval and the commonest status (the daily rollup: every UTC day the
range touches).""", page, {
                "browser": ("browser", None), "dns_mode": ("DNS mode", None), "profile": ("profile", None),
                "n": ("loads", None), "failed": ("failed", None)} | RATE_COLUMNS | {
                "commonest_status": ("commonest status", None)}, interval=DAILY),
            _stacked("Page-load failures by status per browser", """
Question: how do page loads fail per browser? Count per failure status, stacked, and the browser's
loads (n) in the tooltip (the daily rollup: every UTC day the range touches).""", "browser", "browser",
                     "v_page_load_daily", "v_page_load_daily", PW, DAILY),
        ]),
    ]
    return new_dashboard(UID, "Failure rates", __doc__.split("\n\n")[0], VARS, rows)
