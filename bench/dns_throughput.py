"""DNS engine throughput: timed queries per second per transport with ``reuse`` and full
per-query phase timestamps (targets: >= 2,000/s Do53, >= 1,000/s DoT, DoH, DoH3, DoQ).

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


def measure(endpoints: dict, n: int, qname_fmt: str, transports: list[str] = TRANSPORTS, start_at: float | None = None) -> dict:
    from vantage_agent.dns import registry
    from vantage_agent.dns._common import QueryOptions
    from vantage_agent.dns.policy import Policy

    out = {}
    for t in transports:
        c = registry.client(t, endpoints[t], Policy("reuse"), QueryOptions(timeout_s=2))
        try:
            for i in range(20):  # warm: connection, resolver cache
                c.query(qname_fmt.format(i=i % 10))
            if start_at is not None:  # parallel workers start together
                time.sleep(max(0.0, start_at - time.time()))
            oks = 0
            totals = []
            t0, c0 = time.monotonic(), time.process_time()
            w0 = time.time()
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
                  "wall_start": w0, "wall_end": w0 + wall,
                  "p50_us": round(totals[len(totals) // 2] / 1e3) if totals else None,
                  "target_qps": TARGETS[t], "meets": TARGETS[t] is None or oks / wall >= TARGETS[t]}
    return out


def parallel(endpoints: dict, n: int, qname_fmt: str, workers: int) -> dict:
    """``workers`` processes, each its own client and connection, per transport in turn;
    q/s = all successful queries / (last worker's end - first worker's start)."""
    out = {}
    for t in TRANSPORTS:
        start_at = time.time() + 2.0
        ep = endpoints[t]
        spec = json.dumps({"t": t, "ep": ep.__dict__, "n": n, "fmt": qname_fmt, "start_at": start_at})
        procs = [subprocess.Popen([sys.executable, __file__, "--worker", spec], stdout=subprocess.PIPE, text=True)
                 for _ in range(workers)]
        rs = [json.loads(p.communicate(timeout=600)[0].strip().splitlines()[-1]) for p in procs]
        oks = sum(r["ok"] for r in rs)
        wall = max(r["wall_end"] for r in rs) - min(r["wall_start"] for r in rs)
        out[t] = {"workers": workers, "n": n * workers, "ok": oks, "qps": round(oks / wall),
                  "per_worker_qps": [r["qps"] for r in rs], "target_qps": TARGETS[t],
                  "meets": TARGETS[t] is None or oks / wall >= TARGETS[t]}
    return out


def worker(spec: str) -> dict:
    from vantage_agent.dns._common import Endpoint

    d = json.loads(spec)
    ep = Endpoint(**d["ep"])
    return measure({d["t"]: ep}, d["n"], d["fmt"], [d["t"]], start_at=d["start_at"])[d["t"]]


def local(n: int, workers: int) -> dict:
    from _dns_coredns import LocalCoreDNS

    with tempfile.TemporaryDirectory() as d:
        s = LocalCoreDNS(Path(d))
        try:
            eps = {t: s.endpoint(t) for t in TRANSPORTS}
            res = {"single": measure(eps, n, "q{i}.example.test.")}
            if workers > 1:
                res["parallel"] = parallel(eps, n, "q{i}.example.test.", workers)
            return res
        finally:
            s.close()


def inner(n: int, workers: int) -> dict:
    from vantage_agent.dns import catalog

    cat = catalog.Catalog.load(testbed=catalog.testbed_info())
    eps = {t: cat.endpoint("testbed-isp", t) for t in TRANSPORTS}
    res = {"single": measure(eps, n, "www.single.test.")}
    if workers > 1:
        res["parallel"] = parallel(eps, n, "www.single.test.", workers)
    return res


def on_testbed(n: int, workers: int) -> dict:
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
            p = subprocess.run(["ip", "netns", "exec", ns, sys.executable, __file__, "--inner", "-n", str(n), "--workers", str(workers)],
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
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2,
                    help="also run this many client processes in parallel (1 = single client only)")
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        print(json.dumps(worker(a.worker)))
        return 0
    if a.inner:
        print(json.dumps(inner(a.n, a.workers)))
        return 0
    res = on_testbed(a.n, a.workers) if a.testbed else local(a.n, a.workers)
    where = "testbed (profile none, ISP resolver frontend)" if a.testbed else "CoreDNS 1.15 on 127.0.0.1"
    print(f"against {where}; load {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    for t, r in res["single"].items():
        par = res.get("parallel", {}).get(t)
        best = max(r["qps"], par["qps"] if par else 0)
        ok = TARGETS[t] is None or best >= TARGETS[t]
        ptxt = f"  {par['workers']} clients {par['qps']:>6} q/s" if par else ""
        print(f"{t:<9} 1 client {r['qps']:>6} q/s (cpu {r['cpu_us_per_query']:>4} us/query, p50 {r['p50_us']} us){ptxt}  "
              f"target {TARGETS[t] or '-'}  {'ok' if ok else 'BELOW TARGET'}")
    print(json.dumps({"target": where, "load": round(os.getloadavg()[0], 2), "transports": res}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
