"""DNS engines side by side on the testbed: our engine (dnscamp) vs getdns vs kdig,
the same names against the same resolver (testbed-isp's CoreDNS frontend) from the same client
namespace, Do53 and DoT, policies fresh and reuse, profiles fiber and 4G, in one run.

Times, per query, in ms:
- dnscamp and getdns: t_response - t_start, our CLOCK_MONOTONIC around the query (for getdns:
  around its synchronous call, in its worker process), handshakes included;
- kdig: its own ";; From ... in X ms" (+stats), not the wall clock of its process (which would
  add its start-up). For a fresh DoT query it includes TCP connect and TLS handshake (measured:
  3.0-3.1 RTT on both profiles, like ours), so the three are the same quantity.
  fresh = one kdig process per query; reuse = one process, +keepopen, all names.
The resolver cache is warmed first (every name, twice, over Do53); for reuse the first query
(which opened the connection) of every block is dropped for every engine. Each row is
``--rounds`` blocks of ``-k`` queries per engine, the engines' order rotating every round, so
that a drift of the emulated link (TOOLCHAIN.md: timer wake-up +0.13-0.35 ms) hits all alike. Prints a table of medians and the
ratio to the best engine per row, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vantage_agent.dns import registry  # noqa: E402
from vantage_agent.stats import median  # noqa: E402

TRANSPORTS = ["do53", "dot"]
POLICIES = ["fresh", "reuse"]
ENGINES = ["dnscamp", "getdns", "kdig"]
NAMES = ["www.single.test.", "www.js.test.", "www.js-css.test."]
_KDIG_TIME = re.compile(r";; From .* in ([0-9.]+) ms")


def _engine_times(engine: str, transport: str, policy: str, ep, names: list[str]) -> tuple[list[float], int]:
    from vantage_agent.dns._common import QueryOptions
    from vantage_agent.dns.policy import Policy

    c = registry.client(transport, ep, Policy(policy), QueryOptions(timeout_s=5), engine=engine)
    try:
        res = [c.query(n) for n in names]
    finally:
        c.close()
    if policy == "reuse":
        res = res[1:]
    ok = [r for r in res if r.ok and r.t_response is not None]
    return [(r.t_response - r.t_start) / 1e6 for r in ok], len(res) - len(ok)


def _kdig_times(transport: str, policy: str, ep, names: list[str]) -> tuple[list[float], int]:
    base = ["kdig", f"@{ep.address}", "-p", str(ep.port), "+noall", "+stats", "+time=5", "+retry=0"]
    if registry.transport(transport).encrypted:
        base += ["+tls", f"+tls-ca={ep.ca_file}" if ep.ca_file else "+tls-ca", f"+tls-hostname={ep.tls_name}"]
    runs = [[*base, n] for n in names] if policy == "fresh" else [[*base, "+keepopen", *names]]
    times: list[float] = []
    for argv in runs:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        times += [float(m) for m in _KDIG_TIME.findall(p.stdout)]
    expected = len(names)
    if policy == "reuse":
        times = times[1:]
        expected -= 1
    return times, expected - len(times)


def inner(profile: str, k: int, rounds: int) -> dict:
    from vantage_agent.dns import catalog, registry, runner
    from vantage_agent.dns._common import QueryOptions
    from vantage_agent.dns.policy import Policy

    info = catalog.testbed_info()
    cat = catalog.Catalog.load(testbed=info)
    eps = {t: cat.endpoint("testbed-isp", t) for t in TRANSPORTS}
    warm = registry.client("do53", eps["do53"], Policy("reuse"), QueryOptions())
    for _ in range(2):
        for n in NAMES:
            warm.query(n)
    warm.close()
    names = [NAMES[i % len(NAMES)] for i in range(k + 1)]
    out: dict = {"rtt_ms": runner.access_rtt_ms(info, profile), "results": {}}
    for t in TRANSPORTS:
        for pol in POLICIES:
            acc: dict = {e: ([], 0) for e in ENGINES}
            for rnd in range(rounds):
                for e in ENGINES[rnd % 3:] + ENGINES[: rnd % 3]:
                    times, failed = (_kdig_times(t, pol, eps[t], names) if e == "kdig"
                                     else _engine_times(e, t, pol, eps[t], names))
                    acc[e] = (acc[e][0] + times, acc[e][1] + failed)
            row = {e: {"median_ms": round(median(ts), 3) if ts else None, "n": len(ts), "failed": f}
                   for e, (ts, f) in acc.items()}
            out["results"][f"{t}/{pol}"] = row
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-k", type=int, default=10, help="queries per block (engine x transport x policy x profile)")
    ap.add_argument("--rounds", type=int, default=6, help="blocks per engine and row, engine order rotating")
    ap.add_argument("--profiles", default="fiber,4g")
    ap.add_argument("--inner", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.inner:
        print(json.dumps(inner(a.inner, a.k, a.rounds)))
        return 0
    import uuid

    from testbed import topology

    token = os.environ.get("DNSCAMP_TESTBED_OWNER") or f"bench-engines-{uuid.uuid4().hex[:8]}"
    env = dict(os.environ, DNSCAMP_TESTBED_OWNER=token)
    cli = [sys.executable, "-m", "dnscamp.cli"]
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
                for prof in a.profiles.split(","):
                    ns = info["clients"][prof]["ns"]
                    p = subprocess.run(["ip", "netns", "exec", ns, sys.executable, __file__, "--inner", prof, "-k", str(a.k),
                                        "--rounds", str(a.rounds)],
                                       env=dict(env, DNSCAMP_TESTBED_INFO=f.name, DNSCAMP_NETNS=ns),
                                       capture_output=True, text=True, timeout=1800)
                    if p.returncode != 0:
                        raise RuntimeError(f"{prof}: {p.stderr[-2000:]}")
                    results[prof] = json.loads(p.stdout.strip().splitlines()[-1])
            finally:
                os.unlink(f.name)
        finally:
            subprocess.run([*cli, "testbed", "down"], env=env, capture_output=True)
    print(f"{'profile':<7} {'transport/policy':<16} " + " ".join(f"{e + ' ms':>11}" for e in ENGINES)
          + "  " + " ".join(f"{e + '/best':>12}" for e in ENGINES))
    within: dict = {}
    for prof, r in results.items():
        for key, row in r["results"].items():
            comparable = {e: v["median_ms"] for e, v in row.items() if v["median_ms"]}
            best = min(comparable.values()) if comparable else None
            cells = " ".join(f"{v['median_ms'] or '-':>11}" for v in row.values())
            ratios = " ".join(f"{(v['median_ms'] / best if (best and e in comparable) else float('nan')):>12.3f}"
                              for e, v in row.items())
            fails = {e: v["failed"] for e, v in row.items() if v["failed"]}
            print(f"{prof:<7} {key:<16} {cells}  {ratios}{'  failed ' + json.dumps(fails) if fails else ''}")
            if best and row["dnscamp"]["median_ms"]:
                within[f"{prof} {key}"] = round(row["dnscamp"]["median_ms"] / best, 4)
    print(f"machine: {platform.node()} {os.cpu_count()} cpus {platform.release()}")
    print(json.dumps({"bench": "dns_engines", "k": a.k, "rounds": a.rounds, "profiles": results, "dnscamp_over_best": within}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
