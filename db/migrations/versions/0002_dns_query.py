"""DNS queries: the v_dns_query view over dns_query records.

Revision ID: 0002_dns_query
Revises: 0001_foundation
"""

from alembic import op

from db.migrations.views import create_view, drop_view

revision = "0002_dns_query"
down_revision = "0001_foundation"
branch_labels = None
depends_on = None


def upgrade() -> None:
    create_view(op, revision, "v_dns_query")


def downgrade() -> None:
    drop_view(op, "v_dns_query")
