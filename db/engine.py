"""Which database dnscamp talks to, and as which role.

Default: the embedded Postgres under $DNSCAMP_HOME (database ``dnscamp``). Setting
DNSCAMP_DATABASE_URL points everything at any other Postgres instead (then the embedded
cluster is never started). Roles: the owner runs migrations; ``dnscamp_writer`` is what
collectors use; ``dnscamp_reader`` can read the views only (Grafana, researchers).
"""

from __future__ import annotations

import os
from urllib.parse import quote

import psycopg
from psycopg import sql as pgsql
import sqlalchemy as sa

from db import embedded

DB_NAME = "dnscamp"
WRITER = "dnscamp_writer"
READER = "dnscamp_reader"


def external_url() -> str | None:
    return os.environ.get("DNSCAMP_DATABASE_URL") or None


def _embedded_url(user: str, dbname: str) -> str:
    c = embedded.cluster()
    return f"postgresql://{user}@/{dbname}?host={quote(str(c.socket_dir))}&port={embedded.PORT}"


def ensure_database(dbname: str = DB_NAME) -> None:
    """Create the database in the embedded cluster if missing (external: the operator's job)."""
    with psycopg.connect(_embedded_url(embedded.SUPERUSER, "postgres"), autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (dbname,)).fetchone():
            conn.execute(pgsql.SQL("CREATE DATABASE {}").format(pgsql.Identifier(dbname)))


def database_url(role: str = "owner", *, start: bool = True, dbname: str | None = None) -> str:
    """libpq URL (postgresql://...) for ``role`` in {"owner", "writer", "reader"}."""
    ext = external_url()
    if ext:
        return ext.replace("postgresql+psycopg://", "postgresql://")
    if start:
        embedded.up()
    dbname = dbname or os.environ.get("DNSCAMP_DATABASE_NAME") or DB_NAME
    if start:
        ensure_database(dbname)
    user = {"owner": embedded.SUPERUSER, "writer": WRITER, "reader": READER}[role]
    return _embedded_url(user, dbname)


def sqlalchemy_url(role: str = "owner", **kw) -> str:
    return database_url(role, **kw).replace("postgresql://", "postgresql+psycopg://", 1)


def get_engine(role: str = "owner", **kw) -> sa.Engine:
    return sa.create_engine(sqlalchemy_url(role, **kw), pool_pre_ping=True)


def connect(role: str = "owner", **kw) -> psycopg.Connection:
    return psycopg.connect(database_url(role, **kw))
