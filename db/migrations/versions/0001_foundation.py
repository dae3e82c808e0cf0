"""Foundation: results, quarantine, roles, envelope and ping views.

Revision ID: 0001_foundation
Revises:
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB, UUID

from db.migrations.views import create_view, drop_view

revision = "0001_foundation"
down_revision = None
branch_labels = None
depends_on = None

WRITER = "dnscamp_writer"
READER = "dnscamp_reader"
VIEWS = ("v_results", "v_ping", "v_failures")


def _create_role(name: str) -> None:
    # Roles are cluster-wide: create once, tolerate their existence (several databases).
    op.execute(
        f"DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{name}') "
        f"THEN CREATE ROLE {name} LOGIN; END IF; END $$"
    )


def upgrade() -> None:
    op.create_table(
        "results",
        sa.Column("id", UUID(as_uuid=True), primary_key=True),
        sa.Column("schema", sa.Text, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("campaign", sa.Text, nullable=False),
        sa.Column("run", sa.Text, nullable=False),
        sa.Column("unit", sa.Text),
        sa.Column("vantage_id", sa.Text, nullable=False),
        sa.Column("provider", sa.Text, nullable=False),
        sa.Column("region", sa.Text),
        sa.Column("network_profile", sa.Text),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("error", sa.Text),
        sa.Column("env", JSONB, nullable=False),
        sa.Column("body", JSONB, nullable=False),
        sa.Column("source_file", sa.Text),
        sa.Column("source_line", sa.Integer),
        sa.Column("ingested_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    )
    op.create_index("ix_results_campaign_kind_started", "results", ["campaign", "kind", "started_at"])
    op.create_index("ix_results_kind_started", "results", ["kind", "started_at"])
    op.create_index("ix_results_vantage_started", "results", ["vantage_id", "started_at"])
    op.create_index("ix_results_started", "results", ["started_at"])

    op.create_table(
        "quarantine",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("source_file", sa.Text, nullable=False),
        sa.Column("line", sa.Integer, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("raw", sa.Text, nullable=False),
        sa.Column("quarantined_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.UniqueConstraint("source_file", "line", name="uq_quarantine_file_line"),
    )

    _create_role(WRITER)
    _create_role(READER)
    op.execute(f"GRANT USAGE ON SCHEMA public TO {WRITER}, {READER}")
    op.execute(f"GRANT SELECT, INSERT ON results, quarantine TO {WRITER}")
    # Temp staging tables for COPY-based ingest.
    op.execute(f"DO $$ BEGIN EXECUTE format('GRANT TEMPORARY ON DATABASE %I TO {WRITER}', current_database()); END $$")
    # The reader gets nothing on tables: views only (granted by create_view).
    op.execute(f"REVOKE ALL ON results, quarantine FROM {READER}")

    for v in VIEWS:
        create_view(op, revision, v)


def downgrade() -> None:
    for v in reversed(VIEWS):
        drop_view(op, v)
    op.drop_table("quarantine")
    op.drop_table("results")
    # The roles stay: they are cluster-wide and may serve other databases. What this
    # revision granted on the schema and the database goes.
    op.execute(f"REVOKE ALL ON SCHEMA public FROM {WRITER}, {READER}")
    op.execute(f"DO $$ BEGIN EXECUTE format('REVOKE ALL ON DATABASE %I FROM {WRITER}', current_database()); END $$")
