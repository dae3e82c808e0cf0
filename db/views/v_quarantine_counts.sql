-- What ingest quarantined, as counts only: per campaign, vantage, run (read from an S3 object's
-- key, NULL for local files), reason class and UTC hour of quarantine, the open lines and the
-- first and last time. No file names, line numbers, reasons' details or raw text: what the
-- dashboards' role (dnscamp_grafana) may read about the quarantine; v_quarantine has the rest.
CREATE OR REPLACE VIEW v_quarantine_counts AS
SELECT campaign,
       vantage_id,
       run,
       reason_class,
       date_trunc('hour', quarantined_at, 'UTC') AS hour,
       count(*)::bigint AS lines,
       min(quarantined_at) AS first_quarantined,
       max(quarantined_at) AS last_quarantined
FROM v_quarantine
GROUP BY campaign, vantage_id, run, reason_class, date_trunc('hour', quarantined_at, 'UTC');
