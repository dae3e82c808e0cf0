"""PostgreSQL's binary COPY format as the store's tables take it: the field packers, the
column lists of every table and temporary table the writer COPYs into, canonical JSON (what
dimension rows are keyed by and jsonb fields hold), a dns_query body's typed columns, the
histogram buckets the rollups keep, and the COPY itself with its row count checked.

Parsers (collectors/parse.py) encode each record's fields with these in their own process;
the writer (`db.writer.store`, `db.writer.rollups`) puts the dimension ids in front and sends
the rows. The packers are module-level names, bound once by their importers: no call layer
is added per value.
"""

from __future__ import annotations

import json
import math
import operator
import re
import struct
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Iterable

import orjson

if TYPE_CHECKING:  # the archive reads the column lists without loading the database driver
    import psycopg

# PostgreSQL binary COPY (https://www.postgresql.org/docs/current/sql-copy.html, "Binary Format"):
# signature, flags, header extension length; per row a field count, then per field its
# length (-1 = NULL) and its bytes in the type's binary send format; a -1 field count ends it.
COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
COPY_TRAILER = struct.pack(">h", -1)
NULL = struct.pack(">i", -1)
INT4 = struct.Struct(">i").pack
INT8 = struct.Struct(">q").pack
F8 = struct.Struct(">iq").pack  # a binary COPY int8 field: length 8, value
F4 = struct.Struct(">ii").pack  # an int4 field: length 4, value
PG_EPOCH = datetime(2000, 1, 1, tzinfo=timezone.utc)  # timestamptz is int8 microseconds from here
US = timedelta(microseconds=1)
_SORTED = orjson.OPT_SORT_KEYS
JSONB_V1 = b"\x01"  # jsonb's binary format: a version byte, then the JSON text (json's: the text)
INT64_MIN, INT64_MAX, INT32_MIN, INT32_MAX = -(2**63), 2**63 - 1, -(2**31), 2**31 - 1
HASH_BYTES = 16  # of the sha256 kept (migration 0021): 2^-128 that a changed record passes for a repeat
LEN16 = INT4(16)  # the length of a uuid field and of a content hash field (HASH_BYTES)
FALSE = struct.pack(">ib", 1, 0)
HOUR_US = 3600 * 10**6
DAY_US = 24 * HOUR_US
CACHE_MAX = 200_000  # entries of a per-process cache of encoded values

# dns_query body keys kept per record in typed columns (what varies from query to query);
# every other key of the body is the query's "shape" (resolver, transport, qname, rcode, ...),
# stored once per distinct value. COPY column lists: dimension ids first (filled by the
# writer), then what the parser encodes.
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
DNS, GENERIC = 0, 1  # the kind table of a record

# A record's rollup row, COPYed into the session's temporary tables of migration 0017
# (dnscamp_rollup_temp) and summed by Postgres (`db.writer.rollups.add_rollups`): a dns_query's
# that the parser does not sum into dnscamp_dns_in, a page_load's into dnscamp_pl_in
# (collectors.parse.rollup).
HOURLY_COLUMNS = ("hour", "campaign", "vantage_id", "network_profile", "resolver", "transport", "status", "bucket",
                  "counted", "shape", "body", *DNS_INT8, *DNS_INT4, "answers")  # fmt: skip
PAGE_LOAD_COLUMNS = ("day", "campaign", "vantage_id", "network_profile", "status", "body")
HOURLY_START = struct.pack(">h", len(HOURLY_COLUMNS))
PAGE_LOAD_START = struct.pack(">h", len(PAGE_LOAD_COLUMNS))
NO_TYPED = NULL * (len(DNS_INT8) + len(DNS_INT4) + 1)
CONN_COLUMNS = ("day", "campaign", "vantage_id", "network_profile", "resolver", "transport", "connection", "n",
                "failures", "total_packets", *(f"{m}_{a}" for m in ("total", "handshake", "exchange", "rtt", "ip_bytes")
                                               for a in ("buckets", "counts")))  # fmt: skip
CONN_START = struct.pack(">h", len(CONN_COLUMNS))
# A parser's sums (`db.writer.batch.Parsed.finish`), COPYed into the session's temporary tables
# (`db.writer.rollups.SUM_TABLES`) and added to dns_hourly, dns_hourly_status and dns_name_daily.
SUM_COLUMNS = {
    "hourly": ("hour", "campaign", "vantage_id", "network_profile", "resolver", "transport", "bucket", "n", "failures"),
    "status": ("hour", "campaign", "vantage_id", "network_profile", "resolver", "transport", "status", "n"),
    "names": ("day", "campaign", "vantage_id", "network_profile", "resolver", "transport", "qname", "status", "n"),
}
SUM_START = {t: struct.pack(">h", len(c)) for t, c in SUM_COLUMNS.items()}

# jsonb keeps numbers as numeric: -0.0 comes back as 0.0 and a float written with a positive
# exponent (orjson: 1e16 and up) as an integer. Such a body also keeps its exact JSON text.
_JSONB_LOSSY = re.compile(rb"-0\.0[,}\]]|[0-9]e\+?[0-9]")


def jsonb_lossy(data: bytes) -> bool:
    # substring tests first (C speed; a positive exponent of 16 and up starts with 1, 2 or 3):
    # the regex costs ~3 us on a 6 KB page_load body
    return (b"-0.0" in data or b"e1" in data or b"e2" in data or b"e3" in data or b"e+" in data) and \
        _JSONB_LOSSY.search(data) is not None


def fields(values: Iterable[bytes | str | None]) -> bytes:
    """Binary COPY fields of text / bytea values (None: NULL)."""
    parts = []
    for v in values:
        if v is None:
            parts.append(NULL)
            continue
        if v.__class__ is str:
            v = v.encode()  # strict UTF-8: a lone surrogate raises here (quarantined)
        parts += (INT4(len(v)), v)
    return b"".join(parts)


def canonical_json(value: Any) -> bytes:
    """Keys sorted, compact; integers beyond 64 bits (which orjson cannot write) by the stdlib."""
    try:
        return orjson.dumps(value, option=_SORTED)
    except orjson.JSONEncodeError:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def dns_split(body: dict) -> bytes | None:
    """A dns_query body's per-record binary COPY fields (DNS_INT8 + DNS_INT4 + answers), or
    None when it does not fit the typed columns (a per-record key absent, or not an integer of
    its column's range: it is then stored whole). The other keys are its shape."""
    try:
        v8, v4, answers = _DNS_INT8_OF(body), _DNS_INT4_OF(body), body["answers"]
        # inline (no call per value): None -> NULL, an int -> its field, anything else -> None (a misfit)
        fields = [NULL if v is None else F8(8, v) if v.__class__ is int else None for v in v8]
        fields += [NULL if v is None else F4(4, v) if v.__class__ is int else None for v in v4]
    except (KeyError, struct.error):  # struct.error: beyond the column's range
        return None
    if None in fields:
        return None
    answers = canonical_json(answers)
    fields += (INT4(len(answers)), answers)
    return b"".join(fields)


_DNS_INT8_OF, _DNS_INT4_OF = operator.itemgetter(*DNS_INT8), operator.itemgetter(*DNS_INT4)


# --- histogram buckets (migration 0013_rollups, docs/store.md "Rollups") ----------------------
# dns_hourly: per hour x campaign x vantage x network profile x resolver x transport, the
# number of dns_query records, of failures, and a histogram of total_ms (t_response - t_start,
# as v_dns_query computes it) of the ok ones over fixed log buckets: bucket 0 holds values
# below HIST_MIN_MS, bucket b >= 1 holds [HIST_MIN_MS * HIST_GAMMA**(b-1), HIST_MIN_MS *
# HIST_GAMMA**b), read back as its geometric middle, so a percentile read from the histogram
# is within sqrt(HIST_GAMMA) - 1 = 0.995 % of the exact one (percentile_disc). The same
# function in SQL (dnscamp_hist_bucket) gives the same bucket (both use the C library's log).
HIST_MIN_MS = 0.001
HIST_GAMMA = 1.02
LN_GAMMA = math.log(HIST_GAMMA)


def hist_bucket(ms: float) -> int:
    if not ms >= HIST_MIN_MS:
        return 0
    return math.floor(math.log(ms / HIST_MIN_MS) / LN_GAMMA) + 1


def bucket16(v: float | None, _floor=math.floor, _log=math.log) -> int | None:
    """dnscamp_hist_bucket16: `hist_bucket` (the same expression, inlined: five a record), None
    for no value, the last bucket beyond ~1e279."""
    if v is None:
        return None
    if not v >= HIST_MIN_MS:
        return 0
    return min(_floor(_log(min(v, 1e280) / HIST_MIN_MS) / LN_GAMMA) + 1, 32767)


# --- cached fields of values that repeat -------------------------------------------------------
_STATUS: dict[str, bytes] = {}  # status -> its COPY field
_GROUPS: dict[tuple, bytes] = {}  # (campaign, vantage, profile, resolver, transport) -> their COPY fields


def status_field(status: str) -> bytes:
    f = _STATUS.get(status)
    if f is None:
        f = fields((status,))
        if len(_STATUS) < 1000:
            _STATUS[status] = f
    return f


def group_field(key: tuple) -> bytes:
    """The COPY fields of a dns key (campaign, vantage, profile, resolver, transport; text or null), cached."""
    group = _GROUPS.get(key)
    if group is None:
        group = fields(key)
        if len(_GROUPS) >= CACHE_MAX:
            _GROUPS.clear()
        _GROUPS[key] = group
    return group


# --- sending -------------------------------------------------------------------------------------


class CountMismatch(Exception):
    """COPY stored a different number of rows than were sent (the batch is rolled back)."""


def copy_sql(table: str, columns: tuple[str, ...]) -> str:
    return f"COPY {table} ({', '.join(columns)}) FROM STDIN (FORMAT BINARY)"


def copy_rows(cur: psycopg.Cursor, sql: str, rows: list[bytes]) -> None:
    """COPY ``rows`` (each a whole binary row) by ``sql``; the count COPY reports is checked."""
    with cur.copy(sql) as copy:
        copy.write(b"".join((COPY_HEADER, *rows, COPY_TRAILER)))
    if cur.rowcount != len(rows):
        raise CountMismatch(f"COPY stored {cur.rowcount} rows of {len(rows)} sent: batch rolled back")
