"""What every RIPE Atlas result has, whatever its type and firmware (sagan's ``Result`` base).

Checking that a value is an Atlas result at all (``load``: only what is not one raises
``NotAnAtlasResult``, which the caller quarantines), its header (the raw table's columns), the
optional-column readers the per-type parsers share, and one status for a whole result. The
types themselves are in ``atlas.ping`` and ``atlas.dns``; ``atlas.measurement_types`` maps a
result's ``type`` to its module.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Sequence

from ripe.atlas.sagan import Result

from vantage_agent import errors

# Fields every Atlas result carries, whatever the firmware (sagan's Result base class).
REQUIRED = ("type", "prb_id", "timestamp")


class NotAnAtlasResult(ValueError):
    """The value is not a RIPE Atlas result at all (the reason names the field)."""


@dataclass(frozen=True)
class Header:
    """What every Atlas result carries (the raw table's columns)."""

    type: str
    msm_id: int | None
    prb_id: int
    timestamp: datetime
    fw: int | None
    from_addr: str | None
    dst_addr: str | None


def load(value: Any) -> dict:
    """Decode one Atlas result (dict, str or bytes) and check that it is one."""
    if isinstance(value, (str, bytes)):
        try:
            value = json.loads(value)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise NotAnAtlasResult(f"malformed JSON: {exc}") from None
    if not isinstance(value, dict):
        raise NotAnAtlasResult(f"not a JSON object ({type(value).__name__})")
    for k in REQUIRED:
        if k not in value:
            raise NotAnAtlasResult(f"{k}: missing (not a RIPE Atlas result)")
    if not isinstance(value["type"], str) or not value["type"]:
        raise NotAnAtlasResult("type: not a string")
    if "msm_id" not in value and "group_id" not in value:
        raise NotAnAtlasResult("msm_id: missing (not a RIPE Atlas result)")
    # The raw table's key columns: integers inside their SQL types (a timestamp a datetime can hold).
    _key_int(value, "prb_id", 2**31 - 1)
    _key_int(value, "timestamp", MAX_TIMESTAMP)
    # negative msm ids are local measurements (`dnscamp atlas server-ping`), never Atlas's
    _key_int(value, "msm_id" if "msm_id" in value else "group_id", 2**63 - 1, low=-(2**63 - 1))
    return value


MAX_TIMESTAMP = 253402300799  # 9999-12-31T23:59:59Z, the last second a datetime holds


def _key_int(value: dict, name: str, high: int, low: int = 0) -> int:
    v = value[name]
    try:
        n = int(v)
        if isinstance(v, bool) or (isinstance(v, float) and v != n):
            raise ValueError
    except (TypeError, ValueError, OverflowError):
        raise NotAnAtlasResult(f"{name}: not an integer ({type(v).__name__})") from None
    if not low <= n <= high:
        raise NotAnAtlasResult(f"{name}: {n} out of range {low}..{high}")
    return n


def opt_int(v: Any) -> int | None:
    """An optional integer column (fw, af, ...): None when absent, not an integer or beyond int4."""
    try:
        n = None if v is None or isinstance(v, bool) else int(v)
    except (TypeError, ValueError, OverflowError):
        return None
    return n if n is not None and -(2**31) <= n < 2**31 else None


def opt_str(v: Any) -> str | None:
    """An optional text column (addresses, names): only a string is one."""
    return v if isinstance(v, str) else None


def header(raw: dict) -> Header:
    dst = opt_str(raw.get("dst_addr")) or opt_str(raw.get("addr"))
    if dst is None and isinstance(raw.get("resultset"), list) and raw["resultset"]:
        dst = opt_str(raw["resultset"][0].get("dst_addr")) if isinstance(raw["resultset"][0], dict) else None
    return Header(
        type=raw["type"],
        msm_id=_key_int(raw, "msm_id" if "msm_id" in raw else "group_id", 2**63 - 1, low=-(2**63 - 1)),
        prb_id=_key_int(raw, "prb_id", 2**31 - 1),
        timestamp=datetime.fromtimestamp(_key_int(raw, "timestamp", MAX_TIMESTAMP), tz=timezone.utc),
        fw=opt_int(raw.get("fw")),
        from_addr=opt_str(raw.get("from")),
        dst_addr=dst,
    )


def sagan(raw: dict):
    """sagan's typed result; odd input is marked, not raised, where sagan allows it."""
    return Result.get(raw, on_error=Result.ACTION_IGNORE, on_malformation=Result.ACTION_IGNORE)


def result_status(rows: Sequence[Any]) -> str:
    """One status for a whole result: ok if any row is ok, else the first row's status."""
    if not rows:
        return errors.Other.status
    if any(r.status == errors.OK for r in rows):
        return errors.OK
    return rows[0].status
