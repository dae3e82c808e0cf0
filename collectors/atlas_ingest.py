"""Ingest RIPE Atlas results (JSON arrays or JSON lines, any firmware) into the store.

- every Atlas result is kept raw in ``atlas_results_raw`` (unique on msm_id, prb_id,
  timestamp, type, destination: ingesting the same results again is a no-op counted as
  duplicates), with a status;
- ping results are parsed by sagan into ``atlas_ping`` (per-packet RTTs, sent/received, avg),
  DNS results into ``atlas_dns`` (one row per response: resolver, rcode, answers from the
  abuf, response time); error results are rows with a status, never dropped;
- only what is not an Atlas result at all goes to the foundation's ``quarantine`` table
  (source_file, line, reason, raw).

Each file is one transaction.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

import psycopg
from psycopg.types.json import Jsonb

from atlas import parse
from vantage_agent import errors


@dataclass
class AtlasIngestStats:
    ingested: int = 0
    duplicates: int = 0
    quarantined: int = 0
    by_type: dict[str, int] = field(default_factory=lambda: {"ping": 0, "dns": 0})
    by_status: dict[str, int] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)

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
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            v = json.loads(line)
        except json.JSONDecodeError as exc:
            yield n, parse.NotAnAtlasResult(f"malformed JSON: {exc}"), line
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


def _dst_key(raw: dict, h: parse.Header) -> str:
    return str(h.dst_addr or raw.get("dst_name") or "")


def ingest_value(cur: psycopg.Cursor, value: Any, *, source_file: str, line: int, raw_text: str,
                 campaign: str | None, stats: AtlasIngestStats) -> None:
    """Store one decoded value (or quarantine it): never raises on what the value holds.

    Each value is stored under a savepoint. What Postgres refuses (a NUL or a NaN in the
    JSON, a number beyond a column's type) is retried as the raw result alone with status
    malformed_response; if even that is refused, the value is quarantined with the reason."""
    try:
        if isinstance(value, parse.NotAnAtlasResult):
            raise value
        if not isinstance(value, dict):  # values are decoded already: a string is no result
            raise parse.NotAnAtlasResult(f"not a JSON object ({type(value).__name__})")
        raw = parse.load(value)
        h = parse.header(raw)
    except parse.NotAnAtlasResult as exc:
        _quarantine(cur, source_file, line, str(exc), raw_text, stats)
        return
    try:
        rows: list = []
        if h.type == "ping":
            rows = [parse.parse_ping(raw)]
        elif h.type == "dns":
            rows = parse.parse_dns(raw)
    except Exception as exc:  # noqa: BLE001 - sagan's odd-input exceptions become a status, not a crash
        rows, parse_error = [], f"could not parse the {h.type} result: {type(exc).__name__}: {exc}"
    else:
        parse_error = None
    status = parse.result_status(rows) if rows else errors.OK
    error = None if status == errors.OK else next((r.error for r in rows if r.error), None) or status
    if parse_error:
        status, error = errors.MalformedResponse.status, parse_error
    try:
        with cur.connection.transaction():
            _store(cur, raw, h, rows, status, error, source_file, line, campaign, stats)
        return
    except _REFUSED as exc:
        refused = f"rejected by the store: {errors.first_line(exc)}"
    try:
        with cur.connection.transaction():
            _store(cur, raw, h, [], errors.MalformedResponse.status, refused, source_file, line, campaign, stats)
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


def _store(cur: psycopg.Cursor, raw: dict, h: parse.Header, rows: list, status: str, error: str | None,
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
        if isinstance(r, parse.PingRow):
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


def ingest_files(files: Iterable[Path], url: str, *, campaign: str | None = None) -> AtlasIngestStats:
    stats = AtlasIngestStats()
    with psycopg.connect(url) as conn:
        for f in files:
            f = Path(f)
            source = str(f.resolve())
            with conn.transaction(), conn.cursor() as cur:
                for line, value, raw_text in iter_items(f):
                    ingest_value(cur, value, source_file=source, line=line, raw_text=raw_text,
                                 campaign=campaign, stats=stats)
    return stats


def ingest_results(results: Iterable[dict], url: str, *, source: str, campaign: str | None = None) -> AtlasIngestStats:
    """Ingest results already in memory (fetch / stream / the testbed run)."""
    stats = AtlasIngestStats()
    with psycopg.connect(url) as conn, conn.transaction(), conn.cursor() as cur:
        for i, r in enumerate(results, 1):
            ingest_value(cur, r, source_file=source, line=i, raw_text=json.dumps(r), campaign=campaign, stats=stats)
    return stats
