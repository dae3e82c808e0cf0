"""The agent's side of a campaign the operator can trust, against moto's S3 in server mode with
the real boto3 client: the per-instance status object (every field), the run manifest shipped
last and once, spool pruning, the disk floor and the end of life of a firing."""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import os
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from dnscamp import schedule as sch
from dnscamp.spec import loads
from tests.conftest import ROOT
from tests.local.test_infra_modules import VARS, _console, modules  # noqa: F401  (modules: the fixture)
from tests.local.test_pipeline_collect import BUCKET, moto, spool_run  # noqa: F401  (moto: the fixture)
from vantage_agent import agent_state, ship

pytestmark = pytest.mark.local

STATUS_FIELDS = {"schema", "campaign", "vantage", "region", "instance_id", "at", "agent_version", "phase",
                 "launched_at", "last_firing", "firings", "skipped_firings", "last_skipped_at", "pending_units",
                 "runs_incomplete", "disk_free_bytes", "clock_offset_s", "error", "ship"}  # fmt: skip
SPEC = """
[campaign]
name = "eol"
seed = 3
repetitions = 2
[campaign.schedule]
cron = "*/5 * * * *"
jitter_s = 0
max_runtime_s = 60
[[vantages]]
id = "here"
provider = "local"
[kinds.ping]
targets = ["127.0.0.1"]
protocol = "udp"
port = 9
count = 1
interval_ms = 5
timeout_ms = 50
[fleet]
results_bucket = "results-test"
home_region = "us-east-1"
days = 1
"""


@pytest.fixture()
def agent(monkeypatch, tmp_path):
    """This machine as fleet instance i-0test of vantage v1 in eu-central-1 (its home in tmp_path)."""
    monkeypatch.setenv("DNSCAMP_INSTANCE_ID", "i-0test")
    monkeypatch.setenv("DNSCAMP_REGION", "eu-central-1")
    monkeypatch.setenv("DNSCAMP_HOME", str(tmp_path))
    monkeypatch.delenv("DNSCAMP_VANTAGE", raising=False)
    return tmp_path


def get(client, key: str) -> bytes:
    return client.get_object(Bucket=BUCKET, Key=key)["Body"].read()


def status_of(client, campaign="c", vantage="v1") -> dict:
    return json.loads(get(client, ship.status_key(campaign, vantage, "eu-central-1", "i-0test")))


def planned(run_dir: Path, units: list[str]) -> None:
    (run_dir / ship.PLANNED).write_text(json.dumps({"units": units}))


def test_the_manifest_goes_last_once_and_names_every_object_by_sha256_and_records(moto, agent):  # noqa: F811
    spool = agent / "spool"
    spool_run(spool, "c", "r1", units=3, per_unit=4)
    planned(spool / "c/r1", [f"unit{u:03d}" for u in range(4)])  # one unit planned that never ran
    har = spool / "c/r1/artifacts/har/page.har"
    har.parent.mkdir(parents=True)
    har.write_text('{"log": {}}')
    out = ship.ship_and_report(spool, BUCKET, "v1")
    assert (out["shipped"], out["artifacts_shipped"], out["manifests_shipped"], out["pending"]) == (3, 1, 1, 0)
    ledger = [json.loads(ln) for ln in (spool / "c/r1" / ship.LEDGER).read_text().splitlines()]
    assert [next(k for k in ("unit", "artifact", "manifest") if k in e) for e in ledger] == ["unit"] * 3 + ["artifact", "manifest"]
    m = json.loads(get(moto.client, "results/c/v1/r1/manifest.json"))
    assert (m["schema"], m["campaign"], m["vantage"], m["run"], m["region"], m["instance_id"]) == (
        1, "c", "v1", "r1", "eu-central-1", "i-0test")
    assert m["units_planned"] == ["unit000", "unit001", "unit002", "unit003"] and m["complete"] == {}
    for o in m["objects"]:  # what S3 holds is what the manifest says, byte for byte
        body = get(moto.client, o["key"])
        assert hashlib.sha256(body).hexdigest() == o["sha256"] and len(body) == o["bytes"]
        assert o["records"] == len(gzip.decompress(body).splitlines()) == 4
    (a,) = m["artifacts"]
    assert a["path"] == "har/page.har" and hashlib.sha256(get(moto.client, a["key"])).hexdigest() == a["sha256"]
    again = ship.ship_and_report(spool, BUCKET, "v1")
    assert (again["shipped"], again["manifests_shipped"], again["already"]) == (0, 0, 3)
    assert sum('"manifest"' in ln for ln in (spool / "c/r1" / ship.LEDGER).read_text().splitlines()) == 1


def test_no_manifest_while_an_object_of_its_run_is_pending(moto, agent):  # noqa: F811
    spool = agent / "spool"
    spool_run(spool, "c", "r1", units=2, per_unit=2)
    spool_run(spool, "c", "r2", units=2, per_unit=2, complete=False)
    planned(spool / "c/r2", ["a", "b", "c"])
    moto.stop()
    down = ship.ship(spool, BUCKET, "v1", client=ship.s3_client(connect_timeout=0.3, read_timeout=1))
    assert down.pending == 3 and down.manifests_shipped == 0  # two units and the manifest after them
    assert ship.backlog(spool, "c") == (2 + 1 + 3, 1)  # r1's units and manifest, r2's three planned units
    moto.start()
    up = ship.ship_and_report(spool, BUCKET, "v1")
    assert (up["shipped"], up["manifests_shipped"], up["pending"]) == (2, 1, 0)
    st = status_of(moto.client)
    assert (st["pending_units"], st["runs_incomplete"]) == (3, 1)  # r2 still going: its units wait


def test_failures_while_s3_was_down_are_told_by_the_first_status_that_gets_through(moto, agent):  # noqa: F811
    """During an outage the status PUT fails like the uploads: the operator learns of it from
    the next status that reaches S3 (and `fleet status` flags ship_errors), then it is cleared."""
    from dnscamp.fleet.status import flags, read_statuses

    spool = agent / "spool"
    spool_run(spool, "c", "r1", units=2, per_unit=2)
    moto.stop()
    down = ship.ship_and_report(spool, BUCKET, "v1", client=ship.s3_client(connect_timeout=0.3, read_timeout=1))
    assert down["pending"] == 3 and "status_error" in down and not down["status_objects"]
    kept = agent_state.read(agent, "c")["unreported_errors"]
    assert len(kept) == 2 and "status:" in kept[-1]  # the upload's failure and the status PUT's
    moto.start()
    ship.ship_and_report(spool, BUCKET, "v1")
    st = status_of(moto.client)
    assert st["ship"]["pending"] == 0 and st["ship"]["errors"] == kept[-3:]
    raised = flags(read_statuses(moto.client, BUCKET, "c"), None, datetime.now(timezone.utc))
    assert [f.what for f in raised] == ["ship_errors"], raised
    assert agent_state.read(agent, "c")["unreported_errors"] == []
    ship.ship_and_report(spool, BUCKET, "v1")  # told once: the next status is clean
    assert status_of(moto.client)["ship"]["errors"] == []
    assert flags(read_statuses(moto.client, BUCKET, "c"), None, datetime.now(timezone.utc)) == []


def test_the_status_object_has_every_field_and_the_clock_offset_to_s3(moto, agent, monkeypatch):  # noqa: F811
    spool = agent / "spool"
    spool_run(spool, "c", "r1", units=2, per_unit=2)
    launched = agent_state.ensure_launched(agent, "c")
    out = ship.ship_and_report(spool, BUCKET, "v1")
    assert out["status_object"] == "status/c/v1/eu-central-1/i-0test.json"
    st = status_of(moto.client)
    assert set(st) == STATUS_FIELDS
    assert (st["schema"], st["phase"], st["launched_at"], st["firings"], st["skipped_firings"]) == (1, "measuring", launched, 0, 0)
    assert (st["pending_units"], st["runs_incomplete"], st["error"], st["last_firing"]) == (0, 0, None, None)
    assert st["ship"] == {"shipped": 3, "pending": 0, "errors": []} and st["disk_free_bytes"] > 0
    assert abs(st["clock_offset_s"]) < 1.5  # one clock: the offset is the Date header's rounding only
    # a clock two minutes ahead (every PUT of the next call sees it): the status says so
    monkeypatch.setattr(ship, "wall_clock", lambda: time.time() + 120)  # moto, in this process, keeps the true one
    spool_run(spool, "c", "r2", units=3, per_unit=1)
    ship.ship_and_report(spool, BUCKET, "v1")
    assert abs(status_of(moto.client)["clock_offset_s"] - 120) < 1.5
    assert abs(agent_state.read(agent, "c")["clock_offset_s"] - 120) < 1.5  # kept for a status with no PUT before it


def test_spool_files_shipped_whole_are_pruned_after_the_days_and_never_shipped_again(moto, agent):  # noqa: F811
    spool = agent / "spool"
    spool_run(spool, "c", "old", units=3, per_unit=2)
    spool_run(spool, "c", "unshipped", units=1, per_unit=2)
    ship.ship(spool, BUCKET, "v1", campaign="c")
    # a run whose manifest did not go: never pruned, however old
    lines = (spool / "c/unshipped" / ship.LEDGER).read_text().splitlines()
    (spool / "c/unshipped" / ship.LEDGER).write_text("\n".join(ln for ln in lines if '"manifest"' not in ln) + "\n")
    later = datetime.now(timezone.utc) + timedelta(days=8)
    assert ship.prune(spool, "c", 7, now=datetime.now(timezone.utc)) == {"runs": 0, "files": 0, "bytes": 0}
    pruned = ship.prune(spool, "c", 7, now=later)
    assert (pruned["runs"], pruned["files"]) == (1, 3) and pruned["bytes"] > 0
    assert not list((spool / "c/old").glob("*.jsonl")) and len(list((spool / "c/unshipped").glob("*.jsonl"))) == 1
    assert {p.name for p in (spool / "c/old").iterdir()} == {ship.LEDGER, ship.COMPLETE}
    again = ship.ship(spool, BUCKET, "v1", campaign="c")
    assert (again.shipped, again.manifests_shipped) == (0, 1)  # only the unshipped run's manifest
    assert ship.backlog(spool, "c") == (0, 0)


def _spec(tmp: Path) -> tuple:
    p = tmp / "eol.toml"
    p.write_text(SPEC)
    return loads(SPEC, str(p)), p


def _shipper(spool: Path, home: Path):
    return lambda phase="measuring", error=None: ship.ship_and_report(spool, BUCKET, "v1", campaign="eol", home=home,
                                                                      phase=phase, error=error)  # fmt: skip


def test_below_the_disk_floor_a_firing_ships_and_prunes_but_does_not_measure(moto, agent):  # noqa: F811
    spec, path = _spec(agent)
    spool = agent / "spool"
    spool_run(spool, "eol", "r1", units=2, per_unit=1)
    log = logging.getLogger("test.disk_floor")
    res = sch.fire(spec, path, home=agent, spool_dir=spool, log=log, ship=_shipper(spool, agent),
                   disk_free=lambda p: 1023 << 20)  # fmt: skip
    assert (res.run, res.phase, res.shipped["shipped"]) == (None, "disk_floor", 2)
    assert sorted(p.name for p in (spool / "eol").iterdir()) == ["r1"]  # no new run
    st = status_of(moto.client, "eol")
    assert st["phase"] == "disk_floor" and st["error"]["step"] == "disk_floor" and "1023 MiB free" in st["error"]["log_tail"][0]
    assert st["firings"] == 0
    ok = sch.fire(spec, path, home=agent, spool_dir=spool, log=log, ship=_shipper(spool, agent), disk_free=lambda p: 1024 << 20)
    assert ok.phase == "measuring" and ok.run and ok.exit_code == 0
    st = status_of(moto.client, "eol")
    assert (st["phase"], st["error"], st["firings"], st["last_firing"]["run"]) == ("measuring", None, 1, ok.run)


def test_after_its_days_an_agent_ships_everything_writes_ended_removes_its_schedule_and_shuts_down(moto, agent, monkeypatch):  # noqa: F811
    monkeypatch.setenv("DNSCAMP_CRON_D", str(agent / "cron.d"))
    (agent / "cron.d").mkdir()
    spec, path = _spec(agent)
    spool = agent / "spool"
    sch.install(spec.campaign.schedule, "eol", path, agent)  # launched now: the first firing measures
    log = logging.getLogger("test.eol")
    first = sch.fire(spec, path, home=agent, spool_dir=spool, log=log)  # shipping nowhere: the run stays in the spool
    assert first.phase == "measuring" and first.exit_code == 0
    run_dir = spool / "eol" / first.run
    (run_dir / "complete.json").unlink()  # as if killed before its last unit
    sorted(run_dir.glob("*.jsonl"))[0].unlink()
    with agent_state.updating(agent, "eol") as st:  # two days later; [fleet] days = 1
        st["launched_at"] = (datetime.now(timezone.utc) - timedelta(days=2)).isoformat()
    shutdowns = []
    moto.stop()  # S3 down at the end: nothing removed, nothing shut down, the next firing tries again
    res = sch.fire(spec, path, home=agent, spool_dir=spool, log=log, shutdown=lambda: shutdowns.append(1),
                   ship=lambda phase="measuring", error=None: ship.ship_and_report(
                       spool, BUCKET, "v1", campaign="eol", home=agent, phase=phase,
                       client=ship.s3_client(connect_timeout=0.3, read_timeout=1)))  # fmt: skip
    assert (res.phase, res.run, shutdowns) == ("ended", None, []) and sch.installed("eol")
    complete = json.loads((run_dir / "complete.json").read_text())
    assert complete["units_not_run"] == 1 and complete["closed_at_end_of_life"]
    moto.start()
    res = sch.fire(spec, path, home=agent, spool_dir=spool, log=log, ship=_shipper(spool, agent),
                   shutdown=lambda: shutdowns.append(1))  # fmt: skip
    assert res.phase == "ended" and shutdowns == [1] and not sch.installed("eol")
    st = status_of(moto.client, "eol")
    assert (st["phase"], st["pending_units"], st["runs_incomplete"], st["firings"]) == ("ended", 0, 0, 1)
    m = json.loads(get(moto.client, f"results/eol/v1/{first.run}/manifest.json"))
    assert len(m["units_planned"]) == 2 and len(m["objects"]) == 2
    assert agent_state.read(agent, "eol")["ended_at"]


def test_the_shutdown_at_the_end_runs_only_where_the_user_data_asked_for_it(tmp_path, monkeypatch):
    fake = tmp_path / "bin" / "shutdown"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\necho \"$@\" >> {tmp_path}/calls\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("DNSCAMP_SHUTDOWN_AT_END", raising=False)
    log = logging.getLogger("test.shutdown")
    sch.shutdown_at_end(log)
    assert not (tmp_path / "calls").exists()
    monkeypatch.setenv("DNSCAMP_SHUTDOWN_AT_END", "1")
    sch.shutdown_at_end(log)
    assert (tmp_path / "calls").read_text() == "-h +1\n"


PUT_STATUS = Path(__file__).resolve().parents[2] / "infra" / "modules" / "vantage" / "put_status.py"


def _reset_auth(url: str, count: str) -> None:
    """moto's IAM enforcement: '0' checks every request's signature and policy from now on."""
    import urllib.request

    req = urllib.request.Request(f"{url}/moto-api/reset-auth", data=count.encode(), method="POST",
                                 headers={"Content-Type": "application/octet-stream"})  # fmt: skip
    urllib.request.urlopen(req, timeout=10).read()


def test_the_bootstraps_stdlib_put_is_signed_as_s3_checks_it_and_writes_the_agents_schema(moto, tmp_path):  # noqa: F811
    import subprocess
    import sys

    import boto3

    iam = boto3.client("iam", endpoint_url=moto.url)
    trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}]}
    role = iam.create_role(RoleName="boot", AssumeRolePolicyDocument=json.dumps(trust))["Role"]
    iam.put_role_policy(RoleName="boot", PolicyName="status", PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "s3:PutObject", "Resource": f"arn:aws:s3:::{BUCKET}/status/c/v1/eu-central-1/*"}]}))
    c = boto3.client("sts", endpoint_url=moto.url).assume_role(RoleArn=role["Arn"], RoleSessionName="i-0boot")["Credentials"]
    env_file = tmp_path / "vantage.env"
    env_file.write_text(f"DNSCAMP_CAMPAIGN=c\nDNSCAMP_VANTAGE=v1\nDNSCAMP_REGION=eu-central-1\nDNSCAMP_RESULTS_BUCKET={BUCKET}\n"
                        "DNSCAMP_AGENT_VERSION=0.1.0\n")  # fmt: skip
    log = tmp_path / "bootstrap.log"
    log.write_text("".join(f"line {i}\n" for i in range(30)))
    env = {"PATH": os.environ["PATH"], "AWS_ENDPOINT_URL_S3": moto.url, "DNSCAMP_INSTANCE_ID": "i-0boot",
           "AWS_ACCESS_KEY_ID": c["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": c["SecretAccessKey"],
           "AWS_SESSION_TOKEN": c["SessionToken"]}  # fmt: skip

    def run(*args, **over):
        return subprocess.run([sys.executable, "-I", str(PUT_STATUS), "--env-file", str(env_file), *args],
                              env={**env, **over}, capture_output=True, text=True, timeout=60)  # fmt: skip

    _reset_auth(moto.url, "0")
    try:
        ok = run("--phase", "bootstrap_error", "--step", "install the agent: line 12: exit 1: pip install", "--log", str(log))
        bad = run("--phase", "bootstrap", AWS_SECRET_ACCESS_KEY="not-the-secret")
        elsewhere = run("--phase", "bootstrap", DNSCAMP_VANTAGE="v2")  # a key outside the role's grant
    finally:
        _reset_auth(moto.url, "inf")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip() == "status/c/v1/eu-central-1/i-0boot.json"
    assert bad.returncode == 1 and "SignatureDoesNotMatch" in bad.stderr and "not-the-secret" not in bad.stderr
    assert elsewhere.returncode == 1 and "AccessDenied" in elsewhere.stderr
    assert c["SecretAccessKey"] not in ok.stdout + ok.stderr + bad.stderr + elsewhere.stderr
    st = json.loads(get(moto.client, "status/c/v1/eu-central-1/i-0boot.json"))
    assert set(st) == STATUS_FIELDS and (st["phase"], st["instance_id"], st["agent_version"]) == ("bootstrap_error", "i-0boot", "0.1.0")
    assert st["error"] == {"step": "install the agent: line 12: exit 1: pip install",
                           "log_tail": [f"line {i}" for i in range(10, 30)]}  # fmt: skip
    assert (st["firings"], st["pending_units"], st["last_firing"], st["ship"]) == (0, 0, None, {"shipped": 0, "pending": 0, "errors": []})


def test_the_user_data_embeds_put_status_byte_for_byte_and_its_bootstrap_parses(modules, tmp_path):  # noqa: F811
    import base64
    import subprocess

    import yaml

    text = _console(modules / "vantage", "nonsensitive(local.user_data)", VARS["vantage"])
    files = {f["path"]: f for f in yaml.safe_load(text)["write_files"]}
    f = files["/usr/local/lib/dnscamp/put_status.py"]
    assert f["encoding"] == "gz+b64" and gzip.decompress(base64.b64decode(f["content"])) == PUT_STATUS.read_bytes()
    assert files["/etc/dnscamp/ec2.env"]["content"] == "DNSCAMP_SHUTDOWN_AT_END=1\n"
    spec = files["/etc/dnscamp/campaign.toml"]
    assert gzip.decompress(base64.b64decode(spec["content"])).decode() == VARS["vantage"]["spec_toml"]
    script = files["/usr/local/sbin/dnscamp-bootstrap"]["content"]
    assert script.startswith("#!/bin/bash\n") and "set -Eeuo pipefail" in script and "trap 'failed $? $LINENO' ERR" in script
    assert script.index("report bootstrap ") < script.index("curl ")  # the start status comes before any step that can fail
    (tmp_path / "bootstrap").write_text(script)
    p = subprocess.run(["bash", "-n", str(tmp_path / "bootstrap")], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    # EC2 refuses user data over 16 KiB: the flagship spec with presigned URLs of a session's length
    url = VARS["vantage"]["agent_wheel_url"].split("?")[0] + "?" + "&".join(f"X-Amz-{k}={'A' * n}" for k, n in (
        ("Credential", 80), ("Security-Token", 1200), ("Signature", 64), ("Date", 16), ("Expires", 5)))  # fmt: skip
    big = dict(VARS["vantage"], spec_toml=(ROOT / "campaigns" / "www20-ec2.toml").read_text(), agent_wheel_url=url,
               agent_lock_url=url)  # fmt: skip
    assert len(_console(modules / "vantage", "nonsensitive(local.user_data)", big).encode()) < 16384


def test_the_bootstrap_trap_puts_the_failing_step_and_the_logs_tail(tmp_path):
    """The rendered script's own trap, run with a step that fails: the status reporter is
    called once with bootstrap_error, the step, the line, and no presigned query string."""
    import re
    import subprocess

    tpl = (PUT_STATUS.parent / "user_data.yaml.tftpl").read_text()
    body = re.search(r"- path: /usr/local/sbin/dnscamp-bootstrap\n.*?content: \|\n((?:      .*\n|\n)+)", tpl, re.S)[1]
    script = "".join(ln[6:] + "\n" for ln in body.splitlines())
    head = script[: script.index('step="download the agent"')]  # the trap and the start status, as rendered
    head = head.replace("/var/log/dnscamp-bootstrap.log", str(tmp_path / "boot.log"))
    head = head.replace("python3 /usr/local/lib/dnscamp/put_status.py", f"{tmp_path}/put_status")
    (tmp_path / "put_status").write_text(f"#!/bin/sh\nprintf '%s|' \"$@\" >> {tmp_path}/calls; echo >> {tmp_path}/calls\n")
    (tmp_path / "put_status").chmod(0o755)
    (tmp_path / "boot").write_text(head + 'step="download the agent"\necho working\nfalse \'https://b.example/x.whl?X-Amz-Signature=ab12\'\necho never\n')
    p = subprocess.run(["bash", str(tmp_path / "boot")], capture_output=True, text=True, timeout=30)
    assert p.returncode == 1
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls[0].startswith("--phase|bootstrap|--step|start|--log|")
    assert len(calls) == 2 and calls[1].startswith("--phase|bootstrap_error|--step|download the agent: line ")
    assert calls[1].split("|")[3].endswith(": exit 1: false 'https://b.example/x.whl") and "Signature" not in calls[1]
    log = (tmp_path / "boot.log").read_text()
    assert "working" in log and "never" not in log and "failed at line" in log
