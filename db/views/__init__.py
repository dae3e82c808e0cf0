"""SQL views: the researchers' API, one ``CREATE OR REPLACE VIEW`` per file, as the head
migration defines them. Migrations never read these files: each creates its views from its own
frozen copy (db/migrations/views/<revision>/); tests/local/test_migrations.py checks that these
equal the head's."""

from __future__ import annotations

from pathlib import Path

VIEWS_DIR = Path(__file__).parent


def view_sql(name: str) -> str:
    return (VIEWS_DIR / f"{name}.sql").read_text()


def all_views() -> list[str]:
    return sorted(p.stem for p in VIEWS_DIR.glob("*.sql"))
