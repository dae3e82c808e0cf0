"""Page loads: the v_page_load view over page_load records.

Revision ID: 0003_page_load
Revises: 0002_dns_query
"""

from alembic import op

from db.migrations.views import create_view, drop_view

revision = "0003_page_load"
down_revision = "0002_dns_query"
branch_labels = None
depends_on = None


def upgrade() -> None:
    create_view(op, revision, "v_page_load")


def downgrade() -> None:
    drop_view(op, "v_page_load")
