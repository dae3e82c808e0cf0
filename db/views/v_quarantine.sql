-- Open ingest problems (the quarantine table: lines that could not be stored, deleted when the
-- line later ingests), without the raw text: file, line, reason and when. For lines of an S3
-- object (source_file s3://bucket/results/<campaign>/<vantage>/<run>/<unit>.jsonl.gz) the
-- campaign and vantage are read from the key; NULL for local files and other keys.
-- reason_class: the reason up to its first ':' (e.g. "invalid JSON", "id_conflict"), for counts.
CREATE OR REPLACE VIEW v_quarantine AS
SELECT q.id,
       q.source_file,
       q.line,
       q.reason,
       split_part(q.reason, ':', 1) AS reason_class,
       k.m[1] AS campaign,
       k.m[2] AS vantage_id,
       k.m[3] AS run,
       octet_length(q.raw) AS raw_bytes,
       q.quarantined_at
FROM quarantine q
CROSS JOIN LATERAL (
    SELECT regexp_match(q.source_file, '^s3://[^/]+/(?:.*/)?results/([^/]+)/([^/]+)/([^/]+)/[^/]+$') AS m
) k;
