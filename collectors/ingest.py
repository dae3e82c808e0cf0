"""Idempotent, loss-free ingest of result files (``*.jsonl`` / ``*.jsonl.gz``).

Contract (ARCHITECTURE.md "Ingest is idempotent and loses nothing"):
- idempotent by record id: each batch is COPYed into a temporary staging table and moved
  with ``INSERT ... ON CONFLICT (id) DO NOTHING``; what conflicts is counted as a duplicate;
- a malformed line, an invalid record or an unknown schema version goes to ``quarantine``
  (file, line, reason, raw text; unique on file + line) and the rest of the file goes on;
- every batch is one transaction, so a SIGKILL at any moment leaves whole batches or
  nothing, and running ingest again stores every valid record exactly once.

Parsing (pydantic validation) is the expensive part; it runs in worker processes, one per
core, while the main process streams COPY into Postgres.
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from collections import deque
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

import psycopg

from vantage_agent.records import RecordError, parse_line

BATCH_LINES = 20_000


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
            out.extend(sorted(x for x in p.rglob("*") if x.is_file() and _is_result_file(x)))
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


def _open_lines(path: Path) -> Iterator[bytes]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as f:
        yield from f


def _copy_text(value: str) -> str:
    """Escape one value for COPY's text format."""
    return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def _parse_chunk(chunk: tuple[str, int, list[bytes], str | None]) -> tuple[bytes, int, list[tuple]]:
    """Worker: validate lines; return (COPY text of the valid lines, how many, quarantine rows).

    Valid lines are shipped to Postgres verbatim (as jsonb) and the envelope columns are
    extracted there, in C, by the INSERT ... SELECT; pydantic has already checked every field."""
    source, first, lines, corrupt = chunk
    out: list[str] = []
    bad: list[tuple[str, int, str, str]] = []
    src = _copy_text(source)
    for i, raw in enumerate(lines):
        lineno = first + i
        text = raw.rstrip(b"\r\n")
        if not text.strip():
            continue  # blank lines (e.g. a trailing newline) are not records
        try:
            parse_line(text)
        except RecordError as exc:
            bad.append((source, lineno, exc.reason, text.decode("utf-8", "replace")))
            continue
        out.append(f"{_copy_text(text.decode())}\t{src}\t{lineno}\n")
    if corrupt:
        # The file broke off here (truncated/corrupt gzip): what was read is kept above.
        bad.append((source, first + len(lines), f"corrupt file: {corrupt}", ""))
    return "".join(out).encode(), len(out), bad


def _chunks(files: list[Path]) -> Iterator[tuple[str, int, list[bytes], str | None]]:
    for path in files:
        source = str(path.resolve())
        buf: list[bytes] = []
        first = 1
        n = 0
        try:
            for n, raw in enumerate(_open_lines(path), start=1):
                if not buf:
                    first = n
                buf.append(raw)
                if len(buf) >= BATCH_LINES:
                    yield source, first, buf, None
                    buf = []
        except (OSError, EOFError, zlib.error) as exc:
            yield source, (first if buf else n + 1), buf, f"{type(exc).__name__}: {exc}"
            continue
        if buf:
            yield source, first, buf, None


_EXTRACT = """
    INSERT INTO results (id, schema, kind, campaign, run, unit, vantage_id, provider, region,
                         network_profile, started_at, status, error, env, body, source_file, source_line)
    SELECT (j->>'id')::uuid, j->>'schema', j->>'kind', j->>'campaign', j->>'run', j->>'unit',
           j->'vantage'->>'id', j->'vantage'->>'provider', j->'vantage'->>'region',
           j->'vantage'->>'network_profile', (j->>'started_at')::timestamptz, j->>'status',
           j->>'error', coalesce(j->'env', '{}'::jsonb), j->'body', source_file, source_line
    FROM ingest_staging
    ON CONFLICT (id) DO NOTHING
"""


def _store(conn: psycopg.Connection, blob: bytes, n: int, bad: list[tuple], stats: IngestStats) -> None:
    try:
        with conn.transaction():
            with conn.cursor() as cur:
                if n:
                    cur.execute(
                        "CREATE TEMP TABLE IF NOT EXISTS ingest_staging "
                        "(j jsonb, source_file text, source_line int) ON COMMIT DELETE ROWS"
                    )
                    with cur.copy("COPY ingest_staging (j, source_file, source_line) FROM STDIN") as copy:
                        copy.write(blob)
                    cur.execute(_EXTRACT)
                    inserted = cur.rowcount
                _quarantine(cur, bad)
    except psycopg.errors.DataError:
        # Python accepted a line that Postgres refuses (e.g. \u0000 in a string): store the
        # batch line by line so that only the offending lines are quarantined.
        _store_one_by_one(conn, blob, bad, stats)
        return
    if n:
        stats.ingested += inserted
        stats.duplicates += n - inserted
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


def _store_one_by_one(conn: psycopg.Connection, blob: bytes, bad: list[tuple], stats: IngestStats) -> None:
    bad = list(bad)
    for row in blob.decode().splitlines():
        text, source, lineno = row.rsplit("\t", 2)
        try:
            with conn.transaction():
                with conn.cursor() as cur:
                    cur.execute(
                        "CREATE TEMP TABLE IF NOT EXISTS ingest_staging "
                        "(j jsonb, source_file text, source_line int) ON COMMIT DELETE ROWS"
                    )
                    with cur.copy("COPY ingest_staging (j, source_file, source_line) FROM STDIN") as copy:
                        copy.write((row + "\n").encode())
                    cur.execute(_EXTRACT)
                    inserted = cur.rowcount
        except psycopg.errors.DataError as exc:
            reason = f"rejected by the store: {str(exc).splitlines()[0]}"
            bad.append((source, int(lineno), reason, text))
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
                for blob, n, bad in _bounded_map(pool, _parse_chunk, _chunks(files), workers * 2):
                    _store(conn, blob, n, bad, stats)
    return stats
