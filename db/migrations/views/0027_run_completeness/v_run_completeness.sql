-- Completeness of each run: what its manifest (run_manifests, migration 0027: the agent ships
-- results/<campaign>/<vantage>/<run>/manifest.json last) says was planned and shipped, against
-- what the collector took (collected_objects) and what is in quarantine. One row per
-- (bucket, campaign, vantage, run) known from a manifest, read or corrupt, or from a collected
-- record object.
-- - With a readable manifest, the run's units are its planned units and the units of its
--   objects. A unit is collected when collected_objects holds its object's key with the
--   manifest's sha256 (or no sha256: collected before the collector kept one); otherwise it
--   is missing, by unit id (missing_units) and, when the manifest names its object, by key
--   (missing_objects). A unit is quarantined when open quarantine rows name its object.
-- - Without a readable manifest (never shipped, or corrupt: manifest_error says why), the
--   units are those of the collected objects; nothing can be known missing, and manifest is
--   false, which is itself what is incomplete.
CREATE OR REPLACE VIEW v_run_completeness AS
WITH collected AS NOT MATERIALIZED (
    SELECT o.bucket, o.key, o.sha256, k.m[1] AS campaign, k.m[2] AS vantage_id, k.m[3] AS run, k.m[4] AS unit
    FROM collected_objects o
    CROSS JOIN LATERAL (
        SELECT regexp_match(o.key, '(?:^|/)results/([^/]+)/([^/]+)/([^/]+)/([^/]+)\.jsonl(?:\.gz)?$') AS m
    ) k
    WHERE k.m IS NOT NULL
), runs AS (
    SELECT bucket, campaign, vantage AS vantage_id, run FROM run_manifests
    UNION
    SELECT bucket, campaign, vantage_id, run FROM collected
)
SELECT r.campaign,
       r.vantage_id,
       r.run,
       r.bucket,
       (m.key IS NOT NULL AND m.error IS NULL) AS manifest,
       m.error AS manifest_error,
       m.region,
       m.instance_id,
       cardinality(m.units_planned) AS units_planned,
       u.units_collected,
       u.units_missing,
       u.units_quarantined,
       u.missing_units,
       u.missing_objects,
       m.collected_at AS manifest_collected_at
FROM runs r
LEFT JOIN run_manifests m
       ON m.bucket = r.bucket AND m.campaign = r.campaign AND m.vantage = r.vantage_id AND m.run = r.run
CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE x.collected)::int AS units_collected,
           count(*) FILTER (WHERE NOT x.collected)::int AS units_missing,
           count(*) FILTER (WHERE x.collected AND EXISTS (
               SELECT 1 FROM quarantine q WHERE q.source_file = 's3://' || r.bucket || '/' || x.key))::int AS units_quarantined,
           coalesce(array_agg(x.unit ORDER BY x.unit) FILTER (WHERE NOT x.collected), '{}') AS missing_units,
           coalesce(array_agg(x.key ORDER BY x.key) FILTER (WHERE NOT x.collected AND x.key IS NOT NULL), '{}')
               AS missing_objects
    FROM (
        SELECT u.unit, mo.key, c.key IS NOT NULL AS collected
        FROM (
            SELECT unnest(m.units_planned) AS unit
            UNION
            SELECT o.unit FROM run_manifest_objects o WHERE o.bucket = m.bucket AND o.manifest_key = m.key
        ) u
        LEFT JOIN run_manifest_objects mo ON mo.bucket = m.bucket AND mo.manifest_key = m.key AND mo.unit = u.unit
        LEFT JOIN collected_objects c
               ON c.bucket = mo.bucket AND c.key = mo.key AND (c.sha256 IS NULL OR c.sha256 = mo.sha256)
        WHERE m.key IS NOT NULL AND m.error IS NULL
        UNION ALL
        SELECT c.unit, c.key, true
        FROM collected c
        WHERE (m.key IS NULL OR m.error IS NOT NULL)
          AND c.bucket = r.bucket AND c.campaign = r.campaign AND c.vantage_id = r.vantage_id AND c.run = r.run
    ) x
) u;
