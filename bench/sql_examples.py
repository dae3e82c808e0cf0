"""docs/sql.md's example queries timed on a store (issue 16: "every documented example query"
at 10,000,000 records): each example as the guide has it, as the reader role, with the demo
campaign's name replaced by --campaign (bench/gen_campaign.py writes campaign `gen`), a warm-up
run and then --repeat timed runs. Prints rows, p50 and max wall ms per example and the load
average before and after.

    DNSCAMP_HOME=/tmp/h .venv/bin/python bench/sql_examples.py --campaign gen --repeat 2
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEMO = "'default'"  # the demo campaign the guide's examples name


def _examples() -> list[tuple[str, str]]:
    """The examples as tests/local/test_sql_examples.py reads them from docs/sql.md."""
    spec = importlib.util.spec_from_file_location("sql_examples", ROOT / "tests/local/test_sql_examples.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.examples()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", help="libpq URL (default: the reader of dnscamp's store)")
    ap.add_argument("--campaign", default="default", help="the campaign to ask about (default: the demo's)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if not args.url:
        from db import engine

        args.url = engine.database_url("reader")
    campaign = "'" + args.campaign.replace("'", "''") + "'"
    print(f"load average before {os.getloadavg()[0]:.2f}")
    with psycopg.connect(args.url, autocommit=True) as conn:
        for title, sql in _examples():
            sql = sql.replace(DEMO, campaign).replace("LIKE 'default/%'", f"LIKE {campaign[:-1]}/%'")
            rows = conn.execute(sql).fetchall()  # warm-up
            times = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                rows = conn.execute(sql).fetchall()
                times.append((time.perf_counter() - t0) * 1e3)
            print(f"{title}: {len(rows)} rows, p50 {statistics.median(times):,.1f} ms, max {max(times):,.1f} ms")
    print(f"load average after {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
