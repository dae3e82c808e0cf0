-- ping records with per-record RTT statistics derived from the per-probe RTTs.
-- Body values are read with JSON_VALUE, which gives NULL (never an error) for a value of
-- another JSON type or out of the column's range (e.g. a "sent": 3.0 stored before records v1
-- became strict); the statistics are computed so that no finite RTT can overflow them.
-- Storage (docs/store.md): generic_results rows (the body as jsonb) and their context.
CREATE OR REPLACE VIEW v_ping AS
SELECT r.id, c.campaign, c.run, c.vantage_id, c.provider, c.region, c.network_profile,
       r.started_at, r.status, r.error,
       r.body ->> 'target' AS target,
       r.body ->> 'address' AS address,
       r.body ->> 'protocol' AS protocol,
       JSON_VALUE(r.body, '$.port' RETURNING int) AS port,
       b.sent,
       b.received,
       CASE WHEN b.sent > 0 THEN 1.0 - b.received::float8 / b.sent END AS loss,
       s.rtt_min_ms, s.rtt_avg_ms, s.rtt_median_ms, s.rtt_max_ms,
       r.body -> 'rtts_ms' AS rtts_ms
FROM generic_results r
JOIN contexts c ON c.id = r.ctx_id
CROSS JOIN LATERAL (
    SELECT JSON_VALUE(r.body, '$.sent' RETURNING int) AS sent,
           JSON_VALUE(r.body, '$.received' RETURNING int) AS received
) b
LEFT JOIN LATERAL (
    -- avg in numeric: a float8 sum of large RTTs could overflow; rounded to 1e-300 so that a
    -- mean below float8's normal range (e.g. of 5e-324 RTTs) is 0, not a float8 underflow error
    SELECT min(x) AS rtt_min_ms, round(avg(x::numeric), 300)::float8 AS rtt_avg_ms,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY x) AS rtt_median_ms,
           max(x) AS rtt_max_ms
    FROM jsonb_path_query(r.body, 'lax $.rtts_ms[*]') AS e,
         LATERAL JSON_VALUE(e, '$' RETURNING float8) AS x
    WHERE x IS NOT NULL
) s ON true
WHERE r.kind = 'ping';
