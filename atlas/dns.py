"""RIPE Atlas DNS measurements: the definition and its price, parsing (sagan) and emitting.

Price — RIPE Atlas "Measurement Cost Model" (see ``atlas.definitions``): 10 credits per result
over UDP, 20 over TCP, twice that one-off. A DNS measurement with ``use_probe_resolver`` yields
one result per probe holding a ``resultset`` (one entry per local resolver); we price one result
per probe, so probes with several resolvers may cost more than planned (``max_credits`` leaves
headroom).

Parsing gives one row per response: a DNS ``"error": {"timeout": ...}`` is ``timeout``, a
SERVFAIL / REFUSED answer is ``servfail`` / ``refused``, an abuf that sagan cannot decode is
``malformed_response``. Emitting follows current probe firmware (fw 5xxx): a ``resultset``, each
entry holding ``result: {"abuf", "rt", "size", ...}`` or ``error: {"timeout": ms}``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ripe.atlas.cousteau import Dns
from ripe.atlas.sagan.dns import DnsResult

from atlas.definitions import ONEOFF_FACTOR, Definition, DefinitionError
from atlas.result import Header, header, opt_int, opt_str, sagan
from vantage_agent import errors

TYPE = "dns"
UDP_COST = 10
TCP_COST = 20


# -- definition ------------------------------------------------------------------------------------
def unit_cost(protocol: str, *, oneoff: bool) -> int:
    base = {"UDP": UDP_COST, "TCP": TCP_COST}.get(protocol.upper())
    if base is None:
        raise DefinitionError(f"dns protocol must be UDP or TCP (got {protocol!r})")
    return base * (ONEOFF_FACTOR if oneoff else 1)


def definition(*, query_argument: str, query_type: str, af: int, protocol: str, description: str,
               oneoff: bool, prepend_probe_id: bool, timeout_ms: int, is_public: bool = True) -> Definition:
    """The probes ask their own resolver(s) (``use_probe_resolver``) with the RD bit set."""
    m = Dns(
        af=af,
        description=description,
        query_class="IN",
        query_type=query_type,
        query_argument=query_argument,
        use_probe_resolver=True,
        set_rd_bit=True,
        prepend_probe_id=prepend_probe_id,
        protocol=protocol,
        timeout=timeout_ms,
        retry=0,
        udp_payload_size=1232,
        is_oneoff=oneoff,
        is_public=is_public,
    )
    d = Definition(role="resolver_dns", measurement=m, unit_cost=unit_cost(protocol, oneoff=oneoff),
                   target=query_argument)
    d.api_struct()
    return d


# -- parsing ---------------------------------------------------------------------------------------
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


def parse(raw: dict, h: Header | None = None) -> list[DnsRow]:
    """One row per response (a probe asking its own resolvers gives a ``resultset``)."""
    h = h or header(raw)
    try:
        r: DnsResult = sagan(raw)
        responses = list(r.responses)
    except Exception as exc:
        return [DnsRow(h.msm_id, h.prb_id, h.timestamp, h.fw, None, opt_int(raw.get("af")), h.dst_addr,
                       opt_str(raw.get("src_addr")), h.from_addr, opt_str(raw.get("proto")), None, None, None,
                       status=errors.MalformedResponse.status, error=f"sagan could not parse the DNS result: {exc}")]
    raw_responses: list[dict] = []
    if isinstance(raw.get("resultset"), list):
        raw_responses = [x if isinstance(x, dict) else {} for x in raw["resultset"]]
    else:
        raw_responses = [raw]
    rows: list[DnsRow] = []
    if not responses:  # a top-level error with no response at all
        err = _dns_error(raw) or (errors.Other.status, r.error_message or "no DNS response in the result")
        return [DnsRow(h.msm_id, h.prb_id, h.timestamp, h.fw, None, opt_int(raw.get("af")), h.dst_addr,
                       opt_str(raw.get("src_addr")), h.from_addr, opt_str(raw.get("proto")), None, None, None,
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


