"""Migration 0026_shaped_misfits's backfill, frozen: the shape of a dns_query body stored whole
(the body without the per-record keys, keyed by the sha256 of its canonical JSON, as ingest
keys a typed record's shape), read from the body's stored JSON text with exact integers."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import orjson

from db.migrations.frozen.m0012 import DNS_PER_RECORD, canonical_json

# orjson reads an integer beyond 64 bits as a float: a text with a run of 19+ digits is read
# by the stdlib (exact integers).
_DIGITS = str.maketrans("123456789", "000000000")
_LONG_DIGIT_RUN = "0" * 19


def loads(text: str) -> Any:
    if _LONG_DIGIT_RUN in text.translate(_DIGITS):
        return json.loads(text)
    return orjson.loads(text)


def dns_shape(body: dict) -> tuple[bytes, bytes]:
    """(sha256, canonical JSON) of a dns_query body's shape: its keys that are not per record."""
    data = canonical_json({k: v for k, v in body.items() if k not in DNS_PER_RECORD})
    return hashlib.sha256(data).digest(), data
