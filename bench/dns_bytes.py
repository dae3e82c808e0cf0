"""Bytes and packets per resolution, per transport and policy, against CoreDNS 1.15 on
127.0.0.1 (the testbed frontends' implementation), compared with 003_b61199a6a5b37f70.txt §5
(median UDP 182 B / 2 packets; DoH without reuse 5,737 B / 27; with reuse 864 B / 8 — for
Cloudflare with real names). IP-level bytes = layer-4 payload counted by the engine + 28 B
(IPv4+UDP) or 52 B (IPv4+TCP with timestamps) per packet. DoH3 has no per-socket counters
(libcurl owns the datagrams): not reported. Prints a table, then one JSON line."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

HDR = {"do53": 28, "do53-tcp": 52, "dot": 52, "doh": 52, "doq": 28}
PAPER = {"do53/fresh": (182, 2), "doh/fresh": (5737, 27), "doh/reuse": (864, 8)}


def main() -> int:
    from _dns_coredns import LocalCoreDNS

    from vantage_agent.dns import registry
    from vantage_agent.dns._common import QueryOptions
    from vantage_agent.dns.policy import Policy

    names = [f"www.site{i}.example.test." for i in range(10)]
    out = {}
    with tempfile.TemporaryDirectory() as d:
        s = LocalCoreDNS(Path(d))
        try:
            for t in HDR:
                for pol in ("fresh", "reuse", "resume"):
                    c = registry.client(t, s.endpoint(t), Policy(pol), QueryOptions())
                    try:
                        res = [c.query(n) for n in names + names]
                    finally:
                        c.close()
                    if pol != "fresh":
                        res = res[1:]
                    b, p = [], []
                    for r in res:
                        if not r.ok or r.query is None:
                            continue
                        hs = r.handshake
                        pk = r.query.packets_sent + r.query.packets_received + (hs.packets_sent + hs.packets_received if hs else 0)
                        by = r.query.bytes_sent + r.query.bytes_received + (hs.bytes_sent + hs.bytes_received if hs else 0)
                        b.append(by + HDR[t] * pk)
                        p.append(pk)
                    b.sort()
                    p.sort()
                    out[f"{t}/{pol}"] = {"ip_bytes_p50": b[len(b) // 2], "packets_p50": p[len(p) // 2], "n": len(b)}
        finally:
            s.close()
    print(f"{'transport/policy':<18} {'IP bytes':>9} {'packets':>8}   paper (003 §5)")
    for k, v in out.items():
        ref = PAPER.get(k)
        print(f"{k:<18} {v['ip_bytes_p50']:>9} {v['packets_p50']:>8}   {f'{ref[0]} B / {ref[1]}' if ref else ''}")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
