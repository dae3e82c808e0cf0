-- Completeness of each run: what its manifest (run_manifests, migration 0027: the agent ships
-- results/<campaign>/<vantage>/<run>/manifest.json last) says was planned and shipped, against
-- what the collector took (collected_objects) and what is in quarantine. One row per
-- (bucket, campaign, vantage, run) known from a manifest, read or corrupt, or from a collected
-- record object at results/<campaign>/<vantage>/<run>/<unit>.jsonl(.gz) (split_part, not a
-- regular expression: 100,000 keys matched by one took seconds).
-- - With a readable manifest, the run's units are its planned units and the units of its
--   objects. A unit is collected when collected_objects holds its object's key with the
--   manifest's sha256 (or no sha256: collected before the collector kept one); otherwise it
--   is missing, by unit id (missing_units) and, when the manifest names its object, by key
--   (missing_objects). A unit is quarantined when open quarantine rows name its object.
-- - Without a readable manifest (never shipped, or corrupt: manifest_error says why), the
--   units are those of the collected objects; nothing can be known missing, and manifest is
--   false, which is itself what is incomplete.
-- Each input is read once and aggregated (no per-run scan of collected_objects): the whole
-- view over 100,000 objects is one pass over each table.
CREATE OR REPLACE VIEW v_run_completeness AS
WITH quarantined AS (
    SELECT DISTINCT source_file FROM quarantine WHERE source_file LIKE 's3://%'
), collected AS (
    SELECT o.bucket, split_part(o.key, '/', 2) AS campaign, split_part(o.key, '/', 3) AS vantage_id,
           split_part(o.key, '/', 4) AS run, count(*)::int AS units, count(q.source_file)::int AS quarantined
    FROM collected_objects o
    LEFT JOIN quarantined q ON q.source_file = 's3://' || o.bucket || '/' || o.key
    WHERE o.key LIKE 'results/%/%/%/%' AND (o.key LIKE '%.jsonl' OR o.key LIKE '%.jsonl.gz')
      AND split_part(o.key, '/', 6) = '' AND split_part(o.key, '/', 2) <> '' AND split_part(o.key, '/', 3) <> ''
      AND split_part(o.key, '/', 4) <> ''
    GROUP BY 1, 2, 3, 4
), units AS (
    SELECT m.bucket, m.key AS manifest_key, u.unit, mo.key, c.key IS NOT NULL AS collected,
           q.source_file IS NOT NULL AS quarantined
    FROM run_manifests m
    CROSS JOIN LATERAL (
        SELECT unnest(m.units_planned) AS unit
        UNION
        SELECT o.unit FROM run_manifest_objects o WHERE o.bucket = m.bucket AND o.manifest_key = m.key
    ) u
    LEFT JOIN run_manifest_objects mo ON mo.bucket = m.bucket AND mo.manifest_key = m.key AND mo.unit = u.unit
    LEFT JOIN collected_objects c
           ON c.bucket = mo.bucket AND c.key = mo.key AND (c.sha256 IS NULL OR c.sha256 = mo.sha256)
    LEFT JOIN quarantined q ON c.key IS NOT NULL AND q.source_file = 's3://' || c.bucket || '/' || c.key
    WHERE m.error IS NULL
), per_manifest AS (
    SELECT bucket, manifest_key,
           count(*) FILTER (WHERE collected)::int AS units_collected,
           count(*) FILTER (WHERE NOT collected)::int AS units_missing,
           count(*) FILTER (WHERE quarantined)::int AS units_quarantined,
           coalesce(array_agg(unit ORDER BY unit) FILTER (WHERE NOT collected), '{}') AS missing_units,
           coalesce(array_agg(key ORDER BY key) FILTER (WHERE NOT collected AND key IS NOT NULL), '{}') AS missing_objects
    FROM units
    GROUP BY 1, 2
)
SELECT coalesce(m.campaign, c.campaign) AS campaign,
       coalesce(m.vantage, c.vantage_id) AS vantage_id,
       coalesce(m.run, c.run) AS run,
       coalesce(m.bucket, c.bucket) AS bucket,
       (m.key IS NOT NULL AND m.error IS NULL) AS manifest,
       m.error AS manifest_error,
       m.region,
       m.instance_id,
       cardinality(m.units_planned) AS units_planned,
       CASE WHEN m.error IS NULL AND m.key IS NOT NULL THEN coalesce(p.units_collected, 0) ELSE coalesce(c.units, 0) END
           AS units_collected,
       CASE WHEN m.error IS NULL AND m.key IS NOT NULL THEN coalesce(p.units_missing, 0) ELSE 0 END AS units_missing,
       CASE WHEN m.error IS NULL AND m.key IS NOT NULL THEN coalesce(p.units_quarantined, 0) ELSE coalesce(c.quarantined, 0) END
           AS units_quarantined,
       CASE WHEN m.error IS NULL AND m.key IS NOT NULL THEN coalesce(p.missing_units, '{}') ELSE '{}' END AS missing_units,
       CASE WHEN m.error IS NULL AND m.key IS NOT NULL THEN coalesce(p.missing_objects, '{}') ELSE '{}' END AS missing_objects,
       m.collected_at AS manifest_collected_at
FROM run_manifests m
FULL JOIN collected c ON c.bucket = m.bucket AND c.campaign = m.campaign AND c.vantage_id = m.vantage AND c.run = m.run
LEFT JOIN per_manifest p ON p.bucket = m.bucket AND p.manifest_key = m.key;
