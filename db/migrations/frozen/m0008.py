"""Migration 0008_ingest_hardening's backfill: the content hash of a stored row, as ingest
computes it from the record's line (canonical JSON of env and body after the envelope values).

The hash is cut to its first 16 bytes, as ingest has stored it since 0021_short_content_hash
(the backfill of a store that 0021 has downgraded gives ingest's hashes back).
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta, timezone
from typing import Any

import orjson

PG_EPOCH = datetime(2000, 1, 1, tzinfo=timezone.utc)
US = timedelta(microseconds=1)
HASH_BYTES = 16


def canonical_json(value: Any) -> bytes:
    """Keys sorted, compact; integers beyond 64 bits (which orjson cannot write) by the stdlib."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def content_hash(envelope: list, env_json: bytes, body_json: bytes) -> bytes:
    """The first HASH_BYTES of the sha256 of one JSON array: the envelope values (id as text,
    started_at as microseconds since 2000-01-01 UTC), then env and body as canonical JSON."""
    data = orjson.dumps([*envelope, orjson.Fragment(env_json), orjson.Fragment(body_json)])
    return hashlib.sha256(data).digest()[:HASH_BYTES]


def stored_envelope(row) -> list:
    """The `content_hash` envelope of a row (id, schema, ..., network_profile, started_at, status, error)."""
    return [str(row[0]), *row[1:10], (row[10] - PG_EPOCH) // US, *row[11:13]]
