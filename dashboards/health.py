"""Dashboard 5, campaign health: what each vantage ran and when, how late its records reached the
store, the S3 objects collected per vantage (last upload), what ingest quarantined, and the RIPE
Atlas credits the campaign's measurements cost. For the operators: not published as a public
dashboard (dashboards.PUBLISHED), readable by the instance's anonymous viewers."""

from __future__ import annotations

from dashboards.panels import bar_panel, new_dashboard, stat_panel, table_panel, time_series, where

UID = "dnscamp-health"
VARS = ("campaign", "region", "vantage", "atlas_campaign")
W = where("campaign", "vantage")
LAG = "extract(epoch FROM ingested_at - started_at)"  # seconds from measurement to the store


def dashboard():
    per_vantage = f"""
SELECT vantage_id, coalesce(region, 'none') AS region,
       count(DISTINCT run) AS runs,
       count(DISTINCT unit) AS units,
       count(*) AS records,
       count(*) FILTER (WHERE status <> 'ok') AS failed,
       min(started_at) AS first_measured,
       max(started_at) AS last_measured,
       max(ingested_at) AS last_ingested,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY {LAG}) AS lag_p50_s,
       max({LAG}) AS lag_max_s
FROM v_results
{W}
GROUP BY 1, 2
ORDER BY 1, 2"""
    units_wide = f"""
SELECT vantage_id,
       count(DISTINCT unit) FILTER (WHERE kind = 'dns_query') AS dns_units,
       count(DISTINCT unit) FILTER (WHERE kind = 'page_load') AS page_load_units,
       count(DISTINCT unit) FILTER (WHERE kind NOT IN ('dns_query', 'page_load')) AS other_units
FROM v_results
{W}
GROUP BY 1
ORDER BY 1"""
    lag = f"""
SELECT $__timeGroup(started_at, $__interval) AS time, vantage_id AS metric,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY {LAG}) AS lag_p50_s
FROM v_results
{W}
GROUP BY 1, 2
ORDER BY 1, 2"""
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
    quarantine = """
SELECT reason_class, count(*) AS lines, count(DISTINCT source_file) AS files, max(quarantined_at) AS last_quarantined
FROM v_quarantine
WHERE $__timeFilter(quarantined_at)
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
per vantage, failures, the first and last measurement, the last ingest, and the ingest lag (seconds
from started_at to ingested_at: median and max).""", per_vantage, {
                "vantage_id": ("vantage", None), "region": ("region", None), "runs": ("runs", None), "units": ("units", None),
                "records": ("records", None), "failed": ("failed", None), "first_measured": ("first measured", "dateTimeAsIso"),
                "last_measured": ("last measured", "dateTimeAsIso"), "last_ingested": ("last ingested", "dateTimeAsIso"),
                "lag_p50_s": ("median ingest lag", "s"), "lag_max_s": ("max ingest lag", "s")}),
            bar_panel("Units run per vantage", """
Question: how much did each vantage run, of which kind? Distinct planner units per vantage (DNS,
page loads, other kinds).""", units_wide, {"vantage_id": ("vantage", None), "dns_units": ("DNS", None),
                                             "page_load_units": ("page loads", None), "other_units": ("other", None)}, stacked=True),
            time_series("Ingest lag over time", """
Question: is the pipeline keeping up? Median seconds from measurement to store per time bucket and
vantage (with S3 shipping: the agent's upload plus the collector's pass).""", lag, unit="s"),
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
Question: what could not be stored, and is it growing? Open quarantine lines per reason, files
and the last time; lines of local files have no campaign and are always counted.""", quarantine, {
                "reason_class": ("reason", None), "lines": ("lines", None), "files": ("files", None),
                "last_quarantined": ("last", "dateTimeAsIso")}, w=12),
        ]),
        ("RIPE Atlas credits", [
            stat_panel("Atlas credits", """
Question: what did the Atlas campaign cost? Credits charged by RIPE Atlas for the results delivered
(cost model of atlas/definitions.py), credits of results that were not charged (the testbed's
probes, our own server pings: what they would cost), and the result count.""", credits_total, {
                "credits_spent": ("credits spent", "none"), "credits_not_charged": ("not charged", "none"),
                "results": ("results", "none")}, w=12),
            table_panel("Atlas credits per measurement role", """
Question: which measurements cost what? Per campaign, role and type: measurements, results,
credits and whether Atlas charged them.""", credits, {
                "campaign": ("Atlas campaign", None), "role": ("role", None), "type": ("type", None),
                "measurements": ("measurements", None), "results": ("results", None), "credits": ("credits", "none"),
                "charged": ("charged", None), "last_result": ("last result", "dateTimeAsIso")}, w=12),
        ]),
    ]
    return new_dashboard(UID, "Campaign health", __doc__.split("\n\n")[0], VARS, rows)
