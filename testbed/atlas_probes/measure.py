"""The Atlas-like probes' measurements, each result in RIPE Atlas JSON (vantage_agent.atlas_json):
phase 1, a DNS query from every probe through its resolver; phase 2, after discovery, the three
ping sets (probe → server, probe → discovered resolver, our server → each resolver)."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Iterable

from vantage_agent import atlas_json
from testbed.atlas_probes.island import SERVER_ADDR, SERVER_ZONE, Island, in_netns

PING_COUNT = 5
PING_INTERVAL_MS = 100.0


def _ping(ns: str, dst: str) -> list[float | None]:
    from vantage_agent.ping import PingParams
    from vantage_agent.ping import ping as run_ping

    params = PingParams(targets=[dst], count=PING_COUNT, interval_ms=PING_INTERVAL_MS, timeout_ms=1000)
    with in_netns(ns):
        body = run_ping(params, dst)
    return list(body.rtts_ms)


def _dns_query(ns: str, src: str, resolver: str, qname: str, timeout: float = 3.0) -> tuple[bytes | None, float | None]:
    import dns.message as dns_message

    q = dns_message.make_query(qname, "A")
    with in_netns(ns):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind((src, 0))
        s.settimeout(timeout)
        t0 = time.perf_counter_ns()
        s.sendto(q.to_wire(), (resolver, 53))
        while True:
            data = s.recv(65535)
            t1 = time.perf_counter_ns()
            if data[:2] == q.to_wire()[:2]:
                return data, (t1 - t0) / 1e6
    except (socket.timeout, OSError):
        return None, None
    finally:
        s.close()


def dns_phase(island: Island, msm: dict[str, int], label: str) -> list[dict]:
    """Phase 1: each probe asks its resolver for ``<prb_id>-<ts>.<label>.<SERVER_ZONE>``."""
    out: list[dict] = []
    ts = int(time.time())
    for p in island.probes:
        qname = f"{p.prb_id}-{ts}.{label}.{SERVER_ZONE}."
        abuf, rt = _dns_query(island.ns("p", p.prb_id), p.probe_addr, p.resolver, qname)
        resp = atlas_json.dns_response(dst_addr=p.resolver, src_addr=p.probe_addr, abuf=abuf, rt_ms=rt, timestamp=ts)
        out.append(atlas_json.dns_result(msm_id=msm["resolver_dns"], prb_id=p.prb_id, timestamp=ts,
                                           from_addr=p.probe_addr, responses=[resp]))
    return out


def ping_phase(island: Island, msm: dict[str, int], discovered: dict[int, str]) -> list[dict]:
    """Phase 2: ``discovered`` is prb_id → the resolver address discovery found for it."""
    rows: list[dict] = []
    for p in island.probes:
        pns = island.ns("p", p.prb_id)
        ts = int(time.time())
        rows.append(atlas_json.ping_result(msm_id=msm["probe_server"], prb_id=p.prb_id, timestamp=ts,
                                           src_addr=p.probe_addr, dst_addr=SERVER_ADDR, rtts=_ping(pns, SERVER_ADDR)))
        res = discovered.get(p.prb_id)
        if res:
            rows.append(atlas_json.ping_result(msm_id=msm["probe_resolver"], prb_id=p.prb_id, timestamp=ts,
                                               src_addr=p.probe_addr, dst_addr=res, rtts=_ping(pns, res)))
    for res in sorted(set(discovered.values())):  # our agent on the server: RTT_Server
        rows.append(atlas_json.ping_result(msm_id=msm["server_resolver"], prb_id=0, timestamp=int(time.time()),
                                           src_addr=SERVER_ADDR, dst_addr=res, rtts=_ping(island.ns("s"), res)))
    return rows


def write_results(path: Path, results: Iterable[dict]) -> Path:
    """Atlas JSON results, one per line (what the results API's ``format=txt`` gives)."""
    path.write_text("".join(json.dumps(r) + "\n" for r in results))
    return path
