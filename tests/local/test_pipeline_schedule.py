"""Scheduled firings on this machine: the run stopped at max_runtime_s, a firing
killed mid-run and the next one, and the exact cron line run while the lock is held and then
free (skipped and logged; then run and shipped to moto's S3 server, collected exactly once)."""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collectors import s3 as coll
from dnscamp import schedule as sch
from tests.local.test_pipeline_collect import BUCKET, counts, moto  # noqa: F401  (moto: the fixture)

pytestmark = pytest.mark.local
ROOT = Path(__file__).resolve().parents[2]

SPEC = """
[campaign]
name = "{name}"
seed = 3
repetitions = {reps}
[campaign.schedule]
cron = "*/5 * * * *"
jitter_s = 0
max_runtime_s = {max_runtime}
[[vantages]]
id = "here"
provider = "local"
[kinds.ping]
targets = ["127.0.0.1"]
protocol = "udp"
port = {port}
count = 2
interval_ms = 5
timeout_ms = 250
"""


@pytest.fixture()
def silent_port():
    """A UDP port that never answers: each unit waits its timeouts (~0.5 s), a slow unit."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    yield s.getsockname()[1]
    s.close()


def write_spec(tmp: Path, name: str, reps: int, port: int, max_runtime: float = 300) -> Path:
    p = tmp / f"{name}.toml"
    p.write_text(SPEC.format(name=name, reps=reps, port=port, max_runtime=max_runtime))
    return p


def fire(spec: Path, home: Path, env=None, **kw) -> subprocess.Popen:
    e = dict(os.environ, DNSCAMP_HOME=str(home), **(env or {}))
    e.pop("DNSCAMP_SPOOL", None)
    return subprocess.Popen([sys.executable, "-m", "dnscamp.cli", "schedule", "fire", str(spec)], cwd=ROOT, env=e,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)  # fmt: skip


def unit_files(home: Path, name: str) -> dict[str, list[dict]]:
    out = {}
    for f in sorted((home / "spool" / name).glob("*/*.jsonl")):
        out[f"{f.parent.name}/{f.stem}"] = [json.loads(ln) for ln in f.read_text().splitlines()]
    return out


def test_a_run_past_max_runtime_is_stopped_and_its_units_are_timeouts(tmp_path, silent_port):
    spec = write_spec(tmp_path, "slow", reps=40, port=silent_port, max_runtime=5)
    t0 = time.monotonic()
    out, err = fire(spec, tmp_path).communicate(timeout=60)
    assert time.monotonic() - t0 < 25, "the run was not stopped near max_runtime_s"
    res = json.loads(out.strip().splitlines()[-1])
    assert res["exit_code"] is None and 0 < res["timed_out_units"] < 40
    files = unit_files(tmp_path, "slow")
    assert len(files) == 40 and all(len(recs) == 1 for recs in files.values())  # every unit once
    statuses = [recs[0]["status"] for recs in files.values()]
    assert statuses.count("timeout") >= res["timed_out_units"]
    run_dir = tmp_path / "spool" / "slow" / res["run"]
    assert json.loads((run_dir / "complete.json").read_text())["units_timeout"] == res["timed_out_units"]
    assert "max_runtime_s" in [r for recs in files.values() for r in recs if "stopped" in (r["error"] or "")][0]["error"]
    log = (tmp_path / "logs" / "slow.log").read_text()
    assert "still going at max_runtime_s" in log and "recorded as timeout" in log
    # the next firing resumes nothing: the stopped run is complete, a new run starts
    time.sleep(1.1)  # run ids have a one-second resolution
    out2, _ = fire(spec, tmp_path).communicate(timeout=60)
    res2 = json.loads(out2.strip().splitlines()[-1])
    assert res2["run"] != res["run"] and not res2["resumed"]


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kill_after=st.integers(1, 4))
def test_a_firing_killed_mid_run_is_resumed_by_the_next_without_duplicates(tmp_path_factory, silent_port, kill_after):
    home = tmp_path_factory.mktemp("killed")
    spec = write_spec(home, "k", reps=8, port=silent_port)
    p = fire(spec, home, start_new_session=True)
    deadline = time.monotonic() + 60
    while len(unit_files(home, "k")) < kill_after and time.monotonic() < deadline:
        time.sleep(0.05)
    p.send_signal(signal.SIGKILL)  # the firing only: its run dies with it (PR_SET_PDEATHSIG)
    p.wait()
    before = unit_files(home, "k")
    assert kill_after <= len(before) < 8
    time.sleep(1.0)  # the orphaned agent finishes its unit and sees its stdin close
    out, err = fire(spec, home).communicate(timeout=120)
    res = json.loads(out.strip().splitlines()[-1])
    after = unit_files(home, "k")
    assert res["resumed"] and res["exit_code"] == 0
    assert len(after) == 8 and {k.split("/")[0] for k in after} == {res["run"]}
    assert all(len(recs) == 1 for recs in after.values())
    ids = [recs[0]["id"] for recs in after.values()]
    assert len(set(ids)) == 8
    for k, recs in before.items():  # units done before the kill were not run again
        assert after[k][0]["id"] == recs[0]["id"]


def test_the_cron_line_skips_while_the_lock_is_held_then_runs_and_ships(moto, tmp_path, monkeypatch, empty_db):  # noqa: F811
    monkeypatch.setenv("DNSCAMP_HOME", str(tmp_path))
    monkeypatch.setenv("DNSCAMP_CRON_D", str(tmp_path / "cron.d"))
    (tmp_path / "cron.d").mkdir()
    spec = tmp_path / "cronned.toml"
    spec.write_text(SPEC.format(name="cronned", reps=2, port=9, max_runtime=120).replace('protocol = "udp"', 'protocol = "icmp"'))
    sched_spec = sch.ScheduleSpec(cron="*/5 * * * *", jitter_s=0, max_runtime_s=120)
    sch.install(sched_spec, "cronned", spec, tmp_path)
    (line,) = sch.installed("cronned")
    command = line.split(" ", 6)[6]  # 5 fields, the user, the command: what cron hands to /bin/sh
    env = {"PATH": os.environ["PATH"], "DNSCAMP_RESULTS_BUCKET": BUCKET, "DNSCAMP_VANTAGE": "here",
           "DNSCAMP_REGION": "eu-central-1", "DNSCAMP_INSTANCE_ID": "i-0cron",
           **{k: os.environ[k] for k in os.environ if k.startswith("AWS_") or k == "PYTHONPATH"}}  # fmt: skip
    key = "status/cronned/here/eu-central-1/i-0cron.json"
    with open(sch.lock_path(tmp_path, "cronned"), "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # the previous firing, still running
        skipped = subprocess.run(["/bin/sh", "-c", command], env=env, capture_output=True, text=True, timeout=60)
    assert skipped.returncode == sch.SKIPPED, skipped.stderr
    assert not (tmp_path / "spool" / "cronned").exists()
    assert "firing skipped (1 so far): the previous firing still holds" in (tmp_path / "logs" / "cronned.log").read_text()
    seen = json.loads(moto.client.get_object(Bucket=BUCKET, Key=key)["Body"].read())  # the operator sees the skip
    assert (seen["skipped_firings"], seen["firings"], seen["last_firing"], seen["phase"]) == (1, 0, None, "measuring")
    assert seen["last_skipped_at"] and seen["launched_at"]
    ran = subprocess.run(["/bin/sh", "-c", command], env=env, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    res = json.loads(ran.stdout.strip().splitlines()[-1])
    assert res["shipped"]["shipped"] == 2 and res["shipped"]["status_object"] == key
    assert res["shipped"]["manifests_shipped"] == 1
    seen = json.loads(moto.client.get_object(Bucket=BUCKET, Key=key)["Body"].read())
    assert (seen["skipped_firings"], seen["firings"], seen["pending_units"], seen["runs_incomplete"]) == (1, 1, 0, 0)
    assert seen["last_firing"]["run"] == res["run"] and seen["last_firing"]["exit_code"] == 0
    assert abs(seen["clock_offset_s"]) < 2  # this machine's clock and moto's are the same clock
    manifest = json.loads(moto.client.get_object(Bucket=BUCKET, Key=f"results/cronned/here/{res['run']}/manifest.json")["Body"].read())
    assert len(manifest["units_planned"]) == 2 and sorted(o["unit"] for o in manifest["objects"]) == sorted(manifest["units_planned"])
    st = coll.collect(f"s3://{BUCKET}/results/cronned/", empty_db, client=moto.client)
    assert st.collected == 2 and counts(empty_db) == (2, 2)
    with psycopg.connect(empty_db) as c:
        assert c.execute("SELECT DISTINCT run FROM results").fetchone()[0] == res["run"]
