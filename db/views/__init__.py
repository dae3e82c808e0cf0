"""SQL views: the researchers' API. One ``CREATE OR REPLACE VIEW`` per file, applied by
migrations through ``apply_view`` (which also grants the read-only role access)."""

from __future__ import annotations

from pathlib import Path

VIEWS_DIR = Path(__file__).parent
READER = "dnscamp_reader"


def view_sql(name: str) -> str:
    return (VIEWS_DIR / f"{name}.sql").read_text()


def apply_view(op, name: str) -> None:
    """Create or replace view ``name`` from db/views/<name>.sql and grant SELECT to the reader."""
    op.execute(view_sql(name))
    op.execute(f"GRANT SELECT ON {name} TO {READER}")


def drop_view(op, name: str) -> None:
    op.execute(f"DROP VIEW IF EXISTS {name} CASCADE")


def all_views() -> list[str]:
    return sorted(p.stem for p in VIEWS_DIR.glob("*.sql"))
