"""The ingest contract: twice = no-op, malformed = quarantined with exit 3, SIGKILL = nothing lost."""

import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psycopg
import pytest

from collectors.ingest import ingest

pytestmark = pytest.mark.local
ROOT = Path(__file__).resolve().parents[2]
V1 = ROOT / "tests" / "fixtures" / "results" / "v1"


def count(url, table="results"):
    with psycopg.connect(url) as c:
        return c.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def gen(path: Path, n: int, bad_every: int = 0) -> int:
    sys.path.insert(0, str(ROOT / "bench"))
    from ingest_bench import generate

    generate(path, n, seed=n)
    if bad_every:
        lines = path.read_text().splitlines()
        for i in range(0, n, bad_every):
            lines[i] = lines[i][: len(lines[i]) // 2]
        path.write_text("\n".join(lines) + "\n")
        return n - len(range(0, n, bad_every))
    return n


def test_twice_is_a_noop(empty_db, tmp_path):
    shutil.copy(V1 / "ping.jsonl", tmp_path / "a.jsonl")
    first = ingest([tmp_path], empty_db)
    assert first.as_json() == {"ingested": 4, "duplicates": 0, "quarantined": 0}
    second = ingest([tmp_path], empty_db)
    assert second.as_json() == {"ingested": 0, "duplicates": 4, "quarantined": 0}
    assert count(empty_db) == 4


def test_stored_columns_match_the_record(empty_db, tmp_path):
    shutil.copy(V1 / "ping.jsonl", tmp_path / "a.jsonl")
    ingest([tmp_path], empty_db)
    with psycopg.connect(empty_db) as c:
        row = c.execute(
            "SELECT kind, campaign, vantage_id, network_profile, started_at, status, error, body->'rtts_ms', source_line "
            "FROM results WHERE id = '6f1c1f7e-2a53-4a38-9d55-0d1f4f3c9a02'"
        ).fetchone()
        assert row[:4] == ("ping", "fixtures", "testbed", "4g")
        assert row[4].isoformat() == "2026-11-22T07:00:01+00:00"  # measurement time, in UTC
        assert row[5:7] == ("ok", None)
        assert row[7] == [92.1, None, 91.8, 92.4]
        assert row[8] == 2
        v = c.execute("SELECT received, loss, rtt_min_ms FROM v_ping WHERE id = '6f1c1f7e-2a53-4a38-9d55-0d1f4f3c9a02'").fetchone()
        assert v[0] == 3 and abs(v[1] - 0.25) < 1e-9 and v[2] == 91.8


def test_malformed_lines_are_quarantined_rest_ingested(empty_db, tmp_path):
    f = tmp_path / "mixed.jsonl"
    good = (V1 / "ping.jsonl").read_text().splitlines()
    bad = [(V1 / "invalid" / n).read_text().strip() for n in ("malformed_json.jsonl", "unknown_schema.jsonl", "unknown_kind.jsonl")]
    f.write_text("\n".join([good[0], bad[0], good[1], bad[1], bad[2], good[2]]) + "\n")
    stats = ingest([f], empty_db)
    assert stats.as_json() == {"ingested": 3, "duplicates": 0, "quarantined": 3}
    with psycopg.connect(empty_db) as c:
        rows = c.execute("SELECT source_file, line, reason, raw FROM quarantine ORDER BY line").fetchall()
    assert [r[1] for r in rows] == [2, 4, 5]
    assert rows[0][0] == str(f.resolve())
    assert "malformed JSON" in rows[0][2] and "unknown schema version" in rows[1][2] and "unknown kind" in rows[2][2]
    assert rows[1][3] == bad[1]
    again = ingest([f], empty_db)  # quarantine is idempotent too
    assert count(empty_db, "quarantine") == 3 and again.duplicates == 3


def test_gzip_and_directories(empty_db, tmp_path):
    d = tmp_path / "spool" / "c" / "r"
    d.mkdir(parents=True)
    with gzip.open(d / "x.jsonl.gz", "wt") as g:
        g.write((V1 / "ping.jsonl").read_text())
    (d / "ignored.txt").write_text("not a result file")
    (d / ".partial.jsonl.tmp").write_text("{")
    (d / "artifacts").mkdir()
    (d / "artifacts" / "raw-atlas.jsonl").write_text('{"not": "a record"}\n')  # kept beside records
    assert ingest([tmp_path / "spool"], empty_db).as_json() == {"ingested": 4, "duplicates": 0, "quarantined": 0}


def test_truncated_gzip_keeps_what_was_read(empty_db, tmp_path):
    src = tmp_path / "big.jsonl"
    gen(src, 3000)
    data = gzip.compress(src.read_bytes())
    (tmp_path / "cut.jsonl.gz").write_bytes(data[: len(data) // 2])
    stats = ingest([tmp_path / "cut.jsonl.gz"], empty_db)
    assert 0 < stats.ingested < 3000
    assert stats.quarantined == 1 and "corrupt file" in stats.reasons[0]


def test_cli_json_and_exit_codes(empty_db, tmp_path):
    dbname = empty_db.split("/")[3].split("?")[0]
    env = dict(os.environ, DNSCAMP_DATABASE_NAME=dbname)
    ok = tmp_path / "ok.jsonl"
    shutil.copy(V1 / "ping.jsonl", ok)
    cli = [str(ROOT / ".venv" / "bin" / "dnscamp"), "ingest", "--json"]
    r = subprocess.run([*cli, str(ok)], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"ingested": 4, "duplicates": 0, "quarantined": 0}
    bad = tmp_path / "bad.jsonl"
    lines = [(V1 / "invalid" / "unknown_schema.jsonl").read_text().strip()] * 25
    bad.write_text("\n".join(lines) + "\n")
    r = subprocess.run([*cli, str(bad)], capture_output=True, text=True, env=env)
    assert r.returncode == 3
    assert json.loads(r.stdout) == {"ingested": 0, "duplicates": 0, "quarantined": 25}
    reasons = [l for l in r.stderr.splitlines() if l.startswith("quarantined: ")]
    assert len(reasons) == 20 and f"{bad.resolve()}:1: schema: unknown schema version" in reasons[0]
    r = subprocess.run([*cli, str(tmp_path / "missing.jsonl")], capture_output=True, text=True, env=env)
    assert r.returncode == 2 and "missing.jsonl: no such file" in r.stderr


def test_sigkill_at_any_moment_loses_nothing(empty_db, tmp_path):
    dbname = empty_db.split("/")[3].split("?")[0]
    env = dict(os.environ, DNSCAMP_DATABASE_NAME=dbname)
    f = tmp_path / "many.jsonl"
    n_valid = gen(f, 120_000, bad_every=1000)
    cli = [str(ROOT / ".venv" / "bin" / "dnscamp"), "ingest", "--json", str(f)]
    # Kill it at several moments: during start-up, mid-way, late.
    for delay in (0.8, 2.0, 3.5):
        p = subprocess.Popen(cli, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True)
        time.sleep(delay)
        os.killpg(p.pid, signal.SIGKILL)  # the agent and its parser workers: our own process group
        p.wait()
    partial = count(empty_db)
    r = subprocess.run(cli, capture_output=True, text=True, env=env)
    assert r.returncode == 3, r.stderr  # the malformed lines are reported again (already quarantined)
    assert count(empty_db) == n_valid
    with psycopg.connect(empty_db) as c:
        assert c.execute("SELECT count(DISTINCT id) FROM results").fetchone()[0] == n_valid
        assert c.execute("SELECT count(*) FROM quarantine").fetchone()[0] == 120
    out = json.loads(r.stdout)
    assert out["ingested"] == n_valid - partial and out["ingested"] + out["duplicates"] == n_valid


def _forge_timestamp(record, bad_line: int):
    """Wrap collectors.parse._record: on ``bad_line``, started_at (binary COPY field 2 of the
    item's kind-table row, after the id) becomes -2**62 µs (before 4713 BC), which
    timestamptz's binary input refuses."""
    import dataclasses
    import struct

    forged_ts = struct.pack(">iq", 8, -(2**62))

    def forged(text, lineno, dims, *rest):
        item = record(text, lineno, dims, *rest)
        if lineno == bad_line:
            pos = 4 + 16  # the id field
            item = dataclasses.replace(item, row=item.row[:pos] + forged_ts + item.row[pos + 12 :])
        return item

    return forged


def test_value_postgres_refuses_is_quarantined_not_fatal(empty_db, tmp_path, monkeypatch):
    """A value that passes every check of ours but that Postgres refuses (here: a timestamp
    beyond timestamptz's range, forced into the binary row) costs only its own line."""
    import collectors.parse as cp

    good = (V1 / "ping.jsonl").read_text().splitlines()
    monkeypatch.setattr(cp, "_record", _forge_timestamp(cp._record, bad_line=2))
    f = tmp_path / "t.jsonl"
    f.write_text("\n".join(good[:3]) + "\n")
    stats = ingest([f], empty_db, workers=1)
    assert stats.as_json() == {"ingested": 2, "duplicates": 0, "quarantined": 1}
    assert ":2: rejected by the store: timestamp out of range" in stats.reasons[0]
    with psycopg.connect(empty_db) as c:
        assert c.execute("SELECT raw FROM quarantine").fetchone()[0] == good[1]


def test_rollups_count_a_batch_stored_row_by_row_once(empty_db, tmp_path, monkeypatch):
    """A batch Postgres refuses one row of is stored again row by row: the rollups count each
    stored dns_query record once (the first attempt's rollup rows are gone with its rollback)."""
    import collectors.parse as cp

    good = (V1 / "dns_query.jsonl").read_text().splitlines()[:4]
    monkeypatch.setattr(cp, "_record", _forge_timestamp(cp._record, bad_line=2))
    f = tmp_path / "t.jsonl"
    f.write_text("\n".join(good) + "\n")
    stats = ingest([f], empty_db, workers=1)
    assert stats.as_json() == {"ingested": 3, "duplicates": 0, "quarantined": 1}
    with psycopg.connect(empty_db) as c:
        stored = c.execute("SELECT count(*), count(*) FILTER (WHERE status <> 'ok') FROM v_dns_query").fetchone()
        assert stored[0] == 3
        assert c.execute("SELECT sum(n), sum(failures) FROM dns_hourly").fetchone() == stored
        assert c.execute("SELECT sum(n), sum(failures) FROM dns_conn_daily").fetchone() == stored


def test_campaign_validate_cli_names_field(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[campaign]\nname = "x"\n[[vantages]]\nid = "v"\n[kinds.ping]\ntargets = []\n')
    r = subprocess.run([str(ROOT / ".venv" / "bin" / "dnscamp"), "campaign", "validate", str(bad)], capture_output=True, text=True)
    assert r.returncode == 2
    assert f"{bad}: kinds.ping.targets: List should have at least 1 item" in r.stderr


def test_small_input_is_parsed_without_worker_processes_and_large_with(empty_db, tmp_path, monkeypatch):
    import collectors.ingest as ci

    started = []

    class Pool(ci.ProcessPoolExecutor):
        def __init__(self, *a, **kw):
            started.append(a)
            super().__init__(*a, **kw)

    monkeypatch.setattr(ci, "ProcessPoolExecutor", Pool)
    small = tmp_path / "small.jsonl"
    small.write_bytes((V1 / "ping.jsonl").read_bytes())
    assert ingest([small], empty_db).ingested > 0 and started == []  # one run's file: no workers to start
    big = tmp_path / "big.jsonl"
    n = gen(big, 6_000)
    assert big.stat().st_size > ci.SMALL_INPUT_BYTES
    assert ingest([big], empty_db).ingested == n and len(started) == (1 if (os.cpu_count() or 1) > 1 else 0)
