"""Which database dnscamp talks to, and as which role.

Default: the embedded Postgres under $DNSCAMP_HOME (database ``dnscamp``); its URLs carry no
password, only ``passfile=$DNSCAMP_HOME/pgpass`` (see db/embedded.py, docs/store.md).
External: DNSCAMP_DATABASE_URL is the writer's URL, also used to run migrations (owner);
DNSCAMP_READER_URL the reader's, DNSCAMP_GRAFANA_URL the dashboards' role's. Without its URL,
reader (or grafana) access fails with one line rather than silently reading with the writer's
privileges. Roles: the owner runs migrations; ``dnscamp_writer`` is what collectors use;
``dnscamp_reader`` can read the views only; ``dnscamp_grafana`` (Grafana's datasource) the
aggregate views only, without addresses (migration 0029, docs/store.md "Roles and limits").
"""

from __future__ import annotations

import os

import psycopg
import sqlalchemy as sa
from psycopg import sql as pgsql

from db import embedded
from db.embedded import GRAFANA, READER, WRITER, StoreError

DB_NAME = "dnscamp"
_SETUP_LOCK = 0x646E7363_616D7001  # pg_advisory_lock key: roles and databases are created one caller at a time

__all__ = ["DB_NAME", "GRAFANA", "READER", "WRITER", "StoreError", "connect", "database_url", "external_url", "get_engine"]


# roles that read with a login of their own, never the writer's: (environment variable, role)
_OWN_URL = {"reader": ("DNSCAMP_READER_URL", READER), "grafana": ("DNSCAMP_GRAFANA_URL", GRAFANA)}
ROLE_NAMES = ("owner", "writer", "reader", "grafana")


def external_url() -> str | None:
    return os.environ.get("DNSCAMP_DATABASE_URL") or None


def _external(role: str) -> str:
    url = external_url()
    if role in _OWN_URL:
        var, name = _OWN_URL[role]
        url = os.environ.get(var)
        if not url:
            raise StoreError(f"{var} is not set: with DNSCAMP_DATABASE_URL (the writer), {role} access "
                             f"needs its own URL, a login of role {name} (see docs/store.md)")
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def ensure_database(dbname: str = DB_NAME) -> None:
    """Embedded cluster: create the writer, reader and grafana roles (with their passwords from the
    passfile) and the database if missing. External: the operator's job."""
    pw = embedded.passwords()
    with psycopg.connect(embedded.cluster().url(embedded.SUPERUSER, "postgres"), autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (_SETUP_LOCK,))
        have = dict(conn.execute("SELECT rolname, rolpassword IS NOT NULL FROM pg_authid WHERE rolname = ANY(%s)",
                                 ([WRITER, READER, GRAFANA],)).fetchall())
        for role in (WRITER, READER, GRAFANA):
            if not have.get(role):  # missing, or made without a password by older dnscamp
                embedded.set_password(conn, role, pw[role], create=role not in have)
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (dbname,)).fetchone():
            conn.execute(pgsql.SQL("CREATE DATABASE {}").format(pgsql.Identifier(dbname)))


def database_url(role: str = "owner", *, start: bool = True, dbname: str | None = None) -> str:
    """libpq URL (postgresql://...) for ``role`` in ROLE_NAMES; never holds a password of the
    embedded store."""
    if role not in ROLE_NAMES:
        raise ValueError(f"unknown role {role!r}")
    if external_url():
        return _external(role)
    if start:
        embedded.up()
    dbname = dbname or os.environ.get("DNSCAMP_DATABASE_NAME") or DB_NAME
    if start:
        ensure_database(dbname)
    user = {"owner": embedded.SUPERUSER, "writer": WRITER, "reader": READER, "grafana": GRAFANA}[role]
    return embedded.cluster().url(user, dbname)


def sqlalchemy_url(role: str = "owner", **kw) -> str:
    return database_url(role, **kw).replace("postgresql://", "postgresql+psycopg://", 1)


def get_engine(role: str = "owner", **kw) -> sa.Engine:
    return sa.create_engine(sqlalchemy_url(role, **kw), pool_pre_ping=True)


def connect(role: str = "owner", **kw) -> psycopg.Connection:
    return psycopg.connect(database_url(role, **kw))
