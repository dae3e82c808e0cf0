"""``v_dns_query`` without a WITH list (exact questions over the base view):
the same columns, rows and expressions, its two steps written as subqueries in FROM.

Postgres does not pull a subquery that has a WITH list up into the query reading it (its CTEs
are inlined only when that subquery is planned on its own), so every query of 0015's view kept
a subquery scan of the view, with a Result node computing the view's projection for every row
above the scans. Written without WITH, the planner flattens the view into the query and
computes only the columns it reads. At 10 M records the exact p50 total_ms per transport over
7 days took 1,132 ms instead of 1,270 (docs/benchmarks.md, "Store queries at 10,000,000 records").

Revision ID: 0024_flat_dns_query
Revises: 0023_page_load_columns
"""

from alembic import op

from db.migrations.views import create_view

revision = "0024_flat_dns_query"
down_revision = "0023_page_load_columns"
branch_labels = None
depends_on = None


def upgrade() -> None:
    create_view(op, revision, "v_dns_query")  # same columns: CREATE OR REPLACE


def downgrade() -> None:
    create_view(op, "0015_query_speed", "v_dns_query")  # same columns: CREATE OR REPLACE
