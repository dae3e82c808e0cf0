"""Lossless round trip: every fixture record that ingests comes back from
db.records.iter_records JSON-equal to its line (same keys, values and JSON types, so the same
content hash as ingest stored), ordered by (started_at, id) and filtered as asked."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import psycopg
import pytest

from collectors.ingest import ingest
from collectors.parse import content_hash
from db.records import iso_utc, iter_records
from db.writer.encode import PG_EPOCH, US, canonical_json
from vantage_agent.records import parse_line

pytestmark = pytest.mark.local
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FILES = sorted((FIXTURES / "results").rglob("*.jsonl")) + sorted((FIXTURES / "demo" / "records").glob("*.jsonl"))


def record_hash(rec: dict) -> bytes:
    """collectors.parse.content_hash of a record given back (what ingest computed from its line)."""
    v = rec["vantage"]
    started = (datetime.fromisoformat(rec["started_at"]) - PG_EPOCH) // US
    envelope = [rec["id"], rec["schema"], rec["kind"], rec["campaign"], rec["run"], rec["unit"], v["id"],
                v["provider"], v["region"], v["network_profile"], started, rec["status"], rec["error"]]  # fmt: skip
    return content_hash(envelope, canonical_json(rec["env"]), canonical_json(rec["body"]))


def as_written(line: bytes) -> dict | None:
    """The line as a record in canonical envelope form (defaults filled, started_at in UTC),
    None for a line that is not a valid record."""
    try:
        env, _ = parse_line(line)
        obj = json.loads(line)  # exact integers, floats stay floats
    except ValueError:
        return None
    v = obj["vantage"]
    return {
        **obj, "unit": obj.get("unit"), "error": obj.get("error"), "env": obj.get("env", {}),
        "vantage": {"id": v["id"], "provider": v["provider"], "region": v.get("region"),
                    "network_profile": v.get("network_profile")},
        "started_at": iso_utc(env.started_at),
    }  # fmt: skip


def test_every_fixture_record_round_trips(empty_db):
    stats = ingest(FILES, empty_db)
    assert stats.ingested > 200, stats.as_json()
    written: dict[str, list[dict]] = {}
    for f in FILES:
        for line in f.read_bytes().splitlines():
            if (rec := as_written(line)) is not None:
                written.setdefault(rec["id"], []).append(rec)
    with psycopg.connect(empty_db) as conn:
        stored = dict(conn.execute("SELECT id::text, content_sha256 FROM results").fetchall())
        got = list(iter_records(conn))
    assert len(got) == len(stored) == stats.ingested
    kinds = set()
    for rec in got:
        # byte-equal canonical JSON: same keys, values and JSON types (10 is not 10.0)
        assert canonical_json(rec) in {canonical_json(w) for w in written[rec["id"]]}, rec["id"]
        assert record_hash(rec) == stored[rec["id"]], rec["id"]
        kinds.add(rec["kind"])
    assert kinds == {"ping", "dns_query", "page_load", "link_check", "atlas"}
    keys = [(datetime.fromisoformat(r["started_at"]), r["id"]) for r in got]
    assert keys == sorted(keys)


def test_filters(empty_db):
    ingest(FILES, empty_db)
    with psycopg.connect(empty_db, autocommit=True) as conn:
        every = list(iter_records(conn))
        for key in ("campaign", "kind", "run"):
            value = every[len(every) // 2][key]
            want = [r for r in every if r[key] == value]
            assert list(iter_records(conn, **{key: value})) == want and 0 < len(want) < len(every)
        assert list(iter_records(conn, campaign="no-such-campaign")) == []


def test_bodies_equal_in_python_but_not_in_json_stay_apart(empty_db, tmp_path):
    """Shapes are cached by value in the ingest worker: 5, 5.0 and True (and 0.0, -0.0) are
    equal in Python, not in JSON; each record keeps its own."""
    line = (FIXTURES / "results" / "v1" / "dns_query.jsonl").read_text().splitlines()[0]
    base = json.loads(line)
    variants = [5.0, 5, 7.5]
    lines = []
    for i, v in enumerate(variants):
        rec = {**base, "id": f"00000000-0000-4000-8000-{i:012d}", "body": {**base["body"], "timeout_s": v}}
        lines.append(json.dumps(rec))
    rec = {**base, "id": "00000000-0000-4000-8000-000000000009", "body": {**base["body"], "cache_warmed": True}}
    lines += [json.dumps(rec), json.dumps({**rec, "id": "00000000-0000-4000-8000-000000000010",
                                           "body": {**base["body"], "cache_warmed": None}})]
    (tmp_path / "v.jsonl").write_text("\n".join(lines) + "\n")
    assert ingest([tmp_path], empty_db).ingested == len(lines)
    with psycopg.connect(empty_db) as conn:
        got = {r["id"]: r for r in iter_records(conn)}
    for line in lines:
        want = as_written(line.encode())
        assert canonical_json(got[want["id"]]) == canonical_json(want)
