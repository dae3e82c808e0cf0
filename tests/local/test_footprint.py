"""The rollups' footprint (migration 0020_compact_rollups, docs/store.md "Footprint"):
every rollup table that ingest upserts is autovacuumed once 1,000 of its rows are dead, the
writer may VACUUM it, and a rollup vacuumed between ingest batches stays near the size of its
live rows, where without a vacuum it grows with every batch (each update leaves a dead row
version); the downgrade takes both back."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import numpy as np
import psycopg
import pytest

from collectors import ingest as ingest_mod
from collectors import read as read_mod
from collectors.ingest import ingest
from db import engine, migrate

pytestmark = pytest.mark.local
ROOT = Path(__file__).resolve().parents[2]
M0020 = importlib.import_module("db.migrations.versions.0020_compact_rollups")
_spec = importlib.util.spec_from_file_location("gen_campaign_footprint", ROOT / "bench" / "gen_campaign.py")
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)
EXPECTED = sorted(f"{k}={v}" for k, v in M0020.OPTIONS.items())


def _writer(url: str) -> str:
    return engine.database_url("writer", dbname=psycopg.conninfo.conninfo_to_dict(url)["dbname"])


def _vacuum_warnings(url: str, tables) -> list[str]:
    """VACUUM each table as the writer; the warnings Postgres sent (a table it may not vacuum
    is skipped with one)."""
    got: list[str] = []
    with psycopg.connect(_writer(url), autocommit=True) as c:
        c.add_notice_handler(lambda d: got.append(d.message_primary))
        for t in tables:
            c.execute(f"VACUUM {t}")
    return got


def _options(url: str) -> dict[str, list[str] | None]:
    with psycopg.connect(url) as c:
        rows = c.execute("SELECT relname, reloptions FROM pg_class WHERE relname = ANY(%s) AND relkind = 'r'",
                         (list(M0020.ROLLUPS),)).fetchall()  # fmt: skip
    return {r: sorted(o) if o else None for r, o in rows}


def test_rollups_are_autovacuumed_early_and_the_writer_may_vacuum_them(empty_db):
    assert _options(empty_db) == {t: EXPECTED for t in M0020.ROLLUPS}
    assert _vacuum_warnings(empty_db, M0020.ROLLUPS) == []
    # the writer still may not vacuum what is not a rollup
    assert len(_vacuum_warnings(empty_db, ["dns_queries"])) == 1


def test_downgrade_takes_the_options_and_the_privilege_back(fresh_db):
    sa_url = fresh_db.replace("postgresql://", "postgresql+psycopg://", 1)
    migrate.downgrade(sa_url, M0020.down_revision)
    assert _options(fresh_db) == {t: None for t in M0020.ROLLUPS}
    assert len(_vacuum_warnings(fresh_db, ["dns_conn_daily"])) == 1  # "permission denied to vacuum"
    migrate.upgrade(sa_url)
    assert _options(fresh_db) == {t: EXPECTED for t in M0020.ROLLUPS}


def _dense_campaign(path: Path) -> Path:
    """2 days of queries from 3 vantages to 2 resolvers: ~180 dns_conn_daily rows, each updated
    by many of the small batches below."""
    recs = gen.dns_queries(4000, np.random.default_rng(11), "footprint", gen.END, vantages=gen.VANTAGES[:3],
                           resolvers=gen.RESOLVERS[:2], days=2)  # fmt: skip
    path.mkdir()
    (path / "dns.jsonl").write_bytes(b"".join(gen.orjson.dumps(r) + b"\n" for r in recs))
    return path


def _pages(url: str, table: str) -> tuple[int, int]:
    """(heap pages of ``table``, heap pages of a fresh copy of its rows: its live rows packed)."""
    with psycopg.connect(url) as c:
        c.execute(f"CREATE TEMPORARY TABLE packed AS SELECT * FROM {table}")
        return c.execute(f"SELECT pg_relation_size('{table}') / 8192, pg_relation_size('packed') / 8192").fetchone()


def test_rollups_vacuumed_between_batches_stay_near_their_live_rows(empty_db, db_url, tmp_path, monkeypatch):
    """The writer's VACUUM between batches (what ingest does every VACUUM_EVERY batches) keeps
    dns_conn_daily within 1.5x its packed live rows; the same ingest without it (autovacuum off
    for the table, as when it has not come round yet) leaves it several times larger."""
    records = _dense_campaign(tmp_path / "records")
    monkeypatch.setattr(read_mod, "BATCH_BYTES", 64 << 10)  # ~28 batches
    monkeypatch.setattr(ingest_mod, "VACUUM_EVERY", 10**9)  # the writer's VACUUM below only
    with psycopg.connect(db_url, autocommit=True) as c:  # a second store for the run without vacuum
        name = f"{psycopg.conninfo.conninfo_to_dict(empty_db)['dbname']}_novac"
        c.execute(f'CREATE DATABASE "{name}" TEMPLATE "{psycopg.conninfo.conninfo_to_dict(empty_db)["dbname"]}"')
    plain = engine.database_url("owner", dbname=name)
    try:
        with psycopg.connect(plain, autocommit=True) as c:
            c.execute("ALTER TABLE dns_conn_daily SET (autovacuum_enabled = false)")
        ingest([records], _writer(plain), workers=1)

        store = ingest_mod._store
        batches = []

        def store_then_vacuum(target, chunk, parsed, stats):
            store(target, chunk, parsed, stats)
            batches.append(chunk)
            assert _vacuum_warnings(empty_db, M0020.ROLLUPS) == []

        monkeypatch.setattr(ingest_mod, "_store", store_then_vacuum)
        ingest([records], _writer(empty_db), workers=1)
        assert len(batches) > 20
        vacuumed, packed = _pages(empty_db, "dns_conn_daily")
        grown, packed_plain = _pages(plain, "dns_conn_daily")
        assert packed == packed_plain and packed >= 5
        assert vacuumed <= 1.5 * packed, (vacuumed, packed)
        assert grown >= 3 * packed, (grown, packed)
    finally:
        with psycopg.connect(db_url, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_ingest_vacuums_the_rollups_every_few_batches(empty_db, tmp_path, monkeypatch):
    records = _dense_campaign(tmp_path / "records")
    monkeypatch.setattr(read_mod, "BATCH_BYTES", 64 << 10)
    monkeypatch.setattr(ingest_mod, "VACUUM_EVERY", 2)
    st = ingest([records], _writer(empty_db), workers=1)
    assert st.ingested == 4000
    with psycopg.connect(empty_db) as c:
        assert c.execute("SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = 'dns_conn_daily'").fetchone()[0] > 10
    vacuumed, packed = _pages(empty_db, "dns_conn_daily")
    assert vacuumed <= 1.5 * packed, (vacuumed, packed)
