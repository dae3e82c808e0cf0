"""Parsing: a result line -> a record ready for the store (`db.writer.batch.Item`), or the reason
it is quarantined.

A line is validated (vantage_agent.records: the envelope and the kind's body), read as strict
RFC 8259 JSON (NaN / Infinity, a UTF-8 BOM, lone surrogates, invalid UTF-8 are refused; an
integer beyond 64 bits is read exactly), checked for NUL (PostgreSQL text and jsonb cannot
hold it), given its content hash (`content_hash`), split into the compact store's rows
(`split`: context, environment and dns shape keyed by the sha256 of their canonical JSON, the
kind table's COPY fields) and its rollup contribution (`rollup`). A chunk of lines becomes one
`db.writer.batch.Parsed` (`parse_chunk`), what a parser process sends back.

Parsing (pydantic validation) is the expensive part of an ingest and runs in the parser
processes: the per-record path below was tuned call by call (see its comments); the COPY
packers it uses are db.writer.encode's module-level names, bound here once.
"""

from __future__ import annotations

import gc
import hashlib
import json
import struct
import uuid
from datetime import timedelta
from typing import Any, Iterable

import orjson

from collectors.quarantine import quarantine_text
from collectors.read import MAX_LINE_BYTES, Chunk
from db.writer.batch import Dims, Item, Parsed
from db.writer.encode import (CACHE_MAX, DAY_US, DNS, DNS_PER_RECORD, F4, F8, FALSE, GENERIC, HASH_BYTES, HOUR_US,
                              HOURLY_START, INT4, INT8, INT32_MAX, INT64_MAX, JSONB_V1, LEN16, NO_TYPED, NULL,
                              PAGE_LOAD_START, PG_EPOCH, US, bucket16, canonical_json, dns_split, fields, group_field,
                              hist_bucket, jsonb_lossy, status_field)  # fmt: skip
from vantage_agent.records import RecordError, parse_line

BOM = b"\xef\xbb\xbf"


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
    return [str(row[0]), *row[1:10], (row[10] - PG_EPOCH) // US, *row[11:13]]


def sha(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _text(v: Any) -> str | None:
    """A body value as v_dns_query's ``->>`` reads it (JSON text for a non-string)."""
    return v if v is None or v.__class__ is str else canonical_json(v).decode()


PAGE_LOAD_KEYS = ("browser", "dns_mode", "dns_transport", "http", "plt_ms", "url")  # what the page-load rollups read of a body


def rollup(envelope: list, body: dict, body_json: bytes, shape: bytes | None, typed: bytes | None) -> bytes | tuple:
    """A record's rollup contribution. A page_load's is a row of PAGE_LOAD_COLUMNS (UTC day,
    campaign, vantage, profile, status, the body's PAGE_LOAD_KEYS as jsonb). A typed dns_query
    whose key values have the JSON types records v1 give them is summed by the parser
    (`Parsed.add`): its contribution is the tuple (UTC hour, key, bucket, status, qname,
    `_conn`). Any other dns_query is a row of HOURLY_COLUMNS for Postgres to sum
    (`db.writer.rollups.add_rollups`): its key
    (UTC hour, campaign, vantage, profile, resolver, transport), status, the bucket of its
    total_ms (NULL when not counted: failed, or without both timestamps), then its shape's
    sha256 and ``typed`` (its `dns_split` fields) or, without them, its body."""
    if envelope[2] == "page_load":
        part = canonical_json({k: body[k] for k in PAGE_LOAD_KEYS if k in body})
        return b"".join((PAGE_LOAD_START, F8(8, envelope[10] // DAY_US * DAY_US), fields(envelope[3:10:3]),
                         status_field(envelope[11]), INT4(len(part) + 1), JSONB_V1, part))  # fmt: skip
    ok = envelope[11] == "ok"
    bucket = None
    t0, t1 = body.get("t_start"), body.get("t_response")
    if ok and t0.__class__ is int and t1.__class__ is int:
        bucket = hist_bucket(float(t1 - t0) / 1e6)
    resolver, transport = body.get("resolver"), body.get("transport")
    key = (envelope[3], envelope[6], envelope[9], resolver, transport)
    # cached for text (or null) resolver and transport: another JSON type is written as its JSON text
    text = (resolver is None or resolver.__class__ is str) and (transport is None or transport.__class__ is str)
    hour = envelope[10] // HOUR_US * HOUR_US
    if text and shape is not None and typed:
        qname = body.get("qname")
        if qname is None or qname.__class__ is str:  # what dns_shapes.qname (->>) reads
            conn = _conn(envelope, body, ok)
            if conn is not None:
                return hour, key, bucket, envelope[11], qname, conn
    group = group_field(key) if text else fields((*key[:3], _text(resolver), _text(transport)))
    head = (HOURLY_START, F8(8, hour), group, status_field(envelope[11]), NULL if bucket is None else F4(4, bucket), FALSE)
    if shape is None or not typed:
        return b"".join((*head, NULL, INT4(len(body_json) + 1), JSONB_V1, body_json, NO_TYPED))
    return b"".join((*head, INT4(32), shape, NULL, typed))


# dns_conn_daily in the parser processes: a typed dns_query's key and measures, computed as
# v_dns_query and 0017's dnscamp_rollup_dns compute them (the same float arithmetic and log
# buckets), for bodies whose shape values have the JSON types records v1 give them (a boolean or
# null connection_reused / resumed, a number or null access_rtt_ms: JSON_VALUE reads those as
# Python does); other bodies are left to Postgres. `Parsed.add` sums a chunk's (`tally`).
_SMALL_IP = frozenset(("do53", "doq", "doh3"))  # 28-byte IP + UDP headers, else 52 (IP + TCP)
_BOOL_OR_NONE = (bool, type(None))


def _conn(envelope: list, body: dict, ok: bool) -> tuple | None:
    reused, resumed, rtt = body.get("connection_reused"), body.get("resumed"), body.get("access_rtt_ms")
    if reused.__class__ not in _BOOL_OR_NONE or resumed.__class__ not in _BOOL_OR_NONE or \
            (rtt is not None and rtt.__class__ is not float and rtt.__class__ is not int):
        return None
    mode = "reuse" if reused else "resume" if resumed else "fresh"
    key = (envelope[10] // DAY_US, envelope[3], envelope[6], envelope[9], body.get("resolver"), body.get("transport"), mode)
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
    return key, 0, packets or 0, bucket16(total), bucket16(hs), bucket16(ex), bucket16(mult), bucket16(ip)


_ROLLED_UP = ("dns_query", "page_load")  # the kinds with a rollup row


# Per-process caches of dimension hashes (a worker sees the same contexts, environments and
# shapes over and over): value -> sha256, bounded.
_SHA_CACHE: dict[Any, tuple[bytes, bytes]] = {}
CACHE_MAX = 200_000


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
            if len(_SHA_CACHE) >= CACHE_MAX:
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
        if len(_CANONICAL) >= CACHE_MAX:
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
          digest: bytes | None, lineno: int | None, dims: Dims, env_sha: bytes | None = None) -> Item:
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
    head = (rid.bytes, INT8(started_us))
    if digest is None or lineno is None or len(digest) != HASH_BYTES:
        # migration 0012: a row stored before content hashes / lines, or with 0008's full sha256 (0021 cuts it)
        reg = fields((head[0], digest, None if lineno is None else INT4(lineno)))
    else:  # the fields as fields writes them, without its loop
        reg = b"".join((LEN16, head[0], LEN16, digest, F4(4, lineno)))
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
        row = b"".join((LEN16, head[0], F8(8, started_us), fields((envelope[5], envelope[11], envelope[12])), typed))
        table = DNS
    else:
        exact = body_json if jsonb_lossy(body_json) else None
        row = fields((*head, envelope[5], envelope[2], envelope[11], envelope[12], JSONB_V1 + body_json, exact))
        table = GENERIC
    hourly = rollup(envelope, body, body_json, shape, typed) if envelope[2] in _ROLLED_UP else None
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


def _record(text: bytes, lineno: int, dims: Dims) -> Item:
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
                v.network_profile, (rec.started_at - PG_EPOCH) // US, rec.status, rec.error]  # fmt: skip
    body = obj["body"]
    env_sha, env_json = _canonical(obj.get("env", {}))  # the same for every record of a run: cached
    body_json = canonical_json(body)
    digest = content_hash(envelope, env_json, body_json)
    return split(rec.id, envelope, env_json, body, body_json, digest, lineno, dims, env_sha)


def parse_chunk(chunk: Chunk) -> Parsed:
    """Worker: validate a block's lines into `Item`s and quarantine rows."""
    lines = chunk.block.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    out = parse_lines(chunk.source, enumerate(lines, chunk.first))
    out.bad.extend((chunk.source, ln, reason, raw) for ln, reason, raw in chunk.bad)
    return out


def parse_lines(source: str, lines: Iterable[tuple[int, bytes]]) -> Parsed:
    """Numbered lines into `Item`s and quarantine rows. The
    cyclic garbage collector is off meanwhile: a parse makes no cycles, and its passes over the
    chunk's growing lists cost ~7 % of the parse."""
    collect = gc.isenabled()
    gc.disable()
    try:
        return _parse_numbered(source, lines)
    finally:
        if collect:
            gc.enable()


def _parse_numbered(source: str, lines: Iterable[tuple[int, bytes]]) -> Parsed:
    out = Parsed()
    for lineno, text in lines:
        if text.endswith(b"\r"):
            text = text[:-1]
        if text[:1] != b"{" and not text.strip(b" \t\r"):  # (a record starts with "{": no copy of it)
            continue  # blank (JSON white space only): not a record
        try:
            item = _record(text, lineno, out.dims)
        except (ValueError, TypeError, OverflowError, RecursionError, struct.error) as exc:
            # RecordError, orjson's and Unicode errors are ValueErrors; the rest would be a
            # value the checks above missed: still one quarantined line, never a stopped run.
            reason = exc.reason if isinstance(exc, RecordError) else f"{type(exc).__name__}: {exc}"
            reason = quarantine_text(reason.encode("utf-8", "backslashreplace"))  # may quote the line
            out.bad.append((source, lineno, reason, quarantine_text(text)))
            continue
        out.add(item)
    return out.finish()
