"""Test scaffolding for the store."""

from __future__ import annotations

from pathlib import Path

import psycopg


# The session's template: a copy of the freshly migrated store taken before any test runs. Tests
# that write into the session's own database (`db_url`) leave it as it is, so every copy made from
# it is empty, whatever ran before on this pytest-xdist worker.
TEMPLATE = "dnscamp_test_template"


def make_template() -> None:
    """Copy the session's migrated store (db.engine.DB_NAME) to TEMPLATE, anew."""
    from db import engine

    with psycopg.connect(engine.database_url("owner", dbname="postgres"), autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE}" WITH (FORCE)')
        c.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                  (engine.DB_NAME,))  # fmt: skip
        c.execute(f'CREATE DATABASE "{TEMPLATE}" TEMPLATE "{engine.DB_NAME}"')


def copy_of_template(name: str) -> str:
    """A new database ``name``: a copy of the session's migrated, empty store; returns its URL."""
    from db import engine

    with psycopg.connect(engine.database_url("owner", dbname="postgres"), autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}" TEMPLATE "{TEMPLATE}"')
    return engine.database_url("owner", dbname=name)


def drop_database(name: str) -> None:
    from db import engine

    with psycopg.connect(engine.database_url("owner", dbname="postgres"), autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def empty_store(conn: psycopg.Connection) -> None:
    """Every table of the store emptied in one TRUNCATE (records, dimensions, rollups, Atlas,
    quarantine; not alembic_version), whatever tables the migrations at head have, and its
    identity counters restarted (ids start at 1, as in a new store): ~25 ms,
    where `DELETE FROM results` runs the view's per-row triggers (~6 ms a record)."""
    tables = [r[0] for r in conn.execute(
        "SELECT format('%I', c.relname) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') AND NOT c.relispartition "
        "AND c.relname <> 'alembic_version'")]  # fmt: skip
    conn.execute("TRUNCATE " + ", ".join(tables) + " RESTART IDENTITY")


# The ingest code of the commit before the writer moved to db/writer/: the last whose Store
# wrote to stores at older revisions (0013's dns_hourly before 0022, generic_results before
# 0026's shape_id). Today's ingest writes the head's tables only; a test of an upgrade over
# records an older dnscamp ingested runs that code (git archive) in a subprocess.
OLD_INGEST = "03a899d"
_OLD_INGEST_RUN = """
import sys
from pathlib import Path
import collectors.ingest as I
assert I.__file__.startswith(sys.argv[1]), I.__file__
st = I.ingest([Path(p) for p in sys.argv[3:]], sys.argv[2], workers=1)
print(st.ingested)
"""


def old_code(rev: str, dest) -> Path:
    """``collectors/`` and ``vantage_agent/`` of commit ``rev`` under ``dest`` (git archive; kept
    when already there), to run an older dnscamp's code in a subprocess."""
    import io
    import subprocess
    import tarfile

    import pytest

    root = Path(__file__).resolve().parents[1]
    dest = Path(dest)
    if not (dest / "collectors").exists():
        try:
            tar = subprocess.run(["git", "-C", str(root), "archive", rev, "collectors", "vantage_agent"],
                                 capture_output=True, check=True).stdout  # fmt: skip
        except (OSError, subprocess.CalledProcessError) as exc:
            pytest.fail(f"needs git and commit {rev} of this repository to run its code ({exc})")
        with tarfile.open(fileobj=io.BytesIO(tar)) as t:
            t.extractall(dest, filter="data")
    return dest


def ingest_with_old_code(paths, url: str, dest, rev: str = OLD_INGEST) -> int:
    """Ingest ``paths`` into ``url`` with the ingest code of commit ``rev`` (checked out under
    ``dest``): the number of records ingested."""
    import subprocess
    import sys

    dest = old_code(rev, dest)
    r = subprocess.run([sys.executable, "-c", _OLD_INGEST_RUN, str(dest), url, *map(str, paths)], cwd=dest,
                       capture_output=True, text=True, env={"PYTHONPATH": str(dest), "PATH": "/usr/bin:/bin"},
                       timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    return int(r.stdout.strip().splitlines()[-1])


def role_url(owner_url: str, role: str) -> str:
    """``owner_url`` (the embedded store's, as the `db_url`, `empty_db` and `fresh_db` fixtures
    give it) logged in as ``role`` instead: same database, same passfile."""
    from db import embedded

    url = owner_url.replace(f"{embedded.SUPERUSER}@", f"{role}@", 1)
    assert url != owner_url, owner_url
    return url


def grafana_url(owner_url: str) -> str:
    """The same database as Grafana's datasource reads it: role dnscamp_grafana (aggregate views
    only, migration 0029), its privileges, with a session statement_timeout of 120 s instead of
    the role's 15 s: the panels' SQL is checked here for what it returns, on a machine whose
    other test workers run under SCHED_IDLE beside the island; the role's own limits are
    tests/local/test_grafana_role.py's (role_url)."""
    from db import embedded

    return role_url(owner_url, embedded.GRAFANA) + ("&" if "?" in owner_url else "?") + "options=-c%20statement_timeout%3D120s"
