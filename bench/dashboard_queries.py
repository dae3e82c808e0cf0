"""Dashboard query times: every Grafana panel's SQL, expanded as Grafana sends it
(dashboards/expand.py; variables at All unless --campaign, the time range of the data unless
--from/--to), run --repeat times on the store at --url as given (nothing is generated here: load a
data set first, e.g. bench/gen_campaign.py --ingest), with the p50, p95 and max per panel.

    .venv/bin/python bench/dashboard_queries.py [--url postgresql://...] [--repeat 20] [--campaign C]

--url: a libpq URL of a role that can read the views (Grafana's is dnscamp_reader); default:
the reader of the store dnscamp uses. --panel: only the panels whose title contains it (and no
variable queries). Prints
one line per panel and per variable query (each once, in the first dashboard that has it); the
last line is JSON. Beside the wall times, the server's CPU time per
query (the session's backend and its parallel workers, from /proc, when the server runs on
this machine: on a shared machine wall time includes waiting for a core, CPU time does not;
other sessions of the same server that end during a panel's runs count too, so time a server
nobody else queries) and the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TARGET_MS = 500  # the target for a panel's p95


def _time_range(conn, args) -> tuple[datetime, datetime]:
    lo, hi = conn.execute("SELECT min(started_at), max(started_at) FROM v_results").fetchone()
    lo = datetime.fromisoformat(args.time_from) if args.time_from else (lo or datetime.now(timezone.utc))
    hi = datetime.fromisoformat(args.time_to) if args.time_to else (hi or datetime.now(timezone.utc))
    return lo, hi + timedelta(seconds=1)


def _interval(lo: datetime, hi: datetime, max_points: int = 1000) -> str:
    """Grafana's $__interval for a ~1000-pixel panel, rounded up to a whole minute as its
    rounding table does for ranges of days."""
    seconds = max((hi - lo).total_seconds() / max_points, 60)
    return f"{int(-(-seconds // 60))}m"


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _server_cpu_ms(backend: int) -> float | None:
    """CPU time (ms) of a local server's work for this connection: the backend's utime + stime plus
    the postmaster's cutime + cstime (its exited children: the parallel workers a query
    started). None when the server is not on this machine."""
    own = _stat(backend)
    parent = own and _stat(int(own[1]))
    if not own or not parent:
        return None
    ticks = int(own[11]) + int(own[12]) + int(parent[13]) + int(parent[14])
    return ticks * 1e3 / os.sysconf("SC_CLK_TCK")


def _time(conn, sql: str, repeat: int, backend: int) -> dict:
    """One warm-up (and the row count), then ``repeat`` timed runs: p50 / p95 / max wall ms and
    the server's CPU ms per run."""
    rows = len(conn.execute(sql).fetchall())
    times = []
    cpu0 = _server_cpu_ms(backend)
    for _ in range(repeat):
        t0 = time.perf_counter()
        conn.execute(sql).fetchall()
        times.append((time.perf_counter() - t0) * 1e3)
    q = statistics.quantiles(times, n=20, method="inclusive") if len(times) > 1 else times * 19
    cpu1 = _server_cpu_ms(backend)
    return {"rows": rows, "p50_ms": round(statistics.median(times), 2), "p95_ms": round(q[18], 2),
            "max_ms": round(max(times), 2), "cpu_ms": None if cpu0 is None else round((cpu1 - cpu0) / repeat, 1)}


def main() -> int:
    import dashboards
    from dashboards.expand import expand, resolve

    ap = argparse.ArgumentParser()
    ap.add_argument("--url", help="libpq URL (default: the reader of dnscamp's store)")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--campaign", action="append", help="select these campaigns (default: All)")
    ap.add_argument("--atlas-campaign", action="append", help="select these Atlas campaigns (default: All)")
    ap.add_argument("--dashboard", action="append", help="only these dashboard uids (default: all, public copies included)")
    ap.add_argument("--panel", action="append", help="only panels whose title contains this (default: all)")
    ap.add_argument("--from", dest="time_from", help="ISO time (default: the first record's started_at)")
    ap.add_argument("--to", dest="time_to", help="ISO time (default: the last record's started_at)")
    args = ap.parse_args()
    if not args.url:
        from db import engine

        args.url = engine.database_url("reader")
    selected = {k: tuple(v) for k, v in (("campaign", args.campaign), ("atlas_campaign", args.atlas_campaign)) if v}
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    out: dict[str, dict] = {}
    with psycopg.connect(args.url, autocommit=True) as conn:
        server = conn.execute("SHOW server_version").fetchone()[0]
        backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        load_before = os.getloadavg()
        counts = dict(conn.execute("SELECT kind, count(*) FROM v_results GROUP BY 1").fetchall())
        lo, hi = _time_range(conn, args)
        iv = _interval(lo, hi)
        print(f"store: PostgreSQL {server}, records {counts}, range {lo.isoformat()} .. {hi.isoformat()}, "
              f"$__interval {iv}, {args.repeat} runs per panel")
        for name, data in dashboards.build().items():
            if args.dashboard and data["uid"] not in args.dashboard:
                continue
            t0 = time.perf_counter()
            variables = resolve(conn, data, selected, lo, hi, interval=iv)
            var_ms = (time.perf_counter() - t0) * 1e3
            print(f"{name}: variables {var_ms:.1f} ms")
            for v in data["templating"]["list"]:  # each variable's query, timed once per run of it
                if args.panel or f"variable / {v['name']}" in out:
                    continue
                sql = expand(v["query"], variables, lo, hi, interval=iv)
                out[f"variable / {v['name']}"] = fig = _time(conn, sql, args.repeat, backend)
                print(f"  variable {v['name']}: p50 {fig['p50_ms']} ms, p95 {fig['p95_ms']} ms, "
                      f"server CPU {fig['cpu_ms']} ms/query, {fig['rows']} options")
            for p in dashboards.panel_list(data):
                if args.panel and not any(t in p["title"] for t in args.panel):
                    continue
                sql = expand(p["targets"][0]["rawSql"], variables, lo, hi, interval=iv)
                out[f"{name.removesuffix('.json')} / {p['title']}"] = fig = _time(conn, sql, args.repeat, backend)
                rows = fig["rows"]
                flag = "" if fig["p95_ms"] <= TARGET_MS else f"  > {TARGET_MS} ms"
                print(f"  {p['title']}: p50 {fig['p50_ms']} ms, p95 {fig['p95_ms']} ms, max {fig['max_ms']} ms, "
                      f"server CPU {fig['cpu_ms']} ms/query, {rows} rows{flag}")
    worst = max(out.items(), key=lambda kv: kv[1]["p95_ms"]) if out else ("-", {"p95_ms": None})
    load_after = os.getloadavg()
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f}")
    print(json.dumps({"records": counts, "repeat": args.repeat, "interval": iv, "worst_panel": worst[0],
                      "load_before": load_before, "load_after": load_after,
                      "worst_p95_ms": worst[1]["p95_ms"], "over_target": sorted(k for k, v in out.items()
                                                                                if v["p95_ms"] > TARGET_MS),
                      "panels": out}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
