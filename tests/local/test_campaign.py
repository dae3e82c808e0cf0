"""Campaign runner end to end on loopback: spec -> agent -> spool -> ingest; resume; failures."""

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import psycopg
import pytest

from collectors.ingest import ingest
from dnscamp import runner
from dnscamp.spec import loads

pytestmark = pytest.mark.local
ROOT = Path(__file__).resolve().parents[2]

SPEC = """
[campaign]
name = "{name}"
seed = 5
repetitions = {reps}
[[vantages]]
id = "here"
provider = "local"
[kinds.ping]
targets = {targets}
protocol = "{proto}"
port = {port}
count = {count}
interval_ms = {interval}
timeout_ms = 300
"""


def spec(name="c", reps=1, targets='["127.0.0.1"]', proto="icmp", port=33434, count=2, interval=5):
    return loads(SPEC.format(name=name, reps=reps, targets=targets, proto=proto, port=port, count=count, interval=interval))


def records(run_dir: Path):
    out = []
    for f in sorted(run_dir.glob("*.jsonl")):
        out.extend(json.loads(l) for l in f.read_text().splitlines())
    return out


def test_run_writes_one_file_per_unit_and_ingests(tmp_path, empty_db):
    s = spec(reps=3, targets='["127.0.0.1", "localhost"]')
    summary = runner.run(s, spool_dir=tmp_path, show_progress=False)
    assert summary.units_total == 6 and summary.units_run == 6 and summary.statuses == {"ok": 6}
    recs = records(summary.run_dir)
    assert len(recs) == 6 and all(r["status"] == "ok" and r["body"]["received"] == 2 for r in recs)
    assert {r["unit"] for r in recs} == {p.stem for p in summary.run_dir.glob("*.jsonl")}
    assert all(r["env"]["kernel"] for r in recs)
    assert (summary.run_dir / "complete.json").exists()
    plan = json.loads((summary.run_dir / "plan.json").read_text())
    assert plan["seed"] == 5 and len(plan["order"]) == 6
    assert ingest([summary.run_dir], empty_db).as_json() == {"ingested": 6, "duplicates": 0, "quarantined": 0}


def test_udp_ping_to_closed_port_and_silent_server(tmp_path):
    silent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    silent.bind(("127.0.0.1", 0))
    port = silent.getsockname()[1]
    try:
        closed = runner.run(spec(name="u1", proto="udp", port=9), spool_dir=tmp_path, show_progress=False)
        r = records(closed.run_dir)[0]
        assert r["status"] == "ok" and r["body"]["reply_kinds"] == ["port_unreachable", "port_unreachable"]
        quiet = runner.run(spec(name="u2", proto="udp", port=port), spool_dir=tmp_path, show_progress=False)
        r = records(quiet.run_dir)[0]
        assert r["status"] == "timeout" and r["body"]["rtts_ms"] == [None, None] and "no reply" in r["error"]
    finally:
        silent.close()


def test_unresolvable_target_is_a_dns_error_record(tmp_path):
    s = spec(name="bad", targets='["no-such-host.invalid"]')
    summary = runner.run(s, spool_dir=tmp_path, show_progress=False)
    (r,) = records(summary.run_dir)
    assert r["status"] == "dns_error" and "no-such-host.invalid" in r["error"]


def test_resume_after_sigkill_redoes_nothing_and_loses_nothing(tmp_path):
    text = SPEC.format(name="resume", reps=12, targets='["127.0.0.1"]', proto="icmp", port=1, count=3, interval=100)
    f = tmp_path / "spec.toml"
    f.write_text(text)
    spool = tmp_path / "spool"
    env = dict(os.environ, DNSCAMP_SPOOL=str(spool))
    cli = [str(ROOT / ".venv" / "bin" / "dnscamp"), "campaign", "run", str(f), "--no-ingest", "--json"]
    p = subprocess.Popen(cli, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    run_dir = None
    deadline = time.time() + 30
    while time.time() < deadline:
        dirs = list((spool / "resume").glob("*")) if (spool / "resume").exists() else []
        if dirs and len(list(dirs[0].glob("*.jsonl"))) >= 3:
            run_dir = dirs[0]
            break
        time.sleep(0.05)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    assert run_dir is not None, "the run never got going"
    before = {q.name: q.read_bytes() for q in run_dir.glob("*.jsonl")}
    assert 3 <= len(before) < 12 and not (run_dir / "complete.json").exists()
    r = subprocess.run(cli, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["resumed"] and out["run"] == run_dir.name
    assert out["units_skipped"] == len(before) and out["units_run"] == 12 - len(before)
    after = {q.name: q.read_bytes() for q in run_dir.glob("*.jsonl")}
    assert len(after) == 12
    assert all(after[k] == v for k, v in before.items())  # finished units untouched
    ids = [json.loads(l)["id"] for b in after.values() for l in b.decode().splitlines()]
    assert len(ids) == len(set(ids)) == 12


def test_crashed_agent_is_a_record_and_the_run_goes_on(tmp_path, monkeypatch):
    # A kind whose run() kills its own agent process: the runner must record it and go on.
    import dnscamp.kinds as registry

    monkeypatch.setitem(registry.KINDS, "ping", "tests.local.crashing_kind:KIND")
    s = spec(name="crash", reps=3)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    summary = runner.run(s, spool_dir=tmp_path, show_progress=False)
    recs = records(summary.run_dir)
    assert len(recs) == 3
    assert all(r["status"] == "other" and "vantage agent exited with code -9" in r["error"] for r in recs)


def test_units_start_in_the_order_of_campaign_plan(tmp_path):
    targets = '["127.0.0.1", "localhost"]'
    text = SPEC.format(name="order", reps=3, targets=targets, proto="icmp", port=1, count=1, interval=5)
    f = tmp_path / "spec.toml"
    f.write_text(text)
    out = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "dnscamp"), "campaign", "plan", str(f), "--json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    planned = [json.loads(line)["id"] for line in out.stdout.splitlines()]
    summary = runner.run(loads(text), spool_dir=tmp_path / "spool", show_progress=False)
    log = [json.loads(line) for line in (summary.run_dir / runner.EXECUTED).read_text().splitlines()]
    assert len(planned) == 6 and [e["unit"] for e in log] == planned
    assert [e["order"] for e in log] == list(range(6)) and {e["where"] for e in log} == {"client"}
    # The records agree: sorted by start time, their units are in plan order too.
    assert [r["unit"] for r in sorted(records(summary.run_dir), key=lambda r: r["started_at"])] == planned
