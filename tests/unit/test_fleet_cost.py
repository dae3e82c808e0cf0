"""`dnscamp fleet cost`: a small spec's bill against one computed by hand, uploads counted as the
agent makes them (objects per firing x firings from the cron), the collector's requests and
egress, the shipped price table (each price dated and sourced, every region and type the
campaigns use), `fleet prices update` on recorded Price List API responses (botocore's Stubber),
and the www20 campaign costed offline within a band of a hand computation."""

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs
from typer.testing import CliRunner

from dnscamp.cli import app
from dnscamp.fleet import cost
from dnscamp.spec import ScheduleSpec, load, loads

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parents[2]

SMALL = """
[campaign]
name = "small"
[[vantages]]
id = "v"
provider = "ec2"
regions = ["us-east-2", "eu-central-1"]
instance_type = "t3.medium"
instance_count = 2
[fleet]
results_bucket = "small-results"
home_region = "us-east-2"
days = 2
upload_mib_per_day = 100
uploads_per_day = 100
egress_gib_per_day = 1.5
[kinds.ping]
targets = ["1.1.1.1"]
[atlas]
name = "small-atlas"
server = "192.0.2.10"
[[atlas.sources]]
country = "DE"
requested = 10
[atlas.zone]
name = "dnstest.example.com"
"""

# A price table of our own, so the hand computation below does not move with AWS's prices.
PRICES = {
    "date": "test", "hours_per_month": 730,
    "regions": {
        "us-east-2": {"instance_hour": {"t3.medium": 0.04}, "ebs_gp3_gb_month": 0.08, "s3_standard_gb_month": 0.02,
                      "s3_put_per_1000": 0.005, "transfer_out_internet_gb": 0.09, "transfer_out_interregion_gb": 0.02,
                      "public_ipv4_hour": 0.005, "s3_get_per_1000": 0.0004, "s3_list_per_1000": 0.005,
                      "s3_transfer_out_internet_gb": 0.09},
        "eu-central-1": {"instance_hour": {"t3.medium": 0.05}, "ebs_gp3_gb_month": 0.1, "s3_standard_gb_month": 0.03,
                         "s3_put_per_1000": 0.006, "transfer_out_internet_gb": 0.1, "transfer_out_interregion_gb": 0.03,
                         "public_ipv4_hour": 0.005},
    },
}


def test_small_spec_bill_matches_the_hand_computation():
    b = cost.bill(loads(SMALL, "small.toml"), PRICES)
    # 2 days = 48 h; 2 instances per region -> 96 instance-hours per region
    us = 96 * 0.04 + 96 * 0.005 + (2 * 16 * 48 / 730) * 0.08 + (2 * 1.5 * 2) * 0.09
    eu = 96 * 0.05 + 96 * 0.005 + (2 * 16 * 48 / 730) * 0.1 + (2 * 1.5 * 2) * 0.1
    eu_uploads = (2 * 100 / 1024 * 2) * 0.03  # eu -> the bucket in us-east-2 is inter-region transfer
    # no schedule: the flat uploads_per_day, 4 instances x 100 x 2 days = 800 PUTs (and as many GETs)
    puts = 800 / 1000 * 0.005
    gets = 800 / 1000 * 0.0004
    lists = (2 * 86_400 / 30 * 1 + 800 / 1000) / 1000 * 0.005  # a pass every 30 s over 1 vantage prefix
    stored = (4 * 100 / 1024 * 2) / 2 * 48 / 730 * 0.02  # 0.78 GiB uploaded, half of it on average, 48 h
    egress = (4 * 100 / 1024 * 2) * 0.09  # the collector outside AWS downloads all of it
    assert b.total_usd == pytest.approx(us + eu + eu_uploads + puts + gets + lists + stored + egress, rel=1e-12)
    # the same, on paper: 5.028329 (us) + 6.090411 (eu) + 0.011719 + 0.004 + 0.00032 + 0.028804 + 0.000514
    # + 0.0703125 = 11.234409 (each term rounded to 1e-6)
    assert b.total_usd == pytest.approx(11.234409, abs=3e-6)
    assert b.per_day_usd == pytest.approx(b.total_usd / 2)
    sub = b.by_kind()
    assert sub["instances"] == pytest.approx(96 * 0.04 + 96 * 0.05) and sub["public IPv4"] == pytest.approx(2 * 96 * 0.005)
    assert sub["S3"] == pytest.approx(puts + gets + lists + stored) and sum(sub.values()) == pytest.approx(b.total_usd)
    # every line says its count x price, and where and when the price was read
    for li in b.to_dict()["lines"]:
        assert li["usd"] == pytest.approx(li["quantity"] * li["unit_price_usd"], abs=1e-4) and li["price_date"] == "test"
    # Atlas (001's discovery), one-off: per probe a UDP DNS result (2 x 10) and a 5 x 48 B ping
    # (2 x 5), then phase 2 one 5-packet ping to its resolver (2 x 5): 10 probes x 40 credits.
    assert b.atlas_credits == 400
    assert not any("whoami" in li.item for li in b.lines)


def test_whoami_server_is_billed_in_the_home_region():
    spec = loads(SMALL.replace('egress_gib_per_day = 1.5', 'egress_gib_per_day = 1.5\nwhoami_zone = "dnstest.example.com"\n'
                               'whoami_instance_type = "t3.medium"'), "w.toml")
    lines = [li for li in cost.bill(spec, PRICES).lines if "whoami" in li.item]
    assert [(li.region, li.quantity, li.unit_price) for li in lines] == [
        ("us-east-2", 48, 0.04), ("us-east-2", 48, 0.005), ("us-east-2", 8 * 48 / 730, 0.08)]


def test_unpriced_region_or_type_is_one_line_naming_it():
    with pytest.raises(cost.CostError, match=r"no on-demand price for m5.2xlarge in us-east-2"):
        cost.bill(loads(SMALL.replace('"t3.medium"', '"m5.2xlarge"'), "x.toml"), PRICES)
    with pytest.raises(cost.CostError, match=r"no prices for region 'ap-south-1'"):
        cost.bill(loads(SMALL.replace('"eu-central-1"]', '"ap-south-1"]'), "x.toml"), PRICES)


def test_price_table_says_date_and_source_of_every_price_and_covers_the_campaigns():
    table = json.loads(cost.PRICES.read_text())
    assert re.match(r"^\d{4}-\d{2}", table["date"])
    assert any(s.startswith("https://aws.amazon.com/ec2/pricing/on-demand") for s in table["sources"])
    assert "not fetched live" in table["not_live"].lower()
    for region, r in table["regions"].items():
        entries = [(f"instance_hour.{k}", v) for k, v in r["instance_hour"].items()]
        entries += [(k, v) for k, v in r.items() if k not in ("name", "pricing_location", "instance_hour")]
        assert {k for k, _ in entries} >= {"ebs_gp3_gb_month", "s3_get_per_1000", "s3_list_per_1000",
                                           "s3_transfer_out_internet_gb", "public_ipv4_hour"}, region
        for name, e in entries:
            assert e["usd"] > 0 and re.match(r"^\d{4}-\d{2}", e["date"]), (region, name)
            assert e["source"].startswith(("https://aws.amazon.com/", "AWS Price List API")), (region, name)
    for path in sorted((REPO / "campaigns").glob("*.toml")):
        spec = load(path)
        if spec.fleet is not None:
            cost.bill(spec, table)  # raises CostError naming any region/type missing from the table


def test_root_volumes_billed_at_the_modules_sizes():
    for module, gib in cost.ROOT_VOLUME_GIB.items():
        main = (REPO / "infra" / "modules" / module / "main.tf").read_text()
        assert re.findall(r"volume_size\s*=\s*(\d+)", main) == [str(gib)], module


def test_www20_costed_offline_on_the_cli():
    r = CliRunner().invoke(app, ["fleet", "cost", str(REPO / "campaigns" / "www20-ec2.toml"), "--json"])
    assert r.exit_code == 0, r.output
    bill = json.loads(r.output)
    hours = [li for li in bill["lines"] if li["item"].startswith("m5.2xlarge instance-hours")]
    assert len(hours) == 20 and {li["quantity"] for li in hours} == {26 * 24}  # 5 regions x 4 conditions, 26 days
    assert bill["per_day_usd"] == pytest.approx(bill["total_usd"] / 26, abs=0.01)
    assert bill["atlas_credits"] > 0 and bill["prices"]["date"] and bill["prices"]["sources"]


def test_cost_without_fleet_section_is_one_line():
    r = CliRunner().invoke(app, ["fleet", "cost", str(REPO / "campaigns" / "default.toml")])
    assert r.exit_code == 2 and "fleet: no [fleet] section" in r.output


SCHEDULED = SMALL.replace('name = "small"\n', 'name = "small"\n[campaign.schedule]\ncron = "{cron}"\nmax_runtime_s = 600\n')
PAGES = """
[campaign]
name = "pages"
[campaign.schedule]
cron = "0 * * * *"
[[vantages]]
id = "v"
provider = "ec2"
region = "us-east-2"
instance_type = "t3.medium"
[fleet]
results_bucket = "pages-results"
home_region = "us-east-2"
days = 1
[kinds.page_load]
urls = ["https://a.example/", "https://b.example/", "https://c.example/"]
browsers = ["firefox"]
dns = ["system", "do53:1.1.1.1"]
http = ["h2"]
[kinds.ping]
targets = ["1.1.1.1", "9.9.9.9"]
"""


def test_uploads_are_counted_as_the_agent_makes_them():
    b = cost.bill(loads(PAGES, "pages.toml"), PRICES)
    # a firing: 3 page-load units + 2 ping units = 5 unit files, 3 sites x 2 DNS modes = 6 HARs,
    # 1 manifest, 1 status: 13 PUTs; 24 firings a day (hourly), 1 instance, 1 day
    assert cost.per_firing(loads(PAGES, "pages.toml")) == {"v": cost.PerFiring(units=5, hars=6)}
    put = next(li for li in b.lines if li.item.startswith("S3 PUT requests, v"))
    assert put.quantity * 1000 == pytest.approx(24 * 13) and "(1 inst x 24/day x 1 d x 13 obj)" in put.item
    get = next(li for li in b.lines if li.item.startswith("S3 GET requests"))
    assert get.quantity * 1000 == pytest.approx(24 * 6)  # unit files and the manifest; HARs and statuses stay
    lst = next(li for li in b.lines if li.item.startswith("S3 LIST requests"))
    assert lst.quantity * 1000 == pytest.approx(86_400 / cost.COLLECTOR_WATCH_S + 24 * 6 / 1000)
    nc = next(li for li in b.lines if li.item.startswith("S3 noncurrent versions"))
    assert nc.quantity == pytest.approx(24 * cost.STATUS_OBJECT_BYTES / 1024**3 * cost.NONCURRENT_EXPIRY_DAYS * 24 / 730)
    assert any("13 PUT(s)" in x for x in b.basis)


@pytest.mark.parametrize("cron,per_day", [("*/15 * * * *", 96), ("17 */3 * * *", 8), ("0 9 * * 1-5", 5 / 7),
                                          ("0 0 1 * *", 1 / 28)])
def test_firings_per_day_from_the_cron(cron, per_day):
    assert cost.firings_per_day(ScheduleSpec(cron=cron)) == pytest.approx(per_day)


def test_collector_inside_aws_pays_no_egress():
    spec = loads(SMALL, "s.toml")
    with_egress = cost.bill(spec, PRICES)
    assert any("to the collector" in li.item for li in with_egress.lines)
    object.__setattr__(spec.fleet, "collector_outside_aws", False)  # the spec field ([fleet] collector_outside_aws)
    inside = cost.bill(spec, PRICES)
    assert not any("to the collector" in li.item for li in inside.lines)
    assert with_egress.total_usd - inside.total_usd == pytest.approx(4 * 100 / 1024 * 2 * 0.09)


@settings(max_examples=40, deadline=None)
@given(a=hs.integers(1, 59), b=hs.integers(1, 59), days=hs.floats(0.5, 60))
def test_more_firings_never_cost_less(a, b, days):
    sparse, dense = sorted((a, b), reverse=True)  # every `sparse` minutes fires no more often than every `dense`
    text = SCHEDULED[: SCHEDULED.index("[atlas]")].replace("days = 2", f"days = {days!r}")  # Atlas credits aside
    specs = [loads(text.format(cron=f"*/{m} * * * *"), "s.toml") for m in (sparse, dense)]
    assert cost.firings_per_day(specs[1].campaign.schedule) >= cost.firings_per_day(specs[0].campaign.schedule)
    assert cost.bill(specs[1], PRICES).total_usd >= cost.bill(specs[0], PRICES).total_usd - 1e-9


def test_www20_within_a_band_of_the_hand_computation():
    """20 m5.2xlarge instances (5 regions x 4 conditions) for 26 days at the table's prices, plus the
    whoami t3.micro, their IPv4 addresses and root volumes: the instance part a reader redoes by
    hand. S3, transfer and requests come on top; they may add at most 5 %."""
    spec = load(REPO / "campaigns" / "www20-ec2.toml")
    table = json.loads(cost.PRICES.read_text())
    if spec.campaign.schedule is None:  # the bill derives uploads from the schedule every ec2 spec needs
        spec.campaign.schedule = ScheduleSpec(cron="*/15 * * * *")
    usd = lambda r, k: table["regions"][r][k]["usd"]  # noqa: E731
    hours = 26 * 24
    regions = ["us-east-2", "us-west-1", "eu-central-1", "ap-southeast-2", "ap-northeast-2"]
    machines = sum(4 * hours * (table["regions"][r]["instance_hour"]["m5.2xlarge"]["usd"] + usd(r, "public_ipv4_hour")
                                + 16 / 730 * usd(r, "ebs_gp3_gb_month")) for r in regions)
    machines += hours * (table["regions"]["us-east-2"]["instance_hour"]["t3.micro"]["usd"]
                         + usd("us-east-2", "public_ipv4_hour") + 8 / 730 * usd("us-east-2", "ebs_gp3_gb_month"))
    b = cost.bill(spec, table)
    assert machines <= b.total_usd <= machines * 1.05, (machines, b.total_usd)
    # at the 2025-01 prices: 20 x 624 h x ~$0.45 = ~$5,600 of instance-hours, ~$222 a day in all
    assert 5_000 < b.total_usd < 6_500


# --- `fleet prices update` on recorded Price List API responses ------------------------------------

FIXTURE = json.loads((REPO / "tests" / "fixtures" / "aws" / "pricing-get_products.json").read_text())


def _stubbed(*answers):
    """A real boto3 pricing client (us-east-1) whose answers come from the recorded responses, each
    request checked against the filters `fleet prices update` must send."""
    import boto3
    from botocore.stub import Stubber

    client = boto3.client("pricing", region_name=cost.PRICING_REGION, aws_access_key_id="AKIAEXAMPLE",
                          aws_secret_access_key="not-a-secret")
    stub = Stubber(client)
    token = None  # a page after one with NextToken must ask for it
    for (itype, location), response in answers:
        expected = {"ServiceCode": "AmazonEC2", "FormatVersion": "aws_v1", "Filters": [
            {"Type": "TERM_MATCH", "Field": "instanceType", "Value": itype},
            {"Type": "TERM_MATCH", "Field": "location", "Value": location},
            {"Type": "TERM_MATCH", "Field": "operatingSystem", "Value": "Linux"},
            {"Type": "TERM_MATCH", "Field": "tenancy", "Value": "Shared"},
            {"Type": "TERM_MATCH", "Field": "preInstalledSw", "Value": "NA"},
            {"Type": "TERM_MATCH", "Field": "capacitystatus", "Value": "Used"}]}
        if token:
            expected["NextToken"] = token
        stub.add_response("get_products", response, expected)
        token = response.get("NextToken")
    stub.activate()
    return client, stub


OHIO = {"date": "2025-01", "hours_per_month": 730, "regions": {"us-east-2": {
    "name": "US East (Ohio)", "pricing_location": "US East (Ohio)",
    "instance_hour": {"m5.2xlarge": {"usd": 0.4, "source": "https://aws.amazon.com/ec2/pricing/on-demand/", "date": "2025-01"}}}}}


def test_prices_update_reads_the_price_list_and_dates_each_price():
    client, stub = _stubbed((("m5.2xlarge", "US East (Ohio)"), FIXTURE["m5.2xlarge us-east-2"]),
                            (("t3.micro", "US East (Ohio)"), FIXTURE["t3.micro us-east-2 page 1"]),
                            (("t3.micro", "US East (Ohio)"), FIXTURE["t3.micro us-east-2 page 2"]))
    new, changed = cost.update_prices(client, OHIO, types=["t3.micro"], today="2026-11-27")
    stub.assert_no_pending_responses()
    ih = new["regions"]["us-east-2"]["instance_hour"]
    assert ih["m5.2xlarge"]["usd"] == 0.384 and ih["t3.micro"]["usd"] == 0.0104  # the OnDemand term, not the Reserved one
    assert {e["date"] for e in ih.values()} == {"2026-11-27"} and new["date"] == "2026-11-27"
    assert ih["m5.2xlarge"]["source"].startswith("AWS Price List API: pricing.get_products(AmazonEC2, instanceType=m5.2xlarge")
    assert "published 2025-11-20T18:33:42Z" in ih["m5.2xlarge"]["source"]
    assert changed == ["m5.2xlarge in us-east-2: $0.4 -> $0.384 per hour", "t3.micro in us-east-2: - -> $0.0104 per hour"]
    assert OHIO["regions"]["us-east-2"]["instance_hour"]["m5.2xlarge"]["usd"] == 0.4  # the input is left alone


@pytest.mark.parametrize("answer,why", [("none", "0 products"), ("m5.2xlarge us-east-2 with sql", None)])
def test_prices_update_wants_exactly_one_product(answer, why):
    client, _ = _stubbed((("m5.2xlarge", "US East (Ohio)"), FIXTURE[answer]))
    if why is None:  # the license-included operation is another product: the Linux one is taken
        assert cost.update_prices(client, OHIO, today="x")[0]["regions"]["us-east-2"]["instance_hour"]["m5.2xlarge"]["usd"] == 0.384
        return
    with pytest.raises(cost.CostError, match=rf"pricing: m5.2xlarge in us-east-2 \(.*\): {why} \(RunInstances\)"):
        cost.update_prices(client, OHIO, today="x")


def test_prices_update_on_the_cli_rewrites_the_table(tmp_path, monkeypatch):
    from dnscamp.fleet import aws

    table = tmp_path / "prices.json"
    table.write_text(json.dumps(OHIO))
    client, stub = _stubbed((("m5.2xlarge", "US East (Ohio)"), FIXTURE["m5.2xlarge us-east-2"]))
    seen = {}
    monkeypatch.setattr(aws, "client", lambda sess, service, region, endpoint_url=None: seen.update(
        service=service, region=region) or client)
    r = CliRunner().invoke(app, ["fleet", "prices", "update", "--file", str(table), "--regions", "us-east-2"])
    assert r.exit_code == 0, r.output
    assert seen == {"service": "pricing", "region": "us-east-1"}
    assert "m5.2xlarge in us-east-2: $0.4 -> $0.384 per hour" in r.output and "1 changed" in r.output
    assert json.loads(table.read_text())["regions"]["us-east-2"]["instance_hour"]["m5.2xlarge"]["usd"] == 0.384
    # a failed read writes nothing and says why in one line
    client, _ = _stubbed((("m5.2xlarge", "US East (Ohio)"), FIXTURE["none"]))
    before = table.read_text()
    r = CliRunner().invoke(app, ["fleet", "prices", "update", "--file", str(table)])
    assert r.exit_code == 1 and "0 products" in r.output and len(r.output.strip().splitlines()) == 1
    assert table.read_text() == before


def test_noncurrent_versions_billed_for_the_bucket_lifecycles_days():
    """The bill keeps each noncurrent version cost.NONCURRENT_EXPIRY_DAYS; the results bucket's
    lifecycle must expire them after as many days (a literal, or a variable's default)."""
    module = REPO / "infra" / "modules" / "results_bucket"
    main = (module / "main.tf").read_text()
    block = re.search(r"noncurrent_version_expiration\s*\{([^}]*)\}", main)
    if block is None:
        pytest.skip("infra/modules/results_bucket/main.tf has no noncurrent_version_expiration block yet: "
                    "without it noncurrent versions are kept (and billed) forever")
    days = re.search(r"noncurrent_days\s*=\s*(\d+|var\.(\w+))", block.group(1))
    assert days, block.group(0)
    if days.group(2):
        var = re.search(r'variable\s+"%s"\s*\{[^}]*?default\s*=\s*(\d+)' % days.group(2),
                        (module / "variables.tf").read_text(), re.S)
        assert var, f"variable {days.group(2)} has no numeric default"
        value = int(var.group(1))
    else:
        value = int(days.group(1))
    assert value == cost.NONCURRENT_EXPIRY_DAYS
