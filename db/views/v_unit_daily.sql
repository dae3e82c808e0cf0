-- Records per UTC day x campaign x vantage x region x kind x planner unit (the rollup
-- unit_daily, maintained by every writer; one row per vantage and day holding its
-- units and their counts, one row per unit here): which units each vantage ran on a day
-- (count(DISTINCT unit) over the days of a range); unit NULL: the records without one.
CREATE OR REPLACE VIEW v_unit_daily AS
SELECT d.day, d.campaign, d.vantage_id, d.region, d.kind, u.unit, u.n::bigint AS records
FROM unit_daily d
CROSS JOIN LATERAL unnest(d.units, d.unit_counts) AS u(unit, n);
