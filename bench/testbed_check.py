"""Benchmark: fidelity of the testbed's emulated access links (docs/testbed.md's targets).

Brings the island up with fiber (14.8 ms), 4g (91.9 ms) and 4g-medium (104.5 ms) unless it is
already up with them, runs `dnscamp testbed check` on each, prints the table and a JSON line
(last line) with, per profile: median RTT error, loss per direction, TCP goodput versus
expected, QUIC, emulator lateness and CPU. Tears the island down again if it brought it up.
Needs root. Usage: .venv/bin/python bench/testbed_check.py [--profiles fiber,4g,4g-medium]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--profiles", default="fiber,4g,4g-medium")
    ap.add_argument("--probes", type=int, default=500)
    ap.add_argument("--loss-packets", type=int, default=10000)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/testbed_check.py: needs root (network namespaces)")
    from testbed import topology

    token = os.environ.setdefault("DNSCAMP_TESTBED_OWNER", f"bench-{uuid.uuid4().hex[:8]}")
    dn = [sys.executable, "-m", "dnscamp.cli", "testbed"]
    with topology.session_lease(token, log=lambda m: print(m, file=sys.stderr)):
        subprocess.run([*dn, "down"], check=True, cwd=ROOT)
        try:
            subprocess.run([*dn, "up", "--no-services", "--profiles", a.profiles], check=True, cwd=ROOT)
            p = subprocess.run([*dn, "check", "--json", "--no-spool", "--probes", str(a.probes),
                                "--loss-packets", str(a.loss_packets)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
            res = json.loads(p.stdout)
        finally:
            subprocess.run([*dn, "down"], cwd=ROOT)
    out = {"bench": "testbed_check", "machine": {"kernel": platform.release(), "cpus": os.cpu_count(),
                                                  "load1": os.getloadavg()[0]}, "profiles": {}}
    for name, r in res.items():
        out["profiles"][name] = {
            "backend": r["backend"], "rtt_ms_configured": r["rtt_ms_configured"], "rtt_ms_p50": r["rtt_ms_p50"],
            "rtt_error_ms": r["rtt_error_ms"], "rtt_ms_p5": r["rtt_ms_p5"], "rtt_ms_p95": r["rtt_ms_p95"],
            "loss_up": [r["loss_up"]["lost"], r["loss_up"]["sent"]] if r["loss_up"] else None,
            "loss_down": [r["loss_down"]["lost"], r["loss_down"]["sent"]] if r["loss_down"] else None,
            "up_mbps": [r["up_mbps_expected"], r["up_mbps_measured"]],
            "down_mbps": [r["down_mbps_expected"], r["down_mbps_measured"]],
            "quic_ms": r["quic_handshake_ms"], "lateness_p99_ms": r["lateness_p99_ms"],
            "cpu_pct": [r.get("emulator_cpu_pct_up"), r.get("emulator_cpu_pct_down")],
            "passed": r["passed"], "failures": r["failures"],
        }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
