"""``v_results`` reads ``kind`` from its tables instead of the record's context (
every view at 10 M records): the same columns and rows. A dns_queries row only ever holds a
dns_query record and a generic_results row carries its record's kind, which is also its
context's (one writer sets both: db.writer, the ``results`` view's trigger, archive
restore), so a question that reads no other context column (a count per kind and day) no
longer joins ``contexts`` for every row of its window. At 10 M dns_query + 1 M page loads the
count per kind and day took 598 instead of 675 ms over 7 days and 1,926 instead of 2,250 over
30 (docs/benchmarks.md, "Store queries at 10,000,000 records").

Revision ID: 0025_results_kind
Revises: 0024_flat_dns_query
"""

from alembic import op

from db.migrations.views import create_view

revision = "0025_results_kind"
down_revision = "0024_flat_dns_query"
branch_labels = None
depends_on = None


def upgrade() -> None:
    create_view(op, revision, "v_results")  # same columns: CREATE OR REPLACE


def downgrade() -> None:
    create_view(op, "0015_query_speed", "v_results")  # same columns: CREATE OR REPLACE
