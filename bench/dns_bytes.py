"""Bytes and packets per resolution, per transport and policy, against CoreDNS 1.15 on
127.0.0.1 (the testbed frontends' implementation), compared with 003_b61199a6a5b37f70.txt §4
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

from dnscamp.experiments.bytes import HDR, PAPER, PAPER_REF, wire_totals  # noqa: E402 - shared with experiment 2
from vantage_agent.dns import registry  # noqa: E402

TRANSPORTS = [t for t in HDR if registry.transport(t).counts_wire]  # DoH3: counted only in a testbed namespace


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
            for t in TRANSPORTS:
                for pol in ("fresh", "reuse", "resume"):
                    c = registry.client(t, s.endpoint(t), Policy(pol), QueryOptions())
                    try:
                        res = [c.query(n) for n in names + names]
                    finally:
                        c.close()
                    if pol != "fresh":
                        res = res[1:]
                    totals = [w for r in res if (w := wire_totals(r, t)) is not None]
                    b = [w[0] for w in totals]
                    p = [w[1] for w in totals]
                    b.sort()
                    p.sort()
                    out[f"{t}/{pol}"] = {"ip_bytes_p50": b[len(b) // 2], "packets_p50": p[len(p) // 2], "n": len(b)}
        finally:
            s.close()
    print(f"{'transport/policy':<18} {'IP bytes':>9} {'packets':>8}   paper ({PAPER_REF})")
    for k, v in out.items():
        ref = PAPER.get(tuple(k.split("/")))
        print(f"{k:<18} {v['ip_bytes_p50']:>9} {v['packets_p50']:>8}   {f'{ref[0]} B / {ref[1]}' if ref else ''}")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
