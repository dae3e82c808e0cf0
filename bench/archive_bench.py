"""The store and the archive side by side on the same generated records:

- bytes per record: the store's tables after ingest (pg_total_relation_size of every table,
  indexes and TOAST included, minus the empty schema's) against the archive's Parquet files;
- the dashboard-style queries (p50 total_ms per transport over the last 7 days; failure rate
  per resolver x transport over 30 days), timed on Postgres (reader role, the v_ views) and
  on DuckDB over the archive (`dnscamp sql --archive`'s views), same SQL text on both;
- ingest and archive throughput on the way;
- what PostgreSQL's percentile_cont costs by itself over the exact question's windows
  (`exact_floor`): the lower bound of any store layout for that question on this machine.

    .venv/bin/python bench/archive_bench.py [--records 1000000] [--runs 5] [--keep DIR]
    DNSCAMP_HOME=$BIG .venv/bin/python bench/archive_bench.py --archive "$BIG/archive" --campaign gen
      (a store that holds the campaign already, and its archive: the queries and the floor only;
      $BIG: the 10 M store of docs/benchmarks.md)

Generates N dns_query records with bench/gen_campaign.py (seed 1) in a scratch directory,
ingests them into a scratch database of the embedded cluster (DNSCAMP_HOME; started and
stopped here if it was not running), archives them, and prints a Markdown table and a JSON
line. Timings: the first (cold) run and the median of the next --runs. `side_by_side` is the
comparison on a store that holds the records already: bench/store_bench.py --archive runs it
after its own figures, on the same store (one run for both benches).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
_spec = importlib.util.spec_from_file_location("gen_campaign", ROOT / "bench" / "gen_campaign.py")
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)

CAMPAIGN = "bench"
# gen_campaign's 30 days end at gen.END (2026-11-23T00:00Z): fixed bounds, the same text on both engines
QUERIES = {
    "p50 total_ms per transport, last 7 days": """
        SELECT transport, count(*) AS n,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY total_ms) AS p50_total_ms
        FROM v_dns_query
        WHERE campaign = 'bench' AND status = 'ok' AND started_at >= TIMESTAMPTZ '2026-11-16 00:00:00+00'
        GROUP BY transport ORDER BY transport""",
    "failure rate per resolver x transport, 30 days": """
        SELECT resolver, transport, count(*) AS n,
               avg(CASE WHEN status <> 'ok' THEN 1.0 ELSE 0.0 END) AS failure_rate
        FROM v_dns_query
        WHERE campaign = 'bench' AND started_at >= TIMESTAMPTZ '2026-10-24 00:00:00+00'
        GROUP BY resolver, transport ORDER BY resolver, transport""",
}


def table_bytes(conn: psycopg.Connection) -> dict[str, int]:
    """pg_total_relation_size (heap + TOAST + indexes) of every table of the schema; a
    partitioned table counts its partitions."""
    rows = conn.execute(
        "SELECT c.relname, (SELECT sum(pg_total_relation_size(t.relid)) FROM pg_partition_tree(c.oid) t) "
        "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() "
        "AND c.relkind IN ('r', 'p', 'm') AND NOT c.relispartition"
    ).fetchall()
    return {name: int(size or 0) for name, size in rows}


def timed(fn, runs: int) -> tuple[float, float, object]:
    """(cold seconds, median of the next ``runs``, last result)."""
    t = time.perf_counter()
    out = fn()
    cold = time.perf_counter() - t
    warm = []
    for _ in range(runs):
        t = time.perf_counter()
        out = fn()
        warm.append(time.perf_counter() - t)
    return cold, statistics.median(warm), out


def same(a: list, b: list) -> bool:
    if len(a) != len(b):
        return False
    for ra, rb in zip(a, b):
        for x, y in zip(ra, rb):
            if isinstance(x, (int, float)) or type(x).__name__ == "Decimal":
                if abs(float(x) - float(y)) > 1e-9 * max(1.0, abs(float(x))):
                    return False
            elif x != y:
                return False
    return True


def side_by_side(url: str, reader: str, campaign: str, dest: Path, records: int, runs: int) -> dict:
    """Archive ``campaign`` of the store at ``url`` (owner) into ``dest``, then time QUERIES on
    Postgres (``reader``, the v_ views) and on DuckDB over the archive, same SQL text, results
    checked equal (`compare`). ``records``: the campaign's record count (for bytes per record)."""
    from dnscamp.opendata import archive

    res: dict = {}
    t = time.perf_counter()
    with psycopg.connect(url) as c:
        m = archive.write(c, campaign, str(dest))
    res["archive_s"] = round(time.perf_counter() - t, 1)
    pbytes = sum(f["bytes"] for f in m["files"])
    res["parquet_bytes"] = pbytes
    res["parquet_bytes_per_record"] = round(pbytes / records, 1)
    res["parquet_files"] = len(m["files"])
    print(f"archived in {res['archive_s']} s: {len(m['files'])} files, {res['parquet_bytes_per_record']} B/record", flush=True)
    res.update(compare(reader, campaign, dest, runs))
    return res


# The exact question's windows (QUERIES' bounds): the question on both engines over each, and what
# percentile_cont alone costs in Postgres over the same values (`exact_floor`).
FLOOR_WINDOWS = {"7 days": "2026-11-16 00:00:00+00", "30 days": "2026-10-24 00:00:00+00"}
EXACT_P50 = "p50 total_ms per transport, last 7 days"  # the QUERIES entry, its window start replaced


# The rollup-guided exact median: the rollup's histograms give every transport's exact count of
# ok values per log bucket, hence the bucket(s) holding the ranks percentile_cont interpolates
# between and how many values lie below them; one scan of the window then fetches only the values
# of those buckets (a few % of the window), and the ranks are read from them sorted. The count of
# fetched values is checked against the rollup's (a value bucketed differently at ingest and here
# would show): on a mismatch that transport falls back to percentile_cont over the view. Hour-
# aligned windows only (FLOOR_WINDOWS are): a window starting inside an hour would need that
# hour's histogram from the base rows.
GUIDED_HIST = """
    SELECT transport, bucket, sum(n)::bigint FROM v_dns_hourly_hist
    WHERE campaign = %(campaign)s AND hour >= %(t0)s::timestamptz GROUP BY 1, 2"""
GUIDED_SLICE = """
    SELECT transport, total_ms FROM v_dns_query
    WHERE campaign = %(campaign)s AND status = 'ok' AND started_at >= %(t0)s::timestamptz
      AND total_ms >= %(lo)s AND total_ms < %(hi)s AND ({ranges})"""


def guided_exact(rc, campaign: str, t0: str, q: float = 0.5) -> tuple[list[tuple], list[str]]:
    """``[(transport, n, q-quantile of total_ms)]`` equal to ``percentile_cont(q)`` over
    ``v_dns_query``'s ok rows since ``t0`` (hour-aligned), read through the rollup as above; and
    the transports that fell back to percentile_cont."""
    counts: dict[str, dict[int, int]] = {}
    for transport, bucket, n in rc.execute(GUIDED_HIST, {"campaign": campaign, "t0": t0}):
        counts.setdefault(transport, {})[bucket] = n
    want, ranges, params = {}, [], {"campaign": campaign, "t0": t0}
    for i, (transport, hist) in enumerate(sorted(counts.items())):
        total = sum(hist.values())
        pos = q * float(total - 1)  # as percentile_cont: float8 rank, floor and ceil, then lerp
        k0, k1 = math.floor(pos), math.ceil(pos)
        below, b0, b1, upto = 0, None, None, 0
        for b in sorted(hist):
            if b0 is None and upto + hist[b] > k0:
                b0, below = b, upto
            upto += hist[b]
            if upto > k1:
                b1 = b
                break
        want[transport] = (total, pos, k0, k1, below, sum(n for b, n in hist.items() if b0 <= b <= b1))
        # the bucket test is the rollup's own function; the value range before it lets the scan
        # skip its logarithm for the rows far from the median
        lo = 0.001 * 1.02 ** (b0 - 1) * (1 - 1e-9) if b0 > 0 else float("-inf")
        hi = 0.001 * 1.02**b1 * (1 + 1e-9)
        ranges.append(f"(transport = %(tr{i})s AND total_ms >= %(lo{i})s AND total_ms < %(hi{i})s "
                      f"AND dnscamp_hist_bucket(total_ms) BETWEEN {int(b0)} AND {int(b1)})")
        params.update({f"tr{i}": transport, f"lo{i}": lo, f"hi{i}": hi})
    values: dict[str, list[float]] = {t: [] for t in want}
    if ranges:
        # one range over every transport's first: the scan tests it before the per-transport ones
        params["lo"] = min(params[f"lo{i}"] for i in range(len(ranges)))
        params["hi"] = max(params[f"hi{i}"] for i in range(len(ranges)))
        for transport, v in rc.execute(GUIDED_SLICE.format(ranges=" OR ".join(ranges)), params):
            values[transport].append(v)
    out, fell_back = [], []
    for transport, (total, pos, k0, k1, below, expected) in sorted(want.items()):
        vals = sorted(values[transport])
        if len(vals) != expected:
            fell_back.append(transport)
            row = rc.execute("SELECT count(total_ms), percentile_cont(%(q)s) WITHIN GROUP (ORDER BY total_ms) "
                             "FROM v_dns_query WHERE campaign = %(campaign)s AND status = 'ok' AND "
                             "started_at >= %(t0)s::timestamptz AND transport = %(t)s",
                             {"q": q, "campaign": campaign, "t0": t0, "t": transport}).fetchone()
            out.append((transport, row[0], row[1]))
            continue
        lo_v, hi_v = vals[k0 - below], vals[k1 - below]
        out.append((transport, total, lo_v if k0 == k1 else lo_v + (pos - k0) * (hi_v - lo_v)))
    return out, fell_back


def exact_floor(url: str, reader: str, campaign: str, archive_dir: Path, runs: int) -> dict:
    """The exact p50 per transport over each of FLOOR_WINDOWS: on DuckDB over the archive and on
    Postgres through `v_dns_query` (``reader``), then what PostgreSQL's percentile_cont costs by
    itself over the same values, in the layout most favourable to it: the window's ok
    (transport, total_ms) already copied into a two-column temporary table, stored in transport
    order with an index on it (the grouping reads the groups in order: no sort but
    percentile_cont's own), work_mem large enough that nothing spills. An ordered-set
    aggregate runs in one process (PostgreSQL 18 has no parallel or partial form of it), so no
    view, index or partitioning of the store answers that question faster on this machine. Beside
    them: the window's values only collected per transport through `v_dns_query` by a parallel
    aggregate (array_agg), the data movement that an exact aggregate of another kind (one with
    partial states) would need before choosing its value.
    ``url``: a role that may create temporary tables (the owner). Median ms of ``runs``."""
    from dnscamp.opendata import duck

    assert FLOOR_WINDOWS["7 days"] in QUERIES[EXACT_P50], "QUERIES' exact p50 no longer starts at FLOOR_WINDOWS' 7 days"
    out: dict = {}
    con = duck.connect(str(archive_dir))
    with psycopg.connect(reader) as rc, psycopg.connect(url, autocommit=True) as c:
        rc.read_only = True
        c.execute("SET work_mem = '1GB'")
        for window, lo in FLOOR_WINDOWS.items():
            q = QUERIES[EXACT_P50].replace("'bench'", f"'{campaign}'").replace(FLOOR_WINDOWS["7 days"], lo)
            _, pg_s, prow = timed(lambda: rc.execute(q).fetchall(), runs)
            _, duck_s, drow = timed(lambda: con.execute(q).fetchall(), runs)
            assert same(prow, drow), (window, prow, drow)
            # what a parallel exact aggregate (not percentile_cont) would have to do before choosing
            # its value: array_agg is parallel (partial states per worker, combined in the leader)
            gather = q.replace("percentile_cont(0.5) WITHIN GROUP (ORDER BY total_ms)", "cardinality(array_agg(total_ms))")
            _, gather_s, grow = timed(lambda: rc.execute(gather).fetchall(), runs)
            assert [r[:2] for r in grow] == [r[:2] for r in prow], (window, grow, prow)
            _, guided_s, (gout, fell_back) = timed(lambda: guided_exact(rc, campaign, lo), runs)
            # exact: the same values bit for bit (percentile_cont's own arithmetic), not close
            assert [tuple(r) for r in gout] == [tuple(r) for r in prow], (window, gout, prow)
            c.execute("DROP TABLE IF EXISTS pg_temp.floor_values")
            c.execute("CREATE TEMP TABLE floor_values AS SELECT transport, total_ms FROM v_dns_query "
                      "WHERE campaign = %s AND status = 'ok' AND started_at >= %s::timestamptz ORDER BY transport",
                      (campaign, lo))
            c.execute("CREATE INDEX ON pg_temp.floor_values (transport)")
            c.execute("ANALYZE pg_temp.floor_values")
            n = c.execute("SELECT count(*) FROM pg_temp.floor_values").fetchone()[0]
            row = {"values": n, "duckdb_ms": round(duck_s * 1000, 1), "postgres_view_ms": round(pg_s * 1000, 1),
                   "parallel_collect_ms": round(gather_s * 1000, 1), "guided_ms": round(guided_s * 1000, 1),
                   "guided_fell_back": fell_back}
            c.execute("SET enable_sort = off")  # GroupAggregate over the index scan: the groups in order
            c.execute("SET enable_hashagg = off")
            for name, sql in (("alone_one_group_ms", "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY total_ms) "
                                                     "FROM pg_temp.floor_values"),
                              ("alone_per_transport_ms", "SELECT transport, percentile_cont(0.5) WITHIN GROUP "
                                                         "(ORDER BY total_ms) FROM pg_temp.floor_values GROUP BY transport")):
                _, warm, _ = timed(lambda: c.execute(sql).fetchall(), runs)
                row[name] = round(warm * 1000, 1)
            c.execute("RESET enable_sort")
            c.execute("RESET enable_hashagg")
            out[window] = row
            print(f"exact p50 per transport, {window} ({n:,} values): DuckDB {row['duckdb_ms']:,.0f} ms, "
                  f"v_dns_query {row['postgres_view_ms']:,.0f} ms; percentile_cont alone {row['alone_one_group_ms']:,.0f} ms "
                  f"over all, {row['alone_per_transport_ms']:,.0f} ms per transport; rollup-guided "
                  f"{row['guided_ms']:,.0f} ms (fell back: {fell_back or 'none'})", flush=True)
        c.execute("DROP TABLE IF EXISTS pg_temp.floor_values")
    return out


def compare(reader: str, campaign: str, archive_dir: Path, runs: int) -> dict:
    """QUERIES on Postgres (``reader``, the v_ views) and on DuckDB over the archive at
    ``archive_dir``, same SQL text, results checked equal: cold run and median of ``runs``."""
    from dnscamp.opendata import duck

    res: dict = {"queries": {}}
    t = time.perf_counter()
    con = duck.connect(str(archive_dir))
    res["duckdb_open_s"] = round(time.perf_counter() - t, 3)
    with psycopg.connect(reader) as rc:
        rc.read_only = True
        for name, q in QUERIES.items():
            q = q.replace("'bench'", f"'{campaign}'")
            pc, pw, prow = timed(lambda: rc.execute(q).fetchall(), runs)
            dc, dw, drow = timed(lambda: con.execute(q).fetchall(), runs)
            assert same(prow, drow), (name, prow[:3], drow[:3])
            res["queries"][name] = {"postgres_cold_s": round(pc, 3), "postgres_s": round(pw, 3),
                                    "duckdb_cold_s": round(dc, 3), "duckdb_s": round(dw, 3), "rows": len(prow)}
            print(f"{name}: Postgres {pw * 1000:.0f} ms (cold {pc * 1000:.0f}), DuckDB {dw * 1000:.0f} ms "
                  f"(cold {dc * 1000:.0f}), same {len(prow)} rows", flush=True)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000, help="dns_query records")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--workers", type=int, default=2, help="ingest parser processes")
    ap.add_argument("--keep", type=Path, help="keep the generated records and the archive here")
    ap.add_argument("--archive", type=Path, metavar="DIR",
                    help="no generation: the store at DNSCAMP_HOME holds --campaign and DIR is its archive "
                         "(dnscamp archive): time QUERIES on both, and percentile_cont alone (`exact_floor`)")
    ap.add_argument("--campaign", default=CAMPAIGN, help="with --archive: the campaign (bench/gen_campaign.py writes gen)")
    a = ap.parse_args()

    from collectors.ingest import ingest
    from db import embedded, engine, migrate

    if a.archive:
        print(f"load average before: {os.getloadavg()[0]:.2f}", flush=True)
        res = compare(engine.database_url("reader"), a.campaign, a.archive, a.runs)
        res["exact_floor"] = exact_floor(engine.database_url("owner"), engine.database_url("reader"), a.campaign,
                                                   a.archive, a.runs)
        print(f"load average after: {os.getloadavg()[0]:.2f}", flush=True)
        _floor_table(res)
        print(json.dumps(res))
        return

    was_running = engine.external_url() is not None or embedded.is_running()
    work = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="dnscamp-archive-bench-"))
    dbname = f"dnscamp_archive_bench_{os.getpid()}"
    res: dict = {"records": a.records, "machine": f"{platform.machine()}, {os.cpu_count()} vCPU"}
    try:
        t = time.perf_counter()
        gen.generate(work / "gen", dns_queries_n=a.records, page_loads_n=0, atlas_n=0, seed=1, campaign=CAMPAIGN)
        res["generate_s"] = round(time.perf_counter() - t, 1)
        jsonl = sum(f.stat().st_size for f in (work / "gen" / "records").glob("*.jsonl"))
        res["jsonl_bytes_per_record"] = round(jsonl / a.records)
        print(f"generated {a.records:,} dns_query records in {res['generate_s']} s ({res['jsonl_bytes_per_record']} B/record as JSONL)", flush=True)

        url = engine.database_url("owner", dbname=dbname)
        migrate.upgrade(url.replace("postgresql://", "postgresql+psycopg://", 1))
        with psycopg.connect(url, autocommit=True) as c:
            empty = table_bytes(c)
        t = time.perf_counter()
        st = ingest([work / "gen" / "records"], url, workers=a.workers)
        secs = time.perf_counter() - t
        assert st.ingested == a.records and st.quarantined == 0, st.as_json()
        res["ingest_records_per_s"] = round(a.records / secs)
        with psycopg.connect(url, autocommit=True) as c:
            c.execute("VACUUM ANALYZE")
            full = table_bytes(c)
        grown = {k: v - empty.get(k, 0) for k, v in full.items() if v - empty.get(k, 0) > 0 and k != "alembic_version"}
        res["postgres_bytes"] = sum(grown.values())
        res["postgres_bytes_per_record"] = round(res["postgres_bytes"] / a.records)
        res["postgres_tables"] = grown
        print(f"ingested in {secs:.1f} s ({res['ingest_records_per_s']:,}/s); store: {res['postgres_bytes_per_record']} B/record "
              f"{grown}", flush=True)

        res.update(side_by_side(url, engine.database_url("reader", dbname=dbname), CAMPAIGN, work / "archive",
                                a.records, a.runs))
        res["exact_floor"] = exact_floor(url, engine.database_url("reader", dbname=dbname), CAMPAIGN,
                                                   work / "archive", a.runs)
    finally:
        with psycopg.connect(engine.database_url("owner", dbname="postgres"), autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
        if not was_running:
            embedded.down()

    print()
    print(f"| {a.records:,} dns_query records | Postgres (dnscamp store) | Parquet (zstd) + DuckDB |")
    print("|---|---|---|")
    print(f"| bytes on disk per record | {res['postgres_bytes_per_record']:,} | {res['parquet_bytes_per_record']} |")
    print(f"| write | ingest {res['ingest_records_per_s']:,} records/s | archive {a.records / res['archive_s']:,.0f} records/s |")
    for name, q in res["queries"].items():
        print(f"| {name} | {q['postgres_s'] * 1000:,.0f} ms (cold {q['postgres_cold_s'] * 1000:,.0f}) | "
              f"{q['duckdb_s'] * 1000:,.0f} ms (cold {q['duckdb_cold_s'] * 1000:,.0f}) |")
    _floor_table(res)
    print(json.dumps(res))


def _floor_table(res: dict) -> None:
    """The exact question on both engines, and what percentile_cont alone costs in Postgres."""
    print()
    print("| exact p50 total_ms per transport (ms; × DuckDB) | 7 days | 30 days |")
    print("|---|---:|---:|")
    f = res["exact_floor"]
    for key, what in (("duckdb_ms", "DuckDB over the archive"), ("postgres_view_ms", "Postgres, `v_dns_query`"),
                      ("parallel_collect_ms", "Postgres, `v_dns_query`, the values only collected per transport "
                                              "(parallel `array_agg`, no percentile)"),
                      ("alone_one_group_ms", "Postgres, percentile_cont alone, all values in one group"),
                      ("alone_per_transport_ms", "Postgres, percentile_cont alone, per transport"),
                      ("guided_ms", "Postgres, rollup-guided exact (`guided_exact`: the rollup's histogram, "
                                    "then the median's buckets only)")):
        cells = [f"{w[key]:,.0f} ({w[key] / w['duckdb_ms']:.1f}×)" for w in f.values()]
        print(f"| {what} | " + " | ".join(cells) + " |")
    print("| values in the window | " + " | ".join(f"{w['values']:,}" for w in f.values()) + " |")


if __name__ == "__main__":
    main()
