"""Each migration's view SQL, frozen in it: ``<revision>/<view>.sql`` is the definition that
revision creates (one ``CREATE OR REPLACE VIEW`` per file). No later change edits these files:
a changed view is a new migration with a new file, so upgrading through an old revision
creates what that revision shipped, and a downgrade restores the previous definition exactly.

db/views/*.sql is a copy of the head's definitions, for reading (tests/local/test_migrations.py
checks that they are equal)."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).parent
READER = "dnscamp_reader"


def view_sql(revision: str, name: str) -> str:
    return (HERE / revision / f"{name}.sql").read_text()


def create_view(op, revision: str, name: str) -> None:
    """Upgrade: create or replace ``name`` as ``revision`` defines it; the reader role reads
    views only, so it gets SELECT on each."""
    op.execute(view_sql(revision, name))
    op.execute(f"GRANT SELECT ON {name} TO {READER}")


def restore_view(op, revision: str, name: str) -> None:
    """Downgrade: ``name`` exactly as the earlier ``revision`` defined it. Dropped first, since
    CREATE OR REPLACE cannot remove or retype columns. No CASCADE: a view someone built on
    ours makes the downgrade stop rather than vanish."""
    op.execute(f"DROP VIEW {name}")
    create_view(op, revision, name)


def drop_view(op, name: str) -> None:
    op.execute(f"DROP VIEW {name}")


def views_at(revision: str | None) -> dict[str, str]:
    """{view: revision whose file defines it} in the schema at ``revision`` (None: base).
    Views are only ever created or replaced by upgrades, so this is the latest file of each
    view along the (linear) history up to ``revision``."""
    if revision is None:
        return {}
    from alembic.script import ScriptDirectory

    from db.migrate import alembic_config

    script = ScriptDirectory.from_config(alembic_config())
    chain = [s.revision for s in script.walk_revisions("base", revision)][::-1]  # base first
    return {p.stem: rev for rev in chain if (HERE / rev).is_dir() for p in sorted((HERE / rev).glob("*.sql"))}
