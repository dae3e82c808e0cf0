"""DNS fidelity on the testbed: median resolution time in multiples of the access
RTT, warm resolver cache, fiber and 4G (000_6647a8606a2226e0.txt §V-B measured 1.03 / 2.50 /
3.43 for DoUDP / DoQ / DoH). Targets: Do53 <= 1.05; DoQ and DoH3 fresh <= 2.10; DoT and DoH
fresh <= 3.10; every transport with reuse <= 1.10 (reused queries only). Also bytes and
packets per resolution (cf. 003_b61199a6a5b37f70.txt §5: UDP 182 B / 2; DoH 5,737 B / 27;
reused 864 B / 8).

Takes the testbed lease, brings the island up with fiber,4g (down at the end), and runs the
engine inside dc-client-<profile> against the ISP resolver's CoreDNS frontend. The resolution
time is t_response - t_start (handshakes included), divided by the profile's configured RTT.
Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vantage_agent.dns import registry  # noqa: E402
from vantage_agent.stats import median  # noqa: E402

TRANSPORTS = ["do53", "dot", "doh", "doh3", "doq"]
POLICIES = ["fresh", "reuse", "resume"]
TARGET = {("do53", p): 1.05 for p in POLICIES}
TARGET.update({(t, "fresh"): v for t, v in {"doq": 2.10, "doh3": 2.10, "dot": 3.10, "doh": 3.10}.items()})
TARGET.update({(t, "reuse"): 1.10 for t in TRANSPORTS})
NAMES = ["www.single.test.", "www.js.test.", "www.js-css.test."]
HDR = {"do53": 28, "doq": 28, "doh3": 28, "dot": 52, "doh": 52}  # IPv4+UDP / IPv4+TCP(timestamps)


def inner(profile: str, k: int) -> dict:
    from vantage_agent.dns import catalog, registry, runner
    from vantage_agent.dns._common import QueryOptions
    from vantage_agent.dns.policy import Policy

    info = catalog.testbed_info()
    rtt = runner.access_rtt_ms(info, profile)
    cat = catalog.Catalog.load(testbed=info)
    out: dict = {"rtt_ms": rtt, "results": {}}
    warm = registry.client("do53", cat.endpoint("testbed-isp", "do53"), Policy("reuse"), QueryOptions())
    for _ in range(3):
        for n in NAMES:
            warm.query(n)
    warm.close()
    for t in TRANSPORTS:
        for pol in POLICIES:
            c = registry.client(t, cat.endpoint("testbed-isp", t), Policy(pol), QueryOptions(timeout_s=5))
            try:
                res = [c.query(NAMES[i % len(NAMES)]) for i in range(k + 1)]
            finally:
                c.close()
            if pol in ("reuse", "resume"):
                res = res[1:]  # the first query opened the connection / fetched the ticket
            ok = [r for r in res if r.ok]
            mult = [(r.t_response - r.t_start) / 1e6 / rtt for r in ok]
            exch = [(r.t_response - r.t_query_sent) / 1e6 / rtt for r in ok]
            byts, pkts = [], []
            for r in ok:
                if r.query is None:
                    continue
                hs = r.handshake
                b = r.query.bytes_sent + r.query.bytes_received + (hs.bytes_sent + hs.bytes_received if hs else 0)
                p = r.query.packets_sent + r.query.packets_received + (hs.packets_sent + hs.packets_received if hs else 0)
                byts.append(b + HDR[t] * p)
                pkts.append(p)
            out["results"][f"{t}/{pol}"] = {
                "n": len(res), "ok": len(ok), "errors": sorted({r.status for r in res if not r.ok}),
                "reused": sum(r.connection_reused for r in res), "resumed": sum(bool(r.resumed) for r in res),
                "early_data": sum(bool(r.early_data) for r in res),
                "rtt_multiple_p50": round(median(mult), 3) if mult else None,
                "exchange_multiple_p50": round(median(exch), 3) if exch else None,
                "ip_bytes_p50": median(byts), "packets_p50": median(pkts),
                # where the time goes beyond whole round trips (ms, medians over ok queries)
                "phases_ms_p50": _phases(ok),
            }
    return out


def _phases(ok: list) -> dict:
    """Median connect / handshake / handshake-to-send gap / exchange times in ms."""

    def ms(a, b):
        return None if a is None or b is None else (b - a) / 1e6

    cols = {
        "connect": [ms(r.t_start, r.t_connected) for r in ok],
        "handshake": [ms(r.t_connected or r.t_start, r.t_tls_done) for r in ok],
        "gap": [ms(r.t_tls_done, r.t_query_sent) for r in ok],
        "exchange": [ms(r.t_query_sent, r.t_response) for r in ok],
    }
    return {k: round(median([x for x in v if x is not None]), 2) if any(x is not None for x in v) else None
            for k, v in cols.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-k", type=int, default=15, help="queries per transport x policy")
    ap.add_argument("--profiles", default="fiber,4g")
    ap.add_argument("--inner", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.inner:
        print(json.dumps(inner(a.inner, a.k)))
        return 0
    import uuid

    from testbed import topology

    token = os.environ.get("DNSCAMP_TESTBED_OWNER") or f"bench-dns-{uuid.uuid4().hex[:8]}"
    env = dict(os.environ, DNSCAMP_TESTBED_OWNER=token)
    cli = [sys.executable, "-m", "dnscamp.cli"]
    profiles = a.profiles.split(",")
    results = {}
    with topology.session_lease(token, log=lambda m: print(m, file=sys.stderr)):
        subprocess.run([*cli, "testbed", "down"], env=env, capture_output=True)
        try:
            up = subprocess.run([*cli, "testbed", "up", "--profiles", a.profiles], env=env, capture_output=True, text=True)
            if up.returncode != 0:
                raise RuntimeError(f"testbed up failed: {up.stderr[-2000:]}")
            info = json.loads(subprocess.run([*cli, "testbed", "info", "--json"], env=env, check=True,
                                             capture_output=True, text=True).stdout)
            with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
                json.dump(info, f)
            try:
                for prof in profiles:
                    ns = info["clients"][prof]["ns"]
                    p = subprocess.run(["ip", "netns", "exec", ns, sys.executable, __file__, "--inner", prof, "-k", str(a.k)],
                                       env=dict(env, DNSCAMP_TESTBED_INFO=f.name, DNSCAMP_NETNS=ns),
                                       capture_output=True, text=True, timeout=1800)
                    if p.returncode != 0:
                        raise RuntimeError(f"{prof}: {p.stderr[-2000:]}")
                    results[prof] = json.loads(p.stdout.strip().splitlines()[-1])
            finally:
                os.unlink(f.name)
        finally:
            subprocess.run([*cli, "testbed", "down"], env=env, capture_output=True)
    failures = []
    print(f"{'profile':<7} {'transport/policy':<16} {'xRTT p50':>9} {'exch xRTT':>9} {'target':>7} {'IP B':>7} {'pkts':>5}  notes")
    for prof, r in results.items():
        for key, s in r["results"].items():
            t, pol = key.split("/")
            target = TARGET.get((t, pol))
            m = s["rtt_multiple_p50"]
            bad = target is not None and (m is None or m > target)
            if bad:
                failures.append(f"{prof} {key} {m} > {target}")
            notes = f"ok {s['ok']}/{s['n']} reused {s['reused']} resumed {s['resumed']} 0rtt {s['early_data']}"
            print(f"{prof:<7} {key:<16} {m if m is not None else '-':>9} {s['exchange_multiple_p50'] or '-':>9} "
                  f"{target or '-':>7} {s['ip_bytes_p50'] or '-':>7} {s['packets_p50'] or '-':>5}  {notes}{'  ABOVE TARGET' if bad else ''}")
    print()
    print("fresh connections: median phases in ms (connect / handshake / gap to query / exchange) and")
    print("the excess of their sum over the round trips the transport needs (DoT/DoH 3, DoQ/DoH3 2):")
    for prof, r in results.items():
        rtt = r["rtt_ms"]
        for key, s in r["results"].items():
            ph = s.get("phases_ms_p50") or {}
            if not key.endswith("/fresh") or ph.get("handshake") is None:
                continue
            parts = [f"{ph.get(k) if ph.get(k) is not None else '-':>6}" for k in ("connect", "handshake", "gap", "exchange")]
            trips = 2 if registry.transport(key.split("/", 1)[0]).quic else 3  # QUIC: handshake + exchange
            excess = sum(v for v in ph.values() if v is not None) - trips * rtt
            print(f"{prof:<7} {key:<16} {' '.join(parts)}   excess {excess:.2f} ms = {excess / rtt:.3f} RTT")
    print(json.dumps({"profiles": results, "targets_missed": failures}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
