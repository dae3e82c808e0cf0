-- Records per UTC day x campaign x vantage x region x kind x planner unit (the rollup
-- unit_daily, maintained by every writer; issue 16): which units each vantage ran on a day
-- (count(DISTINCT unit) over the days of a range); unit NULL: the records without one.
CREATE OR REPLACE VIEW v_unit_daily AS
SELECT day, campaign, vantage_id, region, kind, unit, n AS records
FROM unit_daily;
