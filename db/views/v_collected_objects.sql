-- The S3 collector's ledger (collected_objects, migration 0010), one row per result object it
-- ingested, with the campaign, vantage, run and unit read from the key the agent ships under
-- (results/<campaign>/<vantage>/<run>/<unit>.jsonl.gz, vantage_agent/ship.py; NULL parts for
-- a key of another shape). collected_at is when the collector last ingested the object (an
-- upload is collected at most one collector pass later): what "last upload per vantage" reads.
CREATE OR REPLACE VIEW v_collected_objects AS
SELECT o.bucket,
       o.key,
       k.m[1] AS campaign,
       k.m[2] AS vantage_id,
       k.m[3] AS run,
       k.m[4] AS unit,
       o.etag,
       o.size,
       o.ingested,
       o.duplicates,
       o.quarantined,
       o.collected_at
FROM collected_objects o
CROSS JOIN LATERAL (
    SELECT regexp_match(o.key, '(?:^|/)results/([^/]+)/([^/]+)/([^/]+)/([^/]+)\.jsonl(?:\.gz)?$') AS m
) k;
