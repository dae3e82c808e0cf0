"""Collected S3 objects: ``collected_objects`` is the collector's ledger of what it
took from the results bucket (collectors/s3.py): one row per (bucket, key) with the ETag and
size it ingested and the line counts of that ingest. An object whose ETag is unchanged is not
downloaded again; one that changed (re-uploaded) is, and its records dedupe by id and content
hash. The writer (the collector's role) inserts and updates rows; no view, so no frozen SQL.

Revision ID: 0010_collected_objects
Revises: 0009_dns_engine
"""

import sqlalchemy as sa
from alembic import op

revision = "0010_collected_objects"
down_revision = "0009_dns_engine"
branch_labels = None
depends_on = None

WRITER = "dnscamp_writer"


def upgrade() -> None:
    op.create_table(
        "collected_objects",
        sa.Column("bucket", sa.Text, nullable=False),
        sa.Column("key", sa.Text, nullable=False),
        sa.Column("etag", sa.Text, nullable=False),
        sa.Column("size", sa.BigInteger, nullable=False),
        sa.Column("ingested", sa.Integer, nullable=False),
        sa.Column("duplicates", sa.Integer, nullable=False),
        sa.Column("quarantined", sa.Integer, nullable=False),
        sa.Column("collected_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("bucket", "key", name="pk_collected_objects"),
    )
    op.execute(f"GRANT SELECT, INSERT, UPDATE ON collected_objects TO {WRITER}")


def downgrade() -> None:
    op.drop_table("collected_objects")  # its grants go with it
