"""Bounded, least-privilege reading: the dashboards' role ``dnscamp_grafana`` and limits on it
and on ``dnscamp_reader``.

Grafana lets any of its users send any SQL to its datasource (POST /api/ds/query), so what the
datasource's role can read and how long it can run is what a Grafana user can. ``dnscamp_grafana``
(LOGIN; its password is set where the reader's is: the embedded store's passfile, or the compose
store's first start) reads aggregates only:

- the rollup views, ``v_contexts``, ``v_atlas_credits`` and ``v_atlas_probes`` (a probe's public
  Atlas metadata: country, AS, coordinates);
- ``v_quicsocks_savings`` and ``v_collected_objects`` without their address and object-name
  columns (column-level grants: a query naming probe_addr, resolver, configured_resolver,
  bucket, key or etag, or ``SELECT *``, is refused);
- the quarantine as counts (``v_quarantine_counts``, new here: no file names, lines or text).

Never the record views (v_results, v_dns_query, v_page_load, v_ping, v_atlas_ping, v_atlas_dns,
v_failures, v_run_completeness, v_quarantine). Both roles get a connection limit and per-role
defaults (statement_timeout, work_mem, idle_in_transaction_session_timeout) and a ceiling on
temporary files (temp_file_limit, which only a superuser may change); docs/store.md "Roles and
limits" gives the values and why. Role settings are cluster-wide, like the roles: setting them
needs the owner to be a superuser (or to hold CREATEROLE and SET on temp_file_limit).

A later migration that re-creates one of these views (restore_view drops it) grants it to
dnscamp_grafana again, from GRAFANA_VIEWS / GRAFANA_COLUMNS of its own revision.

Revision ID: 0029_grafana_role
Revises: 0028_interval_functions
"""

from alembic import op

from db.migrations.views import create_view, drop_view

revision = "0029_grafana_role"
down_revision = "0028_interval_functions"
branch_labels = None
depends_on = None

GRAFANA = "dnscamp_grafana"
READER = "dnscamp_reader"
GRAFANA_VIEWS = (
    "v_dns_hourly", "v_dns_hourly_hist", "v_dns_hourly_status", "v_dns_conn_daily", "v_dns_conn_daily_hist",
    "v_dns_name_daily", "v_page_load_daily", "v_page_load_daily_hist", "v_page_load_url_daily_hist",
    "v_ingest_daily", "v_ingest_lag_hist", "v_unit_daily", "v_contexts", "v_atlas_credits", "v_atlas_probes",
    "v_quarantine_counts",
)
# views the role reads only some columns of: everything but addresses and object names
GRAFANA_COLUMNS = {
    "v_quicsocks_savings": ("campaign", "prb_id", "probe_asn", "resolver_asn", "isp_resolver", "rtt_dns_ms",
                            "rtt_server_ms", "rtt_direct_ms", "status_quo_ms", "proposal_ms", "status_quo_retry_ms",
                            "proposal_retry_ms", "saving_ms", "saving_retry_ms"),
    "v_collected_objects": ("campaign", "vantage_id", "run", "unit", "size", "ingested", "duplicates", "quarantined",
                            "collected_at"),
}
# Grafana: its datasource opens at most 8 connections (provisioning maxOpenConns), two spare for
# an operator; the slowest panel took 1.5 s over 30 days at 10 M records (docs/dashboards.md
# "Query times"), so 15 s leaves ten times that and still frees the store quickly.
# The reader: researchers, `dnscamp report`, `export`; a bound on a forgotten query, not a
# nuisance (SET statement_timeout per connection raises it).
LIMITS = {
    GRAFANA: {"connection_limit": 10, "statement_timeout": "15s", "work_mem": "16MB",
              "idle_in_transaction_session_timeout": "30s", "temp_file_limit": "256MB"},
    READER: {"connection_limit": 20, "statement_timeout": "30min", "work_mem": "64MB",
             "idle_in_transaction_session_timeout": "10min", "temp_file_limit": "10GB"},
}


def upgrade() -> None:
    # Roles are cluster-wide: create once (no password: the store's setup sets it), tolerate it
    op.execute(f"DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{GRAFANA}') "
               f"THEN CREATE ROLE {GRAFANA} LOGIN; END IF; END $$")
    op.execute(f"GRANT USAGE ON SCHEMA public TO {GRAFANA}")
    create_view(op, revision, "v_quarantine_counts")
    op.execute(f"GRANT SELECT ON {', '.join(GRAFANA_VIEWS)} TO {GRAFANA}")
    for view, cols in GRAFANA_COLUMNS.items():
        op.execute(f"GRANT SELECT ({', '.join(cols)}) ON {view} TO {GRAFANA}")
    for role, limits in LIMITS.items():
        op.execute(f"ALTER ROLE {role} CONNECTION LIMIT {limits['connection_limit']}")
        for name, value in limits.items():
            if name != "connection_limit":
                op.execute(f"ALTER ROLE {role} SET {name} = '{value}'")


def downgrade() -> None:
    # The grafana role stays (cluster-wide: other databases may grant it), without its limits
    # and without anything in this database, like the reader and writer at base.
    for role, limits in LIMITS.items():
        op.execute(f"ALTER ROLE {role} CONNECTION LIMIT -1")
        for name in limits:
            if name != "connection_limit":
                op.execute(f"ALTER ROLE {role} RESET {name}")
    for view in GRAFANA_COLUMNS:
        op.execute(f"REVOKE ALL ON {view} FROM {GRAFANA}")
    op.execute(f"REVOKE ALL ON {', '.join(GRAFANA_VIEWS)} FROM {GRAFANA}")
    drop_view(op, "v_quarantine_counts")  # a new view: nothing earlier to restore
    op.execute(f"REVOKE ALL ON SCHEMA public FROM {GRAFANA}")
