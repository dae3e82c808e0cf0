"""Page loads: the v_page_load view over page_load records (issue 6).

Revision ID: 0003_page_load
Revises: 0001_foundation
"""

from alembic import op

from db.views import apply_view, drop_view

revision = "0003_page_load"
down_revision = "0001_foundation"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_view(op, "v_page_load")


def downgrade() -> None:
    drop_view(op, "v_page_load")
