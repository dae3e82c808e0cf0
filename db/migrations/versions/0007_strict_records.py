"""Strict records v1: the views that read body values re-applied so that no stored value can
make them raise (``"sent": 3.0`` made v_ping's ``::int`` fail for every
reader). They read with JSON_VALUE (NULL for a value of another type or range) and compute
differences and sums without overflow; column names and types are unchanged.

This revision used to merge two branches (0006 and 0003); now the history is one
line (0001 -> 0002 -> 0003 -> 0005 -> 0006 -> 0007 -> ...) and stores that list a merged
branch's revision beside a later one are mended by db/migrations/env.py.

Revision ID: 0007_strict_records
Revises: 0006_dns_cache_warmed
"""

from alembic import op

from db.migrations.views import create_view, restore_view

revision = "0007_strict_records"
down_revision = "0006_dns_cache_warmed"
branch_labels = None
depends_on = None

# view -> the revision whose definition this one replaces (what a downgrade restores)
VIEWS = {"v_ping": "0001_foundation", "v_dns_query": "0006_dns_cache_warmed", "v_page_load": "0003_page_load"}


def upgrade() -> None:
    for v in VIEWS:
        create_view(op, revision, v)  # CREATE OR REPLACE: same columns, same types


def downgrade() -> None:
    for v, previous in VIEWS.items():
        restore_view(op, previous, v)
