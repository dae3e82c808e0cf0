"""Run Alembic migrations programmatically (``dnscamp db migrate``)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

INI = Path(__file__).parent / "alembic.ini"
MIGRATION_LOCK = 0x646E7363_616D7002  # pg_advisory_lock key held by db/migrations/env.py during upgrades


def alembic_config(url: str | None = None) -> Config:
    cfg = Config(str(INI))
    cfg.set_main_option("script_location", str(Path(__file__).parent / "migrations"))
    if url:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade(url: str | None = None, target: str = "heads") -> None:
    """Upgrade to ``target``; concurrent callers are serialised by MIGRATION_LOCK (env.py)."""
    command.upgrade(alembic_config(url), target)


def downgrade(url: str | None, target: str) -> None:
    """Downgrade to ``target`` (a revision, or "base"); each revision restores the previous one's
    schema exactly (docs/store.md, Migrations)."""
    command.downgrade(alembic_config(url), target)


def current_heads(url: str | None = None) -> list[str]:
    import sqlalchemy as sa
    from alembic.runtime.migration import MigrationContext

    from db.engine import sqlalchemy_url

    eng = sa.create_engine(url or sqlalchemy_url("owner"))
    try:
        with eng.connect() as conn:
            return sorted(MigrationContext.configure(conn).get_current_heads())
    finally:
        eng.dispose()


def script_heads() -> list[str]:
    from alembic.script import ScriptDirectory

    return sorted(ScriptDirectory.from_config(alembic_config()).get_heads())
