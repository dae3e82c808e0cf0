"""Migration 0020_compact_rollups's storage options of the rollup tables and its guard for
PostgreSQL 17's MAINTAIN privilege, frozen (0022_hourly_keys's new dns_hourly takes both)."""

OPTIONS = {"autovacuum_vacuum_scale_factor": "0", "autovacuum_vacuum_threshold": "1000",
           "autovacuum_vacuum_cost_delay": "0"}  # fmt: skip
# MAINTAIN (VACUUM, ANALYZE, ... by a role that does not own the table) exists from PostgreSQL 17
IF_MAINTAIN = "DO $$ BEGIN IF current_setting('server_version_num')::int >= 170000 THEN EXECUTE '{}'; END IF; END $$"
