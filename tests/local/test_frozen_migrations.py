"""The migrations' data code is frozen in db/migrations/frozen/ (no migration runs live code):
an upgrade of a store with records gives, table by table and row by row (identity ids
included), what the migrations gave when they ran the live ingest code (commit FROZEN_FROM,
the last before the freeze, run from git in a subprocess)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import psycopg
import pytest

from db import engine
from tests.local.test_migrations import HOSTILE, V1, _downgrade, _fixture_records, _insert_result, _sa, _upgrade

pytestmark = pytest.mark.local
ROOT = Path(__file__).resolve().parents[2]
FROZEN_FROM = "03a899d"
BEFORE_BACKFILLS = "0007_strict_records"  # before 0008's content hashes: every data migration runs
ONE_TABLE = "0011_dashboard_views"  # the last one-table store (0012 moves its rows)
_OLD_UPGRADE = """
import sys
import db
from db import migrate
assert db.__file__.startswith(sys.argv[2]), db.__file__
migrate.upgrade(sys.argv[1], sys.argv[3])
"""


def _tables(url: str) -> dict[str, list[str]]:
    """Every table's rows (partitions' rows under their parent), sorted, as text."""
    with psycopg.connect(url) as c:
        names = [r[0] for r in c.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition ORDER BY 1")]  # fmt: skip
        return {t: sorted(c.execute(f'SELECT md5(t::text) FROM "{t}" t').fetchall()) for t in names}


def _insert(url: str, lines: list[str], campaign: str) -> int:
    n = 0
    with psycopg.connect(url) as c:
        for line in lines:
            try:
                _insert_result(c, json.loads(line), f"{campaign}{n % 3}")
                c.commit()
                n += 1
            except (ValueError, KeyError, TypeError, psycopg.Error):
                c.rollback()  # not a record a table could hold (NUL, not an object...)
    return n


def test_upgrades_store_what_the_live_code_stored(fresh_db, tmp_path):
    """Valid records (and legacy bodies) stored before 0008, the hostile corpus before 0012 (a
    timestamp beyond Python's datetime stops 0008's backfill, in either code), some with full
    sha256 hashes; then both stores upgraded to the head."""
    from tests.local.test_views_hostile import LEGACY

    try:
        tar = subprocess.run(["git", "-C", str(ROOT), "archive", FROZEN_FROM, "db", "collectors", "vantage_agent"],
                             capture_output=True, check=True).stdout  # fmt: skip
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.fail(f"needs git and commit {FROZEN_FROM} of this repository ({exc})")
    old = tmp_path / "old"
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        t.extractall(old, filter="data")

    def old_upgrade(url: str, rev: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(old)}
        subprocess.run([sys.executable, "-c", _OLD_UPGRADE, _sa(url), str(old), rev], env=env, check=True, cwd=old)

    _downgrade(fresh_db, BEFORE_BACKFILLS)
    valid = [ln for f in sorted(V1.glob("*.jsonl")) for ln in f.read_text().splitlines()]
    legacy = [json.dumps({**_fixture_records()[0], "kind": k, "body": b}) for k, b in LEGACY.items()]
    assert _insert(fresh_db, valid + legacy, "v") > 20
    name = psycopg.conninfo.conninfo_to_dict(fresh_db)["dbname"]
    twin = f"{name}_old"
    admin = engine.database_url("owner", dbname="postgres")
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{twin}" TEMPLATE "{name}"')
    try:
        twin_url = engine.database_url("owner", dbname=twin)
        _upgrade(fresh_db, ONE_TABLE)
        old_upgrade(twin_url, ONE_TABLE)
        hostile = [ln for f in sorted(HOSTILE.glob("*.jsonl")) for ln in f.read_text().splitlines()]
        assert _insert(fresh_db, hostile, "h") > 40
        with psycopg.connect(fresh_db) as a, psycopg.connect(twin_url) as b:
            # a started_at beyond Python's datetime stops 0012's move (either code's): not a record to move
            a.execute("DELETE FROM results WHERE started_at >= '10000-01-01'")
            a.execute("UPDATE results SET content_sha256 = sha256(id::text::bytea) WHERE campaign = 'h1'")
            a.commit()
            # the same rows in the same physical order in both (0012 numbers the batches in the
            # order a DISTINCT reads them)
            with a.cursor().copy("COPY (SELECT * FROM results) TO STDOUT") as out:
                data = b"".join(bytes(x) for x in out)
            a.execute("TRUNCATE results")
            b.execute("TRUNCATE results")
            for c in (a, b):
                with c.cursor().copy("COPY results FROM STDIN") as into:
                    into.write(data)
                c.commit()
        old_upgrade(twin_url, "heads")
        with psycopg.connect(twin_url) as b:  # the frozen code's head; later revisions move no record
            old_head = b.execute("SELECT version_num FROM alembic_version").fetchone()[0]
        _upgrade(fresh_db, old_head)
        got, want = _tables(fresh_db), _tables(twin_url)
        assert sorted(got) == sorted(want)
        assert sum(map(len, got.values())) > 500
        for t in want:
            assert got[t] == want[t], t
        _upgrade(fresh_db, "head")
        after = _tables(fresh_db)
        assert all(after[t] == got[t] for t in got if t not in ("alembic_version", "collected_objects")), \
            [t for t in got if after.get(t) != got[t]]  # fmt: skip
    finally:
        with psycopg.connect(admin, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{twin}" WITH (FORCE)')
