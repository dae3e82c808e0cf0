"""The rendered root module of a 5-region x 2-vantage spec passes `terraform validate` (with the
real hashicorp/aws provider from the mirror, offline) and `fmt -check`. Without terraform/tofu
or the provider mirror these tests FAIL naming what is missing (never skip)."""

import json

import pytest

from dnscamp.fleet import render, toolchain
from dnscamp.spec import loads

pytestmark = pytest.mark.local

REGIONS = ["us-east-2", "us-west-1", "eu-central-1", "ap-southeast-2", "ap-northeast-2"]
SPEC = f"""
[campaign]
name = "five-by-two"
[[vantages]]
id = "plain"
provider = "ec2"
regions = {json.dumps(REGIONS)}
[[vantages]]
id = "lossy"
provider = "ec2"
regions = {json.dumps(REGIONS)}
instance_type = "m5.2xlarge"
network_profiles = ["lossy-4g"]
[fleet]
results_bucket = "five-by-two-results"
home_region = "eu-central-1"
whoami_zone = "dnstest.example.com"
[kinds.ping]
targets = ["1.1.1.1"]
"""


def require_terraform() -> str:
    try:
        name, _ = toolchain.find_terraform()
    except toolchain.ToolchainError as exc:
        pytest.fail(str(exc), pytrace=False)
    if toolchain.provider_mirror() is None:
        pytest.fail(f"{toolchain.PROVIDER} provider mirror not found (DNSCAMP_TF_PLUGIN_DIR, the implied mirror dirs, "
                    f"/opt, /usr/local, ...): run {toolchain.INSTALL_HINT}", pytrace=False)
    return name


def tf(args, cwd) -> str:
    r = toolchain.run(args, cwd=cwd, check=False)
    assert r.returncode == 0, f"{args[0]}: {r.stdout[-2000:]}{r.stderr[-2000:]}"
    return r.stdout


def test_rendered_five_regions_two_vantages_validate_and_fmt(tmp_path):
    require_terraform()
    build = render.render(loads(SPEC, "five.toml"), SPEC, out=tmp_path / "five-by-two")
    cfg = json.loads((build / "main.tf.json").read_text())
    assert len(cfg["provider"]["aws"]) == 5 and len([m for m in cfg["module"] if m.startswith("vantage_")]) == 10
    tf(["init", "-input=false", "-backend=false", "-no-color"], build)
    out = tf(["validate", "-json", "-no-color"], build)
    result = json.loads(out)
    assert result["valid"] is True and result["error_count"] == 0, result
    # fmt formats HCL (.tf, .tfvars): it checks the modules the root calls; the root itself is
    # JSON, whose format is ours (json.dumps, indent 2), checked byte for byte below.
    tf(["fmt", "-check", "-recursive", "-no-color", str(render.MODULES)], build)
    tf(["fmt", "-check", "-no-color"], build)
    assert (build / "main.tf.json").read_text() == json.dumps(cfg, indent=2) + "\n"


def test_validate_catches_a_broken_render(tmp_path):
    """The check above can fail: a module argument the vantage module does not declare is an error."""
    require_terraform()
    build = render.render(loads(SPEC, "five.toml"), SPEC, out=tmp_path / "broken")
    cfg = json.loads((build / "main.tf.json").read_text())
    cfg["module"]["vantage_plain_us_east_2"]["no_such_argument"] = 1
    (build / "main.tf.json").write_text(json.dumps(cfg, indent=2) + "\n")
    tf(["init", "-input=false", "-backend=false", "-no-color"], build)
    r = toolchain.run(["validate", "-json", "-no-color"], cwd=build, check=False)
    assert r.returncode != 0 and json.loads(r.stdout)["valid"] is False
