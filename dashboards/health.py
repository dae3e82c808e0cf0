"""Dashboard 5, campaign health: what each vantage ran and when, how late its records reached the
store, the S3 objects collected per vantage (last upload), what ingest quarantined, and the RIPE
Atlas credits the campaign's measurements cost. For the operators: not published as a public
dashboard (dashboards.PUBLISHED), for the instance's signed-in users. Every count is its own n; the
failed share of each vantage carries its Wilson 95 % interval; colours mark what needs a look
(thresholds: a vantage silent for over 2 hours, records arriving over an hour late, over 1 % of
them failed)."""

from __future__ import annotations

from grafana_foundation_sdk.builders import common as cb
from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models.dashboard import DynamicConfigValue, Threshold, ThresholdsMode

from dashboards.panels import bar_panel, hist_quantiles, new_dashboard, stat_panel, table_panel, time_series, where

UID = "dnscamp-health"
VARS = ("campaign", "region", "vantage", "atlas_campaign")
# The rollups of migration 0018 (docs/store.md "Rollups"): v_ingest_daily / v_ingest_lag_hist
# (records per context x ingest batch x UTC day) and v_unit_daily (records per UTC day x vantage
# x kind x unit) instead of every record. A v_ingest_daily row (in practice a run's records of
# one batch) counts whole when its first..last started_at overlaps the range (its day among
# those the range touches, panels.DAYS: the day condition uses the primary key); a unit counts
# when a record of it lies on a UTC day the range overlaps: from the day of its start to the
# last day that starts before its end (a range ending at midnight does not read the next day).
_OVERLAP = "last_started >= $__timeFrom()::timestamptz AND first_started <= $__timeTo()::timestamptz"
W_ROWS = where("campaign", "vantage", time="day") + f"\n  AND {_OVERLAP}"
W_UNITS = where("campaign", "vantage", time="day") + "\n  AND day < $__timeTo()::timestamptz"
# What needs a look (green below the first value, orange from it, red from the second): a
# vantage that measured nothing for 2 (6) hours (while its campaign runs: a finished campaign's
# vantages are all red, by design), records reaching the store an hour (6 hours) after they
# were measured, 1 % (5 %) of a vantage's records failed.
SILENT_H = (2, 6)
LAG_S = (3600, 6 * 3600)
FAILED = (0.01, 0.05)


def _steps(warn: float, alert: float) -> list[Threshold]:
    # the base step's value is -Infinity to Grafana whatever it says (its schema wants a number;
    # Grafana writes null): 0, the least of these measures
    return [Threshold(value=0, color="green"), Threshold(value=warn, color="orange"),
            Threshold(value=alert, color="red")]


def _coloured(warn: float, alert: float) -> list[DynamicConfigValue]:
    """A table column's cells coloured by the thresholds."""
    return [DynamicConfigValue(id_val="thresholds", value={"mode": "absolute", "steps": [
                {"value": t.value, "color": t.color} for t in _steps(warn, alert)]}),
            DynamicConfigValue(id_val="custom.cellOptions", value={"type": "color-text"})]


def dashboard():
    lag_p50 = hist_quantiles(f"SELECT vantage_id, region, bucket, sum(n) AS n FROM v_ingest_lag_hist\n{W_ROWS}\nGROUP BY 1, 2, 3",
                             "vantage_id, region", {"lag_p50_s": 0.5})
    per_vantage = f"""
SELECT v.vantage_id, coalesce(v.region, 'none') AS region, v.runs, coalesce(u.units, 0) AS units, v.records, v.failed,
       v.failed::float8 / nullif(v.records, 0) AS failed_share,
       dnscamp_wilson_lo(v.failed, v.records) AS failed_share_lo, dnscamp_wilson_hi(v.failed, v.records) AS failed_share_hi,
       v.first_measured, v.last_measured,
       extract(epoch FROM least(now(), $__timeTo()::timestamptz) - v.last_measured) / 3600 AS silent_h,
       v.last_ingested, l.lag_p50_s, v.lag_max_s
FROM (SELECT vantage_id, region,
             count(DISTINCT run) AS runs,
             sum(records)::bigint AS records,
             sum(failed)::bigint AS failed,
             min(first_started) AS first_measured,
             max(last_started) AS last_measured,
             max(ingested_at) AS last_ingested,
             max(lag_max_s) AS lag_max_s
      FROM v_ingest_daily
      {W_ROWS}
      GROUP BY 1, 2) v
LEFT JOIN ({lag_p50}) l ON l.vantage_id = v.vantage_id AND l.region IS NOT DISTINCT FROM v.region
LEFT JOIN (SELECT vantage_id, region, count(unit) AS units
           FROM (SELECT DISTINCT vantage_id, region, unit FROM v_unit_daily
                 {W_UNITS}) d
           GROUP BY 1, 2) u ON u.vantage_id = v.vantage_id AND u.region IS NOT DISTINCT FROM v.region
ORDER BY 1, 2"""
    units_wide = f"""
SELECT vantage_id,
       count(DISTINCT unit) FILTER (WHERE kind = 'dns_query') AS dns_units,
       count(DISTINCT unit) FILTER (WHERE kind = 'page_load') AS page_load_units,
       count(DISTINCT unit) FILTER (WHERE kind NOT IN ('dns_query', 'page_load')) AS other_units
FROM (SELECT DISTINCT vantage_id, kind, unit FROM v_unit_daily
      {W_UNITS}) d
GROUP BY 1
ORDER BY 1"""
    lag = hist_quantiles(f"SELECT $__timeGroup(first_started, $__interval) AS time, vantage_id AS metric, bucket, sum(n) AS n\n"
                         f"              FROM v_ingest_lag_hist\n{W_ROWS}\nGROUP BY 1, 2, 3", "time, metric",
                         {"lag_p50_s": 0.5}) + "\n  ORDER BY 1, 2"  # fmt: skip
    uploads = f"""
SELECT campaign, vantage_id,
       count(*) AS objects,
       count(DISTINCT run) AS runs,
       max(collected_at) AS last_collected,
       sum(size) AS bytes,
       sum(ingested) AS ingested,
       sum(duplicates) AS duplicates,
       sum(quarantined) AS quarantined
FROM v_collected_objects
{where("campaign", "vantage", time="collected_at")}
GROUP BY 1, 2
ORDER BY last_collected DESC"""
    # counts only (v_quarantine_counts: per campaign, vantage, run, reason class and hour; no
    # file names or lines): the hours the range touches, each counting whole
    quarantine = """
SELECT reason_class, sum(lines)::bigint AS lines, count(DISTINCT hour) AS hours, max(last_quarantined) AS last_quarantined
FROM v_quarantine_counts
WHERE ($__timeFilter(hour) OR hour = date_trunc('hour', $__timeFrom()::timestamptz, 'UTC'))
  AND (campaign IS NULL OR campaign = ANY(ARRAY[${campaign:sqlstring}]::text[]))
GROUP BY 1
ORDER BY lines DESC, 1"""
    aw = where("atlas_campaign", time=None)
    credits_total = f"""
SELECT coalesce(sum(credits) FILTER (WHERE charged), 0) AS credits_spent,
       coalesce(sum(credits) FILTER (WHERE NOT charged), 0) AS credits_not_charged,
       coalesce(sum(results), 0) AS results
FROM v_atlas_credits
{aw}"""
    credits = f"""
SELECT campaign, role, type, count(*) AS measurements, sum(results) AS results, sum(credits) AS credits, bool_and(charged) AS charged,
       max(last_result) AS last_result
FROM v_atlas_credits
{aw}
GROUP BY 1, 2, 3
ORDER BY 1, 2, 3"""
    rows = [
        ("Vantages", [
            table_panel("Per vantage: units run, last measurement, ingest lag", """
Question: is every vantage running, and are its records arriving? Runs, planner units and records
per vantage (n), failures and their share with its Wilson 95 % interval, the first and last
measurement and the hours since the last (to the range's end or now), the last ingest, and the
ingest lag (seconds from started_at to ingested_at: median and max, over the vantage's n records).
Coloured: silent over 2 / 6 hours, max lag over 1 / 6 hours, failed share over 1 / 5 %. From the ingest rollups (a run's records of one
ingest batch count whole when they overlap the range; units per UTC day the range touches); the
median is read from 2 % log buckets: within 1 % of percentile_disc (nearest rank) over the records,
a negative lag read as 0; the max is exact.""", per_vantage, {
                "vantage_id": ("vantage", None), "region": ("region", None), "runs": ("runs", None), "units": ("units", None),
                "records": ("records (n)", None), "failed": ("failed", None), "failed_share": ("failed share", "percentunit"),
                "failed_share_lo": ("failed 95 % CI low", "percentunit"), "failed_share_hi": ("failed 95 % CI high", "percentunit"),
                "first_measured": ("first measured", "dateTimeAsIso"), "last_measured": ("last measured", "dateTimeAsIso"),
                "silent_h": ("hours since last", "h"), "last_ingested": ("last ingested", "dateTimeAsIso"),
                "lag_p50_s": ("median ingest lag", "s"), "lag_max_s": ("max ingest lag", "s")})
            .override_by_name("silent_h", _coloured(*SILENT_H)).override_by_name("lag_max_s", _coloured(*LAG_S))
            .override_by_name("failed_share", _coloured(*FAILED)),
            bar_panel("Units run per vantage", """
Question: how much did each vantage run, of which kind? Distinct planner units per vantage (DNS,
page loads, other kinds) on the UTC days the range touches (rollup v_unit_daily).""", units_wide, {"vantage_id": ("vantage", None), "dns_units": ("DNS", None),
                                             "page_load_units": ("page loads", None), "other_units": ("other", None)}, stacked=True),
            time_series("Ingest lag over time", """
Question: is the pipeline keeping up? Median seconds from measurement to store per time bucket and
vantage (with S3 shipping: the agent's upload plus the collector's pass). From the ingest rollups:
a run's records of one ingest batch are in the time bucket of their first measurement; the median
is read from 2 % log buckets: within 1 % of percentile_disc over the records. The dashed lines: 1 and
6 hours.""", lag, unit="s")
            .thresholds(dash.ThresholdsConfig().mode(ThresholdsMode.ABSOLUTE).steps(_steps(*LAG_S)))
            .thresholds_style(cb.GraphThresholdsStyleConfig().mode(common.GraphThresholdsStyleMode.DASHED)),
        ]),
        ("Collection and ingest", [
            table_panel("Last upload per vantage (S3 collector)", """
Question: when did each vantage's results last arrive in the bucket and get collected? Objects
collected per campaign and vantage (from their keys), the last collection time, bytes, and the
records ingested, duplicated and quarantined. Empty when results are ingested from local files.""",
                        uploads, {"campaign": ("campaign", None), "vantage_id": ("vantage", None), "objects": ("objects", None),
                                  "runs": ("runs", None), "last_collected": ("last collected", "dateTimeAsIso"),
                                  "bytes": ("bytes", "decbytes"), "ingested": ("ingested", None),
                                  "duplicates": ("duplicates", None), "quarantined": ("quarantined", None)}),
            table_panel("Quarantined lines by reason", """
Question: what could not be stored, and is it growing? Open quarantine lines per reason (counts
only: the lines themselves are for the reader role, v_quarantine), the hours with any, and the
last time; lines of local files have no campaign and are always counted.""", quarantine, {
                "reason_class": ("reason", None), "lines": ("lines", None), "hours": ("hours", None),
                "last_quarantined": ("last", "dateTimeAsIso")}, w=12),
        ]),
        ("RIPE Atlas credits", [
            stat_panel("Atlas credits", """
Question: what did the Atlas campaign cost? Credits charged by RIPE Atlas for the results delivered
(cost model of atlas/definitions.py), credits of results that were not charged (the testbed's
probes, our own server pings: what they would cost), and the result count. v_atlas_credits sums
each result's credits at ingest (atlas_credit_sums): exact.""", credits_total, {
                "credits_spent": ("credits spent", "none"), "credits_not_charged": ("not charged", "none"),
                "results": ("results", "none")}, w=12),
            table_panel("Atlas credits per measurement role", """
Question: which measurements cost what? Per campaign, role and type: measurements, results,
credits and whether Atlas charged them (from atlas_credit_sums, kept at ingest: exact).""", credits, {
                "campaign": ("Atlas campaign", None), "role": ("role", None), "type": ("type", None),
                "measurements": ("measurements", None), "results": ("results", None), "credits": ("credits", "none"),
                "charged": ("charged", None), "last_result": ("last result", "dateTimeAsIso")}, w=12),
        ]),
    ]
    return new_dashboard(UID, "Campaign health", __doc__.split("\n\n")[0], VARS, rows)
