"""DNS queries: v_dns_query gains ``cache_warmed`` (the unit warmed the resolver's cache before
timing; vantage_agent/dns/kind.py).

Revision ID: 0006_dns_cache_warmed
Revises: 0005_atlas
"""

from alembic import op

from db.migrations.views import create_view, restore_view

revision = "0006_dns_cache_warmed"
down_revision = "0005_atlas"
branch_labels = None
depends_on = None


def upgrade() -> None:
    create_view(op, revision, "v_dns_query")  # CREATE OR REPLACE: the new column is the last one


def downgrade() -> None:
    restore_view(op, "0002_dns_query", "v_dns_query")
