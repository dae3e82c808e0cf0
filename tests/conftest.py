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


# Under pytest-xdist (`make test` runs three workers) every test of the island runs on one worker,
# in file order: the island is one per machine (namespaces are global), and the other workers
# meanwhile run the CPU-bound rest. The island's tests are the testbed layer's, by path: the
# scheduler on the controller sees node ids only (pytest 9 no longer lets xdist's
# --dist loadgroup rename them, so an xdist_group marker would not hold them together).
ISLAND_PATHS = ("tests/testbed/", "testbed/linkem/")
# Tests outside the testbed whose servers must answer on time join the island's unit and run
# under SCHED_OTHER with it. Under SCHED_IDLE beside the island's busiest tests, the page-load
# stub's QUIC upstream (a CoreDNS the test starts, inheriting the policy) was starved for longer
# than the stub's 5 s timeout: the browser got a SERVFAIL, and the test counted a stub failure
# that an idle machine never shows.
ON_TIME_PATHS = ("tests/local/test_pageload_stub.py",)
# The island's tests measure time (link emulation, probes' RTTs, page loads) and check it
# against targets that hold on an otherwise idle machine. Under xdist every other test, and each
# worker's embedded Postgres, runs under SCHED_IDLE: it gets a core only when nothing of the
# island wants it. (A niceness of 10 was not enough: the probes' RTT errors doubled while the
# other worker ran Postgres-heavy tests.) A worker running the island's tests goes back to
# SCHED_OTHER, which root may do; processes a test starts inherit its worker's policy.
def _policy(island: bool) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        try:
            os.sched_setscheduler(0, os.SCHED_OTHER if island else os.SCHED_IDLE, os.sched_param(0))
        except PermissionError:  # not root: the island's tests fail on that already (pytest_runtest_setup)
            pass


def pytest_configure(config: pytest.Config) -> None:
    _policy(island=False)  # the session's start (its Postgres, its migrations) too


def work_unit(nodeid: str) -> str:
    """The xdist work unit of a test: "island" for the island's, else the test itself."""
    return "island" if nodeid.startswith(ISLAND_PATHS + ON_TIME_PATHS) else nodeid


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    from xdist.scheduler import LoadScopeScheduling

    class IslandScheduling(LoadScopeScheduling):
        """The island's tests are one work unit (the largest, so it is handed out first); every
        other test is a unit of its own, as with --dist load."""

        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return IslandScheduling(config, log)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    from tests.fuzz.conftest import TALLY

    TALLY.update(getattr(node, "workeroutput", {}).get("fuzz_tally", {}))


def pytest_terminal_summary(terminalreporter) -> None:
    from tests.fuzz.conftest import TALLY

    if TALLY:
        terminalreporter.write_line(
            "fuzz: generated lines through " + ", ".join(f"{k} {v:,}" for k, v in sorted(TALLY.items()))
        )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    stray = [i.nodeid for i in items if i.get_closest_marker("testbed") and not i.nodeid.startswith(ISLAND_PATHS)]
    if stray:
        raise pytest.UsageError(f"{stray[0]}: a testbed test outside {', '.join(ISLAND_PATHS)} would run beside "
                                "the island's other tests under xdist: move it there")


def pytest_runtest_setup(item: pytest.Item) -> None:
    _policy(island=work_unit(item.nodeid) == "island")
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
    if not engine.external_url():
        from tests.store_util import make_template

        make_template()
        if os.environ.get("PYTEST_XDIST_WORKER"):  # its backends fork from it: all of them yield to the island
            pid = embedded.postmaster_pid(embedded.cluster())
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split() if pid else []
            for p in [pid, *map(int, children)] if pid else []:
                os.sched_setscheduler(p, os.SCHED_IDLE, os.sched_param(0))
    yield url
    if not engine.external_url():
        embedded.down()


_counter = itertools.count()


def _copy_of_template(name: str) -> str:
    """A new database ``name``, a copy of the session's migrated, empty store; returns its URL."""
    from db import engine
    from tests.store_util import copy_of_template

    if engine.external_url():
        pytest.fail("a test database needs the embedded Postgres (unset DNSCAMP_TEST_DATABASE_URL)")
    return copy_of_template(name)


def _drop_database(name: str) -> None:
    from tests.store_util import drop_database

    drop_database(name)


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
