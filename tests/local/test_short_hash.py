"""The content hash in 16 bytes (migration 0021_short_content_hash): stored hashes are
the first 16 bytes of the record's sha256; a repeat of a stored record is a duplicate and a
different record under a stored id an id_conflict, for records stored before the upgrade (with
the full 32-byte sha256) and after it, and for rows inserted through the ``results`` view; the
upgrade rewrites result_ids, so the table shrinks at once; the downgrade leaves NULL ("stored
before content hashes") for the code of 0020."""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path

import orjson
import psycopg
import pytest

import collectors.parse as cp
from collectors.ingest import ingest
from db import migrate
from db.writer.batch import Dims
from tests.store_util import ingest_with_old_code

pytestmark = pytest.mark.local
ROOT = Path(__file__).resolve().parents[2]
V1 = ROOT / "tests" / "fixtures" / "results" / "v1"
REV, PREVIOUS = "0021_short_content_hash", "0020_compact_rollups"
BEFORE_SHORT_HASH = "c019b7e"  # the last commit whose ingest stored the whole sha256 (a store at 0020)


def _sa(url: str) -> str:
    return url.replace("postgresql://", "postgresql+psycopg://", 1)


def _records(n: int, **changes) -> list[dict]:
    """n valid ping records with fresh ids (from the v1 fixture)."""
    base = json.loads((V1 / "ping.jsonl").read_text().splitlines()[0])
    return [dict(base, id=str(uuid.uuid4()), **changes) for _ in range(n)]


def _write(path: Path, recs: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def _old_content_hash(envelope: list, env_json: bytes, body_json: bytes) -> bytes:
    """content_hash as the code before 0021 had it (commit c019b7e): the whole sha256."""
    return hashlib.sha256(orjson.dumps([*envelope, orjson.Fragment(env_json), orjson.Fragment(body_json)])).digest()


def _full_sha256(rec: dict, monkeypatch) -> bytes:
    """The 32-byte sha256 the code before 0021 stored for ``rec``."""
    with monkeypatch.context() as m:
        m.setattr(cp, "content_hash", _old_content_hash)
        return cp._record(json.dumps(rec).encode(), 1, Dims()).digest


def _hashes(url: str) -> dict[str, bytes | None]:
    with psycopg.connect(url) as c:
        return dict(c.execute("SELECT id::text, content_sha256 FROM result_ids").fetchall())


def _sizes(url: str) -> tuple[int, int]:
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("VACUUM result_ids")
        return c.execute("SELECT pg_total_relation_size('result_ids'), pg_relation_size('result_ids')").fetchone()


def test_stored_hashes_are_the_first_16_bytes_of_the_sha256(empty_db, tmp_path, monkeypatch):
    recs = _records(20)
    stats = ingest([_write(tmp_path / "a.jsonl", recs)], empty_db)
    assert stats.as_json() == {"ingested": 20, "duplicates": 0, "quarantined": 0}
    assert _hashes(empty_db) == {r["id"]: _full_sha256(r, monkeypatch)[:16] for r in recs}


def test_records_stored_before_the_upgrade_stay_duplicates_and_conflicts(fresh_db, tmp_path, monkeypatch):
    """Records ingested at 0020 with full sha256 hashes (by the ingest code of 0020's time)
    -> upgrade: every hash is cut to its first 16
    bytes, result_ids shrinks by ~16 bytes a row (the rewrite, not dead rows), a re-ingest is
    all duplicates and a changed record under a stored id an id_conflict."""
    n = 3000
    recs = _records(n)
    old = _write(tmp_path / "old.jsonl", recs)
    migrate.downgrade(_sa(fresh_db), PREVIOUS)
    assert ingest_with_old_code([old], fresh_db, tmp_path / "code", rev=BEFORE_SHORT_HASH) == n
    before = _hashes(fresh_db)
    assert before == {r["id"]: _full_sha256(r, monkeypatch) for r in recs} and len(before[recs[0]["id"]]) == 32
    total0, heap0 = _sizes(fresh_db)

    migrate.upgrade(_sa(fresh_db), REV)
    assert _hashes(fresh_db) == {k: h[:16] for k, h in before.items()}
    total1, heap1 = _sizes(fresh_db)
    # 32 + 1 -> 16 + 1 bytes of hash: a 88-byte row becomes 72 (8-byte alignment)
    assert heap1 <= heap0 - 14 * n and total1 <= total0 - 14 * n, (total0, heap0, total1, heap1)

    migrate.upgrade(_sa(fresh_db), "head")
    changed = _write(tmp_path / "changed.jsonl", [dict(recs[0], run="other-run")])
    assert ingest([old], fresh_db).as_json() == {"ingested": 0, "duplicates": n, "quarantined": 0}
    assert ingest([changed], fresh_db).as_json() == {"ingested": 0, "duplicates": 0, "quarantined": 1}
    with psycopg.connect(fresh_db) as c:
        reason = c.execute("SELECT reason FROM quarantine").fetchone()[0]
    assert reason.startswith(f"id_conflict: record {recs[0]['id']} is stored with content hash {before[recs[0]['id']][:16].hex()}")

    # and back: NULL, which the code of 0020 reads as "stored before content hashes" (a duplicate)
    migrate.downgrade(_sa(fresh_db), PREVIOUS)
    assert set(_hashes(fresh_db).values()) == {None}
    migrate.upgrade(_sa(fresh_db), "head")


def test_records_stored_after_the_upgrade(empty_db, tmp_path):
    recs = _records(50)
    f = _write(tmp_path / "a.jsonl", recs)
    assert ingest([f], empty_db).ingested == 50
    assert {len(h) for h in _hashes(empty_db).values()} == {16}
    assert ingest([f], empty_db).as_json() == {"ingested": 0, "duplicates": 50, "quarantined": 0}
    changed = _write(tmp_path / "b.jsonl", [dict(recs[7], status="timeout", error="no answer")])
    assert ingest([changed], empty_db).as_json() == {"ingested": 0, "duplicates": 0, "quarantined": 1}


def test_rows_inserted_through_the_results_view_then_ingested(empty_db, tmp_path, monkeypatch):
    """The results view stores the content_sha256 it is given: none, the full sha256 (what a
    writer of before 0021 computes) or the 16 bytes. Ingesting the same records afterwards finds
    duplicates in all three cases; a changed record under such an id is an id_conflict."""
    recs = _records(3)
    given = [None, _full_sha256(recs[1], monkeypatch), _full_sha256(recs[2], monkeypatch)[:16]]
    with psycopg.connect(empty_db) as c:
        for rec, h in zip(recs, given):
            v = rec["vantage"]
            c.execute(
                "INSERT INTO results (id, schema, kind, campaign, run, unit, vantage_id, provider, region,"
                " network_profile, started_at, status, error, env, body, content_sha256)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (rec["id"], rec["schema"], rec["kind"], rec["campaign"], rec["run"], rec.get("unit"), v["id"],
                 v["provider"], v.get("region"), v.get("network_profile"), rec["started_at"], rec["status"],
                 rec.get("error"), json.dumps(rec.get("env", {})), json.dumps(rec["body"]), h),
            )  # fmt: skip
    assert _hashes(empty_db) == {r["id"]: h for r, h in zip(recs, given)}
    f = _write(tmp_path / "a.jsonl", recs)
    assert ingest([f], empty_db).as_json() == {"ingested": 0, "duplicates": 3, "quarantined": 0}
    changed = _write(tmp_path / "b.jsonl", [dict(r, run="other-run") for r in recs[1:]])
    assert ingest([changed], empty_db).as_json() == {"ingested": 0, "duplicates": 0, "quarantined": 2}
