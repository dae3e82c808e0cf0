"""A page load's grouping keys and load time as stored columns (docs/sql.md example 7
at 10 M records): ``generic_results`` gains five generated columns, computed by Postgres from
the body when a row is written (``GENERATED ALWAYS AS (...) STORED``), NULL on rows of other
kinds, and ``v_page_load`` reads them instead of the body:

    pl_url, pl_browser, pl_dns_mode, pl_dns_transport   body ->> 'url' (...) as text
    pl_plt_ms                                           JSON_VALUE(body, '$.plt_ms' RETURNING float8)

They are the expressions v_page_load used (same values, same NULLs), so the view keeps its
columns, rows and meanings; the body stays the record (exports and content hashes read it).
Why: a question that pairs loads by run (002's PLT difference to Do53) reads these five fields
of every load; out of the jsonb body that cost ~5 us a row (1 M loads: 5.4 s of a 6.8 s query),
and the sort carried the 1.3 KB bodies to disk. No writer changes: COPY and the ``results``
view's trigger name their columns, and Postgres fills these in (~70 bytes a page_load row).

The upgrade rewrites ``generic_results`` (adding a stored generated column does; ~12 s for the
10 M store's 1 M page loads, under an exclusive lock); the downgrade drops the columns.

Revision ID: 0023_page_load_columns
Revises: 0022_hourly_keys
"""

from alembic import op

from db.migrations.views import create_view, restore_view

revision = "0023_page_load_columns"
down_revision = "0022_hourly_keys"
branch_labels = None
depends_on = None

# column -> (type, the v_page_load expression it stores); db/models.py has the same
COLUMNS = {
    "pl_url": ("text", "body ->> 'url'"),
    "pl_browser": ("text", "body ->> 'browser'"),
    "pl_dns_mode": ("text", "body ->> 'dns_mode'"),
    "pl_dns_transport": ("text", "body ->> 'dns_transport'"),
    "pl_plt_ms": ("float8", "JSON_VALUE(body, '$.plt_ms' RETURNING float8)"),
}


def generated(expr: str) -> str:
    """The stored expression: the page load's value, NULL on a row of another kind."""
    return f"CASE WHEN kind = 'page_load' THEN {expr} END"


def upgrade() -> None:
    op.execute("ALTER TABLE generic_results " + ", ".join(
        f"ADD COLUMN {name} {typ} GENERATED ALWAYS AS ({generated(expr)}) STORED"
        for name, (typ, expr) in COLUMNS.items()))
    create_view(op, revision, "v_page_load")  # same columns: CREATE OR REPLACE


def downgrade() -> None:
    restore_view(op, "0016_page_load_warm", "v_page_load")
    op.execute("ALTER TABLE generic_results " + ", ".join(f"DROP COLUMN {name}" for name in COLUMNS))
