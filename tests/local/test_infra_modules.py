"""infra/modules with the real tools: terraform fmt/validate/test, tflint, checkov, and
`cloud-init schema` on the user data Terraform itself renders. A missing tool fails the test
naming it and install/60-infra.sh (never a skip). Modules are copied to a temp dir so `init`
leaves nothing in the checkout."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from dnscamp.fleet import toolchain
from tests import tools
from tests.conftest import ROOT

pytestmark = pytest.mark.local
INSTALLER = "install/60-infra.sh"
INFRA = ROOT / "infra"
MODULES = ["vantage", "results_bucket", "whoami_dns", "budget"]
SHA = "0123456789abcdef" * 4
VARS = {
    "vantage": {
        "campaign": "www20", "vantage": "ec2-ohio", "region": "us-east-2", "network_profile": "4g",
        "results_bucket": "dnscamp-results-www20", "spec_toml": (ROOT / "campaigns" / "default.toml").read_text(),
        "agent_wheel_url": "https://dnscamp-results-www20.s3.us-east-2.amazonaws.com/dist/dnscamp-0.1.0-py3-none-any.whl"
                           "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=3600&X-Amz-Signature=ab12",
        "agent_wheel_sha256": SHA, "agent_lock_url": "https://dnscamp-results-www20.s3.amazonaws.com/dist/requirements.lock?X-Amz-Signature=cd34",
        "agent_lock_sha256": SHA, "agent_version": "0.1.0",
    },
    "whoami_dns": {
        "zone": "whoami.dnscamp.example.org", "coredns_sha256": SHA,
        "coredns_url": "https://dnscamp-results-www20.s3.amazonaws.com/dist/coredns-1.15.0?X-Amz-Signature=ef56",
    },
}


def _terraform() -> None:
    try:
        toolchain.find_terraform()
    except toolchain.ToolchainError as exc:
        pytest.fail(f"{exc}: run {INSTALLER}", pytrace=False)
    if toolchain.provider_mirror() is None:
        pytest.fail(f"no hashicorp/aws provider mirror found (set DNSCAMP_TF_PLUGIN_DIR): run {INSTALLER}", pytrace=False)


def _ok(p: subprocess.CompletedProcess) -> str:
    assert p.returncode == 0, f"{' '.join(map(str, p.args[:3]))} failed:\n{p.stdout}\n{p.stderr}"
    return p.stdout


@pytest.fixture(scope="module")
def modules(tmp_path_factory) -> Path:
    """infra/modules copied to a temp dir, each module `init -backend=false` from the mirror."""
    _terraform()
    dest = tmp_path_factory.mktemp("infra") / "modules"
    shutil.copytree(INFRA / "modules", dest, ignore=shutil.ignore_patterns(".terraform*", "*.tfstate*"))
    for m in MODULES:
        _ok(toolchain.run(["init", "-backend=false", "-input=false", "-no-color"], cwd=dest / m, check=False))
    return dest


def test_fmt_check():
    _terraform()
    _ok(toolchain.run(["fmt", "-check", "-recursive", "-diff", "-no-color", str(INFRA)], cwd=ROOT, check=False))


@pytest.mark.parametrize("module", MODULES)
def test_validate(modules, module):
    out = json.loads(toolchain.run(["validate", "-json", "-no-color"], cwd=modules / module, check=False).stdout)
    assert out["valid"] and out["warning_count"] == 0, out["diagnostics"]


@pytest.mark.parametrize("module", MODULES)
def test_terraform_test_files(modules, module):
    out = _ok(toolchain.run(["test", "-no-color"], cwd=modules / module, check=False))
    passed = re.search(r"Success! (\d+) passed, 0 failed", out)
    assert passed and int(passed.group(1)) >= 3, out  # the run blocks ran (none skipped silently)


@pytest.mark.parametrize("module", MODULES)
def test_tflint_clean(module):
    tflint = tools.require("tflint", INSTALLER)
    p = subprocess.run([tflint, f"--config={INFRA / 'modules' / '.tflint.hcl'}", f"--chdir={INFRA / 'modules' / module}",
                        "--format=compact", "--no-color"], capture_output=True, text=True)
    assert p.returncode == 0 and "issue" not in p.stdout, p.stdout + p.stderr


def test_checkov_zero_failed_and_every_skip_reasoned():
    checkov = tools.require("checkov", INSTALLER)
    p = subprocess.run([checkov, "-d", str(INFRA), "--framework", "terraform", "--skip-download", "-o", "json"],
                       capture_output=True, text=True, cwd=ROOT)
    report = json.loads(p.stdout)
    report = report if isinstance(report, dict) else report[0]
    results = report["results"]
    assert report["summary"]["failed"] == 0 and p.returncode == 0, [
        (c["check_id"], c["resource"], c["file_path"]) for c in results["failed_checks"]]
    assert report["summary"]["passed"] >= 50 and report["summary"]["parsing_errors"] == 0
    # each skip is carried in the code with a reason, and no stale skip comment lingers
    skips = {(c["check_id"], c["file_path"].lstrip("/")) for c in results["skipped_checks"]}
    assert all(len(c["check_result"].get("suppress_comment") or "") > 20 for c in results["skipped_checks"])
    in_code = {(m.group(1), str(f.relative_to(INFRA)))
               for f in INFRA.rglob("*.tf") for m in re.finditer(r"#checkov:skip=(CKV\w+):\S", f.read_text())}
    assert skips == in_code


def _console(module_dir: Path, expr: str, variables: dict) -> str:
    """A module's expression evaluated by Terraform itself (base64 so no HCL string quoting intervenes)."""
    varfile = module_dir / "test.tfvars.json"
    varfile.write_text(json.dumps(variables))
    # toolchain.run takes no stdin: the same binary and environment, with the expression as input
    p = subprocess.run([str(toolchain.find_terraform()[1]), "console", f"-var-file={varfile}"], cwd=module_dir,
                       input=f"base64encode({expr})\n", capture_output=True, text=True, env=toolchain.tf_env())
    return base64.b64decode(json.loads(_ok(p).strip())).decode()


def _schema(tmp_path, name: str, text: str) -> None:
    cloud_init = tools.require("cloud-init", INSTALLER)
    f = tmp_path / f"{name}.yaml"
    f.write_text(text)
    p = subprocess.run([cloud_init, "schema", "--config-file", str(f)], capture_output=True, text=True)
    assert p.returncode == 0 and "Valid cloud-config" in p.stdout, p.stdout + p.stderr


def test_cloud_init_schema_rejects_a_bad_config(tmp_path):
    with pytest.raises(AssertionError, match="packages"):
        _schema(tmp_path, "bad", "#cloud-config\npackages: 3\n")


def test_vantage_user_data_is_valid_cloud_config(modules, tmp_path):
    text = _console(modules / "vantage", "nonsensitive(local.user_data)", VARS["vantage"])
    assert text.startswith("#cloud-config\n") and VARS["vantage"]["agent_wheel_url"] in text
    _schema(tmp_path, "vantage", text)


def test_whoami_user_data_is_valid_cloud_config(modules, tmp_path):
    d = modules / "whoami_dns"
    # the elastic IP is only known after apply: render the default Corefile with a documentation address
    corefile = _console(d, 'templatefile("${path.module}/Corefile.tftpl", {zone = var.zone, '
                        'zone_re = replace(var.zone, ".", "[.]"), ns_address = "198.51.100.53"})', VARS["whoami_dns"])
    text = _console(d, "nonsensitive(local.user_data)", {**VARS["whoami_dns"], "corefile": corefile})
    assert base64.b64encode(corefile.encode()).decode() in text
    _schema(tmp_path, "whoami", text)


def test_whoami_corefile_is_generated_from_the_testbeds():
    import runpy

    gen = runpy.run_path(str(INFRA / "modules" / "whoami_dns" / "generate_corefile.py"))
    assert (INFRA / "modules" / "whoami_dns" / "Corefile.tftpl").read_text() == gen["corefile_template"](), (
        "stale: run .venv/bin/python infra/modules/whoami_dns/generate_corefile.py")


def test_whoami_corefile_for_the_testbed_zone_is_the_testbeds(modules):
    from testbed import plan
    from testbed.services.dns_hierarchy import whoami_corefile

    d = modules / "whoami_dns"
    rendered = _console(d, f'templatefile("${{path.module}}/Corefile.tftpl", {{zone = "{plan.WHOAMI_ZONE}", '
                        f'zone_re = replace("{plan.WHOAMI_ZONE}", ".", "[.]"), ns_address = "{plan.WHOAMI_AUTH_SERVER}"}})',
                        VARS["whoami_dns"])
    body = rendered.split("\n", 1)[1]  # after the "generated by" comment
    assert body == whoami_corefile().replace(f"  bind {plan.WHOAMI_AUTH_SERVER}\n", "")
