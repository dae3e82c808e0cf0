"""Rollups for the Campaign health dashboard at 10 M records (issue 16): work in progress.

Revision ID: 0018_health_rollups
Revises: 0017_dashboard_rollups
"""

revision = "0018_health_rollups"
down_revision = "0017_dashboard_rollups"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
