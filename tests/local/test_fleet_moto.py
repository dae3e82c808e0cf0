"""`dnscamp fleet` (the real CLI, real Terraform and the real hashicorp/aws provider) against
moto in server mode: a faithful fake of AWS's APIs on a loopback HTTPS endpoint, not AWS. Here:
a dry run creates nothing, a missing terraform/tofu is refused by name, and checkov passes the
planned fleet of two regions. The applied fleet (status by tag, the instance and collector
policies under moto's IAM enforcement, the saved plan, the locked state, drain and destroy) is
test_fleet_terraform.py's, which uses this file's HTTPS server and IAM condition handling.

HTTPS because the vantage module accepts only https:// agent URLs (presigned against the
endpoint): the server's certificate comes from a throwaway CA (testbed.services.ca, limited to
127.0.0.0/8 and .test) that boto3 and the provider trust through AWS_CA_BUNDLE.

Missing terraform/tofu, the provider mirror or moto's server dependencies FAIL naming them."""

import contextlib
import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.local.test_fleet_terraform import require_terraform

pytestmark = pytest.mark.local

REPO = Path(__file__).resolve().parents[2]
DNSCAMP = [sys.executable, "-m", "dnscamp.cli"]
MARKER = "dnscamp-moto-secret-MARKER-41c9"
AMI = "ami-1e749f67"  # an image moto ships in every region (no Debian one: ami_ids pins this)
CAMPAIGN = "motofleet"
SPEC = f"""
[campaign]
name = "{CAMPAIGN}"
[campaign.schedule]
cron = "*/15 * * * *"
[[vantages]]
id = "alpha"
provider = "ec2"
regions = ["us-east-2", "eu-central-1"]
instance_type = "t3.micro"
[[vantages]]
id = "beta"
provider = "ec2"
region = "eu-central-1"
instance_type = "t3.micro"
instance_count = 2
network_profiles = ["3g"]
[fleet]
results_bucket = "motofleet-results"
home_region = "us-east-2"
ami_ids = {{ "us-east-2" = "{AMI}", "eu-central-1" = "{AMI}" }}
[kinds.ping]
targets = ["1.1.1.1"]
"""


def _moto_server_class():
    try:  # moto's server runs on Flask and werkzeug (moto[server])
        from moto.server import ThreadedMotoServer
    except ImportError as exc:
        pytest.fail(f"moto's server mode needs {exc.name}: install moto[server]'s dependencies "
                    "(flask, flask-cors) into .venv", pytrace=False)
    from moto.moto_server.threaded_moto_server import MotoRequestHandler, make_server  # werkzeug's, as moto uses it
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    class HttpsMotoServer(ThreadedMotoServer):
        """ThreadedMotoServer with TLS (its own entry point, plus ssl_context)."""

        def __init__(self, cert: Path, key: Path):
            super().__init__(ip_address="127.0.0.1", port=0, verbose=False)
            self._tls = (str(cert), str(key))

        def _server_entry(self) -> None:
            app = DomainDispatcherApplication(create_backend_app)
            self._server = make_server(self._ip_address, self._port, app, True,
                                       request_handler=MotoRequestHandler, ssl_context=self._tls)
            self._server_ready_event.set()
            self._server.serve_forever()

    return HttpsMotoServer


def _evaluate_secure_transport(monkeypatch) -> None:
    """moto 5.2 evaluates only StringEquals conditions and treats a statement whose condition it
    cannot match as a denial, so the bucket's TLS-only statement (Deny ... if aws:SecureTransport
    is "false") would deny every request. AWS applies a statement only when its condition holds:
    evaluate the one condition our policies use, for this HTTPS-only server (SecureTransport is
    true for every request), and let moto judge the rest of the statement."""
    from moto.iam.access_control import IAMPolicyStatement, PermissionResult

    original = IAMPolicyStatement.is_action_permitted

    def is_action_permitted(self, action, resource="*", principal=None, incoming_condition_values=None):
        cond = self._statement.get("Condition")
        if not cond:
            return original(self, action, resource, principal, incoming_condition_values)
        (op, tests), = cond.items()
        (key, value), = tests.items()
        assert (op, key) == ("Bool", "aws:SecureTransport"), f"a condition this test does not evaluate: {cond}"
        if str(value).lower() != "true":  # the condition does not hold over TLS: the statement does not apply
            return PermissionResult.NEUTRAL
        bare = IAMPolicyStatement({k: v for k, v in self._statement.items() if k != "Condition"})
        return original(bare, action, resource, principal, incoming_condition_values)

    monkeypatch.setattr(IAMPolicyStatement, "is_action_permitted", is_action_permitted)


@pytest.fixture(scope="module")
def moto(tmp_path_factory):
    d = tmp_path_factory.mktemp("moto")
    with https_moto(d) as m:
        spec = d / "motofleet.toml"
        spec.write_text(SPEC)
        yield {**m, "spec": spec, "build": d / "build"}


@contextlib.contextmanager
def https_moto(d: Path, *patches):
    """An HTTPS moto server (certificate from a throwaway CA under ``d``, IAM's AWS-managed
    policies loaded, the TLS-only condition evaluated, then each of ``patches`` applied to a
    MonkeyPatch) and the operator's environment: {"url", "env", "ca", "dir", "outputs"}.
    Fails naming terraform or the provider mirror when they are missing."""
    from testbed.services.ca import CA

    require_terraform()
    patch = pytest.MonkeyPatch()
    _evaluate_secure_transport(patch)
    for extra in patches:
        extra(patch)
    ca = CA(d / "ca").ensure()
    leaf = ca.issue("moto", ["moto.test"], ips=["127.0.0.1"])
    server = _moto_server_class()(leaf.cert, leaf.key)
    # the instance role attaches AWS's AmazonSSMManagedInstanceCore, which moto knows only when asked
    patch.setenv("MOTO_IAM_LOAD_MANAGED_POLICIES", "true")
    server.start()
    try:
        host, port = server.get_host_and_port()
        url = f"https://{host}:{port}"
        reset_backends(url, str(ca.cert_path))  # backends made earlier in this process did not load them
        env = dict(os.environ, AWS_ACCESS_KEY_ID="AKIAMOTOTESTOPERATOR", AWS_SECRET_ACCESS_KEY=MARKER,
                   AWS_DEFAULT_REGION="us-east-2", AWS_CA_BUNDLE=str(ca.cert_path))
        env.pop("AWS_PROFILE", None)
        env.pop("AWS_SESSION_TOKEN", None)
        yield {"url": url, "env": env, "ca": str(ca.cert_path), "dir": d, "outputs": []}
    finally:
        server.stop()
        patch.undo()


def reset_backends(url: str, cafile: str) -> None:
    import ssl

    req = urllib.request.Request(f"{url}/moto-api/reset", data=b"", method="POST")
    urllib.request.urlopen(req, context=ssl.create_default_context(cafile=cafile), timeout=30).read()


def cli(m, *args, check=True) -> subprocess.CompletedProcess:
    r = subprocess.run([*DNSCAMP, "fleet", *args, str(m["spec"]), "--endpoint-url", m["url"]],
                       cwd=REPO, env=m["env"], capture_output=True, text=True, timeout=900)
    m["outputs"].append(r.stdout + r.stderr)
    if check:
        assert r.returncode == 0, f"fleet {args}: {r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


def boto(m, service, region="us-east-2", **creds):
    import boto3

    keys = creds or {"aws_access_key_id": "AKIAMOTOTESTOPERATOR", "aws_secret_access_key": MARKER}
    return boto3.client(service, region_name=region, endpoint_url=m["url"], verify=m["ca"], **keys)


def set_auth(m, initial_no_auth: str) -> None:
    """moto's IAM enforcement (server mode): '0' enforces from now on, 'inf' turns it off."""
    import ssl

    req = urllib.request.Request(f"{m['url']}/moto-api/reset-auth", data=initial_no_auth.encode(), method="POST",
                                 headers={"Content-Type": "application/octet-stream"})  # not a form: moto reads the body
    urllib.request.urlopen(req, context=ssl.create_default_context(cafile=m["ca"]), timeout=10).read()


def test_dry_run_creates_nothing(moto):
    m = moto
    r = cli(m, "apply", "--out", str(m["build"].parent / "dry"), "--dry-run")
    assert "total: $" in r.stdout and "Plan:" in r.stdout and "dry run: nothing created" in r.stdout
    assert "motofleet-results" not in {b["Name"] for b in boto(m, "s3").list_buckets()["Buckets"]}
    assert MARKER not in r.stdout + r.stderr


def test_no_terraform_on_path_is_refused_by_name(moto, tmp_path):
    m = moto
    env = dict(m["env"], PATH=str(tmp_path))  # neither tofu nor terraform
    r = subprocess.run([*DNSCAMP, "fleet", "plan", str(m["spec"]), "--out", str(tmp_path / "b")],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "neither tofu nor terraform on PATH" in r.stderr


def test_checkov_on_the_planned_fleet(moto, tmp_path):
    """checkov over what the rendered root would create (the plan, with the modules' real values),
    beside test_infra_modules.py's scan of the modules' source: zero failed checks, and every
    skip is one carried in the modules' code with its reason (mapped back via the repo root)."""
    from tests import tools

    checkov = tools.require("checkov", "install/60-infra.sh")
    plan = tmp_path / "plan.json"
    cli(moto, "plan", "--out", str(tmp_path / "build"), "--plan-json", str(plan))
    planned = json.loads(plan.read_text())
    types = {r["type"] for r in planned["resource_changes"]}
    assert {"aws_instance", "aws_s3_bucket", "aws_iam_role_policy"} <= types or {"aws_instance", "aws_s3_bucket"} <= types
    p = subprocess.run([checkov, "-f", str(plan), "--framework", "terraform_plan", "--skip-download", "-o", "json",
                        "--repo-root-for-plan-enrichment", str(REPO / "infra")],
                       capture_output=True, text=True, cwd=REPO, timeout=600)
    report = json.loads(p.stdout)
    report = report if isinstance(report, dict) else report[0]
    failed = [(c["check_id"], c["resource"]) for c in report["results"]["failed_checks"]]
    assert report["summary"]["passed"] >= 30 and not failed and p.returncode == 0, failed
    assert all(len(c["check_result"].get("suppress_comment") or "") > 20 for c in report["results"]["skipped_checks"])
