"""DNS queries: v_dns_query gains ``cache_warmed`` (the unit warmed the resolver's cache before
timing; vantage_agent/dns/kind.py).

Revision ID: 0006_dns_cache_warmed
Revises: 0002_dns_query
"""

from alembic import op

from db.views import apply_view

revision = "0006_dns_cache_warmed"
down_revision = "0002_dns_query"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_view(op, "v_dns_query")  # CREATE OR REPLACE: the new column is the last one


def downgrade() -> None:
    pass  # the view only gained a trailing column, which older code ignores
