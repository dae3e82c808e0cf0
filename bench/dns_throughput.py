"""DNS engine throughput: timed queries per second per transport with ``reuse`` and full
per-query phase timestamps (issue 5: >= 2,000/s Do53, >= 1,000/s DoT, DoH, DoH3, DoQ).

Default: against CoreDNS 1.15 (the testbed frontends' implementation) on 127.0.0.1 — no
link delay. ``--testbed``: against the testbed's ISP resolver frontend from the client
namespace of the ``none`` profile (no emulation), taking the testbed lease and bringing the
island up and down itself. One client, one connection, queries back to back.
Prints one line per transport, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

TRANSPORTS = ["do53", "do53-tcp", "dot", "doh", "doh3", "doq"]
TARGETS = {"do53": 2000, "do53-tcp": None, "dot": 1000, "doh": 1000, "doh3": 1000, "doq": 1000}


def measure(endpoints: dict, n: int, qname_fmt: str) -> dict:
    from vantage_agent.dns import registry
    from vantage_agent.dns._common import QueryOptions
    from vantage_agent.dns.policy import Policy

    out = {}
    for t in TRANSPORTS:
        c = registry.client(t, endpoints[t], Policy("reuse"), QueryOptions(timeout_s=2))
        try:
            for i in range(20):  # warm: connection, resolver cache
                c.query(qname_fmt.format(i=i % 10))
            oks = 0
            totals = []
            t0, c0 = time.monotonic(), time.process_time()
            for i in range(n):
                r = c.query(qname_fmt.format(i=i % 10))
                if r.ok:
                    oks += 1
                    totals.append(r.t_response - r.t_start)
            wall, cpu = time.monotonic() - t0, time.process_time() - c0
        finally:
            c.close()
        totals.sort()
        out[t] = {"n": n, "ok": oks, "qps": round(oks / wall), "cpu_us_per_query": round(cpu / n * 1e6),
                  "p50_us": round(totals[len(totals) // 2] / 1e3) if totals else None,
                  "target_qps": TARGETS[t], "meets": TARGETS[t] is None or oks / wall >= TARGETS[t]}
    return out


def local(n: int) -> dict:
    from _dns_coredns import LocalCoreDNS

    with tempfile.TemporaryDirectory() as d:
        s = LocalCoreDNS(Path(d))
        try:
            return measure({t: s.endpoint(t) for t in TRANSPORTS}, n, "q{i}.example.test.")
        finally:
            s.close()


def inner(n: int) -> dict:
    from vantage_agent.dns import catalog

    cat = catalog.Catalog.load(testbed=catalog.testbed_info())
    return measure({t: cat.endpoint("testbed-isp", t) for t in TRANSPORTS}, n, "www.single.test.")


def on_testbed(n: int) -> dict:
    import uuid

    from testbed import topology

    token = os.environ.get("DNSCAMP_TESTBED_OWNER") or f"bench-dns-{uuid.uuid4().hex[:8]}"
    env = dict(os.environ, DNSCAMP_TESTBED_OWNER=token)
    cli = [sys.executable, "-m", "dnscamp.cli"]
    with topology.session_lease(token, log=lambda m: print(m, file=sys.stderr)):
        subprocess.run([*cli, "testbed", "down"], env=env, capture_output=True)
        try:
            subprocess.run([*cli, "testbed", "up", "--profiles", "none"], env=env, check=True, capture_output=True)
            info = json.loads(subprocess.run([*cli, "testbed", "info", "--json"], env=env, check=True,
                                             capture_output=True, text=True).stdout)
            with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
                json.dump(info, f)
            ns = info["clients"]["none"]["ns"]
            p = subprocess.run(["ip", "netns", "exec", ns, sys.executable, __file__, "--inner", "-n", str(n)],
                               env=dict(env, DNSCAMP_TESTBED_INFO=f.name), capture_output=True, text=True, timeout=900)
            os.unlink(f.name)
            if p.returncode != 0:
                raise RuntimeError(p.stderr[-2000:])
            return json.loads(p.stdout.strip().splitlines()[-1])
        finally:
            subprocess.run([*cli, "testbed", "down"], env=env, capture_output=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=3000, help="timed queries per transport")
    ap.add_argument("--testbed", action="store_true", help="against the testbed (profile none) instead of loopback CoreDNS")
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.inner:
        print(json.dumps(inner(a.n)))
        return 0
    res = on_testbed(a.n) if a.testbed else local(a.n)
    where = "testbed (profile none, ISP resolver frontend)" if a.testbed else "CoreDNS 1.15 on 127.0.0.1"
    print(f"against {where}; load {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    for t, r in res.items():
        print(f"{t:<9} {r['qps']:>6} q/s  cpu {r['cpu_us_per_query']:>4} us/query  p50 {r['p50_us']} us  "
              f"target {r['target_qps'] or '-'}  {'ok' if r['meets'] else 'BELOW TARGET'}")
    print(json.dumps({"target": where, "load": round(os.getloadavg()[0], 2), "transports": res}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
