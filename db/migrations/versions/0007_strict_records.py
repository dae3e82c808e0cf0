"""Strict records v1: the views that read body values re-applied so that no stored value can
make them raise (issue 11, defect 4: ``"sent": 3.0`` made v_ping's ``::int`` fail for every
reader). They read with JSON_VALUE (NULL for a value of another type or range) and compute
differences and sums without overflow; column names and types are unchanged.

Revision ID: 0007_strict_records
Revises: 0006_dns_cache_warmed
Depends on: 0003_page_load (v_page_load)
"""

from alembic import op

from db.views import apply_view

revision = "0007_strict_records"
down_revision = "0006_dns_cache_warmed"
branch_labels = None
depends_on = ("0003_page_load",)

VIEWS = ("v_ping", "v_dns_query", "v_page_load")


def upgrade() -> None:
    for v in VIEWS:
        apply_view(op, v)  # CREATE OR REPLACE: same columns, same types


def downgrade() -> None:
    pass  # the previous definitions return the same columns; they only raise on more values
