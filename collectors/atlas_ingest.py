"""Ingest RIPE Atlas results (JSON arrays or JSON lines, any firmware) into the store.

- every Atlas result is kept raw in ``atlas_results_raw`` (unique on msm_id, prb_id,
  timestamp, type, destination: ingesting the same results again is a no-op counted as
  duplicates), with a status;
- ping results are parsed by sagan into ``atlas_ping`` (per-packet RTTs, sent/received, avg),
  DNS results into ``atlas_dns`` (one row per response: resolver, rcode, answers from the
  abuf, response time); error results are rows with a status, never dropped;
- only what is not an Atlas result at all goes to the foundation's ``quarantine`` table
  (source_file, line, reason, raw).

Each file is one transaction. Results are written in blocks of ``BLOCK`` (parsed by sagan in
Python, then one set-based INSERT of the raw rows and one COPY per parsed table), each block under
one savepoint; a block Postgres refuses anything of is rolled back and written again one result at
a time (``ingest_value``), so a refused result is stored or quarantined exactly as alone and no
other result of its block is lost.
"""

from __future__ import annotations

import gzip
import itertools
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

import psycopg
from psycopg.types.json import Jsonb

from atlas import measurement_types
from atlas import result as atlas_result
from atlas.dns import DnsRow
from atlas.ping import PingRow
from vantage_agent import errors


@dataclass
class AtlasIngestStats:
    ingested: int = 0
    duplicates: int = 0
    quarantined: int = 0
    by_type: dict[str, int] = field(default_factory=lambda: {"ping": 0, "dns": 0})
    by_status: dict[str, int] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    blocks_redone: int = 0  # blocks written again result by result (not in as_json: not about the data)

    def add(self, o: AtlasIngestStats) -> None:
        self.ingested += o.ingested
        self.duplicates += o.duplicates
        self.quarantined += o.quarantined
        for mine, theirs in ((self.by_type, o.by_type), (self.by_status, o.by_status)):
            for k, n in theirs.items():
                mine[k] = mine.get(k, 0) + n
        self.reasons += o.reasons

    def as_json(self) -> dict[str, Any]:
        return {
            "ingested": self.ingested,
            "duplicates": self.duplicates,
            "quarantined": self.quarantined,
            "by_type": dict(self.by_type),
        }


def _open_text(path: Path) -> str:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data.decode("utf-8", errors="replace")


def iter_items(path: Path) -> Iterator[tuple[int, Any, str]]:
    """(line, decoded value or a parse error marker, raw text) for each item of a file.

    A JSON array (what the Atlas API returns) gives one item per element, numbered from 1;
    JSON lines give one item per non-empty line (a line holding an array is expanded).
    """
    text = _open_text(path)
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            arr = json.loads(text)
        except json.JSONDecodeError:
            arr = None
        if isinstance(arr, list):
            for i, v in enumerate(arr, 1):
                yield i, v, json.dumps(v)
            return
    # "\n" only: str.splitlines() also splits on U+2028, U+2029, NEL, \x1c-\x1e, \v and \f, which a
    # JSON string may hold (a result would break into unparseable halves)
    for n, line in enumerate(text.split("\n"), 1):
        line = line.removesuffix("\r")
        if not line.strip():
            continue
        try:
            v = json.loads(line)
        except json.JSONDecodeError as exc:
            yield n, atlas_result.NotAnAtlasResult(f"malformed JSON: {exc}"), line
            continue
        if isinstance(v, list):
            for x in v:
                yield n, x, json.dumps(x)
        else:
            yield n, v, line


_RAW_SQL = """
INSERT INTO atlas_results_raw (campaign, msm_id, prb_id, "timestamp", type, fw, dst_key, status, error,
                               raw, source_file, source_line)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT ON CONSTRAINT uq_atlas_raw_result DO NOTHING
RETURNING id
"""

_PING_SQL = """
INSERT INTO atlas_ping (raw_id, campaign, msm_id, prb_id, "timestamp", fw, af, src_addr, from_addr, dst_addr,
                        dst_name, sent, received, duplicates, rtts_ms, avg_ms, min_ms, max_ms, status, error)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
"""

_DNS_SQL = """
INSERT INTO atlas_dns (raw_id, campaign, msm_id, prb_id, "timestamp", fw, subid, af, resolver, src_addr,
                       from_addr, proto, rcode, qname, qtype, answers, response_time_ms, response_size,
                       status, error)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
"""


def _dst_key(raw: dict, h: atlas_result.Header) -> str:
    return str(h.dst_addr or raw.get("dst_name") or "")


@dataclass
class _Result:
    """One Atlas result parsed, ready to store (the same for both write paths)."""

    raw: dict
    h: atlas_result.Header
    rows: list
    status: str
    error: str | None
    key: tuple  # uq_atlas_raw_result's columns: msm_id, prb_id, timestamp, type, dst_key


def _prepare(value: Any) -> _Result:
    """Check and parse one decoded value; raises atlas_result.NotAnAtlasResult for what is no result."""
    if isinstance(value, atlas_result.NotAnAtlasResult):
        raise value
    if not isinstance(value, dict):  # values are decoded already: a string is no result
        raise atlas_result.NotAnAtlasResult(f"not a JSON object ({type(value).__name__})")
    raw = atlas_result.load(value)
    h = atlas_result.header(raw)
    try:
        rows = measurement_types.parse(raw, h)
    except Exception as exc:  # noqa: BLE001 - sagan's odd-input exceptions become a status, not a crash
        rows, parse_error = [], f"could not parse the {h.type} result: {type(exc).__name__}: {exc}"
    else:
        parse_error = None
    status = atlas_result.result_status(rows) if rows else errors.OK
    error = None if status == errors.OK else next((r.error for r in rows if r.error), None) or status
    if parse_error:
        status, error = errors.MalformedResponse.status, parse_error
    return _Result(raw, h, rows, status, error, (h.msm_id, h.prb_id, h.timestamp, h.type, _dst_key(raw, h)))


def ingest_value(cur: psycopg.Cursor, value: Any, *, source_file: str, line: int, raw_text: str,
                 campaign: str | None, stats: AtlasIngestStats) -> None:
    """Store one decoded value (or quarantine it): never raises on what the value holds.

    Each value is stored under a savepoint. What Postgres refuses (a NUL or a NaN in the
    JSON, a number beyond a column's type) is retried as the raw result alone with status
    malformed_response; if even that is refused, the value is quarantined with the reason."""
    try:
        res = _prepare(value)
    except atlas_result.NotAnAtlasResult as exc:
        _quarantine(cur, source_file, line, str(exc), raw_text, stats)
        return
    try:
        with cur.connection.transaction():
            _store(cur, res.raw, res.h, res.rows, res.status, res.error, source_file, line, campaign, stats)
        return
    except _REFUSED as exc:
        refused = f"rejected by the store: {errors.first_line(exc)}"
    try:
        with cur.connection.transaction():
            _store(cur, res.raw, res.h, [], errors.MalformedResponse.status, refused, source_file, line, campaign,
                   stats)
    except _REFUSED as exc:
        _quarantine(cur, source_file, line, f"rejected by the store: {errors.first_line(exc)}", raw_text, stats)


# What Postgres (or psycopg's adaptation) refuses in a value: bad input, not a broken connection.
_REFUSED = (psycopg.DataError, psycopg.IntegrityError, psycopg.ProgrammingError)


def _quarantine(cur: psycopg.Cursor, source_file: str, line: int, reason: str, raw_text: str,
                stats: AtlasIngestStats) -> None:
    stats.quarantined += 1
    stats.reasons.append(f"{source_file}:{line}: {reason}")
    cur.execute(
        "INSERT INTO quarantine (source_file, line, reason, raw) VALUES (%s, %s, %s, %s) "
        "ON CONFLICT ON CONSTRAINT uq_quarantine_file_line DO NOTHING",
        # text columns hold no NUL: spelled as its JSON escape
        (source_file, line, reason.replace("\x00", "\\u0000"), raw_text[:100_000].replace("\x00", "\\u0000")),
    )


def _store(cur: psycopg.Cursor, raw: dict, h: atlas_result.Header, rows: list, status: str, error: str | None,
           source_file: str, line: int, campaign: str | None, stats: AtlasIngestStats) -> None:
    cur.execute(
        _RAW_SQL,
        (campaign, h.msm_id, h.prb_id, h.timestamp, h.type, h.fw, _dst_key(raw, h), status, error,
         Jsonb(raw), source_file, line),
    )
    got = cur.fetchone()
    if got is None:
        stats.duplicates += 1
        return
    raw_id = got[0]
    for r in rows:
        if isinstance(r, PingRow):
            cur.execute(
                _PING_SQL,
                (raw_id, campaign, r.msm_id, r.prb_id, r.timestamp, r.fw, r.af, r.src_addr, r.from_addr,
                 r.dst_addr, r.dst_name, r.sent, r.received, r.duplicates, list(r.rtts), r.avg, r.min, r.max,
                 r.status, r.error),
            )
        else:
            cur.execute(
                _DNS_SQL,
                (raw_id, campaign, r.msm_id, r.prb_id, r.timestamp, r.fw, r.subid, r.af, r.resolver, r.src_addr,
                 r.from_addr, r.proto, r.rcode, r.qname, r.qtype, Jsonb(r.answers), r.response_time,
                 r.response_size, r.status, r.error),
            )
    # counted once everything of the value is written (a refused row rolls the savepoint back)
    stats.ingested += 1
    stats.by_type[h.type] = stats.by_type.get(h.type, 0) + 1
    stats.by_status[status] = stats.by_status.get(status, 0) + 1


# Results per block: large enough that a block's round trips and savepoint are noise (~5 µs a
# result), small enough that a block redone result by result (one refused result) costs < 1 s.
BLOCK = 2000

_RAW_BLOCK_SQL = """
INSERT INTO atlas_results_raw (campaign, msm_id, prb_id, "timestamp", type, fw, dst_key, status, error,
                               raw, source_file, source_line)
SELECT %s, u.* FROM unnest(%b::bigint[], %b::int[], %b::timestamptz[], %b::text[], %b::int[], %b::text[],
                           %b::text[], %b::text[], %b::jsonb[], %b::text[], %b::int[]) AS u
ON CONFLICT ON CONSTRAINT uq_atlas_raw_result DO NOTHING
RETURNING id, msm_id, prb_id, "timestamp", type, dst_key
"""
_PING_COPY = ("COPY atlas_ping (raw_id, campaign, msm_id, prb_id, \"timestamp\", fw, af, src_addr, from_addr, "
              "dst_addr, dst_name, sent, received, duplicates, rtts_ms, avg_ms, min_ms, max_ms, status, error) "
              "FROM STDIN (FORMAT BINARY)")
_DNS_COPY = ("COPY atlas_dns (raw_id, campaign, msm_id, prb_id, \"timestamp\", fw, subid, af, resolver, src_addr, "
             "from_addr, proto, rcode, qname, qtype, answers, response_time_ms, response_size, status, error) "
             "FROM STDIN (FORMAT BINARY)")
# binary COPY (no text escaping in Python); the values are checked to be of these types (_copyable)
_PING_TYPES = ["int8", "text", "int8", "int4", "timestamptz", "int4", "int4", "text", "text", "text", "text", "int4",
               "int4", "int4", "float8[]", "float8", "float8", "float8", "text", "text"]
_DNS_TYPES = ["int8", "text", "int8", "int4", "timestamptz", "int4", "int4", "int4", "text", "text", "text", "text",
              "text", "text", "text", "jsonb", "float8", "int4", "text", "text"]

_INT4 = range(-(2**31), 2**31)


def _plain(v: Any, kind: type) -> bool:
    """A value COPY writes exactly as the per-result INSERT binds it (exact Python types only:
    sagan passes odd input through, e.g. a list where an address goes, which COPY's text
    format would store as text where the INSERT is refused)."""
    if v is None:
        return True
    if kind is int:
        return type(v) is int and v in _INT4
    if kind is float:
        return type(v) is float or (type(v) is int and abs(v) < 2**53)
    return type(v) is str


def _copyable(r: PingRow | DnsRow) -> bool:
    if isinstance(r, PingRow):
        return (all(_plain(v, int) for v in (r.fw, r.af, r.sent, r.received, r.duplicates))
                and all(_plain(v, str) for v in (r.src_addr, r.from_addr, r.dst_addr, r.dst_name, r.status, r.error))
                and all(_plain(v, float) for v in (r.avg, r.min, r.max))
                and type(r.rtts) is list and all(x is None or type(x) is float for x in r.rtts))
    return (all(_plain(v, int) for v in (r.fw, r.subid, r.af, r.response_size))
            and all(_plain(v, str) for v in (r.resolver, r.src_addr, r.from_addr, r.proto, r.rcode, r.qname, r.qtype,
                                             r.status, r.error))
            and _plain(r.response_time, float) and type(r.answers) is list)


_REDO = "redo"  # a result the set-based write could store differently: its block goes result by result


def _prepare_block(block: list[tuple[int, Any, str]]) -> list[_Result | atlas_result.NotAnAtlasResult | str]:
    """Per item: the parsed result, why it is no Atlas result (to quarantine), or _REDO.
    Pure Python (sagan), no store: what the parse thread runs."""
    out: list[_Result | atlas_result.NotAnAtlasResult | str] = []
    for _, value, _ in block:
        try:
            res = _prepare(value)
        except atlas_result.NotAnAtlasResult as exc:
            out.append(exc)
            continue
        out.append(res if all(_copyable(r) for r in res.rows) else _REDO)
    return out


class _Redo(Exception):
    """The block holds a _REDO result: roll it back and write it result by result."""


def _store_block(cur: psycopg.Cursor, block: list[tuple[int, Any, str]], prepared: list, source_file: str,
                 campaign: str | None, stats: AtlasIngestStats) -> None:
    if _REDO in prepared:
        raise _Redo
    todo: dict[tuple, tuple[int, _Result]] = {}  # by uq_atlas_raw_result key, first of the block wins
    for (line, _, raw_text), res in zip(block, prepared):
        if isinstance(res, atlas_result.NotAnAtlasResult):
            _quarantine(cur, source_file, line, str(res), raw_text, stats)
        elif res.key in todo:
            stats.duplicates += 1
        else:
            todo[res.key] = (line, res)
    if not todo:
        return
    items = list(todo.values())
    cols = list(zip(*(res.key[:4] + (res.h.fw, res.key[4], res.status, res.error, Jsonb(res.raw), source_file, line)
                      for line, res in items)))
    cur.execute(_RAW_BLOCK_SQL, [campaign, *map(list, cols)])
    ids = {tuple(k): i for i, *k in cur.fetchall()}
    stats.duplicates += len(items) - len(ids)
    new = [(ids[res.key], res) for _, res in items if res.key in ids]
    pings = [(i, r) for i, res in new for r in res.rows if isinstance(r, PingRow)]
    dnss = [(i, r) for i, res in new for r in res.rows if isinstance(r, DnsRow)]
    if pings:  # atlas_ping's row trigger (atlas_ping_latest, 0017) fires on COPY too
        with cur.copy(_PING_COPY) as cp:
            cp.set_types(_PING_TYPES)
            for i, r in pings:
                cp.write_row((i, campaign, r.msm_id, r.prb_id, r.timestamp, r.fw, r.af, r.src_addr, r.from_addr,
                              r.dst_addr, r.dst_name, r.sent, r.received, r.duplicates, r.rtts, r.avg, r.min, r.max,
                              r.status, r.error))
    if dnss:
        with cur.copy(_DNS_COPY) as cp:
            cp.set_types(_DNS_TYPES)
            for i, r in dnss:
                cp.write_row((i, campaign, r.msm_id, r.prb_id, r.timestamp, r.fw, r.subid, r.af, r.resolver,
                              r.src_addr, r.from_addr, r.proto, r.rcode, r.qname, r.qtype, Jsonb(r.answers),
                              r.response_time, r.response_size, r.status, r.error))
    for _, res in new:
        stats.ingested += 1
        stats.by_type[res.h.type] = stats.by_type.get(res.h.type, 0) + 1
        stats.by_status[res.status] = stats.by_status.get(res.status, 0) + 1


def _prepared(blocks: Iterator[list]) -> Iterator[tuple[list, list]]:
    """(block, _prepare_block(block)) in order, the next block parsed by a thread while this one
    is written (psycopg waits for Postgres without the GIL: the parse overlaps the server's work)."""
    with ThreadPoolExecutor(1) as pool:
        nxt = None
        for b in blocks:
            fut = pool.submit(_prepare_block, b)
            if nxt is not None:
                yield nxt[0], nxt[1].result()
            nxt = (b, fut)
        if nxt is not None:
            yield nxt[0], nxt[1].result()


def ingest_items(cur: psycopg.Cursor, items: Iterable[tuple[int, Any, str]], *, source_file: str,
                 campaign: str | None, stats: AtlasIngestStats, block: int = BLOCK) -> None:
    """Store (line, value, raw text) items block by block; a block refused in any part is
    rolled back to its savepoint and redone with ingest_value, one result at a time."""
    it = iter(items)
    blocks = iter(lambda: list(itertools.islice(it, block)), [])
    for chunk, prepared in _prepared(blocks):
        part = AtlasIngestStats()
        try:
            with cur.connection.transaction():
                _store_block(cur, chunk, prepared, source_file, campaign, part)
        # any refusal of the block (bad value, or psycopg's own adaptation or COPY error): what
        # ingest_value's _REFUSED does not cover then surfaces there, result by result, as before
        except (psycopg.Error, _Redo):
            stats.blocks_redone += 1
            for line, value, raw_text in chunk:
                ingest_value(cur, value, source_file=source_file, line=line, raw_text=raw_text,
                             campaign=campaign, stats=stats)
        else:
            stats.add(part)


def ingest_files(files: Iterable[Path], url: str, *, campaign: str | None = None,
                 block: int = BLOCK) -> AtlasIngestStats:
    """``block``: results per block; 0 writes every result alone (the per-result path)."""
    stats = AtlasIngestStats()
    with psycopg.connect(url) as conn:
        for f in files:
            f = Path(f)
            source = str(f.resolve())
            with conn.transaction(), conn.cursor() as cur:
                _ingest(cur, iter_items(f), source, campaign, stats, block)
    return stats


def ingest_results(results: Iterable[dict], url: str, *, source: str, campaign: str | None = None,
                   block: int = BLOCK) -> AtlasIngestStats:
    """Ingest results already in memory (fetch / stream / the testbed run)."""
    stats = AtlasIngestStats()
    with psycopg.connect(url) as conn, conn.transaction(), conn.cursor() as cur:
        items = ((i, r, json.dumps(r)) for i, r in enumerate(results, 1))
        _ingest(cur, items, source, campaign, stats, block)
    return stats


def _ingest(cur: psycopg.Cursor, items: Iterable[tuple[int, Any, str]], source: str, campaign: str | None,
            stats: AtlasIngestStats, block: int) -> None:
    if block > 0:
        ingest_items(cur, items, source_file=source, campaign=campaign, stats=stats, block=block)
        return
    for line, value, raw_text in items:
        ingest_value(cur, value, source_file=source, line=line, raw_text=raw_text, campaign=campaign, stats=stats)
