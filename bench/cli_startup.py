"""CLI start-up: how long `dnscamp` takes before it does any work, each run a fresh process:

- `dnscamp --help` and `dnscamp sql --help` (Typer builds every command's signature, rich
  renders the help);
- `dnscamp sql --archive A "select 1"` on a small archive (DuckDB over its Parquet files,
  checked against the manifest first), and a query over one of its views (``VIEW_QUERY``).

    .venv/bin/python bench/cli_startup.py [--runs 21] [--archive DIR] [--top 8]

Prints, per command, the median and minimum wall time and the median CPU time (user + system)
of --runs runs after one warm-up, then the packages `python -X importtime` charges most (self
time summed per top-level package, median of 5 runs); the last line is JSON. The machine is shared:
the CPU time moves less with the load than the wall time, and the load average is printed.

The small archive is the demo campaign (tests/fixtures/demo, 113 records and its Atlas
results) stored in an embedded Postgres under a temporary DNSCAMP_HOME and archived, as
tests/local/test_sql_cli.py makes its archive; the home goes afterwards. --archive DIR times
an existing archive instead.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


# A query over one of the archive's views: its files are scanned, and the views it reads created.
VIEW_QUERY = "SELECT transport, count(*) FROM v_dns_query GROUP BY 1"


def small_archive(work: Path) -> str:
    """The demo campaign archived under ``work``, which is its DNSCAMP_HOME too (the embedded
    Postgres's service user must reach the home: a directory under it would not be, mkdtemp's
    0700 closes it); the server is stopped again before returning."""
    os.environ["DNSCAMP_HOME"] = str(work)
    os.environ.pop("DNSCAMP_DATABASE_URL", None)
    import psycopg

    from db import embedded, engine, migrate
    from dnscamp.opendata import archive as arc
    from tests.scaffolding.demo_data import CAMPAIGN, load_demo

    try:
        url = engine.database_url("owner")
        migrate.upgrade(engine.sqlalchemy_url("owner"))
        load_demo(url)
        with psycopg.connect(url) as conn:
            arc.write(conn, CAMPAIGN, str(work / "archive"))
    finally:
        embedded.down()
    return str(work / "archive")


def _env() -> dict[str, str]:
    """This checkout's code first, with its bytecode cached as an installed dnscamp has it (the
    warm-up run writes it: compiling the modules again in every run would be timed otherwise)."""
    path = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": str(ROOT) + (os.pathsep + path if path else "")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def timed(args: list[str], runs: int) -> dict[str, float]:
    """Median / minimum wall time and median CPU time (ms) of ``python -m dnscamp.cli ARGS``."""
    cmd, env = [sys.executable, "-m", "dnscamp.cli", *args], _env()
    walls, cpus = [], []
    for i in range(runs + 1):
        before = os.times()
        t = time.perf_counter()
        r = subprocess.run(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wall = time.perf_counter() - t
        after = os.times()
        if r.returncode != 0:
            raise SystemExit(f"{' '.join(args)}: exit {r.returncode}: {r.stderr.strip()[-300:]}")
        if i:  # the first run warms the page cache and writes bytecode
            walls.append(wall)
            cpus.append(after.children_user - before.children_user + after.children_system - before.children_system)
    return {"wall_ms": round(statistics.median(walls) * 1000, 1), "wall_min_ms": round(min(walls) * 1000, 1),
            "cpu_ms": round(statistics.median(cpus) * 1000, 1)}  # fmt: skip


def import_offenders(args: list[str], top: int, runs: int = 5) -> list[tuple[str, float]]:
    """The top-level packages with the most import time: each package's self times summed per
    run (`-X importtime`), the median of ``runs`` runs, in ms."""
    per: dict[str, list[int]] = collections.defaultdict(list)
    for _ in range(runs):
        r = subprocess.run([sys.executable, "-X", "importtime", "-m", "dnscamp.cli", *args], env=_env(), cwd=ROOT,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
        run: collections.Counter = collections.Counter()
        for line in r.stderr.splitlines():
            parts = line.removeprefix("import time:").split("|")
            if len(parts) == 3 and parts[0].strip().isdigit():
                run[parts[2].strip().split(".")[0]] += int(parts[0])
        for name, us in run.items():
            per[name].append(us)
    med = {name: statistics.median(v + [0] * (runs - len(v))) for name, v in per.items()}
    return [(name, round(us / 1000, 1)) for name, us in sorted(med.items(), key=lambda kv: -kv[1])[:top]]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--archive", help="an existing archive directory (default: the demo campaign's, made here)")
    ap.add_argument("--top", type=int, default=8, help="packages listed per command")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="dnscamp-cli-bench-"))
    try:
        archive = a.archive or small_archive(work)
        commands = {
            "dnscamp --help": ["--help"],
            "dnscamp sql --help": ["sql", "--help"],
            'dnscamp sql --archive A "select 1"': ["sql", "--archive", archive, "select 1"],
            f'dnscamp sql --archive A "{VIEW_QUERY}"': ["sql", "--archive", archive, VIEW_QUERY],
        }
        res: dict = {"runs": a.runs, "cores": os.cpu_count(), "load_before": round(os.getloadavg()[0], 2), "commands": {}}
        for name, args in commands.items():
            res["commands"][name] = {**timed(args, a.runs), "imports": import_offenders(args, a.top)}
        res["load_after"] = round(os.getloadavg()[0], 2)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"{a.runs} runs each, {os.cpu_count()} cores, load {res['load_before']} -> {res['load_after']}")
    print("| command | median wall | min wall | median CPU |")
    print("|---|---|---|---|")
    for name, r in res["commands"].items():
        print(f"| `{name}` | {r['wall_ms']:.0f} ms | {r['wall_min_ms']:.0f} ms | {r['cpu_ms']:.0f} ms |")
    for name, r in res["commands"].items():
        print(f"{name}: imports " + ", ".join(f"{p} {ms:.0f} ms" for p, ms in r["imports"]))
    print(json.dumps(res))


if __name__ == "__main__":
    main()
