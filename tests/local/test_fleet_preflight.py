"""The fleet's preflight: offline (the schedule fires within [fleet] days whatever the launch
time, names and counts within the limits) and online against moto in server mode (default VPCs,
instance types offered, vCPUs in use, buckets), with the Service Quotas answer replayed from a
response in the documented shape through botocore's Stubber, as moto implements Service Quotas
for the vpc service only. `campaign validate` and `fleet apply --dry-run` refuse in one line
each, before any terraform."""

from __future__ import annotations

import json
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from dnscamp.cli import app
from dnscamp.fleet import preflight
from dnscamp.spec import ScheduleSpec, load, loads
from tests.scaffolding.moto_s3 import FAKE_AWS, free_port

pytestmark = pytest.mark.local
REPO = Path(__file__).resolve().parents[2]
QUOTA = json.loads((REPO / "tests/fixtures/aws/service-quotas-get_service_quota-ec2-L-1216C47A.json").read_text())
QUOTA.pop("//")
AMI = "ami-1e749f67"  # an image moto ships in every region
START = datetime(2026, 1, 1, tzinfo=timezone.utc)

SPEC = """
[campaign]
name = "pf"
{schedule}
[[vantages]]
id = "alpha"
provider = "ec2"
{where}
instance_type = "{itype}"
instance_count = {count}
[fleet]
results_bucket = "pf-results"
home_region = "us-east-2"
days = {days}
[kinds.ping]
targets = ["1.1.1.1"]
"""
EVERY_15 = '[campaign.schedule]\ncron = "*/15 * * * *"'


def spec(where='region = "us-east-2"', itype="t3.micro", count=1, days=3, schedule=EVERY_15):
    return loads(SPEC.format(where=where, itype=itype, count=count, days=days, schedule=schedule), "f.toml")


# --- offline --------------------------------------------------------------------------------


def test_every_shipped_campaign_with_ec2_vantages_passes_validate():
    checked = []
    for path in sorted((REPO / "campaigns").rglob("*.toml")):
        if not load(path).ec2_vantages():
            continue
        r = CliRunner().invoke(app, ["campaign", "validate", str(path)])
        assert r.exit_code == 0, r.output
        checked.append(path.name)
    assert {"www20-ec2.toml", "rehearsal.toml"} <= set(checked)


def test_www20_without_its_schedule_is_refused_in_one_line(tmp_path):
    text = (REPO / "campaigns/www20-ec2.toml").read_text()
    start, end = text.index("[campaign.schedule]"), text.index("max_runtime_s = 780\n") + len("max_runtime_s = 780\n")
    bare = tmp_path / "www20.toml"
    bare.write_text(text[:start] + text[end:])
    r = CliRunner().invoke(app, ["campaign", "validate", str(bare)])
    assert r.exit_code == 2
    lines = [ln for ln in r.output.splitlines() if ln.startswith("dnscamp: ")]
    assert lines == [f"dnscamp: {bare}: campaign.schedule: missing, ec2 vantages need one (their instances install it "
                     "at boot and measure only when it fires; without one they run, and bill, measuring nothing): add "
                     '[campaign.schedule] with cron = "..." (docs/spec.md)'], r.output


def test_www20_fires_through_its_whole_period():
    s = load(REPO / "campaigns/www20-ec2.toml")
    assert s.fleet.days == 26 and preflight.offline(s, "w.toml") == []
    from dnscamp.schedule import next_firings, overlap_warning

    assert overlap_warning(s.campaign.schedule) is None  # a run ends before the next firing: none is skipped
    t = next_firings(s.campaign.schedule, 200, START)
    assert max((b - a).total_seconds() for a, b in zip(t, t[1:])) == 900


@pytest.mark.parametrize("cron, days, field, reason", [
    ("0 0 1 * *", 26, "campaign.schedule.cron", "'0 0 1 * *' can go 31 days without firing, not less than [fleet] days = 26"),
    ("0 3 * * 1", 7, "campaign.schedule.cron", "can go 7 days without firing"),
    ("0 0 31 2 *", 3, "campaign.schedule.cron", "'0 0 31 2 *' never fires (no date matches it)"),
    ("*/10 * * 1-11 *", 20, "campaign.schedule.cron", "an instance launched at 2026-11-30 23:50 UTC would reach its end of life"),
])
def test_a_schedule_that_can_miss_the_campaign_is_one_line(cron, days, field, reason):
    lines = preflight.offline(spec(days=days, schedule=f'[campaign.schedule]\ncron = "{cron}"'), "f.toml")
    assert len(lines) == 1 and lines[0].startswith(f"f.toml: {field}: ") and reason in lines[0], lines


def test_a_run_longer_than_the_campaign_is_refused():
    sched = '[campaign.schedule]\ncron = "*/15 * * * *"\njitter_s = 600\nmax_runtime_s = 86000'
    assert preflight.offline(spec(days=1, schedule=sched), "f.toml") == [
        "f.toml: campaign.schedule.max_runtime_s: jitter_s + max_runtime_s = 86600 s is longer than [fleet] days = 1 "
        "(86400 s): a run could not end before the instances' end of life"]
    assert preflight.offline(spec(days=1.01, schedule=sched), "f.toml") == []


def test_monthly_passes_when_the_campaign_outlasts_the_longest_month():
    assert preflight.offline(spec(days=31.01, schedule='[campaign.schedule]\ncron = "0 0 1 * *"'), "f.toml") == []


def test_campaigns_without_ec2_vantages_have_nothing_to_refuse():
    s = load(REPO / "campaigns/default.toml")
    assert s.campaign.schedule is None and preflight.offline(s, "d.toml") == []


def _brute_longest_wait(cron: str, window_s: float, start: datetime, span_days: int) -> float:
    """The longest wait for a firing of any launch in [start, start + span], from every firing."""
    from croniter import croniter

    it = croniter(cron, start)
    prev, worst = start, 0.0
    while prev < start + timedelta(days=span_days):
        nxt = it.get_next(datetime)
        worst = max(worst, (nxt - prev).total_seconds())
        prev = nxt
    return worst


@settings(max_examples=25, deadline=None)
@given(minute=st.integers(0, 59), hour=st.sampled_from(["3", "*/6", "0,12"]),
       dom=st.sampled_from(["*", "1", "1,15", "*/10", "28-31"]), month=st.sampled_from(["*", "*/3", "1-6", "2"]),
       dow=st.sampled_from(["*", "1", "1-5"]), days=st.floats(2, 120))
def test_the_sampled_longest_wait_agrees_with_every_firing(minute, hour, dom, month, dow, days):
    # daily or sparser crons, so that walking every firing of four years is cheap; launches at
    # any time of the four years (the sampler's horizon starts there too)
    cron = f"{minute} {hour} {dom} {month} {dow}"
    window = days * 86_400
    brute = _brute_longest_wait(cron, window, START.replace(second=30), 1461)
    worst = preflight._longest_wait(cron, window, START)
    assert (worst is not None) == (brute >= window), (cron, days, brute / 86_400, worst)
    if worst is not None:
        assert abs((worst[1] - worst[0]).total_seconds() - brute) < 1 or (worst[1] - worst[0]).total_seconds() >= window


def test_derived_names_aws_would_refuse_name_the_vantage():
    s = spec()
    s.vantages[0].id = "a" * 60  # past the spec's validation: the preflight checks again
    lines = preflight.offline(s, "f.toml")
    assert lines and all(ln.startswith("f.toml: vantages.0.id: ") for ln in lines)
    assert any("iam_role 'dnscamp-pf-" in ln and "AWS accepts at most 64" in ln for ln in lines), lines


# --- online, against moto in server mode ----------------------------------------------------


@pytest.fixture()
def moto(monkeypatch):
    from moto.server import ThreadedMotoServer

    for k, v in FAKE_AWS.items():
        monkeypatch.setenv(k, v)
    for k in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(k, raising=False)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    url = f"http://127.0.0.1:{port}"
    urllib.request.urlopen(urllib.request.Request(f"{url}/moto-api/reset", method="POST"), timeout=10).read()  # state is per process
    yield url
    # moto's state is per process: leave a fresh one (default VPCs back) for the next test here
    urllib.request.urlopen(urllib.request.Request(f"{url}/moto-api/reset", method="POST"), timeout=10).read()
    server.stop()


class Session:
    """A boto3 session on moto whose Service Quotas (and optionally S3) answers are replayed:
    the preflight's own clients and calls, with Stubber checking every request and response
    against botocore's service model."""

    def __init__(self, quota: dict | None = QUOTA, head_bucket_status: int | None = None):
        self.session = boto3.Session()
        self.quota, self.head_bucket_status, self.stubs = quota, head_bucket_status, []

    def client(self, service, **kw):
        c = self.session.client(service, **kw)
        if service == "service-quotas" and self.quota is not None:
            stub = Stubber(c)
            stub.add_response("get_service_quota", self.quota, {"ServiceCode": "ec2", "QuotaCode": "L-1216C47A"})
            stub.activate()
            self.stubs.append(stub)
        if service == "s3" and self.head_bucket_status is not None:
            stub = Stubber(c)
            stub.add_client_error("head_bucket", service_error_code=str(self.head_bucket_status),
                                  http_status_code=self.head_bucket_status, expected_params={"Bucket": "pf-results"})
            stub.activate()
            self.stubs.append(stub)
        return c


def _delete_default_vpc(url: str, region: str) -> None:
    ec2 = boto3.client("ec2", region_name=region, endpoint_url=url)
    vpc = ec2.describe_vpcs(Filters=[{"Name": "isDefault", "Values": ["true"]}])["Vpcs"][0]["VpcId"]
    for sn in ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["Subnets"]:
        ec2.delete_subnet(SubnetId=sn["SubnetId"])
    for gw in ec2.describe_internet_gateways(Filters=[{"Name": "attachment.vpc-id", "Values": [vpc]}])["InternetGateways"]:
        ec2.detach_internet_gateway(InternetGatewayId=gw["InternetGatewayId"], VpcId=vpc)
        ec2.delete_internet_gateway(InternetGatewayId=gw["InternetGatewayId"])
    ec2.delete_vpc(VpcId=vpc)


def test_a_region_without_a_default_vpc_is_refused(moto):
    s = spec(where='regions = ["us-east-2", "eu-central-1"]')
    sess = Session()
    assert preflight.online(s, "f.toml", sess, moto) == []
    _delete_default_vpc(moto, "eu-central-1")
    notes: list[str] = []
    assert preflight.online(s, "f.toml", Session(), moto, notes) == [
        "f.toml: vantages.0.regions.1: eu-central-1 has no default VPC, where the agents run: create one "
        "(aws ec2 create-default-vpc --region eu-central-1) or leave the region out"]
    assert notes == []


def test_a_vcpu_quota_below_the_plan_is_refused_counting_what_runs_there(moto):
    # the recorded quota is 32 vCPUs; m5.2xlarge has 8 (moto's describe_instance_types, as AWS's)
    assert preflight.online(spec(itype="m5.2xlarge", count=4), "f.toml", Session(), moto) == []
    ec2 = boto3.client("ec2", region_name="us-east-2", endpoint_url=moto)
    ec2.run_instances(ImageId=AMI, InstanceType="t3.medium", MinCount=2, MaxCount=2)  # another workload: 2 x 2 vCPUs
    ec2.run_instances(ImageId=AMI, InstanceType="m5.2xlarge", MinCount=1, MaxCount=1,  # this campaign's own agent
                      TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "campaign", "Value": "pf"}]}])
    assert preflight.online(spec(itype="m5.2xlarge", count=3), "f.toml", Session(), moto) == []  # 24 + 4 <= 32
    assert preflight.online(spec(itype="m5.2xlarge", count=4), "f.toml", Session(), moto) == [
        "f.toml: vantages.0.region: us-east-2: the plan needs 32 vCPUs of on-demand standard instances and 4 already "
        "run there, above the account's quota of 32 (L-1216C47A): request an increase in Service Quotas or plan fewer "
        "or smaller instances"]


def test_an_instance_type_the_region_does_not_offer_is_refused(moto):
    assert preflight.online(spec(itype="zz9.huge"), "f.toml", Session(), moto) == [
        "f.toml: vantages.0.region: instance type zz9.huge is not offered in us-east-2"]


def test_an_unreadable_quota_is_a_note_not_a_refusal(moto):
    # moto has no ec2 quotas: Service Quotas answers NoSuchResource, as it does for some accounts
    notes: list[str] = []
    assert preflight.online(spec(itype="m5.2xlarge", count=2), "f.toml", boto3.Session(), moto, notes) == []
    assert notes == ["f.toml: us-east-2: the vCPU quota L-1216C47A could not be read (Service Quotas refused or does "
                     "not know it): not checked; the plan needs 16 vCPUs"]


@pytest.mark.parametrize("status, reason", [
    (403, "'pf-results' belongs to another AWS account (S3 names are global): pick another name"),
    (404, None),
])
def test_a_bucket_name_another_account_holds_is_refused(moto, status, reason):
    lines = preflight.online(spec(), "f.toml", Session(head_bucket_status=status), moto)
    assert lines == ([f"f.toml: fleet.results_bucket: {reason}"] if reason else [])


def test_apply_dry_run_refuses_before_any_terraform(moto, tmp_path):
    _delete_default_vpc(moto, "eu-central-1")
    path = tmp_path / "pf.toml"
    path.write_text(SPEC.format(where='regions = ["us-east-2", "eu-central-1"]', itype="t3.micro", count=1, days=3,
                                schedule=""))
    build = tmp_path / "build"
    r = CliRunner().invoke(app, ["fleet", "apply", str(path), "--dry-run", "--endpoint-url", moto, "--out", str(build)])
    assert r.exit_code == 2, r.output
    refusals = [ln for ln in r.output.splitlines() if ln.startswith("dnscamp: ") and "note:" not in ln]
    assert refusals == [
        f"dnscamp: {path}: campaign.schedule: missing, ec2 vantages need one (their instances install it at boot and "
        "measure only when it fires; without one they run, and bill, measuring nothing): add [campaign.schedule] with "
        'cron = "..." (docs/spec.md)',
        f"dnscamp: {path}: vantages.0.regions.1: eu-central-1 has no default VPC, where the agents run: create one "
        "(aws ec2 create-default-vpc --region eu-central-1) or leave the region out",
        "dnscamp: fleet: preflight refused pf: nothing was created"]
    assert "fleet: using" not in r.output and not build.exists()  # no render, no terraform
