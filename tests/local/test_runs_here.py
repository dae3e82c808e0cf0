"""What a machine runs: the local and testbed vantages here; on a fleet instance (user data's
DNSCAMP_VANTAGE / DNSCAMP_REGION) exactly its own vantage, recorded with its own region, under
run ids that two instances of one vantage cannot share."""

import json

import pytest

from dnscamp import runner
from dnscamp.spec import loads
from vantage_agent.records import Vantage

SPEC = """
[campaign]
name = "here"
[[vantages]]
id = "seoul4g"
provider = "ec2"
regions = ["ap-northeast-2", "eu-central-1"]
[[vantages]]
id = "other"
provider = "ec2"
region = "us-east-2"
[[vantages]]
id = "lab"
provider = "local"
[fleet]
results_bucket = "here-results"
home_region = "us-east-2"
[kinds.ping]
targets = ["127.0.0.1"]
count = 1
"""


@pytest.mark.unit
def test_runs_here_without_and_with_a_fleet_identity(monkeypatch):
    ec2, local, tb = Vantage(id="seoul4g", provider="ec2"), Vantage(id="lab", provider="local"), Vantage(id="testbed", provider="testbed")
    monkeypatch.delenv("DNSCAMP_VANTAGE", raising=False)
    assert [runner.runs_here(v) for v in (ec2, local, tb)] == [False, True, True]
    assert runner.fleet_identity() is None and "-" not in runner.new_run_id()
    monkeypatch.setenv("DNSCAMP_VANTAGE", "seoul4g")
    monkeypatch.setenv("DNSCAMP_REGION", "ap-northeast-2")
    assert [runner.runs_here(v) for v in (ec2, local, tb)] == [True, False, False]
    assert not runner.runs_here(Vantage(id="testbed", provider="testbed")) and not runner.runs_here(Vantage(id="x", provider="ec2"))
    ids = {runner.new_run_id() for _ in range(50)}
    assert len(ids) == 50 and all("-ap-northeast-2-" in i for i in ids)


@pytest.mark.local  # runs a ping unit on loopback
def test_a_fleet_instance_runs_its_own_vantage_with_its_region(tmp_path, monkeypatch):
    monkeypatch.setenv("DNSCAMP_VANTAGE", "seoul4g")
    monkeypatch.setenv("DNSCAMP_REGION", "ap-northeast-2")
    summary = runner.run(loads(SPEC, "here.toml"), spool_dir=tmp_path, show_progress=False)
    assert summary.units_run == 1
    recs = [json.loads(line) for f in (tmp_path / "here").rglob("*.jsonl") for line in f.read_text().splitlines()]
    assert [(r["vantage"]["id"], r["vantage"]["provider"], r["vantage"]["region"]) for r in recs] == [
        ("seoul4g", "ec2", "ap-northeast-2")]
