"""Shared fixtures. The whole test session runs with its own DNSCAMP_HOME (a temp dir), so
tests never touch a researcher's store or spool; the embedded Postgres of that home is
started on first use and stopped at the end of the session."""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from pathlib import Path

import pytest

_SESSION_HOME = os.environ.get("DNSCAMP_TEST_HOME") or tempfile.mkdtemp(prefix="dnscamp-test-")
os.environ["DNSCAMP_HOME"] = _SESSION_HOME
os.environ.pop("DNSCAMP_DATABASE_URL", None) if not os.environ.get("DNSCAMP_TEST_DATABASE_URL") else None
if os.environ.get("DNSCAMP_TEST_DATABASE_URL"):
    os.environ["DNSCAMP_DATABASE_URL"] = os.environ["DNSCAMP_TEST_DATABASE_URL"]

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def pytest_unconfigure(config: pytest.Config) -> None:
    # The session's own home (its embedded Postgres is stopped by `db_url`) goes with it: a
    # home named by DNSCAMP_TEST_HOME is the caller's and stays.
    if not os.environ.get("DNSCAMP_TEST_HOME"):
        from db import embedded

        if not embedded.is_running():
            shutil.rmtree(_SESSION_HOME, ignore_errors=True)


def pytest_runtest_setup(item: pytest.Item) -> None:
    # A testbed test that cannot run must fail loudly, never skip silently.
    if item.get_closest_marker("testbed") and os.geteuid() != 0:
        pytest.fail("testbed tests need root (network namespaces, iptables): run `make test` as root")
    if item.get_closest_marker("internet") and os.environ.get("DNSCAMP_INTERNET") != "1":
        pytest.skip("needs the public Internet: set DNSCAMP_INTERNET=1 to run")


@pytest.fixture(scope="session")
def dnscamp_home() -> Path:
    return Path(_SESSION_HOME)


@pytest.fixture(scope="session")
def db_url() -> str:
    """libpq URL (owner role) of a migrated database in the session's embedded Postgres."""
    from db import embedded, engine, migrate

    url = engine.database_url("owner")
    migrate.upgrade(url.replace("postgresql://", "postgresql+psycopg://", 1))
    yield url
    if not engine.external_url():
        embedded.down()


_counter = itertools.count()


def _copy_of_template(name: str) -> str:
    """A new database ``name``, a copy of the session's migrated store; returns its URL."""
    import psycopg

    from db import engine

    if engine.external_url():
        pytest.fail("a test database needs the embedded Postgres (unset DNSCAMP_TEST_DATABASE_URL)")
    admin = engine.database_url("owner", dbname="postgres")
    with psycopg.connect(admin, autocommit=True) as c:
        # The template must have no other connections while it is copied.
        c.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (engine.DB_NAME,),
        )
        c.execute(f'CREATE DATABASE "{name}" TEMPLATE "{engine.DB_NAME}"')
    return engine.database_url("owner", dbname=name)


def _drop_database(name: str) -> None:
    import psycopg

    from db import engine

    with psycopg.connect(engine.database_url("owner", dbname="postgres"), autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture()
def fresh_db(db_url: str) -> str:
    """A new, migrated, empty database for one test (copied from the session's template): for
    tests that change the schema or grants (migrations, DDL) or need a database of their own;
    any other test takes `empty_db`."""
    name = f"t_{os.getpid()}_{next(_counter)}"
    yield _copy_of_template(name)
    _drop_database(name)


# What a test may not change in `empty_db` (TRUNCATE would not undo it): relations (by oid, so a
# drop and re-create counts) with their columns, options and grants, view and function bodies,
# triggers, the migration head and the database's settings. Partitions are left out: ingest
# makes them on demand and the reset drops them.
_SCHEMA_PRINT = """
SELECT md5(string_agg(x, ',' ORDER BY x)) FROM (
  SELECT format('r:%s:%s:%s:%s:%s:%s', c.oid, c.relname, c.relkind, c.relacl, c.reloptions,
                (SELECT string_agg(a.attname || ':' || a.atttypid, ' ' ORDER BY a.attnum) FROM pg_attribute a
                  WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped)) AS x
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
   WHERE n.nspname = current_schema() AND NOT c.relispartition
  UNION ALL
  SELECT format('v:%s:%s', c.oid, md5(pg_get_viewdef(c.oid))) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
   WHERE n.nspname = current_schema() AND c.relkind IN ('v', 'm')
  UNION ALL
  SELECT format('f:%s:%s:%s', p.oid, md5(p.prosrc), p.proacl) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
   WHERE n.nspname = current_schema()
  UNION ALL
  SELECT format('t:%s:%s', t.oid, t.tgenabled) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND NOT t.tgisinternal
  UNION ALL
  SELECT 'a:' || version_num FROM alembic_version
  UNION ALL
  SELECT 'd:' || s.setconfig::text FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase
   WHERE d.datname = current_database()
) s"""


class _Store:
    """The session's working store: one copy of the template, emptied between tests."""

    def __init__(self) -> None:
        self.name = f"s_{os.getpid()}_{next(_counter)}"
        self.url = _copy_of_template(self.name)
        import psycopg

        with psycopg.connect(self.url) as c:
            self.print = c.execute(_SCHEMA_PRINT).fetchone()[0]
            self.partitions = {r[0] for r in c.execute("SELECT oid FROM pg_class WHERE relispartition AND relkind IN ('r', 'p')")}

    def empty(self) -> None:
        """Back to what a fresh copy of the template holds: the connections a previous test left
        are ended (a stray transaction would block TRUNCATE), the partitions made since the copy
        are dropped, every table is emptied and its identity counters restarted."""
        import psycopg

        from tests.store_util import empty_store

        with psycopg.connect(self.url, autocommit=True) as c:
            c.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                      "WHERE datname = current_database() AND pid <> pg_backend_pid()")
            made = c.execute("SELECT format('%%I', relname) FROM pg_class WHERE relispartition AND relkind IN ('r', 'p') "
                             "AND NOT oid = ANY(%s)", (list(self.partitions),)).fetchall()
            for (table,) in made:
                c.execute(f"DROP TABLE IF EXISTS {table}")
            empty_store(c)

    def unchanged(self) -> bool:
        import psycopg

        with psycopg.connect(self.url) as c:
            return c.execute(_SCHEMA_PRINT).fetchone()[0] == self.print


@pytest.fixture(scope="session")
def _store(db_url: str):
    stores = [_Store()]
    yield stores
    _drop_database(stores[0].name)


@pytest.fixture()
def empty_db(_store: list) -> str:
    """The URL of a migrated store with nothing in it: the session's working copy of the
    template, emptied by TRUNCATE before the test (where `fresh_db` copies the template and drops
    the copy for every test). A test that changes the schema or grants here fails: it takes
    `fresh_db`."""
    store = _store[0]
    store.empty()
    yield store.url
    if not store.unchanged():
        # The next test gets a clean copy whatever this one did.
        _drop_database(store.name)
        _store[0] = _Store()
        pytest.fail("this test changed the schema or grants of the shared store: it takes `fresh_db`")
