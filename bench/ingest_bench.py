"""Ingest benchmark (issue 2): N generated `ping` records into the embedded Postgres.

    .venv/bin/python bench/ingest_bench.py [--records 1000000] [--workers 2]

Generates the records (valid schema v1, distinct ids) into a temp file, ingests them into a
fresh scratch database of the embedded cluster, then ingests the same file again (all
duplicates), and prints the figures; the last line is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import tempfile
import time
import uuid
from pathlib import Path

import psutil
import psycopg


def postgres_cpu() -> float:
    """CPU seconds of the embedded postmaster and every child it has reaped (backends that
    ended are counted through cutime/cstime), plus its live children."""
    from db import embedded

    pid = int((embedded.cluster().data / "postmaster.pid").read_text().split()[0])
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    total = sum(int(x) for x in f[11:15]) / tick  # utime, stime, cutime, cstime
    for child in psutil.Process(pid).children(recursive=True):
        try:
            t = child.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            continue
    return total


def own_cpu() -> float:
    r = os.times()
    return r.user + r.system + r.children_user + r.children_system


def generate(path: Path, n: int, seed: int = 1) -> None:
    rnd = random.Random(seed)
    tmpl = (
        '{{"schema":"dnscamp.result/1","kind":"ping","id":"{id}","campaign":"bench","run":"r{run}",'
        '"unit":"u{unit}","vantage":{{"id":"v{v}","provider":"testbed","region":null,"network_profile":"fiber"}},'
        '"started_at":"2026-11-22T{h:02d}:{m:02d}:{s:02d}.{us:06d}Z","status":"ok","error":null,'
        '"env":{{"kernel":"6.1","link_backend":"nfqueue"}},'
        '"body":{{"target":"10.53.1.1","address":"10.53.1.1","protocol":"udp","port":53,"count":3,'
        '"interval_ms":10.0,"timeout_ms":1000.0,"sent":3,"received":3,"rtts_ms":[{a:.3f},{b:.3f},{c:.3f}],'
        '"reply_kinds":["echo","echo","echo"]}}}}\n'
    )
    with open(path, "w") as f:
        for i in range(n):
            f.write(
                tmpl.format(
                    id=uuid.UUID(int=rnd.getrandbits(128), version=4), run=i % 7, unit=i, v=i % 5,
                    h=(i // 3600) % 24, m=(i // 60) % 60, s=i % 60, us=i % 1_000_000,
                    a=15 + rnd.random(), b=15 + rnd.random(), c=15 + rnd.random(),
                )  # fmt: skip
            )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    args = ap.parse_args()

    from collectors.ingest import ingest
    from db import engine, migrate

    dbname = f"dnscamp_bench_{os.getpid()}"
    url = engine.database_url("owner", dbname=dbname)
    migrate.upgrade(url.replace("postgresql://", "postgresql+psycopg://", 1))
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "bench.jsonl"
        t0 = time.perf_counter()
        generate(path, args.records)
        gen_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        c_own, c_pg = own_cpu(), postgres_cpu()
        first = ingest([path], url, workers=args.workers)
        first_s = time.perf_counter() - t0
        cpu_own, cpu_pg = own_cpu() - c_own, postgres_cpu() - c_pg
        t0 = time.perf_counter()
        second = ingest([path], url, workers=args.workers)
        second_s = time.perf_counter() - t0
    with psycopg.connect(engine.database_url("owner", dbname="postgres")) as c:
        c.autocommit = True
        c.execute(f'DROP DATABASE "{dbname}"')
    out = {
        "records": args.records,
        "workers": args.workers,
        "generate_s": round(gen_s, 2),
        "ingest_s": round(first_s, 2),
        "records_per_s": round(args.records / first_s),
        "reingest_s": round(second_s, 2),
        "reingest_records_per_s": round(args.records / second_s),
        "cpu_us_per_record_python": round(cpu_own / args.records * 1e6, 1),
        "cpu_us_per_record_postgres": round(cpu_pg / args.records * 1e6, 1),
        # What two idle cores could do at this CPU cost per record (an upper bound).
        "records_per_s_if_two_idle_cores": round(2 / ((cpu_own + cpu_pg) / args.records)),
        "load_avg_1min": round(os.getloadavg()[0], 2),
        "ingested": first.ingested,
        "duplicates_second_run": second.duplicates,
        "machine": f"{platform.machine()} {os.cpu_count()} cores, kernel {platform.release()}",
    }
    print(f"ingest: {out['records']} records in {out['ingest_s']} s = {out['records_per_s']} records/s "
          f"(re-ingest {out['reingest_records_per_s']} records/s, all duplicates); CPU per record: "
          f"{out['cpu_us_per_record_python']} us Python + {out['cpu_us_per_record_postgres']} us Postgres; "
          f"load {out['load_avg_1min']}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
