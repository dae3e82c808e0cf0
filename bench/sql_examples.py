"""docs/sql.md's example queries timed on a store (the target: "every documented example query
answers with p95 <= 500 ms over a 7-day window and <= 2 s over 30 days" at 10,000,000 records):
each example's main form (the rollups where they hold the question) as the guide has it, and with
--exact its exact form over the base views too; as the reader role, with the demo campaign's
name replaced by --campaign (bench/gen_campaign.py writes campaign `gen`), one warm-up run and
then --repeat timed runs. Prints a markdown table: rows, median and p95 (nearest rank) wall ms,
the median CPU ms of the server (the query's backend plus the parallel workers it reaped, read
from /proc: the store must run on this machine) and the load average before and after.

    DNSCAMP_HOME=$BIG .venv/bin/python bench/sql_examples.py --campaign gen --repeat 3 [--exact]
    ... --only 7 --pair-any-resolver [--since 2026-11-16]   (example 7 with pairs on gen; its last 7 days)

($BIG: the 10 M store of docs/benchmarks.md.)
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import statistics
import sys
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEMO = "'default'"  # the demo campaign the guide's examples name
TICK_MS = 1e3 / os.sysconf("SC_CLK_TCK")


def _guide():
    """tests/local/test_sql_examples.py, which reads the examples from docs/sql.md."""
    spec = importlib.util.spec_from_file_location("sql_examples", ROOT / "tests/local/test_sql_examples.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def server_cpu_ms(backend: int, postmaster: int) -> float:
    """CPU ms the backend used plus what the postmaster's reaped children (the parallel workers
    of its queries; any other exited backend too) did: utime + stime, cutime + cstime."""
    def ticks(pid: int, fields: slice) -> int:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return sum(map(int, stat[stat.rindex(")") + 2:].split()[fields]))

    return (ticks(backend, slice(11, 13)) + ticks(postmaster, slice(13, 15))) * TICK_MS


def _once(sql: str, old: str, new: str) -> str:
    if sql.count(old) != 1:
        raise SystemExit(f"docs/sql.md example 7 no longer has {old!r} once: adapt bench/sql_examples.py")
    return sql.replace(old, new)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", help="libpq URL (default: the reader of dnscamp's store)")
    ap.add_argument("--campaign", default="default", help="the campaign to ask about (default: the demo's)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per query (default 3)")
    ap.add_argument("--exact", action="store_true", help="time the exact forms over the base views as well")
    ap.add_argument("--only", help="comma-separated example numbers (default: all ten)")
    # example 7 as the guide says to adapt it: pairs across resolvers (gen's Do53 goes to the
    # ISP's resolver, its encrypted modes elsewhere: with the alias it has no pairs), a window
    ap.add_argument("--pair-any-resolver", action="store_true",
                    help="example 7 without resolver_alias in its PARTITION BY (as the guide says for such a campaign)")
    ap.add_argument("--since", help="example 7 over loads from this timestamp on (e.g. 2026-11-16)")
    args = ap.parse_args()
    if not args.url:
        from db import engine

        args.url = engine.database_url("reader")
    guide = _guide()
    campaign = "'" + args.campaign.replace("'", "''") + "'"
    only = set(args.only.split(",")) if args.only else None
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    print("| example | form | rows | median ms | p95 ms | server CPU ms (median) |\n|---|---|---:|---:|---:|---:|")
    with psycopg.connect(args.url, autocommit=True) as conn:
        backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        postmaster = int(Path(f"/proc/{backend}/stat").read_text().rsplit(")", 1)[1].split()[1])
        for title, sql in guide.examples():
            exact = title.endswith(guide.EXACT)
            if exact and not args.exact or only and title.split(".")[0] not in only:
                continue
            sql = sql.replace(DEMO, campaign).replace("LIKE 'default/%'", f"LIKE {campaign[:-1]}/%'")
            if title.startswith("7.") and args.pair_any_resolver:
                sql = _once(sql, "url, resolver_alias)", "url)")
            if title.startswith("7.") and args.since:
                sql = _once(sql, "AND status = 'ok'", "AND status = 'ok' AND started_at >= %s" % _quote(args.since))
            rows = conn.execute(sql).fetchall()  # warm-up
            wall, cpu = [], []
            for _ in range(args.repeat):
                c0, t0 = server_cpu_ms(backend, postmaster), time.perf_counter()
                rows = conn.execute(sql).fetchall()
                wall.append((time.perf_counter() - t0) * 1e3)
                cpu.append(server_cpu_ms(backend, postmaster) - c0)
            p95 = sorted(wall)[math.ceil(0.95 * len(wall)) - 1]
            form = "exact" if exact else "main"
            name = title.removesuffix(guide.EXACT)
            print(f"| {name} | {form} | {len(rows)} | {statistics.median(wall):,.0f} | {p95:,.0f} "
                  f"| {statistics.median(cpu):,.0f} |", flush=True)
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
