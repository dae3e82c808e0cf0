"""`dnscamp fleet cost`: a small spec's bill against one computed by hand, the shipped price
table (date, sources, every region and type the campaigns use), and the www20 campaign costed
offline."""

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dnscamp.cli import app
from dnscamp.fleet import cost
from dnscamp.spec import load, loads

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
                      "public_ipv4_hour": 0.005},
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
    puts = (2 * 2 * 100 * 2) / 1000 * 0.005  # 800 PUTs at the home region's price
    stored = (4 * 100 / 1024 * 2) / 2 * 48 / 730 * 0.02  # 0.78 GiB uploaded, half of it on average, 48 h
    assert b.total_usd == pytest.approx(us + eu + eu_uploads + puts + stored, rel=1e-12)
    # the same, on paper: 5.028329 (us) + 6.090411 (eu) + 0.011719 + 0.004 + 0.000514 = 11.134973
    assert b.total_usd == pytest.approx(11.134973, abs=1e-6)
    assert b.per_day_usd == pytest.approx(b.total_usd / 2)
    sub = b.by_kind()
    assert sub["instances"] == pytest.approx(96 * 0.04 + 96 * 0.05) and sub["public IPv4"] == pytest.approx(2 * 96 * 0.005)
    assert sub["S3"] == pytest.approx(puts + stored) and sum(sub.values()) == pytest.approx(b.total_usd)
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


def test_price_table_says_date_and_source_and_covers_the_campaigns():
    table = json.loads(cost.PRICES.read_text())
    assert re.match(r"^\d{4}-\d{2}", table["date"])
    assert any(s.startswith("https://aws.amazon.com/ec2/pricing/on-demand") for s in table["sources"])
    assert "not fetched live" in table["not_live"].lower()
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
    assert bill["atlas_credits"] > 0 and bill["prices"]["date"]


def test_cost_without_fleet_section_is_one_line():
    r = CliRunner().invoke(app, ["fleet", "cost", str(REPO / "campaigns" / "default.toml")])
    assert r.exit_code == 2 and "fleet: no [fleet] section" in r.output
