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
    # A testbed test that cannot run must fail loudly, never skip silently (issue 2 §7).
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


@pytest.fixture()
def fresh_db(db_url: str) -> str:
    """A new, migrated, empty database for one test (copied from the session's template)."""
    import psycopg

    from db import engine

    if engine.external_url():
        pytest.fail("fresh_db needs the embedded Postgres (unset DNSCAMP_TEST_DATABASE_URL)")
    name = f"t_{os.getpid()}_{next(_counter)}"
    admin = engine.database_url("owner", dbname="postgres")
    with psycopg.connect(admin, autocommit=True) as c:
        # The template must have no other connections while it is copied.
        c.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (engine.DB_NAME,),
        )
        c.execute(f'CREATE DATABASE "{name}" TEMPLATE "{engine.DB_NAME}"')
    yield engine.database_url("owner", dbname=name)
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
