"""Strict records v1: the views that read body values re-applied so that no stored value can
make them raise (issue 11, defect 4: ``"sent": 3.0`` made v_ping's ``::int`` fail for every
reader). They read with JSON_VALUE (NULL for a value of another type or range) and compute
differences and sums without overflow; column names and types are unchanged.

It also merges the page_load branch (0003, which created v_page_load) so that v_page_load
exists before it is replaced; a ``depends_on`` would leave 0003 a script head that the
database no longer lists (``db status`` and tests compare the two).

Revision ID: 0007_strict_records
Revises: 0006_dns_cache_warmed, 0003_page_load
"""

from alembic import op

from db.views import apply_view

revision = "0007_strict_records"
down_revision = ("0006_dns_cache_warmed", "0003_page_load")
branch_labels = None
depends_on = None

VIEWS = ("v_ping", "v_dns_query", "v_page_load")


def upgrade() -> None:
    for v in VIEWS:
        apply_view(op, v)  # CREATE OR REPLACE: same columns, same types


def downgrade() -> None:
    pass  # the previous definitions return the same columns; they only raise on more values
