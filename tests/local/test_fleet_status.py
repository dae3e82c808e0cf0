"""`dnscamp fleet status` against moto in server mode: instances launched by ec2 run_instances
with the fleet's tags in two regions, status objects PUT under the agents' keys
(status/<campaign>/<vantage>/<region>/<instance_id>.json), one per fault an operator must see
plus a healthy one that raises nothing; the real CLI reads them through boto3 and exits 1 when
anything is flagged. Ages (stale, launch grace) are judged at a chosen `now` on the statuses
the same boto3 calls read; hostile status bodies are generated (hypothesis)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs
from typer.testing import CliRunner

from dnscamp.cli import app
from dnscamp.fleet import status as fs
from dnscamp.spec import ScheduleSpec
from tests.scaffolding.moto_s3 import FAKE_AWS, free_port

pytestmark = pytest.mark.local

AMI = "ami-1e749f67"  # an image moto ships in every region
BUCKET = "statusfleet-results"
SPEC = """
[campaign]
name = "{name}"
[campaign.schedule]
cron = "*/15 * * * *"
max_runtime_s = 600
[[vantages]]
id = "alpha"
provider = "ec2"
regions = ["us-east-2", "eu-central-1"]
instance_type = "t3.micro"
instance_count = {count}
[fleet]
results_bucket = "{bucket}"
home_region = "us-east-2"
[kinds.ping]
targets = ["1.1.1.1"]
"""
GIB = 1024**3


@pytest.fixture()
def moto():
    """A moto server of this test's own. moto keeps its state per process, shared by every
    in-process server: a module-scoped one would see what other tests on the same xdist worker
    did meanwhile (a default VPC deleted), so each test starts from a reset state."""
    import urllib.request

    import boto3
    from moto.server import ThreadedMotoServer

    mp = pytest.MonkeyPatch()
    for k, v in FAKE_AWS.items():
        mp.setenv(k, v)
    for k in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        mp.delenv(k, raising=False)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    url = f"http://127.0.0.1:{port}"
    urllib.request.urlopen(urllib.request.Request(f"{url}/moto-api/reset", method="POST"), timeout=10).read()
    s3 = boto3.client("s3", region_name="us-east-2", endpoint_url=url)
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-east-2"})
    try:
        yield {"url": url, "s3": s3, "ec2": {r: boto3.client("ec2", region_name=r, endpoint_url=url)
                                             for r in ("us-east-2", "eu-central-1")}}
    finally:
        server.stop()
        mp.undo()


def launch(m, campaign: str, region: str, n: int, whoami: bool = False) -> list[str]:
    """Instances as the vantage module tags them (campaign, vantage, region, network_profile), or
    as the whoami_dns module tags its server (campaign, role, zone: no agent, no status)."""
    tags = ({"campaign": campaign, "role": "whoami-dns", "zone": "dnstest.example.com"} if whoami else
            {"campaign": campaign, "vantage": "alpha", "region": region, "network_profile": "none"})
    r = m["ec2"][region].run_instances(
        ImageId=AMI, InstanceType="t3.micro", MinCount=n, MaxCount=n,
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}])
    return [i["InstanceId"] for i in r["Instances"]]


def body(campaign: str, region: str, iid: str, **over) -> dict:
    """A healthy agent's status after a firing, every field of the schema present."""
    now = datetime.now(timezone.utc)
    doc = {"schema": 1, "campaign": campaign, "vantage": "alpha", "region": region, "instance_id": iid,
           "at": now.isoformat(), "agent_version": "0.9.0", "phase": "measuring",
           "launched_at": (now - timedelta(hours=2)).isoformat(),
           "last_firing": {"run": "20260101T0015Z-ab12", "started_at": (now - timedelta(minutes=5)).isoformat(),
                           "ended_at": now.isoformat(), "exit_code": 0, "timed_out_units": 0},
           "firings": 8, "skipped_firings": 0, "last_skipped_at": None, "pending_units": 0, "runs_incomplete": 0,
           "disk_free_bytes": 10 * GIB, "clock_offset_s": 0.02, "error": None,
           "ship": {"shipped": 3, "pending": 0, "errors": []}}
    return doc | over


def put(m, campaign: str, region: str, iid: str, doc: dict | bytes) -> str:
    key = f"status/{campaign}/alpha/{region}/{iid}.json"
    m["s3"].put_object(Bucket=BUCKET, Key=key, Body=doc if isinstance(doc, bytes) else json.dumps(doc).encode())
    return key


def spec_file(tmp_path, name: str, count: int):
    p = tmp_path / f"{name}.toml"
    p.write_text(SPEC.format(name=name, count=count, bucket=BUCKET))
    return p


def status_cli(m, spec, *extra):
    return CliRunner().invoke(app, ["fleet", "status", str(spec), "--endpoint-url", m["url"], *extra])


def test_one_status_per_fault_each_flagged_and_the_healthy_one_not(moto, tmp_path):
    m, c = moto, "faults"
    us = launch(m, c, "us-east-2", 5)
    eu = launch(m, c, "eu-central-1", 4)
    healthy, skipped, low_disk, skew, booterr = us
    floor, ended, corrupt, silent = eu
    whoami = launch(m, c, "us-east-2", 1, whoami=True)[0]  # never writes a status, and must not be flagged for it
    now = datetime.now(timezone.utc)
    put(m, c, "us-east-2", healthy, body(c, "us-east-2", healthy))
    put(m, c, "us-east-2", skipped, body(c, "us-east-2", skipped, skipped_firings=3,
                                         last_skipped_at=now.isoformat()))
    put(m, c, "us-east-2", low_disk, body(c, "us-east-2", low_disk, disk_free_bytes=300 * 1024 * 1024))
    put(m, c, "us-east-2", skew, body(c, "us-east-2", skew, clock_offset_s=-120.4))
    put(m, c, "us-east-2", booterr, body(
        c, "us-east-2", booterr, phase="bootstrap_error", agent_version=None, last_firing=None, firings=0,
        pending_units=0, disk_free_bytes=None, clock_offset_s=None, ship=None,
        error={"step": "schedule install", "log_tail": ["line 1", "dnscamp: campaign.schedule: missing"]}))
    put(m, c, "eu-central-1", floor, body(c, "eu-central-1", floor, phase="disk_floor", disk_free_bytes=900 * 1024 * 1024,
                                          error={"step": "disk_floor", "log_tail": []}))
    put(m, c, "eu-central-1", ended, body(c, "eu-central-1", ended, phase="ended"))
    put(m, c, "eu-central-1", corrupt, b'{"schema": 1, "phase": "meas')
    # `silent` wrote nothing: with a zero grace it is overdue

    r = status_cli(m, spec_file(tmp_path, c, 2), "--json", "--launch-grace-min", "0")
    assert r.exit_code == 1, r.output
    doc = json.loads(r.output)
    got = {(f["instance_id"], f["what"]) for f in doc["flags"]}
    assert got == {(skipped, "skipped_firings"), (low_disk, "low_disk"), (skew, "clock_skew"),
                   (booterr, "bootstrap_error"), (floor, "disk_floor"), (floor, "low_disk"),
                   (ended, "ended_but_running"), (corrupt, "corrupt"), (silent, "no_status")}
    assert not {f["instance_id"] for f in doc["flags"]} & {healthy, whoami}
    detail = {(f["instance_id"], f["what"]): f["detail"] for f in doc["flags"]}
    assert "3 firing(s) skipped" in detail[(skipped, "skipped_firings")]
    assert "schedule install" in detail[(booterr, "bootstrap_error")] and "campaign.schedule: missing" in detail[(booterr, "bootstrap_error")]
    assert "-120.400 s" in detail[(skew, "clock_skew")]
    assert detail[(corrupt, "corrupt")].startswith(f"status/{c}/alpha/eu-central-1/{corrupt}.json: not JSON")
    assert "still billing" in detail[(ended, "ended_but_running")]
    assert len(doc["instances"]) == 10 and len(doc["statuses"]) == 8
    assert doc["pending_units"] == 1  # every queue is 0 but the corrupt one's, unknown

    text = status_cli(m, spec_file(tmp_path, c, 2), "--launch-grace-min", "0")
    assert text.exit_code == 1
    assert f"FLAG alpha @ eu-central-1 {silent}: no_status" in text.output and "9 flag(s):" in text.output

    # the status objects alone (a rehearsal's S3, no EC2 to ask): what they say, nothing about instances
    r = status_cli(m, spec_file(tmp_path, c, 2), "--json", "--no-ec2")
    assert r.exit_code == 1 and json.loads(r.output)["instances"] == []
    assert {(f["instance_id"], f["what"]) for f in json.loads(r.output)["flags"]} == \
        got - {(ended, "ended_but_running"), (silent, "no_status")}

    # with the default 20-minute grace, the instance launched a moment ago is not overdue yet
    r = status_cli(m, spec_file(tmp_path, c, 2), "--json")
    assert silent not in {f["instance_id"] for f in json.loads(r.output)["flags"]}

    # a terminated instance's statuses are history: its ended (or any) status raises nothing
    m["ec2"]["eu-central-1"].terminate_instances(InstanceIds=[ended, floor])
    r = status_cli(m, spec_file(tmp_path, c, 2), "--json", "--launch-grace-min", "0")
    assert not {f["instance_id"] for f in json.loads(r.output)["flags"]} & {ended, floor}


def test_a_healthy_fleet_exits_zero(moto, tmp_path):
    m, c = moto, "healthy"
    ids = {r: launch(m, c, r, 1)[0] for r in ("us-east-2", "eu-central-1")}
    for r, iid in ids.items():
        put(m, c, r, iid, body(c, r, iid))
    r = status_cli(m, spec_file(tmp_path, c, 1))
    assert r.exit_code == 0, r.output
    assert "no flags" in r.output and "measuring, firings 8, skipped 0, pending 0" in r.output


def test_seen_file_reports_each_skipped_firing_once(moto, tmp_path):
    m, c = moto, "skips"
    iid = launch(m, c, "us-east-2", 1)[0]
    launch(m, c, "eu-central-1", 0 + 1)
    spec, seen = spec_file(tmp_path, c, 1), tmp_path / "seen.json"
    for r in ("us-east-2", "eu-central-1"):
        for i in m["ec2"][r].describe_instances(Filters=[{"Name": "tag:campaign", "Values": [c]}])["Reservations"]:
            for inst in i["Instances"]:
                put(m, c, r, inst["InstanceId"], body(c, r, inst["InstanceId"]))
    put(m, c, "us-east-2", iid, body(c, "us-east-2", iid, skipped_firings=2, last_skipped_at="2026-01-01T00:15:00+00:00"))
    first = status_cli(m, spec, "--json", "--seen", str(seen))
    assert first.exit_code == 1 and "2 new, 2 firing(s)" in first.output
    assert json.loads(seen.read_text())[iid] == 2
    assert status_cli(m, spec, "--seen", str(seen)).exit_code == 0  # nothing new since
    put(m, c, "us-east-2", iid, body(c, "us-east-2", iid, skipped_firings=3, last_skipped_at="2026-01-01T01:15:00+00:00"))
    again = status_cli(m, spec, "--json", "--seen", str(seen))
    assert again.exit_code == 1 and "1 new, 3 firing(s)" in again.output


def test_stale_is_judged_on_s3s_clock_at_two_intervals_plus_the_longest_run(moto):
    m, c = moto, "stale"
    iid = launch(m, c, "us-east-2", 1)[0]
    put(m, c, "us-east-2", iid, body(c, "us-east-2", iid, at="2001-01-01T00:00:00+00:00"))  # agent clock far off
    sts = fs.read_statuses(m["s3"], BUCKET, c)
    written = sts[0]["last_modified"]
    inst = [{"id": iid, "state": "running", "vantage": "alpha", "region": "us-east-2", "launched": written}]
    limit = fs.stale_minutes(ScheduleSpec(cron="*/15 * * * *", max_runtime_s=600))
    assert limit == pytest.approx(2 * 15 + 10)
    assert fs.flags(sts, inst, written + timedelta(minutes=limit - 1), stale_min=limit) == []
    late = fs.flags(sts, inst, written + timedelta(minutes=limit + 1), stale_min=limit)
    assert [(f.instance_id, f.what) for f in late] == [(iid, "stale")]
    # no EC2 to ask (the rehearsal): the status alone is judged
    assert [f.what for f in fs.flags(sts, None, written + timedelta(hours=3), stale_min=limit)] == ["stale"]


def test_no_status_after_the_launch_grace():
    launched = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
    inst = [{"id": "i-0abc", "state": "running", "vantage": "v", "region": "eu-west-1", "launched": launched},
            {"id": "i-0def", "state": "terminated", "vantage": "v", "region": "eu-west-1", "launched": launched}]
    assert fs.flags([], inst, launched + timedelta(minutes=19)) == []
    late = fs.flags([], inst, launched + timedelta(minutes=21))
    assert [(f.instance_id, f.what) for f in late] == [("i-0abc", "no_status")] and "launched 21 min ago" in late[0].detail


@pytest.mark.parametrize("cron,runtime,jitter,want_min", [
    ("17 */3 * * *", 3600, 0, 2 * 180 + 60),
    ("0 9 * * 1-5", 600, 300, 2 * 3 * 24 * 60 + 10 + 5),  # Friday 09:00 -> Monday 09:00 is the longest gap
    ("*/7 * * * *", 60, 0, 2 * 7 + 1),
])
def test_stale_minutes_follow_the_schedules_longest_gap(cron, runtime, jitter, want_min):
    assert fs.stale_minutes(ScheduleSpec(cron=cron, max_runtime_s=runtime, jitter_s=jitter)) == pytest.approx(want_min)
    assert fs.stale_minutes(None) == fs.DEFAULT_STALE_MIN


KEY = "status/c/v/eu-west-1/i-0123456789abcdef0.json"


@settings(max_examples=300, deadline=None)
@given(hs.binary(max_size=400) | hs.text(max_size=200).map(str.encode))
def test_any_body_parses_or_is_one_corrupt_line_naming_the_key(raw):
    st = fs.parse(KEY, raw, "c")
    if "corrupt" in st:
        assert st["corrupt"].startswith(KEY + ": ") and "\n" not in st["corrupt"] and len(st["corrupt"]) <= 300
        assert (st["vantage"], st["region"], st["instance_id"]) == ("v", "eu-west-1", "i-0123456789abcdef0")
    else:
        assert set(fs._FIELDS) <= set(st)


JSONISH = hs.recursive(hs.none() | hs.booleans() | hs.integers() | hs.floats(allow_nan=False) | hs.text(max_size=8),
                       lambda c: hs.lists(c, max_size=3) | hs.dictionaries(hs.text(max_size=5), c, max_size=3),
                       max_leaves=6)


@settings(max_examples=300, deadline=None)
@given(field=hs.sampled_from(sorted(fs._FIELDS)), value=JSONISH)
def test_a_wrong_field_is_named_and_a_right_one_passes(field, value):
    doc = body("c", "eu-west-1", "i-0123456789abcdef0")
    doc["vantage"] = "v"
    assert "corrupt" not in fs.parse(KEY, json.dumps(doc).encode(), "c")
    doc[field] = value
    st = fs.parse(KEY, json.dumps(doc).encode(), "c")
    if "corrupt" in st:
        assert f": {field}" in st["corrupt"] or field == "error" and "error.step" in st["corrupt"]
        assert fs.flags([st], None, datetime.now(timezone.utc))[0].what == "corrupt"
    else:  # only a value of the field's type (or null where allowed) that the schema accepts
        types, nullable = fs._FIELDS[field]
        assert (value is None and nullable) or (isinstance(value, types) and not isinstance(value, bool))


@settings(max_examples=200, deadline=None)
@given(hs.lists(hs.one_of(hs.integers(0, 10**6), hs.none(), hs.just("corrupt")), max_size=12))
def test_pending_total_counts_unknown_queues_as_not_empty(queues):
    sts = [{"instance_id": f"i-{n}", "corrupt": "x"} if q == "corrupt" else {"instance_id": f"i-{n}", "pending_units": q}
           for n, q in enumerate(queues)]
    want = sum(q if isinstance(q, int) else 1 for q in queues)
    assert fs.pending_total(sts) == want
    assert fs.pending_total(sts, []) == 0
    assert (fs.pending_total(sts) == 0) == all(q == 0 for q in queues)
