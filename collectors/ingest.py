"""Idempotent, loss-free ingest of result files (``*.jsonl`` / ``*.jsonl.gz``).

Contract (ARCHITECTURE.md "Ingest is idempotent and loses nothing"):
- idempotent by record id: a batch's ids already in the store are dropped (one index probe
  per batch) and the rest is COPYed into ``results``; a collision with a concurrent ingest
  falls back to a staging table + ``INSERT ... ON CONFLICT (id) DO NOTHING``; what was already
  there is counted as a duplicate;
- a malformed line, an invalid record or an unknown schema version goes to ``quarantine``
  (file, line, reason, raw text; unique on file + line) and the rest of the file goes on;
- every batch is one transaction, so a SIGKILL at any moment leaves whole batches or
  nothing, and running ingest again stores every valid record exactly once.

Parsing (pydantic validation) is the expensive part; it runs in worker processes, one per
core, while the main process streams COPY into Postgres.
"""

from __future__ import annotations

import gzip
import os
import re
import zlib
from collections import deque
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

import orjson
import psycopg

from vantage_agent.records import RecordError, parse_line

BATCH_BYTES = 8 << 20  # ~10,000-20,000 records per transaction
READ_BYTES = 256 << 10
ARTIFACTS = "artifacts"  # spool subdirectory for raw files kept beside the records


@dataclass
class IngestStats:
    ingested: int = 0
    duplicates: int = 0
    quarantined: int = 0
    reasons: list[str] = field(default_factory=list)  # "file:line: reason", all of them

    def as_json(self) -> dict[str, int]:
        return {"ingested": self.ingested, "duplicates": self.duplicates, "quarantined": self.quarantined}


class IngestError(Exception):
    """A path that cannot be ingested at all (missing, unreadable)."""


def result_files(paths: Iterable[Path]) -> list[Path]:
    """Expand files and directories into result files, sorted, each once."""
    out: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            # artifacts/ holds what is kept beside records (HAR files, raw Atlas JSON): not records.
            out.extend(
                sorted(
                    x for x in p.rglob("*")
                    if x.is_file() and _is_result_file(x) and ARTIFACTS not in x.relative_to(p).parts[:-1]
                )
            )  # fmt: skip
        elif p.is_file():
            out.append(p)
        else:
            raise IngestError(f"{p}: no such file or directory")
    seen: set[Path] = set()
    uniq = []
    for p in out:
        rp = p.resolve()
        if rp not in seen:
            seen.add(rp)
            uniq.append(p)
    return uniq


def _is_result_file(p: Path) -> bool:
    return (p.name.endswith(".jsonl") or p.name.endswith(".jsonl.gz")) and not p.name.startswith(".")


def _open(path: Path):
    return gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")


COLUMNS = (
    "id", "schema", "kind", "campaign", "run", "unit", "vantage_id", "provider", "region",
    "network_profile", "started_at", "status", "error", "env", "body", "source_file", "source_line",
)  # fmt: skip
_NULL = "\\N"
_SPECIAL = re.compile(r"[\\\t\n\r]")


def _copy_text(value: str | None) -> str:
    """One value in COPY's text format (most values need no escaping: checked first)."""
    if value is None:
        return _NULL
    if not _SPECIAL.search(value):
        return value
    return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def _parse_chunk(chunk: tuple[str, int, bytes, str | None]) -> tuple[list[str], bytes, list[tuple]]:
    """Worker: validate lines; return (record ids, their COPY lines as one block, quarantine rows).

    pydantic validates; orjson re-encodes ``env`` and ``body`` for the jsonb columns (several
    times cheaper than dumping the models), so the per-record cost is about one validation."""
    source, first, block, corrupt = chunk
    lines = block.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    ids: list[str] = []
    out: list[str] = []
    bad: list[tuple[str, int, str, str]] = []
    src = _copy_text(source)
    for i, raw in enumerate(lines):
        lineno = first + i
        text = raw.rstrip(b"\r\n")
        if not text.strip():
            continue  # blank lines (e.g. a trailing newline) are not records
        try:
            env, _ = parse_line(text)
        except RecordError as exc:
            bad.append((source, lineno, exc.reason, text.decode("utf-8", "replace")))
            continue
        obj = orjson.loads(text)
        v = env.vantage
        rid = str(env.id)
        cols = (
            rid, env.schema_, env.kind, env.campaign, env.run, env.unit, v.id, v.provider, v.region,
            v.network_profile, env.started_at.isoformat(), env.status, env.error,
            orjson.dumps(obj.get("env") or {}).decode(), orjson.dumps(obj["body"]).decode(),
        )  # fmt: skip
        ids.append(rid)
        out.append("\t".join(map(_copy_text, cols)) + f"\t{src}\t{lineno}\n")
    if corrupt:
        # The file broke off here (truncated/corrupt gzip): what was read is kept above.
        bad.append((source, first + len(lines), f"corrupt file: {corrupt}", ""))
    return ids, "".join(out).encode(), bad


def _chunks(files: list[Path]) -> Iterator[tuple[str, int, bytes, str | None]]:
    """(file, number of its first line, a block of whole lines, corruption) per batch.

    Blocks of about BATCH_BYTES, cut at a newline: the main process only reads and counts
    newlines (in C); workers split and parse."""
    for path in files:
        source = str(path.resolve())
        first = 1
        rest = b""
        try:
            with _open(path) as f:
                while True:
                    # Small reads: a truncated gzip raises on the read that hits the break, and
                    # everything decompressed before it must still be ingested.
                    piece = f.read(READ_BYTES)
                    if not piece:
                        break
                    rest += piece
                    if len(rest) < BATCH_BYTES:
                        continue
                    cut = rest.rfind(b"\n") + 1
                    if cut == 0:
                        continue
                    block, rest = rest[:cut], rest[cut:]
                    yield source, first, block, None
                    first += block.count(b"\n")
        except (OSError, EOFError, zlib.error) as exc:
            cut = rest.rfind(b"\n") + 1  # whole lines read before the break are kept
            yield source, first, rest[:cut], f"{type(exc).__name__}: {exc}"
            continue
        if rest:
            yield source, first, rest, None  # last line without a newline


_STAGING = "CREATE TEMP TABLE IF NOT EXISTS ingest_staging (LIKE results INCLUDING DEFAULTS) ON COMMIT DELETE ROWS"
_COPY_RESULTS = f"COPY results ({', '.join(COLUMNS)}) FROM STDIN"
_COPY_STAGING = f"COPY ingest_staging ({', '.join(COLUMNS)}) FROM STDIN"
_MOVE = (
    f"INSERT INTO results ({', '.join(COLUMNS)}) SELECT {', '.join(COLUMNS)} FROM ingest_staging "
    "ON CONFLICT (id) DO NOTHING"
)


def _store(conn: psycopg.Connection, ids: list[str], block: bytes, bad: list[tuple], stats: IngestStats) -> None:
    """Store one batch in one transaction.

    Fast path: drop the ids already stored (one index probe for the batch) and COPY the rest
    straight into ``results``. If that collides with a concurrent ingest, or Postgres refuses
    a value, the batch is redone through a staging table with ON CONFLICT DO NOTHING, line by
    line where needed."""
    lines = block.decode().splitlines(keepends=True)
    uniq: dict[str, str] = {}
    for rid, line in zip(ids, lines):
        uniq.setdefault(rid, line)
    try:
        with conn.transaction():
            with conn.cursor() as cur:
                new = list(uniq.values())
                if uniq:
                    cur.execute("SELECT id::text FROM results WHERE id = ANY(%s::uuid[])", (list(uniq),))
                    existing = {r[0] for r in cur.fetchall()}
                    new = [line for rid, line in uniq.items() if rid not in existing]
                    if new:
                        with cur.copy(_COPY_RESULTS) as copy:
                            copy.write("".join(new).encode())
                _quarantine(cur, bad)
    except (psycopg.errors.UniqueViolation, psycopg.DataError):
        _store_via_staging(conn, lines, bad, stats)
        return
    stats.ingested += len(new)
    stats.duplicates += len(ids) - len(new)
    _count_bad(bad, stats)


def _quarantine(cur: psycopg.Cursor, bad: list[tuple]) -> None:
    if bad:
        cur.executemany(
            "INSERT INTO quarantine (source_file, line, reason, raw) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (source_file, line) DO NOTHING",
            bad,
        )


def _count_bad(bad: list[tuple], stats: IngestStats) -> None:
    stats.quarantined += len(bad)
    stats.reasons.extend(f"{s}:{ln}: {reason}" for s, ln, reason, _ in bad)


def _move(conn: psycopg.Connection, lines: list[str]) -> int:
    with conn.cursor() as cur:
        cur.execute(_STAGING)
        with cur.copy(_COPY_STAGING) as copy:
            copy.write("".join(lines).encode())
        cur.execute(_MOVE)
        return cur.rowcount


def _store_via_staging(conn: psycopg.Connection, lines: list[str], bad: list[tuple], stats: IngestStats) -> None:
    bad = list(bad)
    try:
        with conn.transaction():
            inserted = _move(conn, lines)
        stats.ingested += inserted
        stats.duplicates += len(lines) - inserted
    except psycopg.DataError:
        # Python accepted a line that Postgres refuses (e.g. \u0000 in a string): store the
        # batch line by line so that only the offending lines are quarantined.
        for line in lines:
            try:
                with conn.transaction():
                    inserted = _move(conn, [line])
            except psycopg.DataError as exc:
                source, lineno = line.rstrip("\n").rsplit("\t", 2)[1:]
                raw = line.replace("\x00", "\\u0000")  # the COPY form of the line; NUL spelled out
                bad.append((source, int(lineno), f"rejected by the store: {str(exc).splitlines()[0]}", raw))
                continue
            stats.ingested += inserted
            stats.duplicates += 1 - inserted
    with conn.transaction():
        with conn.cursor() as cur:
            _quarantine(cur, bad)
    _count_bad(bad, stats)


def _bounded_map(pool: ProcessPoolExecutor, fn, items: Iterator, window: int) -> Iterator:
    """Like pool.map, in order, but with at most ``window`` chunks in flight (bounded memory)."""
    pending: deque = deque()
    for item in items:
        pending.append(pool.submit(fn, item))
        if len(pending) >= window:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()


def ingest(paths: Iterable[Path], url: str, *, workers: int | None = None) -> IngestStats:
    """Ingest every result file under ``paths`` into the database at ``url`` (libpq URL)."""
    files = result_files(paths)
    stats = IngestStats()
    workers = workers if workers is not None else min(2, os.cpu_count() or 1)
    with psycopg.connect(url) as conn:
        if workers <= 1:
            for chunk in _chunks(files):
                _store(conn, *_parse_chunk(chunk), stats)
        else:
            with ProcessPoolExecutor(max_workers=workers) as pool:
                for ids, block, bad in _bounded_map(pool, _parse_chunk, _chunks(files), workers * 2):
                    _store(conn, ids, block, bad, stats)
    return stats
