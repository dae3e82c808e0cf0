"""Idempotent, loss-free ingest of result files (``*.jsonl``, plain or gzip-compressed).

Contract (ARCHITECTURE.md "Ingest is idempotent and loses nothing"): every non-blank line
ends as exactly one of
- **ingested**: a new record, COPYed into the compact store (``result_ids`` with
  ``content_sha256``, the first 16 bytes of the sha256 of the record's canonical JSON
  (`collectors.parse.content_hash`), and its kind's table; see `collectors.parse.split`,
  `db.writer.store` and docs/store.md) in the batch's ``ingest_batches`` row;
- **duplicate**: its id is already stored with the same content hash (a re-run);
- **quarantined**: a row in ``quarantine`` (file, line, reason, raw text; unique on file +
  line) and the rest of the file goes on. Nothing in a line crashes a run or stops the other
  files (collectors/quarantine.py). Quarantined are: malformed JSON and invalid records
  (collectors/parse.py), JSON that is
  not strict RFC 8259 (NaN / Infinity, a UTF-8 BOM, lone surrogates such as ``\\ud800``,
  invalid UTF-8, numbers beyond a double), NUL anywhere (``\\u0000`` or a raw byte:
  PostgreSQL text and jsonb cannot hold it, and replacing it would store something the agent
  did not write), lines over ``MAX_LINE_BYTES`` (16 MiB; read in pieces, never held whole:
  collectors/read.py), a file named ``*.gz`` that is not gzip (one row, line 1; gzip content is recognised by its
  magic bytes whatever the name), the point where a gzip file breaks off (the lines before
  it are ingested), and ``id_conflict``: a different record under a stored id (the reason
  carries both content hashes).

A quarantined line that later ingests or matches the stored record (the file was fixed) has
its quarantine row deleted: the table holds open problems only.

Every batch is one transaction: a SIGKILL at any moment leaves whole batches or nothing,
and running ingest again stores every valid record exactly once. The number of rows COPY
reports is checked against the rows sent before the commit (`CountMismatch`). A stopped
database ends the run with `StoreUnavailable`; committed batches are kept.

Framing: a worker encodes each record as one row of PostgreSQL's binary COPY format (every
value length-prefixed: db/writer/encode.py), so no character inside a value can split a row or
shift a column. Parsing (pydantic validation) is the expensive part; it runs in worker
processes, one per core, which die with the ingest process (PR_SET_PDEATHSIG), while the main
process probes ids and hands the batches to the writer (db/writer/), which streams COPY into
Postgres and updates the rollups.

This module is the orchestration: files (collectors/read.py) -> chunks -> parsers
(collectors/parse.py, a process pool) -> one transaction per batch (dedup, the writer,
quarantine).
"""

from __future__ import annotations

import ctypes
import os
import signal
import weakref
from collections import deque
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

import psycopg

from collectors import quarantine
from collectors.errors import CountMismatch, IngestError, StoreUnavailable
from collectors.parse import parse_chunk, parse_lines
from collectors.read import Chunk, chunks, result_files
from db.writer import encode
from db.writer.batch import Parsed
from db.writer.rollups import vacuum_rollups
from db.writer.store import Store
from vantage_agent import errors

__all__ = ["CountMismatch", "IngestError", "IngestStats", "StoreUnavailable", "ingest", "result_files"]

SMALL_INPUT_BYTES = 1 << 20  # files (as on disk) parsed in the ingest process itself, without workers
VACUUM_EVERY = 2  # batches (~64 MB of input) between two VACUUMs of the rollups: ~0.7 us a record at 1 M dns_query records


@dataclass
class IngestStats:
    ingested: int = 0
    duplicates: int = 0
    quarantined: int = 0
    reasons: list[str] = field(default_factory=list)  # "file:line: reason", all of them

    def as_json(self) -> dict[str, int]:
        return {"ingested": self.ingested, "duplicates": self.duplicates, "quarantined": self.quarantined}


@dataclass
class _Outcome:
    ingested: int = 0
    duplicates: int = 0
    bad: list[tuple[str, int, str, str]] = field(default_factory=list)


def _store_once(store: Store, chunk: Chunk, p: Parsed, row_by_row: bool, probe: bool = True) -> _Outcome:
    """One batch in one transaction: probe the batch's ids once, sort each line into new /
    duplicate / id_conflict, COPY the new rows, quarantine, resolve fixed lines. Without
    ``probe`` every id is taken as new: result_ids' primary key refuses a stored one
    (UniqueViolation, the batch rolls back and `_store` runs it again with the probe)."""
    conn = store.conn
    out = _Outcome(bad=list(p.bad))
    lines: list[bytes] | None = None

    def line(lineno: int) -> bytes:
        nonlocal lines
        lines = lines if lines is not None else chunk.block.split(b"\n")
        return lines[lineno - chunk.first]

    def raw(lineno: int) -> str:
        return quarantine.quarantine_text(line(lineno).rstrip(b"\r"))

    def reparse(idx: list[int]) -> Parsed:  # `db.writer.rollups.add_rollups`: records idx parsed again
        r = parse_lines(chunk.source, [(p.lines[i], line(p.lines[i])) for i in idx])
        if r.bad or len(r.ids) != len(idx):
            raise IngestError(f"{chunk.source}: line {chunk.first}ff: a second parse of the batch differs from the first")
        return r

    with conn.transaction(), conn.cursor() as cur:
        known: dict[str, tuple] = {}
        if p.ids and probe:
            known = store.stored(cur, p.ids)
        new: list[int] = []
        fine: list[int] = []  # lines stored or matching the stored record
        if not known and len(set(p.ids)) == len(p.ids):
            new = list(range(len(p.ids)))  # the common case: all new, each once
        else:
            for i, rid in enumerate(p.ids):
                have = known.get(rid)
                if have is None:
                    known[rid] = (p.hashes[i], chunk.source, p.lines[i])
                    new.append(i)
                elif have[0] is None or have[0] == p.hashes[i]:  # None: stored before content hashes
                    out.duplicates += 1
                    fine.append(p.lines[i])
                else:
                    reason = quarantine.id_conflict(rid, have, p.hashes[i])
                    out.bad.append((chunk.source, p.lines[i], reason, raw(p.lines[i])))
        if new:
            batch = store.new_batch(cur, chunk.source)
        if not row_by_row:
            out.ingested = store.copy(cur, p, new, batch, reparse) if new else 0
            fine += (p.lines[i] for i in new)
        else:  # Postgres refused a value that passed our checks: find the line(s)
            for i in new:
                try:
                    with conn.transaction():
                        out.ingested += store.copy(cur, p, [i], batch, reparse)
                    fine.append(p.lines[i])
                except psycopg.DataError as exc:
                    reason = f"rejected by the store: {errors.first_line(exc)}"
                    out.bad.append((chunk.source, p.lines[i], reason, raw(p.lines[i])))
        if out.bad:
            quarantine.add(cur, out.bad)
        if fine:
            quarantine.resolve(cur, chunk.source, fine)
    return out


_STORES: "weakref.WeakKeyDictionary[psycopg.Connection, Store]" = weakref.WeakKeyDictionary()


def _store(target: Store | psycopg.Connection, chunk: Chunk, parsed: Parsed, stats: IngestStats) -> None:
    """Store one parsed chunk. ``target``: a `Store`, or a connection (collectors/s3.py), whose
    `Store` (and its caches) lives as long as the connection."""
    if isinstance(target, Store):
        store = target
    elif (store := _STORES.get(target)) is None:
        store = _STORES[target] = Store(target)
    store.prepare(parsed)
    row_by_row = False
    # Batches go without the probe (which costs Postgres a few us per id, as much as the COPY),
    # the primary key finding a stored id, until one of the file's batches meets one: then the
    # file's batches probe (a re-run of a file is all duplicates).
    probe = chunk.source in store.probed
    for _ in range(5):
        try:
            out = _store_once(store, chunk, parsed, row_by_row, probe)
            break
        except encode.CountMismatch as exc:  # the writer's, as this module's error tree has it
            raise CountMismatch(*exc.args) from None
        except psycopg.errors.UniqueViolation:
            # a stored id (a re-run), or a concurrent ingest committed some of these ids meanwhile: probe
            probe = True
            store.probed.add(chunk.source)
            continue
        except psycopg.DataError:
            row_by_row = True
    else:
        raise IngestError(f"{chunk.source}: line {chunk.first}ff: batch kept colliding with a concurrent ingest")
    stats.ingested += out.ingested
    stats.duplicates += out.duplicates
    stats.quarantined += len(out.bad)
    stats.reasons.extend(f"{s}:{ln}: {reason}" for s, ln, reason, _ in out.bad)


# --- driver ------------------------------------------------------------------------------

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _die_with_parent(parent: int) -> None:
    """Worker initializer: the kernel SIGKILLs this worker when the ingest process dies (even
    by SIGKILL), so no parser is left blocked on a pipe."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def _bounded_map(pool: ProcessPoolExecutor, fn, items: Iterator, window: int) -> Iterator[tuple]:
    """(item, fn(item)) in order, like pool.map but with at most ``window`` items in flight
    (bounded memory)."""
    pending: deque = deque()
    for item in items:
        pending.append((item, pool.submit(fn, item)))
        if len(pending) >= window:
            item, fut = pending.popleft()
            yield item, fut.result()
    while pending:
        item, fut = pending.popleft()
        yield item, fut.result()


def _input_bytes(files: list[Path]) -> int:
    """The files' size on disk (one that cannot be read counts as large: its chunk reader says why)."""
    try:
        return sum(f.stat().st_size for f in files)
    except OSError:
        return SMALL_INPUT_BYTES + 1


def ingest(paths: Iterable[Path], url: str, *, workers: int | None = None) -> IngestStats:
    """Ingest every result file under ``paths`` into the database at ``url`` (libpq URL)."""
    files = result_files(paths)
    stats = IngestStats()
    if workers is None:
        # Parser processes pay off from a few batches on; below that their start (~140 ms, more
        # than parsing a small run file) would dominate: a collector ingests many small objects.
        small = _input_bytes(files) <= SMALL_INPUT_BYTES
        workers = 1 if small else min(2, os.cpu_count() or 1)
    pool = ProcessPoolExecutor(workers, initializer=_die_with_parent, initargs=(os.getpid(),)) if workers > 1 else None
    vacuum: tuple | None = None
    try:
        with psycopg.connect(url) as conn:
            store = Store(conn)
            if pool is None:
                parsed = ((c, parse_chunk(c)) for c in chunks(files))
            else:
                parsed = _bounded_map(pool, parse_chunk, chunks(files), workers * 2)
            for n, (chunk, p) in enumerate(parsed, 1):
                _store(store, chunk, p, stats)
                if n % VACUUM_EVERY == 0:
                    vacuum = vacuum_rollups(url, vacuum)
    except psycopg.OperationalError as exc:
        raise StoreUnavailable(
            f"the database stopped or cannot be reached ({errors.first_line(exc)}): run `dnscamp db up` (or check "
            f"DNSCAMP_DATABASE_URL), then the same ingest again; the {stats.ingested} records "
            "of committed batches are kept"
        ) from None
    except BrokenProcessPool:  # a parser was killed (e.g. by the OOM killer)
        raise IngestError(
            f"a parser process died: run the same ingest again; the {stats.ingested} records of committed batches are kept"
        ) from None
    except psycopg.Error as exc:  # e.g. a store not migrated for this version
        raise IngestError(f"the store refused the ingest: {errors.first_line(exc)}") from None
    finally:
        if vacuum is not None:
            vacuum[0].close()
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
    return stats
