"""RIPE Atlas results (any firmware) → typed rows, with ripe.atlas.sagan.

Every Atlas result becomes rows with a ``status`` (the taxonomy of vantage_agent/errors.py):
a ping with no reply is ``timeout``, a DNS ``"error": {"timeout": ...}`` is ``timeout``, a
SERVFAIL / REFUSED answer is ``servfail`` / ``refused``, an abuf that sagan cannot decode is
``malformed_response``. Only what is not an Atlas result at all raises ``NotAnAtlasResult``
(the caller quarantines it). Results of other types (traceroute, http, ...) are Atlas results:
they are kept raw and not parsed further (``kind == "other"``).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ripe.atlas.sagan import Result
from ripe.atlas.sagan.dns import DnsResult
from ripe.atlas.sagan.ping import PingResult

from vantage_agent import errors

# The result types this module parses; others are stored raw only.
PARSED_TYPES = ("ping", "dns")
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


@dataclass(frozen=True)
class PingRow:
    msm_id: int | None
    prb_id: int
    timestamp: datetime
    fw: int | None
    af: int | None
    src_addr: str | None
    from_addr: str | None
    dst_addr: str | None
    dst_name: str | None
    sent: int | None
    received: int | None
    duplicates: int | None
    rtts: list[float | None]  # one per reply slot, in order; None = lost ("x": "*"); dups excluded
    avg: float | None  # mean of the replies (the paper's "average over five pings")
    min: float | None
    max: float | None
    status: str
    error: str | None


@dataclass(frozen=True)
class DnsRow:
    msm_id: int | None
    prb_id: int
    timestamp: datetime
    fw: int | None
    subid: int | None
    af: int | None
    resolver: str | None  # dst_addr of the response: the resolver asked
    src_addr: str | None
    from_addr: str | None
    proto: str | None
    rcode: str | None
    qname: str | None
    qtype: str | None
    answers: list[dict[str, Any]] = field(default_factory=list)
    response_time: float | None = None
    response_size: int | None = None
    status: str = errors.OK
    error: str | None = None


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


def _int(v: Any) -> int | None:
    """An optional integer column (fw, af, ...): None when absent, not an integer or beyond int4."""
    try:
        n = None if v is None or isinstance(v, bool) else int(v)
    except (TypeError, ValueError, OverflowError):
        return None
    return n if n is not None and -(2**31) <= n < 2**31 else None


def _str(v: Any) -> str | None:
    """An optional text column (addresses, names): only a string is one."""
    return v if isinstance(v, str) else None


def header(raw: dict) -> Header:
    dst = _str(raw.get("dst_addr")) or _str(raw.get("addr"))
    if dst is None and isinstance(raw.get("resultset"), list) and raw["resultset"]:
        dst = _str(raw["resultset"][0].get("dst_addr")) if isinstance(raw["resultset"][0], dict) else None
    return Header(
        type=raw["type"],
        msm_id=_key_int(raw, "msm_id" if "msm_id" in raw else "group_id", 2**63 - 1, low=-(2**63 - 1)),
        prb_id=_key_int(raw, "prb_id", 2**31 - 1),
        timestamp=datetime.fromtimestamp(_key_int(raw, "timestamp", MAX_TIMESTAMP), tz=timezone.utc),
        fw=_int(raw.get("fw")),
        from_addr=_str(raw.get("from")),
        dst_addr=dst,
    )


def _sagan(raw: dict):
    return Result.get(raw, on_error=Result.ACTION_IGNORE, on_malformation=Result.ACTION_IGNORE)


def parse_ping(raw: dict, h: Header | None = None) -> PingRow:
    """``h``: header(raw) when the caller has it already."""
    h = h or header(raw)
    try:
        r: PingResult = _sagan(raw)
    except Exception as exc:  # sagan raises plain exceptions on odd input: a record, not a crash
        return PingRow(h.msm_id, h.prb_id, h.timestamp, h.fw, _int(raw.get("af")), _str(raw.get("src_addr")),
                       h.from_addr, h.dst_addr, _str(raw.get("dst_name")), None, None, None, [], None, None, None,
                       errors.MalformedResponse.status, f"sagan could not parse the ping result: {exc}")
    rtts = [p.rtt for p in r.packets if not p.dup]
    got = [x for x in rtts if x is not None]
    if got:
        avg, mn, mx = sum(got) / len(got), min(got), max(got)
    elif r.packets:
        avg = mn = mx = None
    else:  # firmware 0/1: no per-packet list, only the summary
        avg, mn, mx = r.rtt_average, r.rtt_min, r.rtt_max
    received = r.packets_received
    if r.is_error:
        status, err = errors.Other.status, r.error_message or "Atlas reported an error"
    elif r.is_malformed and avg is None:
        status, err = errors.MalformedResponse.status, "sagan marked the result as malformed"
    elif not received or avg is None:
        status, err = errors.Timeout.status, f"no reply to {r.packets_sent} ping(s)"
    else:
        status, err = errors.OK, None
    return PingRow(
        msm_id=h.msm_id,
        prb_id=h.prb_id,
        timestamp=h.timestamp,
        fw=h.fw,
        af=r.af,
        src_addr=_str(raw.get("src_addr")),
        from_addr=r.origin,
        dst_addr=r.destination_address,
        dst_name=r.destination_name,
        sent=r.packets_sent,
        received=received,
        duplicates=r.duplicates,
        rtts=rtts,
        avg=avg,
        min=mn,
        max=mx,
        status=status,
        error=err,
    )


_RCODE_STATUS = {
    "NOERROR": errors.OK,
    "NXDOMAIN": errors.OK,  # an rcode, not an error (errors.py)
    "SERVFAIL": errors.Servfail.status,
    "REFUSED": errors.Refused.status,
}


def _answer(a) -> dict[str, Any]:
    data = {k: v for k, v in (a.raw_data or {}).items() if k not in ("Name", "Type", "Class", "TTL", "RDlength")}
    return {"name": a.name, "type": a.type, "ttl": a.ttl, "data": data}


def _dns_error(resp_raw: dict) -> tuple[str, str] | None:
    e = resp_raw.get("error")
    if not e:
        return None
    if isinstance(e, dict) and "timeout" in e:
        return errors.Timeout.status, f"DNS timeout after {e['timeout']} ms"
    return errors.Other.status, f"Atlas DNS error: {json.dumps(e, sort_keys=True)[:200]}"


def parse_dns(raw: dict, h: Header | None = None) -> list[DnsRow]:
    """One row per response (a probe asking its own resolvers gives a ``resultset``)."""
    h = h or header(raw)
    try:
        r: DnsResult = _sagan(raw)
        responses = list(r.responses)
    except Exception as exc:
        return [DnsRow(h.msm_id, h.prb_id, h.timestamp, h.fw, None, _int(raw.get("af")), h.dst_addr,
                       _str(raw.get("src_addr")), h.from_addr, _str(raw.get("proto")), None, None, None,
                       status=errors.MalformedResponse.status, error=f"sagan could not parse the DNS result: {exc}")]
    raw_responses: list[dict] = []
    if isinstance(raw.get("resultset"), list):
        raw_responses = [x if isinstance(x, dict) else {} for x in raw["resultset"]]
    else:
        raw_responses = [raw]
    rows: list[DnsRow] = []
    if not responses:  # a top-level error with no response at all
        err = _dns_error(raw) or (errors.Other.status, r.error_message or "no DNS response in the result")
        return [DnsRow(h.msm_id, h.prb_id, h.timestamp, h.fw, None, _int(raw.get("af")), h.dst_addr,
                       _str(raw.get("src_addr")), h.from_addr, _str(raw.get("proto")), None, None, None,
                       status=err[0], error=err[1])]
    for i, resp in enumerate(responses):
        rr = raw_responses[i] if i < len(raw_responses) else {}
        abuf = resp.abuf
        rcode = qname = qtype = None
        answers: list[dict[str, Any]] = []
        status, err = errors.OK, None
        e = _dns_error(rr) or _dns_error(rr.get("result") or {} if isinstance(rr.get("result"), dict) else {})
        if e:
            status, err = e
        elif abuf is None or abuf.header is None:
            b64 = (rr.get("result") or {}).get("abuf") if isinstance(rr.get("result"), dict) else None
            if b64:
                status, err = errors.MalformedResponse.status, "abuf could not be decoded"
            else:
                status, err = errors.Other.status, "no abuf in the response"
        else:
            rcode = abuf.header.return_code
            if abuf.questions:
                qname, qtype = abuf.questions[0].name, abuf.questions[0].type
            answers = [_answer(a) for a in (abuf.answers or [])]
            status = _RCODE_STATUS.get(rcode, errors.Other.status)
            err = None if status == errors.OK else f"rcode {rcode}"
        rows.append(
            DnsRow(
                msm_id=h.msm_id,
                prb_id=h.prb_id,
                timestamp=h.timestamp,
                fw=h.fw,
                subid=resp.response_id,
                af=resp.af,
                resolver=resp.destination_address,
                src_addr=resp.source_address,
                from_addr=r.origin,
                proto=resp.protocol,
                rcode=rcode,
                qname=qname,
                qtype=qtype,
                answers=answers,
                response_time=resp.response_time,
                response_size=resp.response_size,
                status=status,
                error=err,
            )
        )
    return rows


def abuf_for(message_wire: bytes) -> str:
    """Base64 of a DNS message, as Atlas stores it in ``abuf``."""
    return base64.b64encode(message_wire).decode()


def result_status(rows: list[PingRow] | list[DnsRow]) -> str:
    """One status for a whole result: ok if any row is ok, else the first row's status."""
    if not rows:
        return errors.Other.status
    if any(r.status == errors.OK for r in rows):
        return errors.OK
    return rows[0].status
