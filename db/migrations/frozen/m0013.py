"""Migration 0013_rollups's triggers on the ``results`` view, frozen (0022_hourly_keys's
downgrade restores the function as this revision wrote it)."""

# Rows inserted into or deleted from the results view (the old table's writers, tests) are
# counted too. INSTEAD OF triggers fire in name order: results_count_delete before
# results_delete (the record's context is still there), results_tally_insert after
# results_insert (it is there already).
TRIGGERS_SQL = """
CREATE FUNCTION dnscamp_results_rollups() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r results%ROWTYPE;
    sign int := CASE TG_OP WHEN 'INSERT' THEN 1 ELSE -1 END;
    ctx int;
    b int;
BEGIN
    IF TG_OP = 'INSERT' THEN r := NEW; ELSE r := OLD; END IF;
    SELECT x.ctx_id INTO ctx FROM (SELECT ctx_id FROM dns_queries WHERE id = r.id AND started_at = r.started_at
                                   UNION ALL
                                   SELECT ctx_id FROM generic_results WHERE id = r.id AND started_at = r.started_at) x;
    INSERT INTO result_counts (ctx_id, status, n) VALUES (ctx, r.status, sign)
    ON CONFLICT ON CONSTRAINT pk_result_counts DO UPDATE SET n = result_counts.n + EXCLUDED.n;
    DELETE FROM result_counts WHERE ctx_id = ctx AND status = r.status AND n = 0;
    IF r.kind <> 'dns_query' THEN
        RETURN r;
    END IF;
    IF r.status = 'ok' AND jsonb_typeof(r.body -> 't_start') = 'number' AND jsonb_typeof(r.body -> 't_response') = 'number'
       AND JSON_VALUE(r.body, '$.t_start' RETURNING bigint) IS NOT NULL
       AND JSON_VALUE(r.body, '$.t_response' RETURNING bigint) IS NOT NULL THEN
        b := dnscamp_hist_bucket((JSON_VALUE(r.body, '$.t_response' RETURNING bigint)::numeric
                                  - JSON_VALUE(r.body, '$.t_start' RETURNING bigint))::float8 / 1e6);
    END IF;
    INSERT INTO dns_hourly AS h (hour, campaign, vantage_id, network_profile, resolver, transport, n, failures, buckets,
                                 counts)
    VALUES (date_trunc('hour', r.started_at, 'UTC'), r.campaign, r.vantage_id, r.network_profile,
            r.body ->> 'resolver', r.body ->> 'transport', sign, sign * (r.status <> 'ok')::int,
            CASE WHEN b IS NULL THEN '{}'::smallint[] ELSE ARRAY[b]::smallint[] END,
            CASE WHEN b IS NULL THEN '{}'::int[] ELSE ARRAY[sign] END)
    ON CONFLICT ON CONSTRAINT uq_dns_hourly DO UPDATE SET n = h.n + EXCLUDED.n, failures = h.failures + EXCLUDED.failures,
        (buckets, counts) = (SELECT m.buckets, m.counts FROM dnscamp_hist_merge(h.buckets, h.counts, EXCLUDED.buckets,
                                                                                  EXCLUDED.counts) m);
    DELETE FROM dns_hourly WHERE n = 0 AND hour = date_trunc('hour', r.started_at, 'UTC') AND campaign = r.campaign
        AND vantage_id = r.vantage_id AND network_profile IS NOT DISTINCT FROM r.network_profile
        AND resolver IS NOT DISTINCT FROM r.body ->> 'resolver' AND transport IS NOT DISTINCT FROM r.body ->> 'transport';
    RETURN r;
END $$;
CREATE TRIGGER results_tally_insert INSTEAD OF INSERT ON results FOR EACH ROW EXECUTE FUNCTION dnscamp_results_rollups();
CREATE TRIGGER results_count_delete INSTEAD OF DELETE ON results FOR EACH ROW EXECUTE FUNCTION dnscamp_results_rollups();
"""
