-- Every record's envelope (no body): the entry point for counting and failure rates.
-- Storage (docs/store.md): dns_queries and generic_results rows, their context
-- (campaign, run, vantage), environment and ingest batch, LEFT JOINed on their primary keys
-- (every id exists) so that a query reading none of a dimension's columns does not join it.
CREATE OR REPLACE VIEW v_results AS
SELECT x.id, c.kind, c.campaign, c.run, x.unit, c.vantage_id, c.provider, c.region, c.network_profile,
       x.started_at, x.status, x.error, x.status = 'ok' AS ok,
       e.envb ->> 'link_backend' AS link_backend,
       b.ingested_at
FROM (SELECT id, ctx_id, env_id, batch_id, started_at, unit, status, error FROM dns_queries
      UNION ALL
      SELECT id, ctx_id, env_id, batch_id, started_at, unit, status, error FROM generic_results) x
LEFT JOIN contexts c ON c.id = x.ctx_id
LEFT JOIN environments e ON e.id = x.env_id
LEFT JOIN ingest_batches b ON b.id = x.batch_id;
