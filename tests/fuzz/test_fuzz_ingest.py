"""Ingest under fuzzing, into the session's real embedded Postgres.

Each example is one result file (plain or gzip) of dozens of generated lines. The invariant of
ingest never raises; ingested + duplicates + quarantined == non-blank lines; every
accepted record reads back equal (envelope columns, env and body as JSON values, text
byte-equal); a rerun ingests nothing. On top, what the contract says line by line: valid
records are stored, exact duplicates are duplicates, a different record under a stored id and
every bad line are quarantined, and every view still selects.
"""

from __future__ import annotations

import gzip
import json
import uuid
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors.ingest import ingest
from tests.fuzz import strategies as S
from tests.fuzz.conftest import FACTOR, TALLY, examples
from tests.store_util import empty_store
from vantage_agent.records import RecordError, parse_line

pytestmark = pytest.mark.local

LINES = 10_000
PER_EXAMPLE = (40, 60)
VIEWS = sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "db" / "views").glob("v_*.sql"))
ENVELOPE = ("id", "schema", "kind", "campaign", "run", "unit", "vantage_id", "provider", "region",
            "network_profile", "started_at", "status", "error", "env::text", "body::text")  # fmt: skip


def _json(v):
    """JSON value for comparison: numbers by value (jsonb keeps 1e308 as 1000...0), bools apart from numbers."""
    if isinstance(v, bool):
        return ("bool", v)
    if isinstance(v, (int, float)):
        return Decimal(repr(v)) if isinstance(v, float) else Decimal(v)
    if isinstance(v, list):
        return [_json(x) for x in v]
    if isinstance(v, dict):
        return {k: _json(x) for k, x in v.items()}
    return v


def expected_row(raw: bytes) -> tuple:
    """What the store must hold for an accepted line, from the line itself (not from the models)."""
    r = json.loads(raw)
    v = r["vantage"]
    return (
        uuid.UUID(r["id"]), r["schema"], r["kind"], r["campaign"], r["run"], r.get("unit"), v["id"], v["provider"],
        v.get("region"), v.get("network_profile"), datetime.fromisoformat(r["started_at"].replace("Z", "+00:00")),
        r["status"], r.get("error"), _json(r.get("env") or {}), _json(r["body"]),
    )  # fmt: skip


def stored_rows(conn: psycopg.Connection) -> dict[uuid.UUID, tuple]:
    rows = conn.execute(f"SELECT {', '.join(ENVELOPE)} FROM results").fetchall()
    return {r[0]: (*r[:13], _json(json.loads(r[13])), _json(json.loads(r[14]))) for r in rows}


def run_example(url: str, tmp: Path, lines: list[S.Line], gz: bool, final_newline: bool, v: S.Violations) -> int:
    with psycopg.connect(url, autocommit=True) as c:
        empty_store(c)
    path = tmp / ("fuzz.jsonl.gz" if gz else "fuzz.jsonl")
    data = S.file_bytes(lines, final_newline)
    path.write_bytes(gzip.compress(data) if gz else data)
    n = sum(x.role != "blank" for x in lines)
    for x in lines:  # the records layer sees the same lines (never anything but RecordError)
        if x.role != "blank":
            try:
                parse_line(x.raw)
            except RecordError:
                pass
            except Exception as exc:  # noqa: BLE001
                v.check(False, f"parse_line raised {type(exc).__name__}", x)
    TALLY["parse_line (in ingest)"] += n
    try:
        stats = ingest([path], url)
    except Exception as exc:  # noqa: BLE001 - the property: ingest never raises
        v.check(False, f"ingest raised {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}")
        return n
    got = (stats.ingested, stats.duplicates, stats.quarantined)
    v.check(sum(got) == n, f"ingested + duplicates + quarantined = {got} != {n} lines")
    src = str(path.resolve())
    with psycopg.connect(url) as c:
        rows = stored_rows(c)
        quarantined = {ln: reason for ln, reason in c.execute(
            "SELECT line, reason FROM quarantine WHERE source_file = %s AND resolved_at IS NULL"
            if _has_resolved(c) else "SELECT line, reason FROM quarantine WHERE source_file = %s", (src,))}  # fmt: skip
        v.check(len(rows) == stats.ingested, f"{len(rows)} rows stored, {stats.ingested} counted as ingested")
        v.check(len(quarantined) == stats.quarantined, f"{len(quarantined)} quarantine rows, {stats.quarantined} counted")
        for view in VIEWS:
            try:
                c.execute(f"SELECT * FROM {view}").fetchall()
            except psycopg.Error as exc:
                c.rollback()
                v.check(False, f"SELECT * FROM {view} fails on stored data: {str(exc).splitlines()[0]}")
    first: dict[str, bytes] = {}
    for lineno, x in enumerate(lines, 1):
        if x.role == "blank":
            continue
        stored = rows.get(uuid.UUID(x.id)) if x.id else None
        if x.role == "valid":
            first.setdefault(x.id, x.raw)
            if v.check(stored is not None, "valid record not stored", x):
                v.check(stored == expected_row(x.raw), "stored record reads back different", x)
        elif x.role == "dup":
            v.check(lineno not in quarantined, "exact duplicate line quarantined", x)
        elif x.role == "conflict":
            v.check("id_conflict" in quarantined.get(lineno, ""), "different record under a stored id not quarantined as id_conflict", x)
        elif x.role == S.MUST:
            v.check(lineno in quarantined, f"bad line not quarantined: {x.why.split()[0]}", x)
            v.check(stored is None, f"bad line stored: {x.why.split()[0]}", x)
        else:  # EITHER: stored (and equal) or quarantined, not both, not neither
            if stored is not None:
                v.check(lineno not in quarantined, f"line both stored and quarantined: {x.why.split()[0]}", x)
                v.check(stored == expected_row(x.raw), f"accepted {x.why.split()[0]} line reads back different", x)
            else:
                v.check(lineno in quarantined, f"line neither stored nor quarantined: {x.why.split()[0]}", x)
    dups = sum(x.role == "dup" for x in lines)
    v.check(stats.duplicates == dups, f"{stats.duplicates} duplicates counted, {dups} exact duplicate lines")
    try:
        again = ingest([path], url)
    except Exception as exc:  # noqa: BLE001
        v.check(False, f"re-ingest raised {type(exc).__name__}")
        return n
    got = (again.ingested, again.duplicates, again.quarantined)
    v.check(again.ingested == 0 and sum(got) == n, f"re-ingest of the same file counted {got} for {n} lines")
    return n


_RESOLVED: dict[str, bool] = {}


def _has_resolved(c: psycopg.Connection) -> bool:
    """Quarantine rows are resolved when the line is later ingested: count only open ones."""
    if "v" not in _RESOLVED:
        _RESOLVED["v"] = bool(c.execute(
            "SELECT 1 FROM information_schema.columns WHERE table_name = 'quarantine' AND column_name = 'resolved_at'"
        ).fetchone())  # fmt: skip
    return _RESOLVED["v"]


def test_ingest_contract(empty_db, tmp_path):
    seen = []

    @settings(max_examples=examples(LINES // (PER_EXAMPLE[0] - 4) + 1))
    @given(S.batches(*PER_EXAMPLE), st.integers(0, 4), st.booleans())
    def prop(lines: list[S.Line], gz: int, final_newline: bool) -> None:
        v = S.Violations()
        seen.append(run_example(empty_db, tmp_path, lines, gz == 0, final_newline, v))
        v.raise_any()

    prop()
    TALLY["ingest"] += sum(seen)
    assert sum(seen) >= LINES * min(1, FACTOR), f"only {sum(seen)} generated lines went through ingest"
