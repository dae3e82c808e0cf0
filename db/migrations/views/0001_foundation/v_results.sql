-- Every record's envelope (no body): the entry point for counting and failure rates.
CREATE OR REPLACE VIEW v_results AS
SELECT id, kind, campaign, run, unit, vantage_id, provider, region, network_profile,
       started_at, status, error, status = 'ok' AS ok,
       env ->> 'link_backend' AS link_backend,
       ingested_at
FROM results;
