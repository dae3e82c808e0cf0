"""`make bench`: run every benchmark in bench/ and print their figures.

Each bench/<area>_*.py prints human-readable lines and, last, one JSON line. Benchmarks that
need the testbed need root; one that fails is reported as failed (with its stderr tail) and
the others still run. The figures go into docs/benchmarks.md by hand, with the machine.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent


def main() -> int:
    only = sys.argv[1:]
    scripts = sorted(p for p in BENCH.glob("*.py") if p.name not in ("run_all.py", "__init__.py") and not p.name.startswith("_"))
    if only:
        scripts = [p for p in scripts if any(o in p.stem for o in only)]
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, kernel {platform.release()}, "
          f"load {os.getloadavg()[0]:.2f}")
    results, failed = {}, []
    for script in scripts:
        print(f"\n== {script.stem}", flush=True)
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=BENCH.parent)
        lines = r.stdout.strip().splitlines()
        for line in lines[:-1]:
            print(line)
        try:
            results[script.stem] = json.loads(lines[-1]) if lines else None
            print(json.dumps(results[script.stem]))
        except json.JSONDecodeError:
            print(lines[-1] if lines else "")
        if r.returncode != 0:
            failed.append(script.stem)
            print(f"FAILED ({r.returncode}): {' | '.join(r.stderr.strip().splitlines()[-3:])}")
        print(f"({time.monotonic() - t0:.0f} s)")
    print(json.dumps({"benchmarks": results, "failed": failed}))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
