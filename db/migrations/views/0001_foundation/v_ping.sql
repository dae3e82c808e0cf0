-- ping records with per-record RTT statistics derived from the per-probe RTTs.
CREATE OR REPLACE VIEW v_ping AS
SELECT r.id, r.campaign, r.run, r.vantage_id, r.provider, r.region, r.network_profile,
       r.started_at, r.status, r.error,
       r.body ->> 'target' AS target,
       r.body ->> 'address' AS address,
       r.body ->> 'protocol' AS protocol,
       (r.body ->> 'port')::int AS port,
       (r.body ->> 'sent')::int AS sent,
       (r.body ->> 'received')::int AS received,
       CASE WHEN (r.body ->> 'sent')::int > 0
            THEN 1.0 - (r.body ->> 'received')::float8 / (r.body ->> 'sent')::float8 END AS loss,
       s.rtt_min_ms, s.rtt_avg_ms, s.rtt_median_ms, s.rtt_max_ms,
       r.body -> 'rtts_ms' AS rtts_ms
FROM results r
LEFT JOIN LATERAL (
    SELECT min(x::float8) AS rtt_min_ms, avg(x::float8) AS rtt_avg_ms,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY x::float8) AS rtt_median_ms,
           max(x::float8) AS rtt_max_ms
    FROM jsonb_array_elements_text(r.body -> 'rtts_ms') AS x
    WHERE x IS NOT NULL AND x <> 'null'
) s ON true
WHERE r.kind = 'ping';
