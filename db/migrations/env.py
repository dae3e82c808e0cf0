"""Alembic environment: the URL comes from db.engine (embedded by default)."""

from __future__ import annotations

from alembic import context
import sqlalchemy as sa
from sqlalchemy import create_engine, pool

from db.migrate import MIGRATION_LOCK
from db.models import Base

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    url = config.get_main_option("sqlalchemy.url")
    if url:
        return url
    from db.engine import sqlalchemy_url

    return sqlalchemy_url("owner")


def _forget_merged_branches(connection) -> None:
    """The history once had two heads, so a store migrated then lists 0005_atlas beside
    0008_ingest_hardening in alembic_version. The history is one line now, 0005 an ancestor of
    0008, and Alembic refuses such a pair ("overlaps"): a listed revision that another listed
    one descends from is forgotten (the schema is what the later one says either way)."""
    table = context.get_context().version_table
    if not sa.inspect(connection).has_table(table):
        return
    script = context.script
    known = {s.revision for s in script.walk_revisions()}
    listed = [r for (r,) in connection.exec_driver_sql(f"SELECT version_num FROM {table}") if r in known]
    below = {s.revision for r in listed for s in script.walk_revisions("base", r) if s.revision != r}
    for r in set(listed) & below:
        connection.exec_driver_sql(f"DELETE FROM {table} WHERE version_num = %s", (r,))


def run_migrations_offline() -> None:
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    engine = create_engine(_url(), poolclass=pool.NullPool)
    with engine.connect() as connection:
        # Concurrent upgrades (two first-time `dnscamp ingest`) run one after the other: a session
        # lock, held across every migration's transaction, released when this connection closes.
        # The second then reads the version table after the first committed and has nothing to do.
        connection.exec_driver_sql(f"SELECT pg_advisory_lock({MIGRATION_LOCK})")
        connection.commit()
        context.configure(connection=connection, target_metadata=target_metadata)
        with context.begin_transaction():
            _forget_merged_branches(connection)
            context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
