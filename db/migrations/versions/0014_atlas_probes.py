"""Atlas probe metadata (the QuicSocks geomap): ``atlas_probes`` holds, per campaign
and probe, the country, IPv4 AS, coordinates and status of each probe whose results the
campaign has, and where they came from: the Atlas probe API (``atlas_api``, atlas/probes.py,
``dnscamp atlas probes``) or the documented site of a testbed Atlas-like probe (``testbed``,
testbed/atlas_probes/sites.json). Keyed by campaign as well as probe id: the testbed's probes are
numbered 1..99 like real Atlas probes, and a probe that moves or goes down later keeps the place
and status it had in each campaign. Readers see it through ``v_atlas_probes``.

The writer may also read ``alembic_version``: a collector that logs in as dnscamp_writer
(docker-compose.yml) runs `dnscamp collect`, which checks the schema is at head before it
collects, and `dnscamp db status` as its health check; both read the revision. Reading it
changes nothing: the writer still cannot create or alter anything, so a store behind the head
is migrated by the owner only (the compose file's one-shot migrate service).

Revision ID: 0014_atlas_probes
Revises: 0013_rollups
"""

import sqlalchemy as sa
from alembic import op

from db.migrations.views import create_view, drop_view

revision = "0014_atlas_probes"
down_revision = "0013_rollups"
branch_labels = None
depends_on = None

WRITER = "dnscamp_writer"
VIEWS = ("v_atlas_probes",)


def upgrade() -> None:
    op.create_table(
        "atlas_probes",
        sa.Column("campaign", sa.Text, nullable=False),
        sa.Column("prb_id", sa.Integer, nullable=False),
        sa.Column("country_code", sa.Text),
        sa.Column("asn_v4", sa.BigInteger),
        sa.Column("lat", sa.Float),
        sa.Column("lon", sa.Float),
        sa.Column("status", sa.Text),  # Atlas's status.name: Connected, Disconnected, Abandoned...
        sa.Column("source", sa.Text, nullable=False),  # atlas_api | testbed
        sa.Column("fetched_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("campaign", "prb_id", name="pk_atlas_probes"),
        sa.CheckConstraint("lat BETWEEN -90 AND 90 AND lon BETWEEN -180 AND 180", name="ck_atlas_probes_coords"),
        sa.CheckConstraint("source IN ('atlas_api', 'testbed')", name="ck_atlas_probes_source"),
    )
    op.execute(f"GRANT SELECT, INSERT, UPDATE ON atlas_probes TO {WRITER}")
    op.execute(f"GRANT SELECT ON alembic_version TO {WRITER}")
    for v in VIEWS:
        create_view(op, revision, v)


def downgrade() -> None:
    op.execute(f"REVOKE SELECT ON alembic_version FROM {WRITER}")
    for v in reversed(VIEWS):
        drop_view(op, v)  # a new view: nothing earlier to restore
    op.drop_table("atlas_probes")
