"""Measurement results written in RIPE Atlas's JSON format (what a probe's ``ping`` and ``dns``
results look like, fw 5xxx), for the results dnscamp makes itself: the testbed's Atlas-like
probes (testbed/atlas_probes) and the server's own pings to resolvers (atlas.ping.server_pings).
It lives on the lowest floor so that both can use it; atlas/ parses these results with sagan like
any other Atlas result."""

from __future__ import annotations

import base64
from typing import Sequence

OFFLINE_FW = 5080  # the firmware number our own emitted results claim (format of fw 5xxx)


def abuf_for(message_wire: bytes) -> str:
    """Base64 of a DNS message, as Atlas stores it in ``abuf``."""
    return base64.b64encode(message_wire).decode()


def ping_result(
    *,
    msm_id: int,
    prb_id: int,
    timestamp: int,
    src_addr: str,
    dst_addr: str,
    rtts: Sequence[float | None],
    dst_name: str | None = None,
    from_addr: str | None = None,
    ttl: int = 64,
    size: int = 48,
    fw: int = OFFLINE_FW,
) -> dict:
    got = [float(x) for x in rtts if x is not None]
    packets = [{"rtt": round(float(x), 3), "ttl": ttl} if x is not None else {"x": "*"} for x in rtts]
    return {
        "af": 6 if ":" in dst_addr else 4,
        "avg": round(sum(got) / len(got), 6) if got else -1,
        "dst_addr": dst_addr,
        "dst_name": dst_name or dst_addr,
        "dup": 0,
        "from": from_addr or src_addr,
        "fw": fw,
        "group_id": msm_id,
        "lts": 10,
        "max": round(max(got), 3) if got else -1,
        "min": round(min(got), 3) if got else -1,
        "msm_id": msm_id,
        "msm_name": "Ping",
        "prb_id": prb_id,
        "proto": "ICMP",
        "rcvd": len(got),
        "result": packets,
        "sent": len(rtts),
        "size": size,
        "src_addr": src_addr,
        "step": None,
        "stored_timestamp": timestamp,
        "timestamp": timestamp,
        "ttl": ttl,
        "type": "ping",
    }


def dns_response(
    *,
    dst_addr: str,
    src_addr: str,
    abuf: bytes | None,
    rt_ms: float | None,
    subid: int = 1,
    submax: int = 1,
    timestamp: int,
    timeout_ms: int = 5000,
    proto: str = "UDP",
) -> dict:
    r: dict = {
        "af": 6 if ":" in dst_addr else 4,
        "dst_addr": dst_addr,
        "lts": 10,
        "proto": proto,
        "src_addr": src_addr,
        "subid": subid,
        "submax": submax,
        "time": timestamp,
    }
    if abuf is None:
        r["error"] = {"timeout": timeout_ms}
    else:
        import dns.message  # dnspython (absolute import)

        try:
            m = dns.message.from_wire(abuf)
            counts = {"ANCOUNT": len(m.answer), "ARCOUNT": len(m.additional), "ID": m.id,
                      "NSCOUNT": len(m.authority), "QDCOUNT": len(m.question)}
        except Exception:  # an undecodable answer is stored as it came
            counts = {}
        r["result"] = {**counts, "abuf": abuf_for(abuf), "rt": round(float(rt_ms or 0), 3),
                       "size": len(abuf)}
    return r


def dns_result(*, msm_id: int, prb_id: int, timestamp: int, from_addr: str, responses: list[dict],
           fw: int = OFFLINE_FW) -> dict:
    return {
        "from": from_addr,
        "fw": fw,
        "group_id": msm_id,
        "lts": 10,
        "msm_id": msm_id,
        "msm_name": "Tdig",
        "prb_id": prb_id,
        "resultset": responses,
        "stored_timestamp": timestamp,
        "timestamp": timestamp,
        "type": "dns",
    }
