"""The results pipeline's faults on loopback: agent spool -> ship (boto3) -> moto's S3
server -> collect -> Postgres, each record exactly once whatever breaks in between."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import boto3
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collectors import s3 as coll
from tests.scaffolding.moto_s3 import free_port, s3_server
from vantage_agent import ship

pytestmark = pytest.mark.local
ROOT = Path(__file__).resolve().parents[2]
BUCKET = "results-test"
PING = json.loads((ROOT / "tests/fixtures/results/v1/ping.jsonl").read_text().splitlines()[0])


@pytest.fixture()
def moto(monkeypatch):
    with s3_server(monkeypatch, BUCKET) as m:
        yield m


def record_lines(n: int, run: str = "r1", unit: str = "u", seed: int = 0) -> bytes:
    out = []
    for i in range(n):
        r = dict(PING, id=str(uuid.UUID(int=(seed << 64) + i + 1, version=4)), run=run, unit=f"{unit}{i % 3}")
        out.append(json.dumps(r))
    return ("\n".join(out) + "\n").encode()


def spool_run(spool: Path, campaign: str, run: str, units: int, per_unit: int, complete=True) -> int:
    d = spool / campaign / run
    d.mkdir(parents=True)
    for u in range(units):
        (d / f"unit{u:03d}.jsonl").write_bytes(record_lines(per_unit, run, f"unit{u:03d}-", seed=hash((campaign, run, u)) & 0xFFFF))
    if complete:
        (d / "complete.json").write_text("{}")
    return units * per_unit


def put_objects(client, n_objects: int, per_object: int, prefix="results/c/v/r1/") -> int:
    for k in range(n_objects):
        client.put_object(Bucket=BUCKET, Key=f"{prefix}u{k:03d}.jsonl.gz",
                          Body=gzip.compress(record_lines(per_object, seed=1000 + k), mtime=0))  # fmt: skip
    return n_objects * per_object


def counts(url: str) -> tuple[int, int]:
    with psycopg.connect(url) as c:
        return c.execute("SELECT count(*), count(DISTINCT id) FROM results").fetchone()


def test_s3_down_during_shipping_then_back(moto, tmp_path, empty_db, monkeypatch):
    monkeypatch.setenv("DNSCAMP_INSTANCE_ID", "i-0v1")
    monkeypatch.delenv("DNSCAMP_REGION", raising=False)
    spool = tmp_path / "spool"
    total = spool_run(spool, "c", "r1", units=4, per_unit=5)
    spool_run(spool, "c", "r2", units=2, per_unit=5, complete=False)  # still going: not shipped yet
    moto.stop()
    down = ship.ship_and_report(spool, BUCKET, "v1", client=ship.s3_client(connect_timeout=0.5), home=tmp_path)
    assert down["shipped"] == 0 and down["pending"] == 5 and down["runs_incomplete"] == 1 and down["errors"]  # 4 units, the manifest
    assert "status_error" in down and "testing" not in json.dumps(down)  # no credentials in what is printed
    assert not (spool / "c/r1" / ship.LEDGER).exists() and len(list((spool / "c/r1").glob("*.jsonl"))) == 4
    moto.start()  # hours later: the queue is shipped, nothing lost
    up = ship.ship_and_report(spool, BUCKET, "v1", home=tmp_path)
    assert up["shipped"] == 4 and up["pending"] == 0 and up["status_object"] == "status/c/v1/local/i-0v1.json"
    keys = sorted(o["Key"] for o in moto.client.list_objects_v2(Bucket=BUCKET)["Contents"])
    assert keys == ["results/c/v1/r1/manifest.json", "results/c/v1/r1/unit000.jsonl.gz", "results/c/v1/r1/unit001.jsonl.gz",
                    "results/c/v1/r1/unit002.jsonl.gz", "results/c/v1/r1/unit003.jsonl.gz", "status/c/v1/local/i-0v1.json"]  # fmt: skip
    status = json.loads(moto.client.get_object(Bucket=BUCKET, Key="status/c/v1/local/i-0v1.json")["Body"].read())
    assert status["pending_units"] == 2 and status["disk_free_bytes"] > 0 and status["agent_version"]  # r2's units wait
    again = ship.ship(spool, BUCKET, "v1")  # the ledger, not a HEAD: nothing uploaded twice
    assert again.shipped == 0 and again.already == 4
    st = coll.collect(f"s3://{BUCKET}/results/", empty_db, client=moto.client)
    assert (st.collected, st.ingested, st.quarantined) == (4, total, 0)
    assert counts(empty_db) == (total, total)
    st = coll.collect(f"s3://{BUCKET}/results/", empty_db, client=moto.client)
    assert (st.collected, st.unchanged) == (0, 4)


def test_a_reupload_after_a_lost_ledger_is_byte_identical(moto, tmp_path, empty_db):
    """A crash between S3's answer and the ledger line: the unit goes again, same bytes, same ETag."""
    spool = tmp_path / "spool"
    spool_run(spool, "c", "r1", units=2, per_unit=3)
    ship.ship(spool, BUCKET, "v1")
    coll.collect(f"s3://{BUCKET}/results/", empty_db, client=moto.client)
    (spool / "c/r1" / ship.LEDGER).unlink()
    assert ship.ship(spool, BUCKET, "v1").shipped == 2
    st = coll.collect(f"s3://{BUCKET}/results/", empty_db, client=moto.client)
    assert (st.unchanged, st.collected) == (2, 0) and counts(empty_db) == (6, 6)


def test_corrupt_objects_are_quarantined_by_key_and_the_rest_go_on(moto, empty_db):
    good = put_objects(moto.client, 3, 10)
    blob = gzip.compress(record_lines(40, seed=77), mtime=0)
    moto.client.put_object(Bucket=BUCKET, Key="results/c/v/r1/trunc.jsonl.gz", Body=blob[: len(blob) // 2])
    moto.client.put_object(Bucket=BUCKET, Key="results/c/v/r1/badjson.jsonl.gz",
                           Body=gzip.compress(record_lines(2, seed=78) + b'{"schema": oops\n'))  # fmt: skip
    st = coll.collect(f"s3://{BUCKET}/results/", empty_db, client=moto.client)
    assert st.collected == 5 and st.quarantined == 2
    with psycopg.connect(empty_db) as c:
        q = dict(c.execute("SELECT source_file, reason FROM quarantine").fetchall())
        rows = dict(c.execute("SELECT key, quarantined FROM collected_objects").fetchall())
    assert "corrupt file" in q[f"s3://{BUCKET}/results/c/v/r1/trunc.jsonl.gz"]
    assert f"s3://{BUCKET}/results/c/v/r1/badjson.jsonl.gz" in q
    assert rows["results/c/v/r1/trunc.jsonl.gz"] == 1 and rows["results/c/v/r1/u000.jsonl.gz"] == 0
    n, distinct = counts(empty_db)
    assert n == distinct and good + 2 <= n < good + 2 + 40  # the whole lines before the break are kept
    assert coll.collect(f"s3://{BUCKET}/results/", empty_db, client=moto.client).unchanged == 5


COLLECTOR = """
import json, os, signal, sys
from collectors import s3
from tests.local.test_pipeline_collect import BUCKET
kill_at = int(sys.argv[3])
seen = []
def before_record(key):
    seen.append(key)
    if len(seen) == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)  # after the object's batches, before its ledger row
st = s3.collect(sys.argv[1], sys.argv[2], endpoint_url=os.environ["AWS_ENDPOINT_URL_S3"], before_record=before_record)
print(json.dumps(st.as_json()), flush=True)
"""


def _collector(url: str, kill_at: int = 0) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", COLLECTOR, f"s3://{BUCKET}/results/", url, str(kill_at)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kill_at=st.integers(1, 6), delay=st.one_of(st.none(), st.floats(0.0, 1.5)))
def test_collector_killed_anywhere_then_rerun_gives_each_record_once(moto, empty_db, kill_at, delay):
    """kill -9 either between an object's last batch and its ledger row (the kill_at-th object),
    or at a random moment; the rerun stores every record exactly once."""
    with psycopg.connect(empty_db, autocommit=True) as c:
        c.execute("DELETE FROM results")  # a view over the store's tables since 0012: no TRUNCATE
        c.execute("TRUNCATE quarantine, collected_objects")
    total = put_objects(moto.client, 6, 200)
    p = _collector(empty_db, 0 if delay is not None else kill_at)
    if delay is not None:
        time.sleep(delay)
        p.send_signal(signal.SIGKILL)
    p.wait(timeout=120)
    st = coll.collect(f"s3://{BUCKET}/results/", empty_db, client=moto.client)
    assert st.quarantined == 0
    assert counts(empty_db) == (total, total)
    with psycopg.connect(empty_db) as c:
        assert c.execute("SELECT count(*) FROM collected_objects").fetchone()[0] == 6


def test_two_collectors_at_once(moto, empty_db):
    total = put_objects(moto.client, 12, 300)
    procs = [_collector(empty_db) for _ in range(2)]
    outs = [p.communicate(timeout=180) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    stats = [json.loads(o[0].strip().splitlines()[-1]) for o in outs]
    assert sum(s["ingested"] for s in stats) == total
    assert counts(empty_db) == (total, total)
    with psycopg.connect(empty_db) as c:
        # each object was taken by one collector (the advisory lock): its row holds all its records
        assert c.execute("SELECT count(*), sum(ingested) FROM collected_objects").fetchone() == (12, total)


def test_the_commands_as_the_writer_role(moto, tmp_path):
    """`dnscamp agent ship` (exit 4 while S3 is down, the queue in its JSON) and `dnscamp collect`
    as the store's writer role (its grants on collected_objects; the session's store)."""
    from typer.testing import CliRunner

    from dnscamp.cli import app

    spool = tmp_path / "spool"
    spool_run(spool, "cli", "r1", units=3, per_unit=4)
    dead = f"http://127.0.0.1:{free_port()}"
    args = ["agent", "ship", "--bucket", BUCKET, "--vantage", "v9", "--spool", str(spool)]
    r = CliRunner().invoke(app, args, env={"AWS_ENDPOINT_URL_S3": dead})
    assert r.exit_code == 4 and json.loads(r.stdout)["pending"] == 4, r.output  # 3 units and the manifest
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0 and json.loads(r.stdout)["shipped"] == 3, r.output
    try:
        r = CliRunner().invoke(app, ["collect", f"s3://{BUCKET}/results/cli/", "--endpoint-url", moto.url, "--json"])
        assert r.exit_code == 0, r.output
        assert json.loads(r.stdout.strip().splitlines()[-1]) | {"bytes": 0} == {
            "listed": 3, "collected": 3, "unchanged": 0, "locked": 0, "bytes": 0, "ingested": 12, "duplicates": 0,
            "quarantined": 0}  # fmt: skip
    finally:  # the session's store is empty_db's template: leave it as it was
        from db import engine

        with psycopg.connect(engine.database_url("owner")) as c:
            ids = [json.loads(ln)["id"] for f in spool.glob("*/*/*.jsonl") for ln in f.read_text().splitlines()]
            c.execute("DELETE FROM results WHERE id = ANY(%s::uuid[])", (ids,))
            c.execute("DELETE FROM collected_objects WHERE bucket = %s", (BUCKET,))
    r = CliRunner().invoke(app, ["collect", "not-a-uri"])
    assert r.exit_code == 2 and "not an s3://bucket/prefix URI" in r.output


def test_a_changed_object_is_collected_again_and_its_records_dedupe(moto, empty_db):
    key = "results/c/v/r1/u.jsonl.gz"
    first = record_lines(5, seed=5)
    moto.client.put_object(Bucket=BUCKET, Key=key, Body=gzip.compress(first, mtime=0))
    coll.collect(f"s3://{BUCKET}/results/", empty_db, client=moto.client)
    changed = json.loads(first.splitlines()[0]) | {"status": "timeout", "error": "x"}  # another record, a stored id
    sixth = record_lines(6, seed=5).splitlines(True)[5]  # a new record
    body = first + sixth + (json.dumps(changed) + "\n").encode()
    moto.client.put_object(Bucket=BUCKET, Key=key, Body=gzip.compress(body, mtime=0))
    st = coll.collect(f"s3://{BUCKET}/results/", empty_db, client=moto.client)
    assert (st.collected, st.ingested, st.duplicates, st.quarantined) == (1, 1, 5, 1)
    assert counts(empty_db) == (6, 6)
    with psycopg.connect(empty_db) as c:
        assert "id_conflict" in c.execute("SELECT reason FROM quarantine").fetchone()[0]
        assert c.execute("SELECT ingested, duplicates, quarantined FROM collected_objects").fetchone() == (1, 5, 1)


def test_hars_follow_their_run_and_are_not_taken_for_records(moto, tmp_path, empty_db):
    spool = tmp_path / "spool"
    n = spool_run(spool, "c", "r1", units=2, per_unit=3)
    har = spool / "c" / "r1" / "artifacts" / "har" / "p1.har"
    har.parent.mkdir(parents=True)
    har.write_bytes(json.dumps({"log": {"version": "1.2", "entries": []}}).encode())
    out = ship.ship(spool, BUCKET, "v")
    assert (out.shipped, out.artifacts_shipped, out.pending) == (2, 1, 0)
    key = "results/c/v/r1/artifacts/har/p1.har.gz"
    assert gzip.decompress(moto.client.get_object(Bucket=BUCKET, Key=key)["Body"].read()) == har.read_bytes()
    again = ship.ship(spool, BUCKET, "v")  # the ledger knows both kinds of lines
    assert (again.shipped, again.artifacts_shipped, again.already) == (0, 0, 2)
    st = coll.collect(f"s3://{BUCKET}/results/", empty_db, client=moto.client)
    assert st.ingested == n and st.quarantined == 0 and counts(empty_db) == (n, n)
    with psycopg.connect(empty_db) as c:
        assert c.execute("SELECT count(*) FROM collected_objects WHERE key LIKE '%%/artifacts/%%'").fetchone()[0] == 0


def test_s3_down_keeps_the_hars_queued_too(moto, tmp_path):
    spool = tmp_path / "spool"
    spool_run(spool, "c", "r1", units=1, per_unit=1)
    har = spool / "c" / "r1" / "artifacts" / "har" / "p1.har"
    har.parent.mkdir(parents=True)
    har.write_text("{}")
    moto.stop()
    down = ship.ship(spool, BUCKET, "v", client=ship.s3_client(connect_timeout=0.5, read_timeout=0.5))
    assert (down.shipped, down.artifacts_shipped) == (0, 0) and down.pending == 3  # the unit, its HAR, the manifest
    assert len(down.errors) == 1  # stops at the first failure
    moto.start()
    back = ship.ship(spool, BUCKET, "v")
    assert (back.shipped, back.artifacts_shipped) == (1, 1)
