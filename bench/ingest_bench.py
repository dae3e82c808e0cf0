"""Ingest benchmark, three workloads in one run, each into a fresh scratch
database of the embedded cluster:

- ``ping``: N generated ``ping`` records (valid schema v1, distinct ids), then the same file
  again (all duplicates);
- ``dns_query``: N generated ``dns_query`` records (bench/gen_campaign.py's: 20 vantages,
  8 resolvers, 5 transports, 30 days), the kind the compact store is tuned for;
- ``mixed``: the v1 fixture records of every kind (tests/fixtures/results/v1/*.jsonl),
  repeated with fresh ids to M records;
- ``mixed+hostile``: the same M records with the hostile corpus mixed in (one line in 20 from
  tests/fixtures/results/hostile/framing.jsonl with fresh ids: every code point class, lone
  surrogates, NUL; plus NaN / BOM / invalid-UTF-8 lines); its overhead is the time per line
  relative to ``mixed`` (both run twice, alternately; the faster run of each counts).

    .venv/bin/python bench/ingest_bench.py [--records 1000000] [--mixed 230000] [--dns 200000] [--workers 2]
    .venv/bin/python bench/ingest_bench.py --records 0 --mixed 0 --dns 200000 --before REV [--rounds 2] [--dns-days 1]
    .venv/bin/python bench/ingest_bench.py --floors [--dns 200000] [--dns-days 1]

``--floors``: the dns_query workload, then what a record's parse cannot do without (`floors`).
``--before REV``: the dns_query workload with the ingest code of commit REV (its collectors/ and
vantage_agent/, on today's schema) and with today's, alternately, each in its own process.

Prints one line per workload; the last line is JSON.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import random
import re
import subprocess
import sys
import tarfile
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


ROOT = Path(__file__).resolve().parents[1]
_ID = re.compile(rb'"id": ?"[0-9a-f-]{36}"')


def _with_fresh_id(line: bytes, rnd: random.Random) -> bytes:
    rid = str(uuid.UUID(int=rnd.getrandbits(128), version=4)).encode()
    if line.startswith(b"\xef\xbb\xbf"):  # json.loads would drop the BOM
        return _ID.sub(b'"id": "' + rid + b'"', line, count=1)
    try:
        obj = json.loads(line)
        obj["id"] = rid.decode()
        return json.dumps(obj, ensure_ascii=False).encode("utf-8", "surrogatepass")
    except ValueError:  # not JSON we can round-trip (NUL, lone surrogates...): swap the id text
        return _ID.sub(b'"id": "' + rid + b'"', line, count=1)


def generate_mixed(path: Path, n: int, hostile_every: int = 0, seed: int = 2) -> int:
    """n fixture records of every kind with fresh ids; with ``hostile_every``, one hostile
    line after every that many records. Returns the number of lines written."""
    rnd = random.Random(seed)
    fixtures = [l for f in sorted((ROOT / "tests/fixtures/results/v1").glob("*.jsonl")) for l in f.read_bytes().splitlines() if l.strip()]
    hostile = (ROOT / "tests/fixtures/results/hostile/framing.jsonl").read_bytes().split(b"\n")[:-1]
    ping = next(l for l in fixtures if b'"interval_ms":10.0' in l)
    hostile += [ping.replace(b'"interval_ms":10.0', b'"interval_ms":NaN'), b"\xef\xbb\xbf" + ping, ping.replace(b"fixtures", b"fix\xfftures")]
    lines = 0
    with open(path, "wb") as f:
        for i in range(n):
            f.write(_with_fresh_id(fixtures[i % len(fixtures)], rnd) + b"\n")
            lines += 1
            if hostile_every and i % hostile_every == hostile_every - 1:
                f.write(_with_fresh_id(hostile[(i // hostile_every) % len(hostile)], rnd) + b"\n")
                lines += 1
    return lines


def generate_dns(path: Path, n: int, *, days: int = 30, vantages: int = 20, resolvers: int = 8, seed: int = 3) -> None:
    """n ``dns_query`` records from bench/gen_campaign.py (the one generator of the campaign's
    shape: every transport, 1-5 % failures across the taxonomy) in one file: the first
    ``vantages`` of its vantages and ``resolvers`` of its resolvers, over ``days`` days."""
    import numpy as np
    import orjson

    gen = _gen_campaign()
    recs = gen.dns_queries(n, np.random.default_rng(seed), "bench", gen.END, vantages=gen.VANTAGES[:vantages],
                           resolvers=gen.RESOLVERS[:resolvers], days=days)  # fmt: skip
    with open(path, "wb", buffering=1 << 20) as f:
        for rec in recs:
            f.write(orjson.dumps(rec) + b"\n")


def _gen_campaign():
    spec = importlib.util.spec_from_file_location("gen_campaign", ROOT / "bench" / "gen_campaign.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    return gen


def measure(name: str, path: Path, lines: int, workers: int, again: bool = False) -> dict:
    """Ingest ``path`` into a fresh scratch database; seconds, lines/s and CPU per line."""
    from collectors.ingest import ingest
    from db import engine, migrate

    dbname = f"dnscamp_bench_{os.getpid()}"
    url = engine.database_url("owner", dbname=dbname)
    migrate.upgrade(url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        t0, c_own, c_pg = time.perf_counter(), own_cpu(), postgres_cpu()
        first = ingest([path], url, workers=workers)
        secs = time.perf_counter() - t0
        time.sleep(0.5)  # let the backend that served the ingest exit and be counted
        cpu_own, cpu_pg = own_cpu() - c_own, postgres_cpu() - c_pg
        out = {
            "lines": lines, "seconds": round(secs, 2), "lines_per_s": round(lines / secs),
            "cpu_us_per_line_python": round(cpu_own / lines * 1e6, 1),
            "cpu_us_per_line_postgres": round(cpu_pg / lines * 1e6, 1),
            # What two idle cores could do at this CPU cost per line (an upper bound).
            "lines_per_s_if_two_idle_cores": round(2 * lines / (cpu_own + cpu_pg)),
            **first.as_json(),
        }  # fmt: skip
        assert first.ingested + first.quarantined == lines, (name, first.as_json(), lines)
        if again:
            t0 = time.perf_counter()
            second = ingest([path], url, workers=workers)
            out["reingest_lines_per_s"] = round(lines / (time.perf_counter() - t0))
            assert second.duplicates == first.ingested
    finally:
        with psycopg.connect(engine.database_url("owner", dbname="postgres"), autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
            c.execute("CHECKPOINT")  # flush this workload's dirty pages now, not during the next one
    print(f"{name}: {lines} lines in {out['seconds']} s = {out['lines_per_s']} lines/s "
          f"(ingested {out['ingested']}, quarantined {out['quarantined']}); CPU per line "
          f"{out['cpu_us_per_line_python']} us Python + {out['cpu_us_per_line_postgres']} us Postgres "
          f"(two idle cores: {out['lines_per_s_if_two_idle_cores']} lines/s)", flush=True)  # fmt: skip
    return out


def _in_tree(tree: Path, name: str, path: Path, lines: int, workers: int) -> dict:
    """`measure` in a new process importing collectors/ and vantage_agent/ from ``tree``."""
    code = (f"import json, sys; from pathlib import Path; sys.path.insert(0, {str(ROOT / 'bench')!r}); "
            f"import ingest_bench as b, collectors.ingest as i; assert i.__file__.startswith({str(tree)!r}); "
            f"print(json.dumps(b.measure({name!r}, Path({str(path)!r}), {lines}, {workers})))")  # fmt: skip
    r = subprocess.run([sys.executable, "-c", code], cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)},
                       capture_output=True, text=True)  # fmt: skip
    if r.returncode:
        raise SystemExit(f"{name} in {tree} failed: {r.stderr.strip().splitlines()[-1:]}")
    *text, last = r.stdout.strip().splitlines()
    print(*text, sep="\n", flush=True)
    return json.loads(last)


def before_after(rev: str, path: Path, lines: int, workers: int, rounds: int, scratch: Path) -> dict:
    """The dns_query file ingested by commit ``rev``'s code and by today's, alternately."""
    tree = scratch / "before"
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "collectors", "vantage_agent"], capture_output=True,
                         check=True).stdout  # fmt: skip
    with tarfile.open(fileobj=__import__("io").BytesIO(tar)) as t:
        t.extractall(tree, filter="data")
    runs: dict[str, list[dict]] = {"before": [], "after": []}
    for i in range(rounds):
        for k in ("before", "after") if i % 2 == 0 else ("after", "before"):
            load = os.getloadavg()[0]
            r = _in_tree(tree if k == "before" else ROOT, f"dns_query {k} ({rev if k == 'before' else 'now'})", path,
                         lines, workers)  # fmt: skip
            runs[k].append({**r, "load_avg_1min_before": round(load, 2), "load_avg_1min_after": round(os.getloadavg()[0], 2)})
    return {"rev": rev, **runs}


def cpu_line(r: dict) -> float:
    return r["cpu_us_per_line_python"] + r["cpu_us_per_line_postgres"]


def floors(path: Path, limit: int = 50_000) -> dict:
    """CPU µs per dns_query record (one process, the best of three passes over the first
    ``limit`` records of ``path``) of what a parse cannot do without: the calls into the
    libraries the store's rules rest on (pydantic-core's validation of the record, orjson's
    strict parse that gives the body's exact JSON values, the scans for integers beyond 64 bits
    and NUL, the sorted body dump and the content hash, the shape's dump, the record id as text)
    and the hand-off of a chunk to a parser process and of its parsed columns back (pickle),
    beside the whole parse of today (`collectors.parse.parse_lines`)."""
    import gc
    import hashlib
    import pickle

    import orjson

    from collectors import parse as ing
    from collectors.read import Chunk
    from vantage_agent.records import _record_adapter

    lines = [ln for ln in path.read_bytes().split(b"\n")[:limit] if ln]
    adapter = _record_adapter()
    objs, recs = [orjson.loads(ln) for ln in lines], [adapter.validate_json(ln) for ln in lines]
    hashed = []  # (envelope, env JSON, body JSON) as `_record` builds them
    for o, r in zip(objs, recs):
        v = r.vantage
        envelope = [str(r.id), r.schema_, r.kind, r.campaign, r.run, r.unit, v.id, v.provider, v.region,
                    v.network_profile, 0, r.status, r.error]  # fmt: skip
        hashed.append((envelope, ing.canonical_json(o.get("env", {})), ing.canonical_json(o["body"])))
    shapes = [{k: v for k, v in o["body"].items() if k not in ing.DNS_PER_RECORD} for o in objs]

    def each(fn, xs) -> float:  # without the cyclic GC, as a parser process calls them
        best = float("inf")
        gc.disable()
        try:
            for _ in range(3):
                t = time.process_time()
                for x in xs:
                    fn(x)
                best = min(best, time.process_time() - t)
        finally:
            gc.enable()
        return round(best / len(xs) * 1e6, 2)

    libs = {
        "pydantic-core validation of the line": each(adapter.validate_json, lines),
        "orjson strict parse": each(orjson.loads, lines),
        "digit-run and NUL scans": each(lambda ln: (ing._LONG_DIGIT_RUN in ln.translate(ing._DIGITS), b"\\u0000" in ln), lines),
        "sorted body dump": each(lambda o: ing.canonical_json(o["body"]), objs),
        "content hash (dump + sha256)": each(lambda h: ing.content_hash(*h), hashed),
        "shape dump + sha256": each(lambda sh: hashlib.sha256(orjson.dumps(sh)).digest(), shapes),
        "record id as text": each(lambda r: str(r.id), recs),
    }
    # the parse and the hand-off with this process's heap as small as a parser's (the cyclic GC
    # walks every live container, and the lists above hold 50,000 models and dicts)
    del objs, recs, hashed, shapes
    gc.collect()
    t = time.process_time()
    parsed = ing.parse_lines("floors", enumerate(lines, 1))  # (without the cyclic GC, as in a parser process)
    parse = round((time.process_time() - t) / len(lines) * 1e6, 2)
    block = b"\n".join(lines) + b"\n"
    t = time.process_time()
    for obj in (Chunk("floors", 1, block), parsed):
        pickle.loads(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))
    handoff = round((time.process_time() - t) / len(lines) * 1e6, 2)
    out = {"records": len(lines), "library_calls_us": libs, "library_calls_sum_us": round(sum(libs.values()), 2),
           "handoff_us": handoff, "parse_today_us": parse}
    for k, v in libs.items():
        print(f"  {k}: {v} us a record", flush=True)
    print(f"library calls {out['library_calls_sum_us']} us, hand-off {handoff} us, whole parse today {parse} us a record "
          f"({len(lines):,} records, one process)", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000, help="ping records")
    ap.add_argument("--mixed", type=int, default=230_000, help="mixed-kind fixture records")
    ap.add_argument("--dns", type=int, default=200_000, help="dns_query records (0: skip)")
    ap.add_argument("--dns-days", type=int, default=30,
                    help="days the dns_query records span (1: about the density of gen_campaign.py's 10 M over 30 days, 333,000 a day)")
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--before", metavar="REV", help="dns_query: also with commit REV's ingest code, alternately")
    ap.add_argument("--rounds", type=int, default=2, help="--before: runs of each")
    ap.add_argument("--floors", action="store_true",
                    help="only the dns_query workload, then what a record's parse cannot do without (`floors`) against "
                         "the 40 µs a record that 50,000 records/s leaves on two cores")
    args = ap.parse_args()
    load_before = round(os.getloadavg()[0], 2)
    res: dict = {}
    if args.floors:
        with tempfile.TemporaryDirectory() as d:
            dns = Path(d) / "dns.jsonl"
            generate_dns(dns, args.dns or 200_000, days=args.dns_days)
            res["dns_query"] = measure("dns_query", dns, args.dns or 200_000, args.workers)
            res["floors"] = f = floors(dns)
        pg = res["dns_query"]["cpu_us_per_line_postgres"]
        total = round(f["library_calls_sum_us"] + f["handoff_us"] + pg, 1)
        print()
        print("| CPU µs per dns_query record | µs |")
        print("|---|---:|")
        for k, v in f["library_calls_us"].items():
            print(f"| {k} | {v} |")
        print(f"| **library calls, sum** | **{f['library_calls_sum_us']}** |")
        print(f"| hand-off to a parser process and back (pickle) | {f['handoff_us']} |")
        print(f"| Postgres (this run's ingest: COPY, rollup upserts, commit) | {pg} |")
        print(f"| **floor before any of the project's own per-record code** | **{total}** |")
        print("| budget of 50,000 records/s on two cores | 40.0 |")
        print(f"| the whole parse today (one process) | {f['parse_today_us']} |")
        print(f"| this run's ingest: Python (parsers + main) + Postgres | "
              f"{res['dns_query']['cpu_us_per_line_python']} + {pg} |")
        res.update(load_avg_1min_before=load_before, load_avg_1min_after=round(os.getloadavg()[0], 2),
                   floor_us=total, machine=f"{platform.machine()} {os.cpu_count()} cores, kernel {platform.release()}")
        print(json.dumps(res))
        return
    with tempfile.TemporaryDirectory() as d:
        ping, mixed, hostile = Path(d) / "ping.jsonl", Path(d) / "mixed.jsonl", Path(d) / "hostile.jsonl"
        if args.records:
            generate(ping, args.records)
            res["ping"] = measure("ping", ping, args.records, args.workers, again=True)
            ping.unlink()
        if args.dns:
            dns = Path(d) / "dns.jsonl"
            generate_dns(dns, args.dns, days=args.dns_days)
            if args.before:
                res["dns_query_before_after"] = before_after(args.before, dns, args.dns, args.workers, args.rounds, Path(d))
            else:
                res["dns_query"] = measure("dns_query", dns, args.dns, args.workers)
            dns.unlink()
        if not args.mixed:
            print(json.dumps(res))
            return
        n_mixed, n_hostile = generate_mixed(mixed, args.mixed), generate_mixed(hostile, args.mixed, hostile_every=20)
        # Alternated twice and the faster of each kept: the overhead is a few per cent, less
        # than what another job on the machine changes between two single runs.
        runs: dict[str, list[dict]] = {"mixed": [], "mixed_hostile": []}
        for _ in range(2):
            runs["mixed"].append(measure("mixed", mixed, n_mixed, args.workers))
            runs["mixed_hostile"].append(measure("mixed+hostile", hostile, n_hostile, args.workers))
        for k, v in runs.items():
            res[k] = min(v, key=lambda r: r["seconds"])
            res[k]["runs_lines_per_s"] = [r["lines_per_s"] for r in v]
    per_line = {k: v["seconds"] / v["lines"] for k, v in res.items()}
    out = {
        "workers": args.workers,
        **res,
        "hostile_overhead_pct": round((per_line["mixed_hostile"] / per_line["mixed"] - 1) * 100, 1),
        "hostile_overhead_cpu_pct": round((cpu_line(res["mixed_hostile"]) / cpu_line(res["mixed"]) - 1) * 100, 1),
        "load_avg_1min_before": load_before,
        "load_avg_1min_after": round(os.getloadavg()[0], 2),
        "machine": f"{platform.machine()} {os.cpu_count()} cores, kernel {platform.release()}",
    }
    print(f"hostile corpus overhead: {out['hostile_overhead_pct']} % wall time, {out['hostile_overhead_cpu_pct']} % CPU time per line; load {load_before} -> {out['load_avg_1min_after']}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
