"""`dnscamp fleet render`: the root module's shape (a provider per region, a module per
(vantage, region), bucket and whoami in the home region), the agent's values left to apply,
no credentials in what is written or printed, and templates in spec text kept literal."""

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dnscamp.cli import app
from dnscamp.fleet import render
from dnscamp.spec import loads

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parents[2]
MARKER = "dnscamp-test-secret-MARKER-7f3a"

SPEC = """
[campaign]
name = "r"
description = "a ${template} and a %{directive} stay literal"
[[vantages]]
id = "web-a"
provider = "ec2"
regions = ["eu-central-1", "us-east-2"]
instance_type = "m5.large"
instance_count = 2
ssh_cidr = "198.51.100.0/24"
network_profiles = ["3g"]
[[vantages]]
id = "b"
provider = "ec2"
region = "ap-northeast-2"
[fleet]
results_bucket = "r-results"
home_region = "us-east-2"
transition_days = 45
whoami_zone = "dnstest.example.com"
ami_ids = { "eu-central-1" = "ami-0123456789abcdef0" }
[kinds.ping]
targets = ["1.1.1.1"]
"""


def rendered(tmp_path, endpoint_url=None, text=SPEC):
    d = render.render(loads(text, str(tmp_path / "r.toml")), text, out=tmp_path / "build", endpoint_url=endpoint_url)
    return json.loads((d / "main.tf.json").read_text())


def test_providers_modules_and_variables(tmp_path):
    c = rendered(tmp_path)
    assert c["terraform"]["required_version"] == ">= 1.6"
    assert c["terraform"]["required_providers"]["aws"] == {"source": "hashicorp/aws", "version": "~> 5.100"}
    provs = c["provider"]["aws"]
    assert [(p["alias"], p["region"]) for p in provs] == [
        ("us_east_2", "us-east-2"), ("eu_central_1", "eu-central-1"), ("ap_northeast_2", "ap-northeast-2")]
    assert all("endpoints" not in p and "s3_use_path_style" not in p for p in provs)
    assert provs[0]["default_tags"] == [{"tags": {"campaign": "r", "managed-by": "dnscamp"}}]
    m = c["module"]
    assert set(m) == {"results_bucket", "whoami_dns", "vantage_web_a_eu_central_1", "vantage_web_a_us_east_2",
                      "vantage_b_ap_northeast_2"}
    assert m["results_bucket"]["providers"] == {"aws": "aws.us_east_2"}
    assert m["results_bucket"]["bucket_name"] == "r-results" and m["results_bucket"]["transition_days"] == 45
    assert m["results_bucket"]["source"] == os.path.relpath(REPO / "infra/modules/results_bucket", tmp_path / "build")
    v = m["vantage_web_a_eu_central_1"]
    assert v["providers"] == {"aws": "aws.eu_central_1"} and v["source"].endswith("/modules/vantage")
    assert (v["campaign"], v["vantage"], v["region"], v["network_profile"]) == ("r", "web-a", "eu-central-1", "3g")
    assert (v["instance_type"], v["instance_count"], v["ssh_cidr"]) == ("m5.large", 2, "198.51.100.0/24")
    assert v["ami_id"] == "ami-0123456789abcdef0" and m["vantage_web_a_us_east_2"]["ami_id"] is None
    assert v["results_bucket"] == "${module.results_bucket.bucket}"
    assert v["agent_wheel_url"] == "${var.agent_wheel_url}" and v["spec_toml"] == "${local.spec_toml}"
    b = m["vantage_b_ap_northeast_2"]
    assert (b["instance_type"], b["instance_count"], b["network_profile"], b["ssh_cidr"]) == ("t3.medium", 1, None, None)
    w = m["whoami_dns"]
    assert w["providers"] == {"aws": "aws.us_east_2"} and w["zone"] == "dnstest.example.com"
    assert w["coredns_url"] == "${var.coredns_url}"
    # the agent's URLs and digests are variables without defaults: apply passes them, a hand-run apply stops
    for k in (*render.AGENT_VARS, *render.COREDNS_VARS):
        assert "default" not in c["variable"][k]
        assert c["variable"][k]["sensitive"] is k.endswith("_url")
    assert set(c["output"]["instance_ids"]["value"]) == {"web-a/eu-central-1", "web-a/us-east-2", "b/ap-northeast-2"}


def test_spec_text_is_carried_literally(tmp_path):
    c = rendered(tmp_path)
    assert "$${template}" in c["locals"]["spec_toml"] and "%%{directive}" in c["locals"]["spec_toml"]
    assert c["locals"]["spec_toml"].replace("$${", "${").replace("%%{", "%{") == SPEC


def test_endpoint_url_only_for_a_stand_in(tmp_path):
    p = rendered(tmp_path, endpoint_url="https://127.0.0.1:4566")["provider"]["aws"][1]
    assert p["endpoints"] == [{s: "https://127.0.0.1:4566" for s in ("s3", "ec2", "iam", "sts", "budgets")}]
    assert p["s3_use_path_style"] is True and p["skip_credentials_validation"] is True


def test_no_credentials_in_the_build_dir_or_output(tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIA" + MARKER)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", MARKER)
    monkeypatch.setenv("AWS_SESSION_TOKEN", MARKER + "-token")
    spec = tmp_path / "r.toml"
    spec.write_text(SPEC)
    r = CliRunner().invoke(app, ["fleet", "render", str(spec), "--out", str(tmp_path / "b")])
    assert r.exit_code == 0, r.output
    files = [p for p in (tmp_path / "b").rglob("*") if p.is_file()]
    assert files and not any(MARKER in p.read_text() for p in files) and MARKER not in r.output
    # and the plan-only placeholders are never in the rendered file either (environment only)
    assert "plan-only" not in (tmp_path / "b" / "main.tf.json").read_text()


def test_render_refusals_are_one_line(tmp_path):
    with pytest.raises(render.RenderError, match="no vantage has provider = 'ec2'"):
        render.config(loads(SPEC.replace('provider = "ec2"\nregions = ["eu-central-1", "us-east-2"]\n'
                                         'instance_type = "m5.large"\ninstance_count = 2\nssh_cidr = "198.51.100.0/24"\n'
                                         'network_profiles = ["3g"]', 'provider = "local"').replace(
            'provider = "ec2"\nregion = "ap-northeast-2"', 'provider = "local"'), "x.toml"), "", out_dir=tmp_path)
    clash = SPEC.replace('id = "b"', 'id = "web_a"').replace('region = "ap-northeast-2"', 'region = "us-east-2"')
    with pytest.raises(render.RenderError, match="both become module 'vantage_web_a_us_east_2'"):
        render.config(loads(clash, "x.toml"), clash, out_dir=tmp_path)


def test_www20_renders_20_vantage_modules(tmp_path):
    text = (REPO / "campaigns" / "www20-ec2.toml").read_text()
    c = rendered(tmp_path, text=text)
    assert len([m for m in c["module"] if m.startswith("vantage_")]) == 20
    assert len(c["provider"]["aws"]) == 5 and "whoami_dns" in c["module"]


def test_local_state_and_no_budget_by_default(tmp_path):
    c = rendered(tmp_path)
    assert "backend" not in c["terraform"] and "budget" not in c["module"]


def test_state_bucket_renders_a_locked_s3_backend(tmp_path):
    text = SPEC.replace('transition_days = 45', 'transition_days = 45\nstate_bucket = "r-tfstate"')
    tf = rendered(tmp_path, text=text)["terraform"]
    be = tf["backend"]["s3"]
    assert tf["required_version"] == ">= 1.10"
    assert be == {"bucket": "r-tfstate", "key": "dnscamp/r/terraform.tfstate", "region": "us-east-2",
                  "encrypt": True, "use_lockfile": True}
    be = rendered(tmp_path, text=text, endpoint_url="https://127.0.0.1:4566")["terraform"]["backend"]["s3"]
    assert be["endpoints"] == {"s3": "https://127.0.0.1:4566"} and be["use_path_style"] is True


def test_budget_from_the_bill_or_the_spec(tmp_path):
    from dnscamp.fleet import cost

    text = SPEC.replace('transition_days = 45', 'transition_days = 45\nbudget_email = "ops@example.org"\ndays = 10')
    spec = loads(text, "r.toml")
    b = rendered(tmp_path, text=text)["module"]["budget"]
    per_day = cost.bill(spec).per_day_usd
    assert b["providers"] == {"aws": "aws.us_east_2"} and b["email"] == "ops@example.org" and b["campaign"] == "r"
    assert b["amount_usd"] == float(int(per_day * 10 * 1.2) + 1)  # ten days of bill plus 20 %, up to a dollar
    long = text.replace("days = 10", "days = 90")
    assert rendered(tmp_path, text=long)["module"]["budget"]["amount_usd"] == float(int(per_day * 31 * 1.2) + 1)
    given = text.replace("days = 10", "days = 10\nbudget_usd_per_month = 250.5")
    assert rendered(tmp_path, text=given)["module"]["budget"]["amount_usd"] == 250.5
