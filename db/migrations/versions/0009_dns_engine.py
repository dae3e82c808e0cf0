"""DNS queries: v_dns_query gains ``engine``, ``engine_version`` and ``engine_run_time_ms``
(which engine timed the query, ours or getdns, its version and its own timing of the call),
NULL for records without them. v_ping gets the fix of its mean RTT (rounded
to 1e-300 so that a mean of subnormal RTTs is 0 instead of a float8 underflow error), which
had been edited into db/views/v_ping.sql without a migration, so stores migrated before that
edit never received it.

Revision ID: 0009_dns_engine
Revises: 0008_ingest_hardening
"""

from alembic import op

from db.migrations.views import create_view, restore_view

revision = "0009_dns_engine"
down_revision = "0008_ingest_hardening"
branch_labels = None
depends_on = None

# view -> the revision whose definition this one replaces (what a downgrade restores)
VIEWS = {"v_ping": "0007_strict_records", "v_dns_query": "0007_strict_records"}


def upgrade() -> None:
    for v in VIEWS:
        create_view(op, revision, v)  # CREATE OR REPLACE: v_dns_query's new columns are the last ones


def downgrade() -> None:
    for v, previous in VIEWS.items():
        restore_view(op, previous, v)
