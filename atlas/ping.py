"""RIPE Atlas ping measurements: the definition and its price, parsing (sagan) and emitting.

Price — RIPE Atlas "Measurement Cost Model" (see ``atlas.definitions``): ``N * (int(S / 1500) + 1)``
credits per result with N packets of S octets (default 3 × 48 → 3), twice that one-off.

Parsing: a ping with no reply is ``timeout``; firmware 0/1 results (no per-packet list) give
only the summary. Emitting follows current probe firmware (fw 5xxx): ``result: [{"rtt": ..} |
{"x": "*"}]``, ``avg/min/max`` = -1 when nothing came back (what the testbed's Atlas-like probes
and our server's own pings write; sagan parses them like real results, tests check it).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime

from ripe.atlas.cousteau import Ping
from ripe.atlas.sagan.ping import PingResult

from atlas.definitions import ONEOFF_FACTOR, Definition, DefinitionError
from atlas.result import Header, header, opt_int, opt_str, sagan
from atlas.spec import AtlasSpec
from vantage_agent import atlas_json, errors

TYPE = "ping"


# -- definition ------------------------------------------------------------------------------------
def unit_cost(packets: int, size: int, *, oneoff: bool) -> int:
    if packets < 1 or size < 1:
        raise DefinitionError(f"ping needs packets >= 1 and size >= 1 (got {packets}, {size})")
    return packets * (size // 1500 + 1) * (ONEOFF_FACTOR if oneoff else 1)


def definition(*, role: str, target: str, af: int, packets: int, size: int, description: str, oneoff: bool,
               is_public: bool = True) -> Definition:
    m = Ping(af=af, target=target, description=description, packets=packets, size=size,
             is_oneoff=oneoff, is_public=is_public, resolve_on_probe=False)
    d = Definition(role=role, measurement=m, unit_cost=unit_cost(packets, size, oneoff=oneoff), target=target)
    d.api_struct()  # validate now
    return d


# -- parsing ---------------------------------------------------------------------------------------
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


def parse(raw: dict, h: Header | None = None) -> PingRow:
    """``h``: header(raw) when the caller has it already."""
    h = h or header(raw)
    try:
        r: PingResult = sagan(raw)
    except Exception as exc:  # sagan raises plain exceptions on odd input: a record, not a crash
        return PingRow(h.msm_id, h.prb_id, h.timestamp, h.fw, opt_int(raw.get("af")), opt_str(raw.get("src_addr")),
                       h.from_addr, h.dst_addr, opt_str(raw.get("dst_name")), None, None, None, [], None, None, None,
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
        src_addr=opt_str(raw.get("src_addr")),
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


def server_pings(spec: AtlasSpec, resolvers: list[str], *, src_addr: str, msm_id: int) -> list[dict]:
    """RTT_Server: five pings from this host (our server) to each resolver, as Atlas JSON."""
    from vantage_agent.ping import PingParams
    from vantage_agent.ping import ping as run_ping

    out = []
    params = PingParams(targets=resolvers or ["127.0.0.1"], count=spec.ping.packets, interval_ms=200, timeout_ms=2000)
    for res in resolvers:
        try:
            rtts = list(run_ping(params, res).rtts_ms)
        except errors.MeasurementError:
            rtts = [None] * spec.ping.packets  # stored as a timeout result, never dropped
        out.append(atlas_json.ping_result(msm_id=msm_id, prb_id=0, timestamp=int(time.time()), src_addr=src_addr,
                                      dst_addr=res, rtts=rtts, fw=0))
    return out
