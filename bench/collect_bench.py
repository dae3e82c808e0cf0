"""Collector benchmark: objects/s and records/s that `dnscamp collect` takes from an
S3 server on loopback (moto in server mode, in this process's threads) into a scratch database
of the embedded cluster. Objects are what agents ship: one gzip JSONL file per unit.

    .venv/bin/python bench/collect_bench.py [--objects 400] [--records 50]

Prints one line per pass (first: everything new; second: nothing changed); the last line is JSON.
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import os
import platform
import socket
import time
import uuid
from pathlib import Path

import boto3
import psycopg

ROOT = Path(__file__).resolve().parents[1]
PING = json.loads((ROOT / "tests/fixtures/results/v1/ping.jsonl").read_text().splitlines()[0])
BUCKET = "bench-results"


def body(obj: int, n: int) -> bytes:
    lines = (json.dumps(dict(PING, id=str(uuid.UUID(int=(obj << 32) + i + 1, version=4)), unit=f"u{obj}")) for i in range(n))
    return gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0)


def main() -> None:
    from moto.server import ThreadedMotoServer

    from collectors import s3
    from db import engine, migrate

    ap = argparse.ArgumentParser()
    ap.add_argument("--objects", type=int, default=400)
    ap.add_argument("--records", type=int, default=50, help="records per object (a unit's records)")
    args = ap.parse_args()
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ[k] = "bench"
    os.environ["AWS_DEFAULT_REGION"] = "us-east-1"
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        port = sk.getsockname()[1]
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's request log, one line per request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    dbname = f"dnscamp_collect_bench_{os.getpid()}"
    url = engine.database_url("owner", dbname=dbname)
    migrate.upgrade(url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        client = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}")
        client.create_bucket(Bucket=BUCKET)
        for o in range(args.objects):
            client.put_object(Bucket=BUCKET, Key=f"results/bench/v1/r1/u{o:05d}.jsonl.gz", Body=body(o, args.records))
        out = {"objects": args.objects, "records_per_object": args.records}
        for name in ("new", "unchanged"):
            t0 = time.perf_counter()
            st = s3.collect(f"s3://{BUCKET}/results/", url, client=client)
            secs = time.perf_counter() - t0
            n_rec = st.ingested + st.duplicates
            out[name] = {"seconds": round(secs, 2), "objects_per_s": round(args.objects / secs, 1),
                         "records_per_s": round(n_rec / secs) if n_rec else 0, **st.as_json()}  # fmt: skip
            print(f"{name}: {args.objects} objects ({n_rec} records) in {secs:.2f} s = "
                  f"{out[name]['objects_per_s']} objects/s, {out[name]['records_per_s']} records/s", flush=True)  # fmt: skip
        assert out["new"]["ingested"] == args.objects * args.records and out["unchanged"]["unchanged"] == args.objects
        out["machine"] = f"{platform.machine()} {os.cpu_count()} cores, kernel {platform.release()}"
        out["load_avg_1min"] = round(os.getloadavg()[0], 2)
        print(json.dumps(out))
    finally:
        server.stop()
        with psycopg.connect(engine.database_url("owner", dbname="postgres"), autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')


if __name__ == "__main__":
    main()
