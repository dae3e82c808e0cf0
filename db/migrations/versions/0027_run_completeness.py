"""Run manifests, the collector's listing watermarks and ``v_run_completeness``.

An agent ships each run's ``manifest.json`` last (results/<campaign>/<vantage>/<run>/manifest.json:
the units planned, and per shipped object its key, sha256 of the gzipped body, bytes and
records). The collector (collectors/s3.py) stores what it read:

- ``run_manifests``: one row per manifest object (bucket, key) with the run it names, its ETag,
  the planned units and the body; a manifest that cannot be read or has the wrong schema keeps
  a row with ``error`` (one line) and no units, so it is not downloaded again until it changes.
- ``run_manifest_objects``: the manifest's objects, one row per unit's object.
- ``collected_objects.sha256``: sha256 of the bytes the collector downloaded, to check them
  against the manifest's (NULL for objects collected before this revision).
- ``collect_watermarks``: per (bucket, results/<campaign>/<vantage>/ prefix) the greatest run id
  a listing has seen, shared by every collector of the store, so a pass lists only recent runs.

``v_run_completeness`` (the reader's) puts them together: per run, units planned, collected,
missing and quarantined, and the missing objects by key.

Revision ID: 0027_run_completeness
Revises: 0026_shaped_misfits
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

from db.migrations.views import create_view, drop_view

revision = "0027_run_completeness"
down_revision = "0026_shaped_misfits"
branch_labels = None
depends_on = None

WRITER = "dnscamp_writer"


def upgrade() -> None:
    op.add_column("collected_objects", sa.Column("sha256", sa.Text, nullable=True))
    op.create_table(
        "run_manifests",
        sa.Column("bucket", sa.Text, nullable=False),
        sa.Column("key", sa.Text, nullable=False),
        sa.Column("campaign", sa.Text, nullable=False),
        sa.Column("vantage", sa.Text, nullable=False),
        sa.Column("run", sa.Text, nullable=False),
        sa.Column("etag", sa.Text, nullable=False),
        sa.Column("region", sa.Text, nullable=True),
        sa.Column("instance_id", sa.Text, nullable=True),
        sa.Column("units_planned", pg.ARRAY(sa.Text), nullable=True),
        sa.Column("body", pg.JSONB, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("collected_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("bucket", "key", name="pk_run_manifests"),
    )
    op.create_index("ix_run_manifests_run", "run_manifests", ["campaign", "vantage", "run"])
    op.create_table(
        "run_manifest_objects",
        sa.Column("bucket", sa.Text, nullable=False),
        sa.Column("manifest_key", sa.Text, nullable=False),
        sa.Column("unit", sa.Text, nullable=False),
        sa.Column("key", sa.Text, nullable=False),
        sa.Column("sha256", sa.Text, nullable=False),
        sa.Column("bytes", sa.BigInteger, nullable=False),
        sa.Column("records", sa.Integer, nullable=False),
        sa.PrimaryKeyConstraint("bucket", "manifest_key", "unit", name="pk_run_manifest_objects"),
        sa.ForeignKeyConstraint(["bucket", "manifest_key"], ["run_manifests.bucket", "run_manifests.key"],
                                name="fk_run_manifest_objects_manifest", ondelete="CASCADE"),  # fmt: skip
    )
    op.create_table(
        "collect_watermarks",
        sa.Column("bucket", sa.Text, nullable=False),
        sa.Column("prefix", sa.Text, nullable=False),
        sa.Column("run", sa.Text, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("bucket", "prefix", name="pk_collect_watermarks"),
    )
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON run_manifests, run_manifest_objects TO {WRITER}")
    op.execute(f"GRANT SELECT, INSERT, UPDATE ON collect_watermarks TO {WRITER}")
    create_view(op, revision, "v_run_completeness")


def downgrade() -> None:
    drop_view(op, "v_run_completeness")  # a new view: nothing earlier to restore
    op.drop_table("collect_watermarks")
    op.drop_table("run_manifest_objects")
    op.drop_index("ix_run_manifests_run", table_name="run_manifests")
    op.drop_table("run_manifests")
    op.drop_column("collected_objects", "sha256")
