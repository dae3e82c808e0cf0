"""Spec fields of the fleet: ec2 vantages (regions, instance type and count, SSH CIDR, one
network profile), the [fleet] section and the [atlas] part; each mistake is one line naming
the field, and the specs that were valid stay valid."""

from pathlib import Path

import pytest

from dnscamp.spec import SpecError, load, loads

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parents[2]

BASE = """
[campaign]
name = "f"
[[vantages]]
id = "v"
provider = "ec2"
{vantage}
[fleet]
results_bucket = "f-results"
home_region = "us-east-2"
{fleet}
[kinds.ping]
targets = ["1.1.1.1"]
{extra}
"""


def spec(vantage='region = "us-east-2"', fleet="", extra=""):
    return BASE.format(vantage=vantage, fleet=fleet, extra=extra)


def errors(text) -> list[str]:
    with pytest.raises(SpecError) as exc:
        loads(text, "f.toml")
    assert all("\n" not in line for line in exc.value.lines)
    return exc.value.lines


def test_good_ec2_spec_and_defaults():
    s = loads(spec('regions = ["us-east-2", "eu-central-1"]\ninstance_type = "m5.2xlarge"\ninstance_count = 2\n'
                   'ssh_cidr = "198.51.100.0/24"\nnetwork_profiles = ["3g"]'), "f.toml")
    v = s.ec2_vantages()[0]
    assert v.all_regions == ["us-east-2", "eu-central-1"] and v.instance_count == 2 and v.ssh_cidr == "198.51.100.0/24"
    assert s.fleet.transition_days == 30 and s.fleet.whoami_zone is None and s.atlas is None
    assert loads(spec(), "f.toml").ec2_vantages()[0].all_regions == ["us-east-2"]


@pytest.mark.parametrize("vantage, expected", [
    ('region = "us-east-2"\nregions = ["eu-central-1"]', "vantages.0: Value error, an ec2 vantage needs exactly one of region or regions"),
    ('', "vantages.0: Value error, an ec2 vantage needs exactly one of region or regions"),
    ('region = "Frankfurt"', "region: 'Frankfurt' is not an AWS region name"),
    ('regions = ["eu-central-1", "eu-central-1"]', "vantages.0.regions: Value error, duplicate region"),
    ('region = "us-east-2"\ninstance_type = "big"', "vantages.0.instance_type: String should match pattern"),
    ('region = "us-east-2"\ninstance_count = 0', "vantages.0.instance_count: Input should be greater than or equal to 1"),
    ('region = "us-east-2"\nssh_cidr = "0.0.0.0/0"', "vantages.0.ssh_cidr: Value error, 0.0.0.0/0 opens SSH to the whole Internet"),
    ('region = "us-east-2"\nssh_cidr = "10.0.0.1/8"', "vantages.0.ssh_cidr: Value error, not a network in CIDR notation"),
    ('region = "us-east-2"\nnetwork_profiles = ["4g-www", "3g"]', "an ec2 vantage has one network profile"),
    ('region = "us-east-2"\nnetwork_profiles = ["5g-dream"]', "vantages.0.network_profiles.0: unknown profile '5g-dream'"),
])
def test_ec2_vantage_errors_name_the_field(vantage, expected):
    lines = errors(spec(vantage))
    assert len(lines) == 1 and lines[0].startswith("f.toml: ") and expected in lines[0], lines


@pytest.mark.parametrize("fleet, expected", [
    ('results_bucket = "Bad_Bucket"', "fleet.results_bucket: String should match pattern"),
    ('results_bucket = "a..b"', "fleet.results_bucket: Value error, 'a..b' is not a valid S3 bucket name"),
    ('home_region = "mars-1"', "fleet.home_region: String should match pattern"),
    ('transition_days = 0', "fleet.transition_days: Input should be greater than or equal to 1"),
    ('whoami_zone = "not a zone"', "fleet.whoami_zone: Value error, 'not a zone' is not a domain name"),
    ('ami_ids = { "us-east-2" = "debian" }', "fleet.ami_ids: Value error, us-east-2: 'debian' is not an AMI id"),
    ('bucket = "x"', "fleet.bucket: Extra inputs are not permitted"),
])
def test_fleet_section_errors_name_the_field(fleet, expected):
    table = {"results_bucket": '"f-results"', "home_region": '"us-east-2"'}
    key, _, value = fleet.partition(" = ")
    table[key] = value
    text = spec().replace('results_bucket = "f-results"\nhome_region = "us-east-2"\n',
                          "".join(f"{k} = {v}\n" for k, v in table.items()))
    lines = errors(text)
    assert len(lines) == 1 and expected in lines[0], lines


def test_ec2_vantages_need_a_fleet_section():
    text = spec().replace('[fleet]\nresults_bucket = "f-results"\nhome_region = "us-east-2"\n', "")
    assert errors(text) == ["f.toml: fleet: required when a vantage has provider = 'ec2' (results_bucket, home_region)"]


def test_ec2_fields_only_on_ec2_vantages():
    text = spec().replace('provider = "ec2"\nregion = "us-east-2"', 'provider = "local"\ninstance_type = "t3.micro"')
    assert any("instance_type: only for provider = 'ec2'" in line for line in errors(text))


def test_atlas_part_is_checked_by_the_atlas_schema_and_matches_the_whoami_zone():
    atlas = '[atlas]\nname = "a"\nserver = "192.0.2.1"\n[[atlas.sources]]\ncountry = "DE"\n[atlas.zone]\nname = "{zone}"\n'
    ok = loads(spec(fleet='whoami_zone = "dnstest.example.com"', extra=atlas.format(zone="dnstest.example.com")), "f.toml")
    assert ok.atlas_spec.zone.name == "dnstest.example.com" and ok.atlas_spec.probes_requested == 10
    bad = errors(spec(fleet='whoami_zone = "dnstest.example.com"', extra=atlas.format(zone="other.example.com")))
    assert bad == ["f.toml: atlas.zone.name: 'other.example.com' is not the fleet's whoami_zone 'dnstest.example.com': "
                   "the discovery needs the zone our server answers for"]
    bad = errors(spec(extra=atlas.format(zone="z.example.com").replace('"192.0.2.1"', '"not-an-ip"')))
    assert len(bad) == 1 and bad[0].startswith("f.toml: atlas.server: ")


def test_existing_and_new_campaigns_load():
    assert load(REPO / "campaigns" / "default.toml").fleet is None
    w = load(REPO / "campaigns" / "www20-ec2.toml")
    # 002 §3.2: five regions, one m5.2xlarge instance per network condition in each (20)
    regions = {r for v in w.ec2_vantages() for r in v.all_regions}
    assert regions == {"us-east-2", "us-west-1", "eu-central-1", "ap-southeast-2", "ap-northeast-2"}
    assert sorted(str(v.network_profiles[0]) for v in w.ec2_vantages()) == ["3g", "4g-www", "None", "lossy-4g"]
    assert sum(len(v.all_regions) * (v.instance_count or 1) for v in w.ec2_vantages()) == 20
    assert {v.instance_type for v in w.ec2_vantages()} == {"m5.2xlarge"}
    # the public resolvers of §3.2.2 over Do53/DoT/DoH, and the region's own (system) resolver
    modes = w.params["page_load"].dns
    assert "system" in modes and {m.split(":")[0] for m in modes} == {"system", "do53", "dot", "doh"}
    assert w.params["dns_query"].resolvers == ["cloudflare", "google", "quad9"]
    assert w.atlas_spec.zone.name == w.fleet.whoami_zone  # 001's discovery through our whoami zone


def test_runner_points_ec2_units_at_fleet(tmp_path, capsys):
    from dnscamp import runner

    summary = runner.run(loads(spec(), "f.toml"), spool_dir=tmp_path, show_progress=False)
    err = capsys.readouterr().err
    assert "units of providers ec2 run on their own vantage agents (`dnscamp fleet apply SPEC` creates them" in err
    assert "infra/ cron" not in err and summary.units_run == 0
