-- RIPE Atlas credits per measurement, from the results delivered (atlas_results_raw) and the
-- "Measurement Cost Model" that atlas/definitions.py prices plans with: ping N packets of S
-- octets cost N * (S / 1500 + 1) per result, DNS 10 per result over UDP and 20 over TCP, and a
-- one-off measurement twice that. N, S and the protocol are read from each raw result (its
-- "sent", "size", "proto"); one-off unless the registered definition says is_oneoff = false
-- (dnscamp submits one-offs). credits: what Atlas charges for these results; charged: whether
-- Atlas charged them at all (false for our own server pings, role server_resolver or a
-- negative msm_id, and for the testbed's offline probes, definition.offline): the testbed's
-- campaigns show what the same results would cost.
-- Since 0018_health_rollups it reads atlas_credit_sums (per campaign label, measurement and
-- type: results, the sum of each result's credits by dnscamp_atlas_unit_credits, first and
-- last timestamp; kept by triggers on atlas_results_raw) instead of every raw result; the
-- measurement's role, one-off factor and charged flag are joined here, at read time.
CREATE OR REPLACE VIEW v_atlas_credits AS
WITH r AS (
    SELECT COALESCE(x.campaign, m.campaign) AS campaign,
           x.msm_id,
           m.role,
           x.type,
           x.results,
           x.first_result,
           x.last_result,
           COALESCE(JSON_VALUE(m.definition, '$.is_oneoff' RETURNING boolean), true) AS oneoff,
           NOT (COALESCE(m.role, '') = 'server_resolver' OR x.msm_id < 0
                OR COALESCE(JSON_VALUE(m.definition, '$.offline' RETURNING boolean), false)
                OR COALESCE(JSON_VALUE(m.definition, '$.local' RETURNING boolean), false)) AS charged,
           x.unit_credits
    FROM atlas_credit_sums x
    LEFT JOIN atlas_measurements m ON m.msm_id = x.msm_id
)
SELECT campaign,
       msm_id,
       role,
       type,
       bool_and(charged) AS charged,
       sum(results)::bigint AS results,
       min(first_result) AS first_result,
       max(last_result) AS last_result,
       sum(unit_credits * CASE WHEN oneoff THEN 2 ELSE 1 END)::bigint AS credits
FROM r
GROUP BY campaign, msm_id, role, type;
