"""Benchmark of the offline Atlas pipeline: N Atlas-like probes on the testbed,
discovery + pings + ingest + analysis; prints the ground-truth RTT errors and the run time.

    sudo .venv/bin/python bench/atlas_offline.py --probes 20 [--seed 1] [--repeat 1]

Runs against a throwaway store (a temporary DNSCAMP_HOME with its own embedded Postgres)
unless --use-store is given. The last line is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--probes", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--use-store", action="store_true")
    a = ap.parse_args()
    if not a.use_store:
        os.environ["DNSCAMP_HOME"] = tempfile.mkdtemp(prefix="dnscamp-bench-atlas-")
        os.environ.pop("DNSCAMP_DATABASE_URL", None)
    from db import embedded, engine, migrate
    from dnscamp.atlas_offline import format_report
    from dnscamp.atlas_run import run_offline

    runs = []
    try:
        migrate.upgrade(engine.sqlalchemy_url("owner"))
        for k in range(a.repeat):
            t0 = time.monotonic()
            r = run_offline(n_probes=a.probes, campaign=f"bench-atlas-{int(time.time())}-{k}", seed=a.seed + k,
                            db_url=engine.database_url("owner"))
            runs.append({"ok": r["ok"], "wall_s": round(time.monotonic() - t0, 1), "errors_ms": r["errors_ms"],
                         "discovery_correct": r["discovery"]["correct"], "link_backend": r["link_backend"]})
            print(format_report(r))
    finally:
        if not a.use_store and not engine.external_url():
            embedded.down()
    out = {"bench": "atlas_offline", "probes": a.probes, "runs": runs, "machine": {
        "cpus": os.cpu_count(), "kernel": platform.release(), "python": platform.python_version()}}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
