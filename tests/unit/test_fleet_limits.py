"""One rule for the fleet's names and counts: infra/modules/limits.json, read by the spec's
validation, repeated in the modules' variables.tf (held equal here), and chosen so that every
name the modules derive is one AWS accepts. Property-based: any ids the spec accepts render
names AWS accepts; any it refuses get one line naming the field."""

from __future__ import annotations

import json
import re
from pathlib import Path

import hcl2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dnscamp.fleet import limits
from dnscamp.spec import SpecError, loads

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parents[2]
MODULES = REPO / "infra" / "modules"
L = json.loads((MODULES / "limits.json").read_text())

# AWS's own rules, written out here independently of limits.json (IAM CreateRole's RoleName,
# CreateInstanceProfile, EC2 CreateSecurityGroup's GroupName, tag values, S3 object keys).
AWS_RULES = {
    "iam_role": lambda n: re.fullmatch(r"[\w+=,.@-]{1,64}", n, re.ASCII) is not None,
    "instance_profile": lambda n: re.fullmatch(r"[\w+=,.@-]{1,128}", n, re.ASCII) is not None,
    "security_group": lambda n: 1 <= len(n) <= 255 and n.isascii() and not n.startswith("sg-"),
    "instance_name_tag": lambda n: 0 <= len(n) <= 256,
    "results_key_prefix": lambda n: len(n.encode()) <= 1024,
    "status_key": lambda n: len(n.encode()) <= 1024,
}

SPEC = """
[campaign]
name = {campaign}
[campaign.schedule]
cron = "*/15 * * * *"
[[vantages]]
id = {vantage}
provider = "ec2"
region = {region}
instance_count = {count}
[fleet]
results_bucket = {bucket}
home_region = "us-east-2"
{fleet}
[kinds.ping]
targets = ["1.1.1.1"]
"""


def spec_text(campaign="c", vantage="v", region="us-east-2", count=1, bucket="c-results", fleet="") -> str:
    q = json.dumps  # a TOML basic string is a JSON string for these alphabets
    return SPEC.format(campaign=q(campaign), vantage=q(vantage), region=q(region), count=count, bucket=q(bucket),
                       fleet=fleet)


def errors(text: str) -> list[str]:
    with pytest.raises(SpecError) as exc:
        loads(text, "f.toml")
    assert all("\n" not in line and line.startswith("f.toml: ") for line in exc.value.lines)
    return exc.value.lines


# --- the modules repeat the file's numbers ---------------------------------------------------


def _variables(module: str) -> dict[str, str]:
    """variable name -> its validation conditions joined (python-hcl2 keeps names quoted)."""
    conf = hcl2.loads((MODULES / module / "variables.tf").read_text())
    out = {}
    for block in conf["variable"]:
        for name, body in block.items():
            out[json.loads(name)] = " && ".join(v["condition"] for v in body.get("validation", []))
    return out


def _regexes(condition: str, var: str) -> list[str]:
    return [json.loads(m) for m in re.findall(r'regex\(("(?:[^"\\]|\\.)*"), var\.' + var + r"\)", condition)]


def _lists(condition: str) -> list[list[str]]:
    return [json.loads(m) for m in re.findall(r"for \w+ in (\[[^\]]*\])", condition)]


@pytest.mark.parametrize("var", ["campaign", "vantage", "region"])
def test_vantage_module_ids_follow_the_limits_file(var):
    cond = _variables("vantage")[var]
    assert _regexes(cond, var) == [L[var]["pattern"]], cond
    assert re.findall(rf"length\(var\.{var}\) <= (\d+)", cond) == [str(L[var]["max_length"])], cond


def test_whoami_module_zone_follows_the_limits_file():
    cond = _variables("whoami_dns")["zone"]
    assert _regexes(cond, "zone") == [L["whoami_zone"]["pattern"]], cond
    assert re.findall(r"length\(var\.zone\) <= (\d+)", cond) == [str(L["whoami_zone"]["max_length"])], cond
    name = hcl2.loads((MODULES / "whoami_dns" / "main.tf").read_text())["locals"][0]["name"]
    assert name == '"dnscamp-whoami-${replace(var.zone, ".", "-")}"'  # python-hcl2 keeps the quotes
    longest = "dnscamp-whoami-" + "a" * L["whoami_zone"]["max_length"]
    assert AWS_RULES["security_group"](longest) and AWS_RULES["instance_name_tag"](longest)


@pytest.mark.parametrize("zone, expected", [
    ("DNSTest.example.com", "fleet.whoami_zone: Value error, 'DNSTest.example.com' does not match"),
    ("dnstest.example.com.", "fleet.whoami_zone: Value error, 'dnstest.example.com.' does not match"),
    ("a" * 60 + "." + "b" * 60 + "." + "c" * 60 + "." + "d" * 60 + ".com", "is 247 characters, at most 240"),
])
def test_a_whoami_zone_the_module_refuses_is_one_line(zone, expected):
    lines = errors(spec_text(fleet=f"whoami_zone = {json.dumps(zone)}"))
    assert len(lines) == 1 and expected in lines[0] and lines[0].endswith("without the trailing dot"), lines


def test_vantage_module_instance_count_follows_the_limits_file():
    cond = _variables("vantage")["instance_count"]
    assert re.findall(r"var\.instance_count <= (\d+)", cond) == [str(L["instances_per_region"]["max"])], cond


@pytest.mark.parametrize("module, var", [("vantage", "results_bucket"), ("results_bucket", "bucket_name")])
def test_bucket_rules_of_the_modules_follow_the_limits_file(module, var):
    cond = _variables(module)[var]
    assert L["s3_bucket"]["pattern"] in _regexes(cond, var), cond
    assert _lists(cond) == [L["s3_bucket"]["reserved_prefixes"], L["s3_bucket"]["reserved_suffixes"]], cond
    assert f'!strcontains(var.{var}, "..")' in cond


def test_the_role_name_template_is_the_modules():
    name = hcl2.loads((MODULES / "vantage" / "main.tf").read_text())["locals"][0]["name"]
    as_template = re.sub(r"\$\{var\.(\w+)\}", r"{\1}", json.loads(name))
    assert as_template == L["names"]["iam_role"]["template"] == L["names"]["security_group"]["template"]


def test_the_longest_ids_still_give_names_aws_accepts():
    longest = limits.longest_names()
    assert longest["iam_role"] == 64  # tight: the lengths were chosen for it
    top = {k: "a" * L[k]["max_length"] for k in ("campaign", "vantage", "region")}
    for what, name in limits.derived_names(top["campaign"], top["vantage"], top["region"]).items():
        assert AWS_RULES[what](name), (what, name)
    # one character more in either id and the role name is past AWS's 64
    assert not AWS_RULES["iam_role"](limits.derived_names("a" * 21, "a" * 20, "a" * 14)["iam_role"])


def test_the_packaged_rules_are_the_modules_file():
    # the agent's wheel holds only the packages: the modules' limits.json links to the packaged one
    link = MODULES / "limits.json"
    assert link.is_symlink() and link.resolve() == limits.LIMITS_FILE.resolve() and not limits.LIMITS_FILE.is_symlink()
    assert limits.limits() == L


# --- the spec applies the same rule ----------------------------------------------------------

IDS = st.text(alphabet="abcXYZ019._-+@ ", min_size=1, max_size=26)
REGIONS = st.one_of(st.sampled_from(["us-east-2", "ap-southeast-2", "us-gov-west-1", "eu-central-1"]),
                    st.from_regex(r"[a-z]{2}-[a-z]{1,16}-[0-9]", fullmatch=True))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(campaign=IDS, vantage=IDS, region=REGIONS)
def test_accepted_ids_render_names_aws_accepts_and_refused_ones_name_the_field(campaign, vantage, region):
    text = spec_text(campaign, vantage, region)
    try:
        s = loads(text, "f.toml")
    except SpecError as exc:
        assert all("\n" not in line for line in exc.lines)
        named = [line.split(": ")[1] for line in exc.lines]
        fields = set(named)
        assert len(named) == len(fields), exc.lines  # one line per field
        assert fields <= {"campaign.name", "vantages.0.id", "vantages.0.region", "vantages.0", "fleet.home_region"}, exc.lines
        # each refused id is named: the one the limits refuse
        if limits.id_problem("campaign", campaign):
            assert "campaign.name" in fields
        if limits.id_problem("vantage", vantage) and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", vantage):
            assert "vantages.0.id" in fields
        if len(region) > L["region"]["max_length"]:
            assert "vantages.0.region" in fields
        return
    assert s.campaign.name == campaign and s.vantages[0].id == vantage
    for what, name in limits.derived_names(campaign, vantage, region).items():
        assert AWS_RULES[what](name), (what, name)


def test_a_refused_id_is_one_line_naming_the_field():
    assert errors(spec_text(campaign="Www20.ec2")) == [
        "f.toml: campaign.name: 'Www20.ec2' does not match ^[a-z0-9][a-z0-9_-]*$ (lower case: S3 keys, cron.d file "
        "names and Terraform identifiers; no dots; 20 keeps the IAM role name within 64); this campaign has ec2 vantages"]
    lines = errors(spec_text(vantage="v" * 21))
    assert len(lines) == 1 and lines[0].startswith("f.toml: vantages.0.id: 'vvvvvvvvvvvvvvvvvvvvv' is 21 characters, at most 20")
    lines = errors(spec_text(region="ap-southeasterly-2"))
    assert len(lines) == 1 and lines[0].startswith("f.toml: vantages.0.region: 'ap-southeasterly-2' is 18 characters")


def test_names_of_other_providers_keep_their_looser_rule():
    text = spec_text().replace('provider = "ec2"\nregion = "us-east-2"\ninstance_count = 1', 'provider = "local"')
    text = text.replace('name = "c"', 'name = "Lab.Campaign-with-a-long-name"').replace('id = "v"', 'id = "Lab.A"')
    s = loads(text.replace('[fleet]\nresults_bucket = "c-results"\nhome_region = "us-east-2"\n', ""), "f.toml")
    assert s.campaign.name == "Lab.Campaign-with-a-long-name"


def test_instance_counts_follow_the_limits_file():
    most = L["instances_per_region"]["max"]
    assert loads(spec_text(count=most), "f.toml").vantages[0].instance_count == most
    assert errors(spec_text(count=most + 1)) == [
        f"f.toml: vantages.0.instance_count: Input should be less than or equal to {most}"]
    total = L["instances_total"]["max"]
    regions = [f"us-east-{i % 10}" for i in range(6)]
    text = spec_text().replace('region = "us-east-2"\ninstance_count = 1',
                               f"regions = {json.dumps(regions)}\ninstance_count = {most}")
    assert errors(text) == [f"f.toml: vantages: {6 * most} ec2 instances in all (instance_count x regions, summed), "
                            f"at most {total} (infra/modules/limits.json)"]


# --- buckets and the operating fields of [fleet] -----------------------------------------------


@pytest.mark.parametrize("bucket, reason", [
    ("a..b", "no '..'"), ("192.168.1.2", "shaped like an IP address"), ("xn--abc", "the prefix 'xn--' is reserved"),
    ("sthree-abc", "the prefix 'sthree-' is reserved"), ("abc-s3alias", "the suffix '-s3alias' is reserved"),
    ("abc--ol-s3", "the suffix '--ol-s3' is reserved"), ("abc.mrap", "the suffix '.mrap' is reserved"),
])
def test_bucket_names_s3_refuses_are_one_line(bucket, reason):
    for field, fleet in (("results_bucket", ""), ("state_bucket", f'state_bucket = "{bucket}"')):
        text = spec_text(bucket=bucket if field == "results_bucket" else "c-results", fleet=fleet)
        lines = errors(text)
        assert len(lines) == 1 and lines[0].startswith(f"f.toml: fleet.{field}: ") and reason in lines[0], lines


@given(st.from_regex(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", fullmatch=True))
@settings(max_examples=200, deadline=None)
def test_an_accepted_bucket_name_follows_s3s_rules(name):
    if limits.bucket_problem(name) is None:
        assert ".." not in name and not re.fullmatch(r"\d+\.\d+\.\d+\.\d+", name)
        assert not name.startswith(("xn--", "sthree-", "amzn-s3-demo-"))
        assert not name.endswith(("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"))
    else:
        assert (".." in name or re.fullmatch(r"\d+\.\d+\.\d+\.\d+", name)
                or name.startswith(("xn--", "sthree-", "amzn-s3-demo-"))
                or name.endswith(("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")))


def test_operating_fields_defaults():
    f = loads(spec_text(), "f.toml").fleet
    assert (f.state_bucket, f.budget_email, f.budget_usd_per_month) == (None, None, None)
    assert (f.prune_shipped_after_days, f.disk_floor_mib, f.collector_outside_aws) == (7, 1024, True)
    f = loads(spec_text(fleet='state_bucket = "c-state"\nbudget_email = "ops@example.org"\nbudget_usd_per_month = 500\n'
                              "prune_shipped_after_days = 0\ndisk_floor_mib = 2048\ncollector_outside_aws = false"),
              "f.toml").fleet
    assert (f.state_bucket, f.budget_email, f.budget_usd_per_month) == ("c-state", "ops@example.org", 500.0)
    assert (f.prune_shipped_after_days, f.disk_floor_mib, f.collector_outside_aws) == (0, 2048, False)


@pytest.mark.parametrize("fleet, expected", [
    ('budget_email = "ops"', "fleet.budget_email: Value error, 'ops' is not an e-mail address"),
    ('budget_email = "ops@example"', "fleet.budget_email: Value error, 'ops@example' is not an e-mail address"),
    ('budget_email = "o ps@example.org"', "fleet.budget_email: Value error"),
    ('budget_usd_per_month = 100', "fleet: Value error, budget_usd_per_month: needs budget_email"),
    ('budget_usd_per_month = 0\nbudget_email = "a@b.org"', "fleet.budget_usd_per_month: Input should be greater than 0"),
    ('state_bucket = "c-results"', "fleet: Value error, state_bucket: must not be the results_bucket"),
    ('prune_shipped_after_days = -1', "fleet.prune_shipped_after_days: Input should be greater than or equal to 0"),
    ('disk_floor_mib = 2000000', "fleet.disk_floor_mib: Input should be less than or equal to 1048576"),
    ('collector_outside_aws = "yes"', "fleet.collector_outside_aws: Input should be a valid boolean"),
])
def test_operating_fields_refusals_name_the_field(fleet, expected):
    lines = errors(spec_text(fleet=fleet))
    assert len(lines) == 1 and expected in lines[0], lines


@given(st.emails())
@settings(max_examples=100, deadline=None)
def test_ordinary_email_addresses_are_accepted(address):
    if len(address) <= 254 and address.isascii() and "." in address.split("@")[1] and len(address.split("@")[0]) <= 64:
        assert loads(spec_text(fleet=f"budget_email = {json.dumps(address)}"), "f.toml").fleet.budget_email == address
