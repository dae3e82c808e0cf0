"""Benchmark: `dnscamp testbed up` with every server for two profiles (fiber, 4g), after the
first build (CoreDNS cached, CA and sites already generated), and the servers' memory.

Holds the machine-wide testbed lease while it runs; tears the island down at the end.
Prints one line per run and a JSON object last. Target: up <= 20 s."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from vantage_agent.stats import median  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "3"))
PROFILES = "fiber,4g"


def dnscamp(*args: str) -> subprocess.CompletedProcess:
    p = subprocess.run([sys.executable, "-m", "dnscamp.cli", *args], capture_output=True, text=True, cwd=ROOT,
                       timeout=600)
    if p.returncode != 0:
        raise SystemExit(f"dnscamp {' '.join(args)} failed: {p.stderr[-2000:]}")
    return p


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    from testbed import topology
    from testbed.services import PROCESSES, state_path
    from testbed.supervisor import Supervisor
    from vantage_agent.paths import testbed_dir

    token = os.environ.setdefault("DNSCAMP_TESTBED_OWNER", f"bench-{os.getpid()}")
    ups, services_s, mem = [], [], {}
    with topology.session_lease(token, log=lambda m: print(m, file=sys.stderr)):
        dnscamp("testbed", "down")
        dnscamp("testbed", "up", "--profiles", PROFILES)  # first build: CA, certs, sites on disk
        dnscamp("testbed", "down")
        try:
            for i in range(RUNS):
                t0 = time.monotonic()
                dnscamp("testbed", "up", "--profiles", PROFILES)
                dt = time.monotonic() - t0
                svc = json.loads(state_path(testbed_dir()).read_text())
                ups.append(dt)
                services_s.append(svc["start_seconds"])
                sup = Supervisor(testbed_dir())
                time.sleep(1.0)
                mem = {n: round(rss_mib(sup.pid(n)), 1) for n in PROCESSES if sup.pid(n)}
                print(f"run {i + 1}: up {dt:.2f} s (services {svc['start_seconds']:.2f} s), "
                      f"servers RSS {sum(mem.values()):.0f} MiB", flush=True)
                dnscamp("testbed", "down")
        finally:
            subprocess.run([sys.executable, "-m", "dnscamp.cli", "testbed", "down"], cwd=ROOT, capture_output=True)
    out = {
        "bench": "testbed_up", "profiles": PROFILES, "runs": RUNS,
        "up_s_median": round(median(ups), 2), "up_s_max": round(max(ups), 2),
        "services_s_median": round(median(services_s), 2),
        "servers_rss_mib": mem, "servers_rss_mib_total": round(sum(mem.values()), 1),
        "target_up_s": 20, "machine": f"{platform.node()} {os.cpu_count()} cpus {platform.release()}",
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
