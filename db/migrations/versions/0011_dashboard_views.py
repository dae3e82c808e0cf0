"""Reader views for the campaign-health dashboard: ``v_collected_objects`` (the S3
collector's ledger with campaign / vantage / run / unit read from each key: last upload per
vantage), ``v_quarantine`` (open ingest problems without their raw text, campaign and vantage
from S3 keys: quarantine counts) and ``v_atlas_credits`` (RIPE Atlas credits per measurement
from the results delivered, by the cost model atlas/definitions.py prices plans with). Grafana
reads views only, as dnscamp_reader, and these tables had none. No existing view changes.

Revision ID: 0011_dashboard_views
Revises: 0010_collected_objects
"""

from alembic import op

from db.migrations.views import create_view, drop_view

revision = "0011_dashboard_views"
down_revision = "0010_collected_objects"
branch_labels = None
depends_on = None

VIEWS = ("v_collected_objects", "v_quarantine", "v_atlas_credits")


def upgrade() -> None:
    for v in VIEWS:
        create_view(op, revision, v)


def downgrade() -> None:
    for v in reversed(VIEWS):
        drop_view(op, v)  # new views: nothing earlier to restore
