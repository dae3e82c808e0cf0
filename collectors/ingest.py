"""Idempotent, loss-free ingest of result files (``*.jsonl``, plain or gzip-compressed).

Contract (ARCHITECTURE.md "Ingest is idempotent and loses nothing"): every non-blank line
ends as exactly one of
- **ingested**: a new record, COPYed into the compact store (``result_ids`` with
  ``content_sha256``, the first 16 bytes of the sha256 of the record's canonical JSON
  (`content_hash`), and its
  kind's table; see `split` and docs/store.md) in the batch's ``ingest_batches`` row;
- **duplicate**: its id is already stored with the same content hash (a re-run);
- **quarantined**: a row in ``quarantine`` (file, line, reason, raw text; unique on file +
  line) and the rest of the file goes on. Nothing in a line crashes a run or stops the other
  files. Quarantined are: malformed JSON and invalid records (``parse_line``), JSON that is
  not strict RFC 8259 (NaN / Infinity, a UTF-8 BOM, lone surrogates such as ``\\ud800``,
  invalid UTF-8, numbers beyond a double), NUL anywhere (``\\u0000`` or a raw byte:
  PostgreSQL text and jsonb cannot hold it, and replacing it would store something the agent
  did not write), lines over ``MAX_LINE_BYTES`` (16 MiB; read in pieces, never held whole),
  a file named ``*.gz`` that is not gzip (one row, line 1; gzip content is recognised by its
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
value length-prefixed), so no character inside a value can split a row or shift a column.
Parsing (pydantic validation) is the expensive part; it runs in worker processes, one per
core, which die with the ingest process (PR_SET_PDEATHSIG), while the main process probes
ids and streams COPY into Postgres.
"""

from __future__ import annotations

import ctypes
import gc
import gzip
import hashlib
import json
import math
import operator
import os
import re
import signal
import struct
import uuid
import weakref
import zlib
from collections import deque
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator

import orjson
import psycopg

from vantage_agent import errors
from vantage_agent.records import RecordError, parse_line

# ~16,000-80,000 records per transaction: every batch rewrites the rollup rows of its days and hours
# (a day of a campaign's dns_conn_daily rows is updated by each of its batches); 32 MiB rather than
# 8 cut Postgres's CPU per dns_query record from ~20 to ~10 us on a campaign of 330,000 a day
BATCH_BYTES = 32 << 20
READ_BYTES = 256 << 10
SMALL_INPUT_BYTES = 1 << 20  # files (as on disk) parsed in the ingest process itself, without workers
MAX_LINE_BYTES = 16 << 20  # a longer line is quarantined without being held in memory
RAW_PREFIX = 4096  # what the quarantine keeps of an over-long line
ARTIFACTS = "artifacts"  # spool subdirectory for raw files kept beside the records
GZIP_MAGIC = b"\x1f\x8b"
BOM = b"\xef\xbb\xbf"


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


class StoreUnavailable(IngestError):
    """The database could not be reached or went away during the run."""


class CountMismatch(IngestError):
    """COPY stored a different number of rows than were sent (the batch is rolled back)."""


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


class NotGzip(OSError):
    pass


@contextmanager
def _open(path: Path):
    """The file's bytes, decompressed when it starts with the gzip magic (whatever its name)."""
    with open(path, "rb") as f:
        magic = f.read(2)
        f.seek(0)
        if magic == GZIP_MAGIC:
            with gzip.GzipFile(fileobj=f) as g:
                yield g
        elif path.name.endswith(".gz"):
            raise NotGzip(f"named *.gz but not gzip (starts with {magic!r}, not 1f 8b): rename or recompress it")
        else:
            yield f


# --- records -> binary COPY rows (worker side) -------------------------------------------
#
# The compact store (migration 0012, docs/store.md "Layout"): a record is a row of
# ``result_ids`` (id, content hash, batch, line: what dedup probes) and a row of
# ``dns_queries`` (dns_query records: typed per-record columns, the rest of the body in a
# shared ``dns_shapes`` row) or of ``generic_results`` (every other kind, and a dns_query
# body that does not fit the typed columns: the body as jsonb). The envelope's repeated
# values (campaign, run, vantage...) are one ``contexts`` row, ``env`` one
# ``environments`` row; both and the shapes are keyed by the sha256 of their canonical JSON.
# A worker encodes everything but the dimension ids, which the main process fills in.

# PostgreSQL binary COPY (https://www.postgresql.org/docs/current/sql-copy.html, "Binary Format"):
# signature, flags, header extension length; per row a field count, then per field its
# length (-1 = NULL) and its bytes in the type's binary send format; a -1 field count ends it.
COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
COPY_TRAILER = struct.pack(">h", -1)
_NULL = struct.pack(">i", -1)
_int4 = struct.Struct(">i").pack
_int8 = struct.Struct(">q").pack
PG_EPOCH = datetime(2000, 1, 1, tzinfo=timezone.utc)  # timestamptz is int8 microseconds from here
_US = timedelta(microseconds=1)
_JSONB_V1 = b"\x01"  # jsonb's binary format: a version byte, then the JSON text (json's: the text)
_SORTED = orjson.OPT_SORT_KEYS
INT64_MIN, INT64_MAX, INT32_MIN, INT32_MAX = -(2**63), 2**63 - 1, -(2**31), 2**31 - 1

# dns_query body keys kept per record in typed columns (what varies from query to query);
# every other key of the body is the query's "shape" (resolver, transport, qname, rcode, ...),
# stored once per distinct value. COPY column lists: dimension ids first (filled by the main
# process), then what the worker encodes.
DNS_INT8 = ("t_start", "t_connected", "t_tls_done", "t_query_sent", "t_response", "handshake_bytes_sent",
            "handshake_bytes_received", "query_bytes_sent", "query_bytes_received")  # fmt: skip
DNS_INT4 = ("sequence", "response_size", "handshake_packets_sent", "handshake_packets_received",
            "query_packets_sent", "query_packets_received")  # fmt: skip
DNS_PER_RECORD = frozenset((*DNS_INT8, *DNS_INT4, "answers"))
REGISTRY_COLUMNS = ("batch_id", "id", "content_sha256", "source_line")
DNS_COLUMNS = ("ctx_id", "env_id", "batch_id", "shape_id", "id", "started_at", "unit", "status", "error",
               *DNS_INT8, *DNS_INT4, "answers")  # fmt: skip
GENERIC_COLUMNS = ("ctx_id", "env_id", "batch_id", "shape_id", "id", "started_at", "unit", "kind", "status",
                   "error", "body", "body_exact")  # fmt: skip
# generic_results before 0026_shaped_misfits (no shape_id): what migration 0012 moves rows into
GENERIC_COLUMNS_0012 = tuple(c for c in GENERIC_COLUMNS if c != "shape_id")
DNS, GENERIC = 0, 1
# jsonb keeps numbers as numeric: -0.0 comes back as 0.0 and a float written with a positive
# exponent (orjson: 1e16 and up) as an integer. Such a body also keeps its exact JSON text.
_JSONB_LOSSY = re.compile(rb"-0\.0[,}\]]|[0-9]e\+?[0-9]")


def _jsonb_lossy(data: bytes) -> bool:
    # substring tests first (C speed; a positive exponent of 16 and up starts with 1, 2 or 3):
    # the regex costs ~3 us on a 6 KB page_load body
    return (b"-0.0" in data or b"e1" in data or b"e2" in data or b"e3" in data or b"e+" in data) and \
        _JSONB_LOSSY.search(data) is not None


def _fields(values: Iterable[bytes | str | None]) -> bytes:
    parts = []
    for v in values:
        if v is None:
            parts.append(_NULL)
            continue
        if v.__class__ is str:
            v = v.encode()  # strict UTF-8: a lone surrogate raises here (quarantined)
        parts += (_int4(len(v)), v)
    return b"".join(parts)


def canonical_json(value: Any) -> bytes:
    """Keys sorted, compact; integers beyond 64 bits (which orjson cannot write) by the stdlib."""
    try:
        return orjson.dumps(value, option=_SORTED)
    except orjson.JSONEncodeError:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


HASH_BYTES = 16  # of the sha256 kept (migration 0021): 2^-128 that a changed record passes for a repeat


def content_hash(envelope: list, env_json: bytes, body_json: bytes) -> bytes:
    """The first `HASH_BYTES` of the sha256 of the record as stored (enough to tell a repeat
    from a different record under the same id, 17 bytes less per stored record than all 32):
    the envelope values (id, schema, kind, campaign, run,
    unit, vantage id, provider, region, network profile, started_at, status, error; ``id`` as
    text, ``started_at`` as microseconds since 2000-01-01 UTC) followed by ``env`` and ``body``
    as canonical JSON (keys sorted, orjson's number forms), all in one JSON array. Key order,
    white space and the timestamp's offset do not change it; any value does."""
    data = orjson.dumps([*envelope, orjson.Fragment(env_json), orjson.Fragment(body_json)])
    return hashlib.sha256(data).digest()[:HASH_BYTES]


def stored_envelope(row) -> list:
    """The `content_hash` envelope of a row (id, schema, ..., network_profile, started_at, status, error)."""
    return [str(row[0]), *row[1:10], (row[10] - PG_EPOCH) // _US, *row[11:13]]


def sha(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


_F8 = struct.Struct(">iq").pack  # a binary COPY int8 field: length 8, value
_F4 = struct.Struct(">ii").pack  # an int4 field: length 4, value
_LEN16 = _int4(16)  # the length of a uuid field and of a content hash field (HASH_BYTES)


def dns_split(body: dict) -> bytes | None:
    """A dns_query body's per-record binary COPY fields (DNS_INT8 + DNS_INT4 + answers), or
    None when it does not fit the typed columns (a per-record key absent, or not an integer of
    its column's range: it is then stored whole). The other keys are its shape."""
    try:
        v8, v4, answers = _DNS_INT8_OF(body), _DNS_INT4_OF(body), body["answers"]
        # inline (no call per value): None -> NULL, an int -> its field, anything else -> None (a misfit)
        fields = [_NULL if v is None else _F8(8, v) if v.__class__ is int else None for v in v8]
        fields += [_NULL if v is None else _F4(4, v) if v.__class__ is int else None for v in v4]
    except (KeyError, struct.error):  # struct.error: beyond the column's range
        return None
    if None in fields:
        return None
    answers = canonical_json(answers)
    fields += (_int4(len(answers)), answers)
    return b"".join(fields)


_DNS_INT8_OF, _DNS_INT4_OF = operator.itemgetter(*DNS_INT8), operator.itemgetter(*DNS_INT4)


@dataclass
class Item:
    """One record ready for the store: what the probe compares, and its COPY fields without
    the dimension ids (``reg``: result_ids after batch_id; ``row``: the kind table's after
    its ids)."""

    rid: str
    digest: bytes
    line: int
    table: int  # DNS | GENERIC
    ctx: bytes  # sha256 of the context / environment / shape (None: generic)
    env: bytes
    shape: bytes | None
    reg: bytes
    row: bytes
    month: int  # year * 12 + month - 1 of started_at (UTC): the partition
    status: str
    hourly: bytes | tuple | None  # a dns_query's or page_load's rollup row, or a summed dns_query's tuple (`rollup`)
    started: int  # started_at, µs since PG_EPOCH (ingest_daily: day, first / last, ingest lag)
    unit: str | None  # the planner unit (unit_daily)


# --- rollups (migration 0013_rollups, docs/store.md "Rollups") --------------------------------
# dns_hourly: per hour x campaign x vantage x network profile x resolver x transport, the
# number of dns_query records, of failures, and a histogram of total_ms (t_response - t_start,
# as v_dns_query computes it) of the ok ones over fixed log buckets: bucket 0 holds values
# below HIST_MIN_MS, bucket b >= 1 holds [HIST_MIN_MS * HIST_GAMMA**(b-1), HIST_MIN_MS *
# HIST_GAMMA**b), read back as its geometric middle, so a percentile read from the histogram
# is within sqrt(HIST_GAMMA) - 1 = 0.995 % of the exact one (percentile_disc). The same
# function in SQL (dnscamp_hist_bucket) gives the same bucket (both use the C library's log).
HIST_MIN_MS = 0.001
HIST_GAMMA = 1.02
_LN_GAMMA = math.log(HIST_GAMMA)
_HOUR_US = 3600 * 10**6


def hist_bucket(ms: float) -> int:
    if not ms >= HIST_MIN_MS:
        return 0
    return math.floor(math.log(ms / HIST_MIN_MS) / _LN_GAMMA) + 1


def _text(v: Any) -> str | None:
    """A body value as v_dns_query's ``->>`` reads it (JSON text for a non-string)."""
    return v if v is None or v.__class__ is str else canonical_json(v).decode()


# A record's rollup row (`rollup`), COPYed into the session's temporary tables of migration 0017
# (dnscamp_rollup_temp) and summed by Postgres (`_add_rollups`): a dns_query's that the parser
# does not sum into dnscamp_dns_in (dns_hourly, dns_hourly_status, dns_conn_daily, dns_name_daily),
# a page_load's into dnscamp_pl_in (page_load_daily, page_load_url_daily). A dns_query row
# carries its shape's sha256 and its typed columns (the `dns_split` fields as they are: Postgres
# computes the measures from them and the shape) or, when it has no shape, its body. Its
# ``counted`` is false since the parsers sum every query they can (0017's skip_counted is unused).
HOURLY_COLUMNS = ("hour", "campaign", "vantage_id", "network_profile", "resolver", "transport", "status", "bucket",
                  "counted", "shape", "body", *DNS_INT8, *DNS_INT4, "answers")  # fmt: skip
PAGE_LOAD_COLUMNS = ("day", "campaign", "vantage_id", "network_profile", "status", "body")
PAGE_LOAD_KEYS = ("browser", "dns_mode", "dns_transport", "http", "plt_ms", "url")  # what the page-load rollups read of a body
_HOURLY_START = struct.pack(">h", len(HOURLY_COLUMNS))
_PAGE_LOAD_START = struct.pack(">h", len(PAGE_LOAD_COLUMNS))
_NO_TYPED = _NULL * (len(DNS_INT8) + len(DNS_INT4) + 1)
_FALSE = struct.pack(">ib", 1, 0)
_DAY_US = 24 * _HOUR_US
_STATUS: dict[str, bytes] = {}  # status -> its COPY field


def _status(status: str) -> bytes:
    f = _STATUS.get(status)
    if f is None:
        f = _fields((status,))
        if len(_STATUS) < 1000:
            _STATUS[status] = f
    return f


def rollup(envelope: list, body: dict, body_json: bytes, shape: bytes | None, typed: bytes | None,
           per_record: bool = False) -> bytes | tuple:
    """A record's rollup contribution. A page_load's is a row of PAGE_LOAD_COLUMNS (UTC day,
    campaign, vantage, profile, status, the body's PAGE_LOAD_KEYS as jsonb). A typed dns_query
    whose key values have the JSON types records v1 give them is summed by the parser
    (`Parsed.add`): its contribution is the tuple (UTC hour, key, bucket, status, qname,
    `_conn`). Any other dns_query (and every one with ``per_record``: a store before
    0022_hourly_keys) is a row of HOURLY_COLUMNS for Postgres to sum (`_add_rollups`): its key
    (UTC hour, campaign, vantage, profile, resolver, transport), status, the bucket of its
    total_ms (NULL when not counted: failed, or without both timestamps), then its shape's
    sha256 and ``typed`` (its `dns_split` fields) or, without them, its body."""
    if envelope[2] == "page_load":
        part = canonical_json({k: body[k] for k in PAGE_LOAD_KEYS if k in body})
        return b"".join((_PAGE_LOAD_START, _F8(8, envelope[10] // _DAY_US * _DAY_US), _fields(envelope[3:10:3]),
                         _status(envelope[11]), _int4(len(part) + 1), _JSONB_V1, part))  # fmt: skip
    ok = envelope[11] == "ok"
    bucket = None
    t0, t1 = body.get("t_start"), body.get("t_response")
    if ok and t0.__class__ is int and t1.__class__ is int:
        bucket = hist_bucket(float(t1 - t0) / 1e6)
    resolver, transport = body.get("resolver"), body.get("transport")
    key = (envelope[3], envelope[6], envelope[9], resolver, transport)
    # cached for text (or null) resolver and transport: another JSON type is written as its JSON text
    text = (resolver is None or resolver.__class__ is str) and (transport is None or transport.__class__ is str)
    hour = envelope[10] // _HOUR_US * _HOUR_US
    if text and shape is not None and typed and not per_record:
        qname = body.get("qname")
        if qname is None or qname.__class__ is str:  # what dns_shapes.qname (->>) reads
            conn = _conn(envelope, body, ok)
            if conn is not None:
                return hour, key, bucket, envelope[11], qname, conn
    group = _group(key) if text else _fields((*key[:3], _text(resolver), _text(transport)))
    head = (_HOURLY_START, _F8(8, hour), group, _status(envelope[11]), _NULL if bucket is None else _F4(4, bucket), _FALSE)
    if shape is None or not typed:
        return b"".join((*head, _NULL, _int4(len(body_json) + 1), _JSONB_V1, body_json, _NO_TYPED))
    return b"".join((*head, _int4(32), shape, _NULL, typed))


# dns_conn_daily in the parser processes: a typed dns_query's key and measures, computed as
# v_dns_query and 0017's dnscamp_rollup_dns compute them (the same float arithmetic and log
# buckets), for bodies whose shape values have the JSON types records v1 give them (a boolean or
# null connection_reused / resumed, a number or null access_rtt_ms: JSON_VALUE reads those as
# Python does); other bodies are left to Postgres. `Parsed.add` sums a chunk's (`_tally`).
_CONN_MODES = {m: _fields((m,)) for m in ("fresh", "reuse", "resume")}
_SMALL_IP = frozenset(("do53", "doq", "doh3"))  # 28-byte IP + UDP headers, else 52 (IP + TCP)
_BOOL_OR_NONE = (bool, type(None))


def _bucket16(v: float | None, _floor=math.floor, _log=math.log) -> int | None:
    """dnscamp_hist_bucket16: `hist_bucket` (the same expression, inlined: five a record), None
    for no value, the last bucket beyond ~1e279."""
    if v is None:
        return None
    if not v >= HIST_MIN_MS:
        return 0
    return min(_floor(_log(min(v, 1e280) / HIST_MIN_MS) / _LN_GAMMA) + 1, 32767)


def _conn(envelope: list, body: dict, ok: bool) -> tuple | None:
    reused, resumed, rtt = body.get("connection_reused"), body.get("resumed"), body.get("access_rtt_ms")
    if reused.__class__ not in _BOOL_OR_NONE or resumed.__class__ not in _BOOL_OR_NONE or \
            (rtt is not None and rtt.__class__ is not float and rtt.__class__ is not int):
        return None
    mode = "reuse" if reused else "resume" if resumed else "fresh"
    key = (envelope[10] // _DAY_US, envelope[3], envelope[6], envelope[9], body.get("resolver"), body.get("transport"), mode)
    if not ok:
        return key, 1, 0, None, None, None, None, None
    t0, t1, tc, tt, tq = body["t_start"], body["t_response"], body["t_connected"], body["t_tls_done"], body["t_query_sent"]
    total = None if t0 is None or t1 is None else float(t1 - t0) / 1e6
    hs_from = t0 if tc is None else tc
    hs = None if tt is None or hs_from is None else float(tt - hs_from) / 1e6
    ex = None if t1 is None or tq is None else float(t1 - tq) / 1e6
    mult = total / rtt if total is not None and rtt is not None and rtt >= 0.001 else None
    qs, qr, ps, pr = body["query_bytes_sent"], body["query_bytes_received"], body["query_packets_sent"], body["query_packets_received"]
    ip = packets = None
    if qs is not None and qr is not None and ps is not None and pr is not None:
        packets = (body["handshake_packets_sent"] or 0) + (body["handshake_packets_received"] or 0) + ps + pr
        ip = (body["handshake_bytes_sent"] or 0) + (body["handshake_bytes_received"] or 0) + qs + qr + \
            (28 if body.get("transport") in _SMALL_IP else 52) * packets
        ip = float(ip) if abs(ip) <= INT64_MAX else None
        packets = packets if abs(packets) <= INT32_MAX else None
    return key, 0, packets or 0, _bucket16(total), _bucket16(hs), _bucket16(ex), _bucket16(mult), _bucket16(ip)


def _tally(sums: dict, c: tuple) -> None:
    """Add one record's `_conn` to a chunk's sums: key -> [n, failures, packets, 5 lists of
    buckets] (counted by `_conn_rows`: Counter counts a list in C)."""
    s = sums.get(c[0])
    if s is None:
        s = sums[c[0]] = [0, 0, 0, [], [], [], [], []]
    s[0] += 1
    if c[1]:
        s[1] += 1
        return
    s[2] += c[2]
    for h, b in zip(s[3:], c[3:]):
        if b is not None:
            h.append(b)


CONN_COLUMNS = ("day", "campaign", "vantage_id", "network_profile", "resolver", "transport", "connection", "n",
                "failures", "total_packets", *(f"{m}_{a}" for m in ("total", "handshake", "exchange", "rtt", "ip_bytes")
                                               for a in ("buckets", "counts")))  # fmt: skip
_CONN_START = struct.pack(">h", len(CONN_COLUMNS))


def _conn_rows(sums: dict) -> list[bytes]:
    """A chunk's dns_conn_daily sums as binary COPY rows of CONN_COLUMNS (the histograms as
    array texts: ascending buckets, their counts)."""
    from collections import Counter

    rows = []
    for (day, *key, mode), (n, f, pk, *hists) in sums.items():
        texts = []
        for h in map(Counter, hists):
            bs = sorted(h)
            texts += ("{" + ",".join(map(str, bs)) + "}", "{" + ",".join([str(h[b]) for b in bs]) + "}")
        rows.append(b"".join((_CONN_START, _F8(8, day * _DAY_US), _fields(key), _CONN_MODES[mode], _F8(8, n), _F8(8, f),
                              _F8(8, pk), _fields(texts))))  # fmt: skip
    return rows


_ROLLED_UP = ("dns_query", "page_load")  # the kinds with a rollup row
_HOURLY_GROUPS: dict[tuple, bytes] = {}  # (campaign, vantage, profile, resolver, transport) -> their COPY fields


def _group(key: tuple) -> bytes:
    """The COPY fields of a dns key (campaign, vantage, profile, resolver, transport; text or null), cached."""
    group = _HOURLY_GROUPS.get(key)
    if group is None:
        group = _fields(key)
        if len(_HOURLY_GROUPS) >= _SHA_CACHE_MAX:
            _HOURLY_GROUPS.clear()
        _HOURLY_GROUPS[key] = group
    return group


# A parser's sums (`Parsed.finish`), COPYed into the session's temporary tables (`_SUM_TABLES`)
# and added to dns_hourly, dns_hourly_status and dns_name_daily (`_add_rollups`).
SUM_COLUMNS = {
    "hourly": ("hour", "campaign", "vantage_id", "network_profile", "resolver", "transport", "bucket", "n", "failures"),
    "status": ("hour", "campaign", "vantage_id", "network_profile", "resolver", "transport", "status", "n"),
    "names": ("day", "campaign", "vantage_id", "network_profile", "resolver", "transport", "qname", "status", "n"),
}
_SUM_START = {t: struct.pack(">h", len(c)) for t, c in SUM_COLUMNS.items()}


# Per-process caches of dimension hashes (a worker sees the same contexts, environments and
# shapes over and over): value -> sha256, bounded.
_SHA_CACHE: dict[Any, tuple[bytes, bytes]] = {}
_SHA_CACHE_MAX = 200_000


def _cached(key: Any, make) -> tuple[bytes, bytes]:
    """(sha256, JSON) of a dimension value, from the cache or ``make()`` (its JSON)."""
    try:
        hit = _SHA_CACHE.get(key)
    except TypeError:  # an unhashable value (a list in a shape): no caching
        hit, key = None, None
    if hit is None:
        data = make()
        hit = (sha(data), data)
        if key is not None:
            if len(_SHA_CACHE) >= _SHA_CACHE_MAX:
                _SHA_CACHE.clear()
            _SHA_CACHE[key] = hit
    return hit


def _canonical(value: Any) -> tuple[bytes, bytes]:
    """(sha256, canonical JSON) of a dimension value (an env block, a dns shape), cached by its
    unsorted orjson text: that text fixes the value exactly (1, 1.0 and true, 0.0 and -0.0 differ
    in it, unlike in Python's ==), hence its canonical JSON, and costs half the sorted dump."""
    try:
        key = orjson.dumps(value)
    except orjson.JSONEncodeError:  # an integer beyond 64 bits: canonical_json's stdlib path, uncached
        data = canonical_json(value)
        return sha(data), data
    hit = _CANONICAL.get(key)
    if hit is None:
        data = canonical_json(value)
        hit = (sha(data), data)
        if len(_CANONICAL) >= _SHA_CACHE_MAX:
            _CANONICAL.clear()
        _CANONICAL[key] = hit
    return hit


_CANONICAL: dict[bytes, tuple[bytes, bytes]] = {}  # unsorted orjson text -> (sha256, canonical JSON)


def dns_shape(body: dict) -> tuple[bytes, bytes]:
    """(sha256, canonical JSON) of a dns_query body's shape: its keys that are not per record.
    A body stored whole (one that `dns_split` refuses) has one too (0026_shaped_misfits):
    v_dns_query reads every record's resolver, transport, ... from its dns_shapes row."""
    return _canonical({k: v for k, v in body.items() if k not in DNS_PER_RECORD})


def split(rid: uuid.UUID, envelope: list, env_json: bytes, body: dict, body_json: bytes,
          digest: bytes | None, lineno: int | None, dims: "Dims", env_sha: bytes | None = None,
          per_record: bool = False) -> Item:
    """A record (envelope values as in `content_hash`, env and body) as an `Item`; new
    contexts, environments and shapes are added to ``dims``. Used by ingest (after
    validation) and by migration 0012 (stored rows as they are). ``env_sha``: sha(env_json)
    when the caller has it."""
    started_us = envelope[10]
    ctx_values = (*envelope[1:5], *envelope[6:10])  # schema, kind, campaign, run, vantage (not unit)
    ctx, _ = _cached(ctx_values, lambda: orjson.dumps(ctx_values))  # orjson refuses lone surrogates
    env = env_sha or _cached(env_json, lambda: env_json)[0]
    if ctx not in dims.contexts:
        dims.contexts[ctx] = ctx_values
    if env not in dims.environments:
        dims.environments[env] = env_json
    head = (rid.bytes, _int8(started_us))
    if digest is None or lineno is None or len(digest) != HASH_BYTES:
        # migration 0012: a row stored before content hashes / lines, or with 0008's full sha256 (0021 cuts it)
        reg = _fields((head[0], digest, None if lineno is None else _int4(lineno)))
    else:  # the fields as _fields writes them, without its loop
        reg = b"".join((_LEN16, head[0], _LEN16, digest, _F4(4, lineno)))
    dns = envelope[2] == "dns_query"
    typed = dns and dns_split(body)
    shape = None
    if typed:
        shape_body = body.copy()  # dns_split found every per-record key
        for k in DNS_PER_RECORD:
            del shape_body[k]
        shape, shape_json = _canonical(shape_body)
    elif dns and body.__class__ is dict:  # stored whole, with its shape too (`dns_shape`)
        shape, shape_json = dns_shape(body)
    if shape is not None and shape not in dims.shapes:
        dims.shapes[shape] = shape_json
    if typed:
        row = b"".join((_LEN16, head[0], _F8(8, started_us), _fields((envelope[5], envelope[11], envelope[12])), typed))
        table = DNS
    else:
        exact = body_json if _jsonb_lossy(body_json) else None
        row = _fields((*head, envelope[5], envelope[2], envelope[11], envelope[12], _JSONB_V1 + body_json, exact))
        table = GENERIC
    hourly = rollup(envelope, body, body_json, shape, typed, per_record) if envelope[2] in _ROLLED_UP else None
    return Item(envelope[0], digest, lineno or 0, table, ctx, env, shape, reg, row, _month(started_us), envelope[11],
                hourly, started_us, envelope[5])  # fmt: skip


_MONTHS: dict[int, int] = {}


def _month(started_us: int) -> int:
    """year * 12 + month - 1 (UTC) of a started_at in µs since 2000, cached by day."""
    day = started_us // 86_400_000_000
    m = _MONTHS.get(day)
    if m is None:
        t = PG_EPOCH + timedelta(days=day)
        m = _MONTHS[day] = t.year * 12 + t.month - 1
    return m


def _has_nul(v: Any) -> bool:
    if isinstance(v, str):
        return "\x00" in v
    if isinstance(v, dict):
        return any("\x00" in k or _has_nul(x) for k, x in v.items())
    if isinstance(v, list):
        return any(map(_has_nul, v))
    return False


def _strict_json(text: bytes) -> Any:
    """orjson's strict RFC 8259 parse, with a reason that names what is wrong."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        msg = str(exc)
        if text.startswith(BOM):
            raise RecordError("UTF-8 byte order mark (BOM) before the record: records are UTF-8 without BOM") from None
        if "surrogate" in msg:
            raise RecordError(f"lone surrogate (a \\ud800-\\udfff escape without its pair): not a character ({msg})") from None
        if text[exc.pos : exc.pos + 9].lstrip(b"-").startswith((b"NaN", b"Infinity")):
            raise RecordError(f"NaN/Infinity at byte {exc.pos}: not a JSON number (write null or a finite number)") from None
        raise RecordError(f"malformed JSON: {msg}") from None


# orjson reads an integer beyond 64 bits as a float (2**70 -> 1.1805916207174113e+21): a line
# with a run of 19+ digits (|n| >= 2**63 has at least 19) is re-read by the stdlib, whose
# integers are exact, so the store keeps the number the agent wrote. Costs ~1 us a line.
_DIGITS = bytes.maketrans(b"123456789", b"000000000")
_LONG_DIGIT_RUN = b"0" * 19


def _record(text: bytes, lineno: int, dims: "Dims", per_record: bool = False) -> Item:
    """One line -> an `Item` (new dimension values into ``dims``); RecordError says why not."""
    if len(text) > MAX_LINE_BYTES:
        raise RecordError(f"line longer than {MAX_LINE_BYTES >> 20} MiB ({len(text)} bytes)")
    rec, _ = parse_line(text)
    obj = _strict_json(text)  # pydantic accepts some JSON that jsonb refuses (NaN, BOM)
    if _LONG_DIGIT_RUN in text.translate(_DIGITS):
        obj = json.loads(text)  # exact integers; orjson has checked everything else
    if b"\\u0000" in text and _has_nul(obj):
        raise RecordError("NUL character (\\u0000) in a string: PostgreSQL text and jsonb cannot hold it")
    v = rec.vantage
    envelope = [str(rec.id), rec.schema_, rec.kind, rec.campaign, rec.run, rec.unit, v.id, v.provider, v.region,
                v.network_profile, (rec.started_at - PG_EPOCH) // _US, rec.status, rec.error]  # fmt: skip
    body = obj["body"]
    env_sha, env_json = _canonical(obj.get("env", {}))  # the same for every record of a run: cached
    body_json = canonical_json(body)
    digest = content_hash(envelope, env_json, body_json)
    return split(rec.id, envelope, env_json, body, body_json, digest, lineno, dims, env_sha, per_record)


def quarantine_text(raw: bytes) -> str:
    """A line as quarantine.raw (text): bytes that are not UTF-8, and NUL, written as \\xNN."""
    return raw.decode("utf-8", "backslashreplace").replace("\x00", "\\x00")


@dataclass
class Chunk:
    """A block of whole lines of one file, and problems found while reading it."""

    source: str
    first: int  # number of the block's first line
    block: bytes
    bad: list[tuple[int, str, str]] = field(default_factory=list)  # (line, reason, raw)


@dataclass
class Dims:
    """Dimension values by sha256: contexts (envelope values), environments and dns shapes
    (canonical JSON)."""

    contexts: dict[bytes, tuple] = field(default_factory=dict)
    environments: dict[bytes, bytes] = field(default_factory=dict)
    shapes: dict[bytes, bytes] = field(default_factory=dict)


@dataclass
class Parsed:
    """A chunk's records as columns of `Item` fields (lists of bytes and ints: cheap to send
    from a parser process, unlike one object per record)."""

    ids: list[str] = field(default_factory=list)
    hashes: list[bytes] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    rows: list[bytes] = field(default_factory=list)  # the kind table's COPY fields (Item.row)
    tables: list[int] = field(default_factory=list)
    ctxs: list[bytes] = field(default_factory=list)
    envs: list[bytes] = field(default_factory=list)
    shapes: list[bytes | None] = field(default_factory=list)
    regs: list[bytes] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    hourly: list[bytes | None] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)  # Item.started
    units: list[str | None] = field(default_factory=list)  # Item.unit
    # the parser's sums of its summed dns_query records (`rollup`): dns_hourly (hour, key, bucket)
    # -> [n, failures], dns_hourly_status (hour, key, status) -> n, dns_name_daily (day, key,
    # qname, status) -> n, dns_conn_daily (`_tally`); `finish` turns them into `sums`
    hourly_sums: dict[tuple, list] = field(default_factory=dict)
    status_sums: dict[tuple, int] = field(default_factory=dict)
    name_sums: dict[tuple, int] = field(default_factory=dict)
    conn: dict[tuple, list] = field(default_factory=dict)
    sums: dict[str, list[bytes]] = field(default_factory=dict)  # table -> binary COPY rows (SUM_COLUMNS)
    months: set[int] = field(default_factory=set)
    dims: Dims = field(default_factory=Dims)
    bad: list[tuple[str, int, str, str]] = field(default_factory=list)  # (file, line, reason, raw)

    def add(self, it: Item) -> None:
        self.ids.append(it.rid)
        self.hashes.append(it.digest)
        self.lines.append(it.line)
        self.rows.append(it.row)
        self.tables.append(it.table)
        self.ctxs.append(it.ctx)
        self.envs.append(it.env)
        self.shapes.append(it.shape)
        self.regs.append(it.reg)
        self.statuses.append(it.status)
        h = it.hourly
        if h.__class__ is tuple:  # a summed dns_query (`rollup`)
            hour, key, bucket, status, qname, conn = h
            k = (hour, key, bucket)
            s = self.hourly_sums.get(k)
            if s is None:
                s = self.hourly_sums[k] = [0, 0]
            s[0] += 1
            if status != "ok":
                s[1] += 1
                k = (hour, key, status)
                self.status_sums[k] = self.status_sums.get(k, 0) + 1
            k = (hour // _DAY_US * _DAY_US, key, qname, status)
            self.name_sums[k] = self.name_sums.get(k, 0) + 1
            _tally(self.conn, conn)
            h = None
        self.hourly.append(h)
        self.starts.append(it.started)
        self.units.append(it.unit)
        self.months.add(it.month)

    def finish(self) -> "Parsed":
        """The sums as binary COPY rows of SUM_COLUMNS (built in the parser process)."""
        self.sums = {
            "hourly": [b"".join((_SUM_START["hourly"], _F8(8, hour), _group(key), _NULL if b is None else _F4(4, b),
                                 _F4(4, n), _F4(4, f))) for (hour, key, b), (n, f) in self.hourly_sums.items()],
            "status": [b"".join((_SUM_START["status"], _F8(8, hour), _group(key), _status(st), _F4(4, n)))
                       for (hour, key, st), n in self.status_sums.items()],
            "names": [b"".join((_SUM_START["names"], _F8(8, day), _group(key), _fields((qname, st)), _F4(4, n)))
                      for (day, key, qname, st), n in self.name_sums.items()],
            "conn": _conn_rows(self.conn),
        }  # fmt: skip
        self.hourly_sums, self.status_sums, self.name_sums, self.conn = {}, {}, {}, {}
        return self


def _parse_chunk(chunk: Chunk) -> Parsed:
    """Worker: validate a block's lines into `Item`s and quarantine rows."""
    lines = chunk.block.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    out = _parse_lines(chunk.source, enumerate(lines, chunk.first))
    out.bad.extend((chunk.source, ln, reason, raw) for ln, reason, raw in chunk.bad)
    return out


def _parse_lines(source: str, lines: Iterable[tuple[int, bytes]], per_record: bool = False) -> Parsed:
    """Numbered lines into `Item`s and quarantine rows (``per_record``: see `rollup`). The
    cyclic garbage collector is off meanwhile: a parse makes no cycles, and its passes over the
    chunk's growing lists cost ~7 % of the parse."""
    collect = gc.isenabled()
    gc.disable()
    try:
        return _parse_numbered(source, lines, per_record)
    finally:
        if collect:
            gc.enable()


def _parse_numbered(source: str, lines: Iterable[tuple[int, bytes]], per_record: bool) -> Parsed:
    out = Parsed()
    for lineno, text in lines:
        if text.endswith(b"\r"):
            text = text[:-1]
        if text[:1] != b"{" and not text.strip(b" \t\r"):  # (a record starts with "{": no copy of it)
            continue  # blank (JSON white space only): not a record
        try:
            item = _record(text, lineno, out.dims, per_record)
        except (ValueError, TypeError, OverflowError, RecursionError, struct.error) as exc:
            # RecordError, orjson's and Unicode errors are ValueErrors; the rest would be a
            # value the checks above missed: still one quarantined line, never a stopped run.
            reason = exc.reason if isinstance(exc, RecordError) else f"{type(exc).__name__}: {exc}"
            reason = quarantine_text(reason.encode("utf-8", "backslashreplace"))  # may quote the line
            out.bad.append((source, lineno, reason, quarantine_text(text)))
            continue
        out.add(item)
    return out.finish()


# --- files -> chunks (main process) ------------------------------------------------------


def _chunks(files: list[Path]) -> Iterator[Chunk]:
    for path in files:
        yield from _file_chunks(path, str(path.resolve()))


def _file_chunks(path: Path, source: str) -> Iterator[Chunk]:
    """Blocks of about BATCH_BYTES, cut at a newline: the main process only reads and counts
    newlines (in C); workers split and parse. A line longer than MAX_LINE_BYTES is skipped
    piece by piece (its first RAW_PREFIX bytes kept for the quarantine)."""
    first = 1
    pieces: list[bytes] = []
    size = 0
    oversize: bytes | None = None  # prefix of the over-long line being skipped
    try:
        with _open(path) as f:
            # Small reads: a truncated gzip raises on the read that hits the break, and
            # everything decompressed before it must still be ingested.
            while piece := f.read(READ_BYTES):
                if oversize is not None:
                    nl = piece.find(b"\n")
                    if nl < 0:
                        continue
                    yield Chunk(source, first, b"", [(first, _too_long(), quarantine_text(oversize))])
                    first, oversize, piece = first + 1, None, piece[nl + 1 :]
                pieces.append(piece)
                size += len(piece)
                if size < BATCH_BYTES:
                    continue
                buf = b"".join(pieces)
                cut = buf.rfind(b"\n") + 1
                if cut:
                    yield Chunk(source, first, buf[:cut])
                    first += buf.count(b"\n", 0, cut)
                if len(buf) - cut > MAX_LINE_BYTES:
                    oversize, pieces, size = buf[cut : cut + RAW_PREFIX], [], 0
                else:
                    pieces, size = [buf[cut:]], len(buf) - cut
            if oversize is not None:  # the file ends inside the over-long line
                yield Chunk(source, first, b"", [(first, _too_long(), quarantine_text(oversize))])
    except (OSError, EOFError, zlib.error) as exc:
        buf = b"".join(pieces)
        cut = buf.rfind(b"\n") + 1  # whole lines read before the break are kept
        if isinstance(exc, NotGzip):
            reason = str(exc)
        elif isinstance(exc, (EOFError, zlib.error, gzip.BadGzipFile)):
            reason = f"corrupt file: {type(exc).__name__}: {exc} (the lines before it are ingested)"
        else:
            reason = f"unreadable file: {type(exc).__name__}: {exc}"
        yield Chunk(source, first, buf[:cut], [(first + buf.count(b"\n", 0, cut), reason, "")])
        return
    if pieces and (buf := b"".join(pieces)):
        yield Chunk(source, first, buf)  # last line without a newline


def _too_long() -> str:
    return f"line longer than {MAX_LINE_BYTES >> 20} MiB (not read; raw is its first {RAW_PREFIX} bytes)"


# --- store (main process) ----------------------------------------------------------------


def _copy_sql(table: str, columns: tuple[str, ...]) -> str:
    return f"COPY {table} ({', '.join(columns)}) FROM STDIN (FORMAT BINARY)"


_COPY_REGISTRY = _copy_sql("result_ids", REGISTRY_COLUMNS)
_COPY = {DNS: _copy_sql("dns_queries", DNS_COLUMNS), GENERIC: _copy_sql("generic_results", GENERIC_COLUMNS)}
_ROW_START = {t: struct.pack(">h", len(c)) for t, c in ((DNS, DNS_COLUMNS), (GENERIC, GENERIC_COLUMNS))}
_COPY_GENERIC_0012 = _copy_sql("generic_results", GENERIC_COLUMNS_0012)
_ROW_START_GENERIC_0012 = struct.pack(">h", len(GENERIC_COLUMNS_0012))
_SHAPED = (
    "SELECT EXISTS (SELECT FROM pg_attribute WHERE attrelid = 'generic_results'::regclass AND attname = 'shape_id' "
    "AND NOT attisdropped)"
)
_REG_START = struct.pack(">h", len(REGISTRY_COLUMNS))
# The batch's ids as one comma-joined text: psycopg's list dumper would check every element
# with a regex (a few us per record in the main process). A hash stored whole (32 bytes: a row
# inserted through the results view with the full sha256) compares by its first HASH_BYTES.
_PROBE = (
    f"SELECT r.id::text, substr(r.content_sha256, 1, {HASH_BYTES}), b.source_file, r.source_line FROM result_ids r "
    "JOIN ingest_batches b ON b.id = r.batch_id WHERE r.id = ANY(string_to_array(%s, ',')::uuid[])"
)
_QUARANTINE = (
    "INSERT INTO quarantine (source_file, line, reason, raw) VALUES (%s, %s, %s, %s) "
    "ON CONFLICT (source_file, line) DO UPDATE SET reason = EXCLUDED.reason, raw = EXCLUDED.raw, "
    "quarantined_at = now() WHERE (quarantine.reason, quarantine.raw) IS DISTINCT FROM (EXCLUDED.reason, EXCLUDED.raw)"
)
_DIM_SQL = {
    "contexts": (
        "INSERT INTO contexts (sha256, schema, kind, campaign, run, vantage_id, provider, region, network_profile) "
        "SELECT * FROM unnest(%b::bytea[], %b::text[], %b::text[], %b::text[], %b::text[], %b::text[], %b::text[], "
        "%b::text[], %b::text[]) ORDER BY 1 ON CONFLICT (sha256) DO NOTHING"
    ),
    "environments": "INSERT INTO environments (sha256, env) SELECT * FROM unnest(%b::bytea[], %b::json[]) ORDER BY 1 "
    "ON CONFLICT (sha256) DO NOTHING",
    "dns_shapes": "INSERT INTO dns_shapes (sha256, body) SELECT * FROM unnest(%b::bytea[], %b::json[]) ORDER BY 1 "
    "ON CONFLICT (sha256) DO NOTHING",
}


def _same(col: list) -> list:
    return col


class Store:
    """The main process's side of one ingest run: dimension ids by sha256 and the months whose
    partitions exist, cached for the run (dimension rows are content-addressed and committed
    before the batches that use them, so a rolled-back batch leaves no dangling id)."""

    def __init__(self, conn: psycopg.Connection, *, rollups: bool = True):
        self.conn = conn
        self.rollups = rollups  # False: a schema before 0013_rollups (migration 0012 moving rows)
        self.ids: dict[str, dict[bytes, int]] = {t: {} for t in _DIM_SQL}
        self.fields: dict[str, dict[bytes, bytes]] = {t: {} for t in _DIM_SQL}  # sha256 -> the id's COPY field
        self.probed: set[str] = set()  # files with a stored id: their batches probe first (`_store`)
        self.months: set[int] = set()
        self.keyed: bool | None = None  # a store at 0022_hourly_keys or later: the parsers' sums (`_add_rollups`)
        self.shaped: bool | None = None  # generic_results.shape_id exists (0026_shaped_misfits; not at 0012)

    def prepare(self, p: Parsed) -> None:
        """Dimension rows and partitions the batch needs, each in its own short transaction."""
        if self.keyed is None and self.rollups:
            with self.conn.transaction(), self.conn.cursor() as cur:
                self.keyed = cur.execute(_HOURLY_KEYED).fetchone()[0]
                if self.keyed:
                    cur.execute(_SUM_TABLES)
        if self.shaped is None:
            with self.conn.transaction(), self.conn.cursor() as cur:
                self.shaped = cur.execute(_SHAPED).fetchone()[0]
        need = {
            "contexts": {k: v for k, v in p.dims.contexts.items() if k not in self.ids["contexts"]},
            "environments": {k: v for k, v in p.dims.environments.items() if k not in self.ids["environments"]},
            "dns_shapes": {k: v for k, v in p.dims.shapes.items() if k not in self.ids["dns_shapes"]},
        }
        for table, new in need.items():
            if not new:
                continue
            keys = sorted(new)  # one order for every ingest: no deadlock between two
            if table == "contexts":
                cols = [list(c) for c in zip(*(new[k] for k in keys))]
            else:
                cols = [[new[k].decode() for k in keys]]
            with self.conn.transaction(), self.conn.cursor() as cur:
                cur.execute(_DIM_SQL[table], (keys, *cols))
                cur.execute(f"SELECT sha256, id FROM {table} WHERE sha256 = ANY(%b)", (keys,))
                got = [(bytes(s), i) for s, i in cur.fetchall()]
            self.ids[table].update(got)
            self.fields[table].update((s, _F4(4, i)) for s, i in got)
        months = p.months - self.months
        for m in sorted(months):
            with self.conn.transaction():
                self.conn.execute("SELECT dnscamp_ensure_partitions(make_timestamptz(%s, %s, 1, 0, 0, 0, 'UTC'))",
                                  (m // 12, m % 12 + 1))
            self.months.add(m)

    def copy(self, cur: psycopg.Cursor, p: Parsed, idx: list[int], batch: int, reparse=None) -> int:
        """COPY records ``idx`` of ``p`` into result_ids and their kind tables; the count COPY
        reports is checked. ``reparse``: see `_add_rollups`."""
        b = _F4(4, batch)
        ctx = self.ids["contexts"]
        f_ctx, f_env, f_shape = self.fields["contexts"], self.fields["environments"], self.fields["dns_shapes"]
        if len(idx) == len(p.ids):  # every record (idx holds distinct indices): no selection
            sel = _same
        else:
            sel = operator.itemgetter(*idx) if len(idx) > 1 else lambda col: (col[idx[0]],)
        rows: dict[int, list[bytes]] = {DNS: [], GENERIC: []}
        dns, gen = rows[DNS], rows[GENERIC]
        dns_head = _ROW_START[DNS]
        shaped = self.shaped is not False  # (prepare has set it)
        gen_head = _ROW_START[GENERIC] if shaped else _ROW_START_GENERIC_0012
        for c, e, sh, t, row in zip(map(f_ctx.__getitem__, sel(p.ctxs)), map(f_env.__getitem__, sel(p.envs)),
                                    sel(p.shapes), sel(p.tables), sel(p.rows)):  # fmt: skip
            if t == DNS:
                dns.append(b"".join((dns_head, c, e, b, f_shape[sh], row)))
            elif shaped:  # a generic row: another kind (no shape), or a dns_query stored whole
                gen.append(b"".join((gen_head, c, e, b, _NULL if sh is None else f_shape[sh], row)))
            else:
                gen.append(b"".join((gen_head, c, e, b, row)))
        _copy(cur, _COPY_REGISTRY, list(map((_REG_START + b).__add__, sel(p.regs))))
        for table, data in rows.items():
            if data:
                _copy(cur, _COPY[table] if table == DNS or shaped else _COPY_GENERIC_0012, data)
        if self.rollups:
            _add_rollups(cur, p, idx, ctx, self.keyed, reparse)
        return len(idx)


# A batch's rollup rows are COPYed into the session's temporary tables (migration 0017's
# dnscamp_rollup_temp) and summed by Postgres: dns_hourly here, the rollups of 0017 by
# dnscamp_rollup_dns / dnscamp_rollup_page_load (which empty the tables: a batch stored row by
# row adds each row once). The result_counts increments (few keys) are summed here. %b: binary
# parameters (psycopg's text array dumper quotes every element with a regex).
# dns_hourly (migration 0022_hourly_keys) is keyed by (hour, key_id): the batch's keys missing
# from dns_hourly_keys are inserted in key order and read back in the statement that upserts the
# rows (ON CONFLICT DO UPDATE returns a key another ingest inserted meanwhile, which this
# statement's snapshot does not see; 0019's dns_name_keys do the same). Keys compare as text
# arrays (NULL equals NULL, and hashes); the keys table is read for the batch's campaigns only.
_HOURLY_UPSERT = """
WITH summed AS (DELETE FROM dnscamp_hourly_sum RETURNING *  -- consumed: a batch stored row by row adds each once
), k AS MATERIALIZED (
    SELECT hour, ARRAY[campaign, vantage_id, network_profile, resolver, transport] AS key, bucket, sum(n)::int AS n,
           sum(f)::int AS f
    FROM (SELECT hour, campaign, vantage_id, network_profile, resolver, transport, bucket, 1 AS n,
                 CASE WHEN status <> 'ok' THEN 1 ELSE 0 END AS f
          FROM dnscamp_dns_in
          UNION ALL
          SELECT hour, campaign, vantage_id, network_profile, resolver, transport, bucket, n, failures
          FROM summed) AS u
    GROUP BY 1, 2, 3
), known AS MATERIALIZED (
    SELECT id, ARRAY[campaign, vantage_id, network_profile, resolver, transport] AS key FROM dns_hourly_keys
    WHERE campaign = ANY (ARRAY(SELECT DISTINCT key[1] FROM k))
), new AS (
    INSERT INTO dns_hourly_keys AS d (campaign, vantage_id, network_profile, resolver, transport)
    SELECT key[1], key[2], key[3], key[4], key[5] FROM (SELECT key FROM k EXCEPT SELECT key FROM known) AS m
    ORDER BY 1, 2, 3, 4, 5
    ON CONFLICT ON CONSTRAINT uq_dns_hourly_keys DO UPDATE SET campaign = EXCLUDED.campaign
    RETURNING d.id, ARRAY[d.campaign, d.vantage_id, d.network_profile, d.resolver, d.transport] AS key
), ids AS (
    SELECT * FROM known UNION ALL SELECT * FROM new
)
INSERT INTO dns_hourly AS h (hour, key_id, n, failures, buckets, counts)
SELECT k.hour, ids.id, sum(k.n), sum(k.f),
       COALESCE(array_agg(k.bucket ORDER BY k.bucket) FILTER (WHERE k.bucket IS NOT NULL), '{}'),
       COALESCE(array_agg(k.n ORDER BY k.bucket) FILTER (WHERE k.bucket IS NOT NULL), '{}')
FROM k JOIN ids ON ids.key = k.key
GROUP BY 1, 2 ORDER BY 1, 2
ON CONFLICT ON CONSTRAINT pk_dns_hourly DO UPDATE SET n = h.n + EXCLUDED.n, failures = h.failures + EXCLUDED.failures,
    (buckets, counts) = (SELECT m.buckets, m.counts
                         FROM dnscamp_hist_sum(h.buckets, h.counts, EXCLUDED.buckets, EXCLUDED.counts) m)
"""
# A store at a revision before 0022 (an older dnscamp's, tests walking the history) keeps
# 0013's layout: a row per hour and the five key texts.
_HOURLY_UPSERT_0013 = """
INSERT INTO dns_hourly (hour, campaign, vantage_id, network_profile, resolver, transport, n, failures, buckets, counts)
SELECT hour, campaign, vantage_id, network_profile, resolver, transport, sum(n), sum(f),
       COALESCE(array_agg(bucket ORDER BY bucket) FILTER (WHERE bucket IS NOT NULL), '{}'),
       COALESCE(array_agg(n ORDER BY bucket) FILTER (WHERE bucket IS NOT NULL), '{}')
FROM (SELECT hour, campaign, vantage_id, network_profile, resolver, transport, bucket, count(*) AS n,
             count(*) FILTER (WHERE status <> 'ok') AS f
      FROM dnscamp_dns_in GROUP BY 1, 2, 3, 4, 5, 6, 7) AS k
GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6
ON CONFLICT ON CONSTRAINT uq_dns_hourly DO UPDATE SET n = dns_hourly.n + EXCLUDED.n,
    failures = dns_hourly.failures + EXCLUDED.failures,
    (buckets, counts) = (SELECT m.buckets, m.counts
                         FROM dnscamp_hist_sum(dns_hourly.buckets, dns_hourly.counts, EXCLUDED.buckets, EXCLUDED.counts) m)
"""
_HOURLY_KEYED = "SELECT to_regclass('dns_hourly_keys') IS NOT NULL"
# The parsers' sums (`Parsed.finish`; stores at 0022_hourly_keys and later): the session's
# temporary tables, created once per connection (`Store.prepare`), emptied at every commit.
_SUM_TABLES = """
SET LOCAL client_min_messages = warning;  -- no NOTICE when they exist
CREATE TEMPORARY TABLE IF NOT EXISTS dnscamp_hourly_sum (hour timestamptz, campaign text, vantage_id text,
    network_profile text, resolver text, transport text, bucket int, n int, failures int) ON COMMIT DELETE ROWS;
CREATE TEMPORARY TABLE IF NOT EXISTS dnscamp_status_sum (hour timestamptz, campaign text, vantage_id text,
    network_profile text, resolver text, transport text, status text, n int) ON COMMIT DELETE ROWS;
CREATE TEMPORARY TABLE IF NOT EXISTS dnscamp_name_sum (day timestamptz, campaign text, vantage_id text,
    network_profile text, resolver text, transport text, qname text, status text, n int) ON COMMIT DELETE ROWS;
"""
_SUM_COPY = {t: f"COPY dnscamp_{ {'hourly': 'hourly', 'status': 'status', 'names': 'name'}[t]}_sum ({', '.join(c)}) "
             "FROM STDIN (FORMAT BINARY)" for t, c in SUM_COLUMNS.items()}  # fmt: skip
# As 0017's dnscamp_rollup_dns and 0019's dnscamp_rollup_dns_names add a batch's rows (sign 1);
# each statement empties the table it reads (as those functions do).
_STATUS_SUM_UPSERT = """
WITH summed AS (DELETE FROM dnscamp_status_sum RETURNING *)
INSERT INTO dns_hourly_status AS h (hour, campaign, vantage_id, network_profile, resolver, transport, status, n)
SELECT * FROM summed ORDER BY 1, 2, 3, 4, 5, 6, 7
ON CONFLICT ON CONSTRAINT uq_dns_hourly_status DO UPDATE SET n = h.n + EXCLUDED.n
"""
_NAME_SUM_UPSERT = """
WITH summed AS (DELETE FROM dnscamp_name_sum RETURNING *
), n AS MATERIALIZED (
    SELECT day, campaign, vantage_id, network_profile, ARRAY[resolver, transport, qname, status] AS key, n AS c
    FROM summed
), new AS (
    INSERT INTO dns_name_keys AS k (resolver, transport, qname, status)
    SELECT key[1], key[2], key[3], key[4]
    FROM (SELECT key FROM n EXCEPT SELECT ARRAY[resolver, transport, qname, status] FROM dns_name_keys) AS m
    ORDER BY 1, 2, 3, 4
    ON CONFLICT ON CONSTRAINT uq_dns_name_keys DO UPDATE SET status = EXCLUDED.status
    RETURNING k.id, ARRAY[k.resolver, k.transport, k.qname, k.status] AS key
), k AS (
    SELECT id, ARRAY[resolver, transport, qname, status] AS key FROM dns_name_keys
    UNION ALL SELECT id, key FROM new
)
INSERT INTO dns_name_daily AS d (day, campaign, vantage_id, network_profile, keys, counts)
SELECT n.day, n.campaign, n.vantage_id, n.network_profile, array_agg(k.id ORDER BY k.id), array_agg(n.c ORDER BY k.id)
FROM n JOIN k ON k.key = n.key
GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
ON CONFLICT ON CONSTRAINT uq_dns_name_daily DO UPDATE
    SET (keys, counts) = (SELECT * FROM dnscamp_count_sum(d.keys, d.counts, EXCLUDED.keys, EXCLUDED.counts))
"""
# result_counts (records per context and status) and migration 0018's rollups of every record
# kind (ingest_daily, unit_daily; docs/store.md "Rollups"): the batch's records summed here per
# context and status, per context and UTC day (and unit; their ingest lags bucketed against the
# batch's ingested_at), upserted by one statement (data-modifying CTEs: one round trip). The
# histograms go as array texts.
_BATCH_OF = "SELECT b.id, b.ingested_at FROM result_ids r JOIN ingest_batches b ON b.id = r.batch_id WHERE r.id = %s::uuid"
_COUNTS_UPSERT = """
WITH counts AS (
    INSERT INTO result_counts AS rc (ctx_id, status, n) SELECT * FROM unnest(%b::int[], %b::text[], %b::bigint[])
    ORDER BY 1, 2 ON CONFLICT ON CONSTRAINT pk_result_counts DO UPDATE SET n = rc.n + EXCLUDED.n
), days AS (
    INSERT INTO ingest_daily AS h (day, ctx_id, batch_id, n, failed, first_started, last_started, lag_buckets, lag_counts)
    SELECT g.day, g.ctx, %b, g.n, g.f, g.lo, g.hi, g.b::smallint[], g.c::int[]
    FROM unnest(%b::timestamptz[], %b::int[], %b::int[], %b::int[], %b::timestamptz[], %b::timestamptz[], %b::text[],
                %b::text[]) AS g(day, ctx, n, f, lo, hi, b, c)
    ORDER BY 1, 2
    ON CONFLICT ON CONSTRAINT pk_ingest_daily DO UPDATE SET
        n = h.n + EXCLUDED.n, failed = h.failed + EXCLUDED.failed,
        first_started = least(h.first_started, EXCLUDED.first_started),
        last_started = greatest(h.last_started, EXCLUDED.last_started),
        (lag_buckets, lag_counts) = (SELECT * FROM dnscamp_hist_sum(h.lag_buckets, h.lag_counts,
                                                                    EXCLUDED.lag_buckets, EXCLUDED.lag_counts))
)
INSERT INTO unit_daily AS u (day, campaign, vantage_id, region, kind, units, unit_counts)
SELECT day, campaign, vantage_id, region, kind, array_agg(unit ORDER BY unit COLLATE "C"), array_agg(n ORDER BY unit COLLATE "C")
FROM (SELECT x.day, c.campaign, c.vantage_id, c.region, c.kind, x.unit, sum(x.n)::int AS n
      FROM unnest(%b::timestamptz[], %b::int[], %b::text[], %b::bigint[]) AS x(day, ctx, unit, n) JOIN contexts c ON c.id = x.ctx
      GROUP BY 1, 2, 3, 4, 5, 6) AS k
GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4, 5
ON CONFLICT ON CONSTRAINT uq_unit_daily DO UPDATE SET
    (units, unit_counts) = (SELECT * FROM dnscamp_units_sum(u.units, u.unit_counts, EXCLUDED.units, EXCLUDED.unit_counts))
"""


def _ts(us: int) -> datetime:
    return PG_EPOCH + timedelta(microseconds=us)


def _lag_hist(starts: list[int], lo: int, hi: int, at: int) -> tuple[str, str]:
    """The ingest lags (``at`` - started_at, seconds: what extract(epoch ...) gives, as float8) of a
    group as a histogram (`_bucket16`'s buckets, array texts). When the greatest and least lag
    share a bucket (a run's minute against a lag of minutes or more), every lag does."""
    first, last = _bucket16((at - hi) / 1e6), _bucket16((at - lo) / 1e6)
    if first == last:
        return "{%d}" % first, "{%d}" % len(starts)
    h: dict[int, int] = {}
    for s in starts:
        b = _bucket16((at - s) / 1e6)
        h[b] = h.get(b, 0) + 1
    bs = sorted(h)
    return "{" + ",".join(map(str, bs)) + "}", "{" + ",".join([str(h[b]) for b in bs]) + "}"


def _health_params(cur: psycopg.Cursor, p: Parsed, idx: list[int], groups: dict[tuple, list[int]]) -> list:
    """The ingest_daily and unit_daily parameters of `_COUNTS_UPSERT` for the batch's records
    ``idx`` grouped by (context id, UTC day): the batch (from the registry row of its first
    record, COPYed just before) and its ingested_at, then per group its sums and per (group, unit)
    its count."""
    batch, at = cur.execute(_BATCH_OF, (p.ids[idx[0]],)).fetchone()
    at_us = (at - PG_EPOCH) // _US
    starts, statuses, units = p.starts, p.statuses, p.units
    days: list[list] = [[] for _ in range(8)]
    per_unit: list[list] = [[], [], [], []]
    for (ctx, day), members in groups.items():
        sts = [starts[i] for i in members]
        lo, hi = min(sts), max(sts)
        b, c = _lag_hist(sts, lo, hi, at_us)
        d = _ts(day * _DAY_US)
        for col, v in zip(days, (d, ctx, len(sts), len(sts) - [statuses[i] for i in members].count("ok"), _ts(lo), _ts(hi),
                                 b, c)):  # fmt: skip
            col.append(v)
        un: dict[str | None, int] = {}
        for i in members:
            u = units[i]
            un[u] = un.get(u, 0) + 1
        for u, n in un.items():
            for col, v in zip(per_unit, (d, ctx, u, n)):
                col.append(v)
    return [batch, *days, *per_unit]


def _add_rollups(cur: psycopg.Cursor, p: Parsed, idx: list[int], ctx_ids: dict[bytes, int], keyed: bool,
                 reparse) -> None:
    """The batch's new records into the rollups (dns_hourly, result_counts, 0017's
    dns_hourly_status, dns_conn_daily, page_load_daily, 0018's ingest_daily and unit_daily, 0019's
    dns_name_daily and page_load_url_daily), in the batch's transaction; keys in one order so that
    two ingests cannot deadlock. The parsers' rows and sums cover the whole chunk: a batch that
    stores some of its records only (or a store before 0022, ``keyed`` false, which takes
    per-record rows) has its new records parsed again for them (``reparse(idx, per_record)``)."""
    counts: dict[tuple, int] = {}
    groups: dict[tuple, list[int]] = {}  # (context id, UTC day) -> the records
    ctxs, statuses, starts = p.ctxs, p.statuses, p.starts
    for i in idx:
        c = ctx_ids[ctxs[i]]
        k = (c, statuses[i])
        counts[k] = counts.get(k, 0) + 1
        g = (c, starts[i] // _DAY_US)
        members = groups.get(g)
        if members is None:
            groups[g] = [i]
        else:
            members.append(i)
    r = p if keyed and len(idx) == len(p.ids) else reparse(idx, not keyed)
    dns, page_loads = [], []
    for h in r.hourly:
        if h is not None:
            (dns if h[:2] == _HOURLY_START else page_loads).append(h)  # the field count says which
    sums = {t: rows for t, rows in r.sums.items() if rows}
    if dns or page_loads or sums:
        cur.execute("SELECT dnscamp_rollup_temp()")
    for t in ("hourly", "status", "names"):
        if t in sums:
            _copy(cur, _SUM_COPY[t], sums[t])
    if dns:
        _copy(cur, f"COPY dnscamp_dns_in ({', '.join(HOURLY_COLUMNS)}) FROM STDIN (FORMAT BINARY)", dns)
    if dns or "hourly" in sums:
        cur.execute(_HOURLY_UPSERT if keyed else _HOURLY_UPSERT_0013)
    if "status" in sums:
        cur.execute(_STATUS_SUM_UPSERT)
    if "names" in sums:
        cur.execute(_NAME_SUM_UPSERT)
    if "conn" in sums:
        _copy(cur, f"COPY dnscamp_conn_in ({', '.join(CONN_COLUMNS)}) FROM STDIN (FORMAT BINARY)", sums["conn"])
        cur.execute("SELECT dnscamp_rollup_conn()")
    if dns:  # dns_hourly_status, dns_conn_daily and dns_name_daily of the per-record rows
        cur.execute("SELECT dnscamp_rollup_dns(1, false)")
    if page_loads:
        _copy(cur, f"COPY dnscamp_pl_in ({', '.join(PAGE_LOAD_COLUMNS)}) FROM STDIN (FORMAT BINARY)", page_loads)
        cur.execute("SELECT dnscamp_rollup_page_load(1)")
    cur.execute(_COUNTS_UPSERT, [*(list(c) for c in zip(*((*k, n) for k, n in counts.items()))),
                                 *_health_params(cur, p, idx, groups)])  # fmt: skip


@dataclass
class _Outcome:
    ingested: int = 0
    duplicates: int = 0
    bad: list[tuple[str, int, str, str]] = field(default_factory=list)


def _copy(cur: psycopg.Cursor, sql: str, rows: list[bytes]) -> None:
    with cur.copy(sql) as copy:
        copy.write(b"".join((COPY_HEADER, *rows, COPY_TRAILER)))
    if cur.rowcount != len(rows):
        raise CountMismatch(f"COPY stored {cur.rowcount} rows of {len(rows)} sent: batch rolled back")


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
        return quarantine_text(line(lineno).rstrip(b"\r"))

    def reparse(idx: list[int], per_record: bool) -> Parsed:  # `_add_rollups`: records idx parsed again
        r = _parse_lines(chunk.source, [(p.lines[i], line(p.lines[i])) for i in idx], per_record)
        if r.bad or len(r.ids) != len(idx):
            raise IngestError(f"{chunk.source}: line {chunk.first}ff: a second parse of the batch differs from the first")
        return r

    with conn.transaction(), conn.cursor() as cur:
        known: dict[str, tuple] = {}
        if p.ids and probe:
            known = {r[0]: r[1:] for r in cur.execute(_PROBE, (",".join(p.ids),)).fetchall()}
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
                    reason = (
                        f"id_conflict: record {rid} is stored with content hash {have[0].hex()} "
                        f"(from {have[1]}:{have[2]}); this line's is {p.hashes[i].hex()}"
                    )
                    out.bad.append((chunk.source, p.lines[i], reason, raw(p.lines[i])))
        if new:
            batch = cur.execute("INSERT INTO ingest_batches (source_file) VALUES (%s) RETURNING id", (chunk.source,))
            batch = batch.fetchone()[0]
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
            cur.executemany(_QUARANTINE, out.bad)
        if fine:
            _resolve(cur, chunk.source, fine)
    return out


def _resolve(cur: psycopg.Cursor, source: str, fine: list[int]) -> None:
    """Delete the quarantine rows of lines that now ingested (one range probe per batch)."""
    cur.execute(
        "SELECT line FROM quarantine WHERE source_file = %s AND line BETWEEN %s AND %s",
        (source, min(fine), max(fine)),
    )
    fixed = {r[0] for r in cur.fetchall()} & set(fine)
    if fixed:
        cur.execute("DELETE FROM quarantine WHERE source_file = %s AND line = ANY(%s)", (source, sorted(fixed)))


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


# The rollup tables ingest updates (migration 0020_compact_rollups lets the writer VACUUM them):
# vacuumed every VACUUM_EVERY batches, so that the space of the row versions the batches left
# dead is reused by the next batches instead of growing the tables. Autovacuum does the same
# over the weeks a campaign's records take to come in, but looks once a minute: a backlog of a
# month ingested in minutes left dns_conn_daily at 4-7x its live rows (docs/store.md "Footprint").
# VACUUM skips a table it may not vacuum (PostgreSQL before 17) with a warning.
ROLLUP_TABLES = ("dns_hourly", "result_counts", "dns_hourly_status", "dns_conn_daily", "page_load_daily",
                 "ingest_daily", "unit_daily", "dns_name_daily", "page_load_url_daily")  # fmt: skip
VACUUM_EVERY = 2  # batches (~64 MB of input): ~0.7 us a record at 1 M dns_query records


def _vacuum_rollups(url: str, vacuum: tuple | None) -> tuple[psycopg.Connection, list[str]]:
    """VACUUM the rollup tables on an autocommit connection (VACUUM cannot run in the batches'
    transactions), opened on first use with the list of the rollup tables this store's schema
    has (a store at an older revision lacks the newer ones); returns both for the next call."""
    if vacuum is None:
        conn = psycopg.connect(url, autocommit=True)
        tables = [t for (t,) in conn.execute("SELECT t FROM unnest(%s::text[]) AS t WHERE to_regclass(t) IS NOT NULL",
                                             (list(ROLLUP_TABLES),))]  # fmt: skip
        vacuum = conn, tables
    if vacuum[1]:
        vacuum[0].execute(f"VACUUM (SKIP_LOCKED) {', '.join(vacuum[1])}")
    return vacuum


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
                parsed = ((c, _parse_chunk(c)) for c in _chunks(files))
            else:
                parsed = _bounded_map(pool, _parse_chunk, _chunks(files), workers * 2)
            for n, (chunk, p) in enumerate(parsed, 1):
                _store(store, chunk, p, stats)
                if n % VACUUM_EVERY == 0:
                    vacuum = _vacuum_rollups(url, vacuum)
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
