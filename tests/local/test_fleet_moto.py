"""`dnscamp fleet apply / status / destroy` (the real CLI, real Terraform and the real
hashicorp/aws provider) against moto in server mode: a faithful fake of AWS's APIs on a loopback
HTTPS endpoint, not AWS. Two regions: the bucket, the instance roles and policies, the
instances; status by tag; destroy. The instance policy's reach is shown by moto's IAM
enforcement with the instance role's own (assumed) credentials. A secret-key marker in the
environment must appear in no file of the build dir and no output.

HTTPS because the vantage module accepts only https:// agent URLs (presigned against the
endpoint): the server's certificate comes from a throwaway CA (testbed.services.ca, limited to
127.0.0.0/8 and .test) that boto3 and the provider trust through AWS_CA_BUNDLE.

Missing terraform/tofu, the provider mirror or moto's server dependencies FAIL naming them."""

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from vantage_agent import ship

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
    from testbed.services.ca import CA

    require_terraform()
    patch = pytest.MonkeyPatch()
    _evaluate_secure_transport(patch)
    d = tmp_path_factory.mktemp("moto")
    ca = CA(d / "ca").ensure()
    leaf = ca.issue("moto", ["moto.test"], ips=["127.0.0.1"])
    server = _moto_server_class()(leaf.cert, leaf.key)
    # the instance role attaches AWS's AmazonSSMManagedInstanceCore, which moto knows only when asked
    patch.setenv("MOTO_IAM_LOAD_MANAGED_POLICIES", "true")
    server.start()
    host, port = server.get_host_and_port()
    url = f"https://{host}:{port}"
    reset_backends(url, str(ca.cert_path))  # backends made earlier in this process did not load them
    env = dict(os.environ, AWS_ACCESS_KEY_ID="AKIAMOTOTESTOPERATOR", AWS_SECRET_ACCESS_KEY=MARKER,
               AWS_DEFAULT_REGION="us-east-2", AWS_CA_BUNDLE=str(ca.cert_path))
    env.pop("AWS_PROFILE", None)
    env.pop("AWS_SESSION_TOKEN", None)
    spec = d / "motofleet.toml"
    spec.write_text(SPEC)
    yield {"url": url, "env": env, "spec": spec, "build": d / "build", "ca": str(ca.cert_path), "outputs": []}
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


def test_apply_status_policy_destroy(moto):
    m = moto
    r = cli(m, "apply", "--out", str(m["build"]), "--yes")
    assert "fleet: using " in r.stdout and "total: $" in r.stdout

    # what the apply created: the bucket (versioned), one role per (vantage, region), instances in both regions
    s3 = boto(m, "s3")
    assert s3.get_bucket_versioning(Bucket="motofleet-results")["Status"] == "Enabled"
    dist = [o["Key"] for o in s3.list_objects_v2(Bucket="motofleet-results", Prefix="dist/")["Contents"]]
    assert any(k.endswith(".whl") for k in dist) and any(k.endswith("requirements.lock") for k in dist)
    roles = {r["RoleName"] for r in boto(m, "iam").list_roles()["Roles"]}
    assert {f"dnscamp-{CAMPAIGN}-alpha-us-east-2", f"dnscamp-{CAMPAIGN}-alpha-eu-central-1",
            f"dnscamp-{CAMPAIGN}-beta-eu-central-1"} <= roles

    st = json.loads(cli(m, "status", "--json").stdout)
    running = sorted((i["vantage"], i["region"]) for i in st["instances"] if i["state"] == "running")
    assert running == [("alpha", "eu-central-1"), ("alpha", "us-east-2"), ("beta", "eu-central-1"), ("beta", "eu-central-1")]
    assert st["vantages"]["alpha"] == {"last_upload": None, "last_upload_key": None}
    assert st["statuses"] == [] and st["flags"] == []  # just launched: within the grace for a first status

    # the instance role's reach, with its own credentials and moto's IAM enforcement on
    role = boto(m, "iam").get_role(RoleName=f"dnscamp-{CAMPAIGN}-alpha-us-east-2")["Role"]
    c = boto(m, "sts").assume_role(RoleArn=role["Arn"], RoleSessionName="agent")["Credentials"]
    agent = boto(m, "s3", aws_access_key_id=c["AccessKeyId"], aws_secret_access_key=c["SecretAccessKey"],
                 aws_session_token=c["SessionToken"])
    from botocore.exceptions import ClientError

    def denied(call, **kw):
        with pytest.raises(ClientError) as exc:
            call(Bucket="motofleet-results", **kw)
        assert exc.value.response["Error"]["Code"] in ("AccessDenied", "403"), exc.value.response

    set_auth(m, "0")
    try:
        agent.put_object(Bucket="motofleet-results", Key=f"results/{CAMPAIGN}/alpha/batch-1.jsonl", Body=b"{}\n")
        body = ship.status_body(campaign=CAMPAIGN, vantage="alpha", region="us-east-2", instance_id="i-0123",
                                phase="measuring", state={}, pending_units=0, runs_incomplete=0,
                                disk_free_bytes=1 << 40, clock_offset_s=0.0)  # fmt: skip
        agent.put_object(Bucket="motofleet-results", Key=f"status/{CAMPAIGN}/alpha/us-east-2/i-0123.json",
                         Body=json.dumps(body).encode())  # a schema-1 status, as the agent writes it
        denied(agent.put_object, Key=f"status/{CAMPAIGN}/alpha/eu-central-1/i-0123.json", Body=b"x")  # its vantage's other region
        denied(agent.put_object, Key=f"results/{CAMPAIGN}/beta/batch-1.jsonl", Body=b"x")  # another vantage's prefix
        denied(agent.put_object, Key=f"status/{CAMPAIGN}/beta/us-east-2/i-0123.json", Body=b"x")
        denied(agent.put_object, Key="status/alpha/us-east-2.json", Body=b"x")
        denied(agent.put_object, Key="dist/evil.whl", Body=b"x")
        denied(agent.get_object, Key=f"results/{CAMPAIGN}/alpha/batch-1.jsonl")
        denied(agent.list_objects_v2, Prefix="results/")
        denied(agent.delete_object, Key=f"results/{CAMPAIGN}/alpha/batch-1.jsonl")
    finally:
        set_auth(m, "inf")

    # a second apply (new wheel upload, new presigned URLs in the user data) keeps the running
    # agents: user data acts at first boot only (lifecycle ignore_changes in the module)
    ids = sorted(i["id"] for i in st["instances"] if i["state"] == "running")
    cli(m, "apply", "--out", str(m["build"]), "--yes")
    st = json.loads(cli(m, "status", "--json").stdout)
    assert sorted(i["id"] for i in st["instances"] if i["state"] == "running") == ids

    st = json.loads(cli(m, "status", "--json").stdout)
    assert st["vantages"]["alpha"]["last_upload_key"] == f"results/{CAMPAIGN}/alpha/batch-1.jsonl"
    assert st["vantages"]["beta"]["last_upload"] is None and st["flags"] == []
    text = cli(m, "status").stdout
    assert "vantage alpha: last upload 20" in text and "4 instance(s)" in text

    # destroy: instances and roles go, the results bucket stays (until --delete-bucket); these
    # agents never wrote a status object, so there is nothing to drain by (test_fleet_terraform drains)
    cli(m, "destroy", "--out", str(m["build"]), "--yes", "--force")
    st = json.loads(cli(m, "status", "--json").stdout)
    assert st["instances"] and all(i["state"] == "terminated" for i in st["instances"])
    roles = {r["RoleName"] for r in boto(m, "iam").list_roles()["Roles"]}
    assert not any(r.startswith(f"dnscamp-{CAMPAIGN}-") for r in roles)
    assert s3.head_bucket(Bucket="motofleet-results")
    cli(m, "destroy", "--out", str(m["build"]), "--yes", "--delete-bucket", "--force")
    assert "motofleet-results" not in {b["Name"] for b in s3.list_buckets()["Buckets"]}

    # the secret key never reached a file of the build dir or any output
    files = [p for p in m["build"].rglob("*") if p.is_file()]
    assert files and not [p for p in files if MARKER.encode() in p.read_bytes()]
    assert not [o for o in m["outputs"] if MARKER in o]


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
