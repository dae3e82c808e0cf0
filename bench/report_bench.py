"""How long `dnscamp report --html` takes on a campaign of the store dnscamp uses, as the reader
(docs/benchmarks.md, "Report"): the whole build (queries, figures, files), then each query by
itself, slowest first.

    DNSCAMP_HOME=$BIG .venv/bin/python bench/report_bench.py --campaign gen [--run RUN] [--per-query]
    .venv/bin/python bench/report_bench.py --scale 0.01 --per-query    # generates its own (130,000 records)

Without --campaign it generates a campaign (bench/gen_campaign.py, seed 1, --scale of the 10 M
one) into a scratch database of the embedded cluster and drops it afterwards.

Target: the 10 M campaign (bench/gen_campaign.py, 13,000,000 records) within 60 s. The last line
is JSON: build seconds, site bytes and files, load averages, and the per-query milliseconds.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402 - after the path set-up

from db import engine  # noqa: E402
from dnscamp import report  # noqa: E402
from dnscamp.site import build, figures  # noqa: E402

TARGET_S = 60.0
_spec = importlib.util.spec_from_file_location("gen_campaign", ROOT / "bench" / "gen_campaign.py")
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)


def queries() -> list[tuple[str, str]]:
    return [(name, sql) for name, _, _, sql in report.SECTIONS] + [
        (i.slug, i.sql) for s in figures.SEEDS for i in s.items]


def time_queries(url: str, campaign: str, run: str | None) -> dict[str, float]:
    """Each report query once (distinct SQL texts only: several figures share one), ms."""
    out: dict[str, float] = {}
    seen: dict[str, str] = {}
    with psycopg.connect(url) as conn:
        for name, sql in queries():
            if sql in seen:
                continue
            seen[sql] = name
            t = time.perf_counter()
            report.fetch(conn, sql, campaign, run)
            out[name] = round(1000 * (time.perf_counter() - t), 1)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--campaign", default=None, help="a campaign of the store (default: generate one)")
    ap.add_argument("--run", default=None)
    ap.add_argument("--scale", type=float, default=0.01, help="without --campaign: the generated campaign's size")
    ap.add_argument("--per-query", action="store_true", help="then time each query by itself")
    a = ap.parse_args(argv)
    if a.campaign is not None:
        return bench(engine.database_url("reader"), a.campaign, a.run, a.per_query)
    from db import embedded, migrate

    was_running = engine.external_url() is not None or embedded.is_running()
    dbname = f"dnscamp_report_bench_{os.getpid()}"
    try:
        with tempfile.TemporaryDirectory(prefix="report-bench-gen-") as work:
            gen.generate(Path(work), dns_queries_n=round(10_000_000 * a.scale), page_loads_n=round(1_000_000 * a.scale),
                         atlas_n=round(2_000_000 * a.scale), seed=1, campaign="gen")
            url = engine.database_url("owner", dbname=dbname)
            migrate.upgrade(url.replace("postgresql://", "postgresql+psycopg://", 1))
            gen.load(Path(work), url)
        return bench(engine.database_url("reader", dbname=dbname), "gen", a.run, a.per_query)
    finally:
        with psycopg.connect(engine.database_url("owner", dbname="postgres"), autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
        if not was_running:
            embedded.down()


def bench(url: str, campaign: str, run: str | None, per_query: bool) -> int:
    """Build the report of campaign (run) as the role of url and time it; prints the figures."""
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="report-bench-") as tmp:
        out = Path(tmp) / "site"
        t = time.perf_counter()
        build.build(url, out, campaign, run)
        wall = time.perf_counter() - t
        files = [p for p in out.rglob("*") if p.is_file()]
        size = sum(p.stat().st_size for p in files)
    load1 = os.getloadavg()[0]
    per = time_queries(url, campaign, run) if per_query else {}
    print(f"report --html, campaign {campaign}" + (f" run {run}" if run else "") +
          f": {wall:.1f} s (target <= {TARGET_S:.0f} s {'met' if wall <= TARGET_S else 'NOT met'}), "
          f"{len(files)} files, {size / 1e6:.2f} MB, load {load0:.1f} -> {load1:.1f}")
    for name, ms in sorted(per.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<22} {ms:>10,.1f} ms")
    print(json.dumps({"campaign": campaign, "run": run, "build_s": round(wall, 2), "files": len(files),
                      "bytes": size, "load": [round(load0, 2), round(load1, 2)], "query_ms": per}))
    return 0 if wall <= TARGET_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
