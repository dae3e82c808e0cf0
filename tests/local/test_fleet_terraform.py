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


# --- the saved plan, the remote locked state, drain and destroy: the real CLI, Terraform and the
# hashicorp/aws provider against moto in server mode (test_fleet_moto.py's HTTPS server)

GUARD = "tfguard"
AMI = "ami-1e749f67"  # an image moto ships in every region
GUARD_SPEC = f"""
[campaign]
name = "{GUARD}"
[campaign.schedule]
cron = "*/15 * * * *"
[[vantages]]
id = "alpha"
provider = "ec2"
region = "us-east-2"
instance_type = "t3.micro"
[[vantages]]
id = "beta"
provider = "ec2"
region = "eu-central-1"
instance_type = "t3.micro"
instance_count = 2
[fleet]
results_bucket = "{GUARD}-results"
state_bucket = "{GUARD}-tfstate"
home_region = "us-east-2"
ami_ids = {{ "us-east-2" = "{AMI}", "eu-central-1" = "{AMI}" }}
[kinds.ping]
targets = ["1.1.1.1"]
"""
GAMMA = """
[[vantages]]
id = "gamma"
provider = "ec2"
region = "us-east-2"
instance_type = "t3.micro"
"""


def _assume_the_prefix_condition(monkeypatch) -> None:
    """moto 5.2 has no request's s3:prefix to match the collector's ListBucket condition against
    (and denies a statement whose condition it cannot evaluate): apply that statement as if the
    condition held. The listing below is under results/; the condition itself is asserted by the
    results_bucket module's terraform test."""
    from moto.iam.access_control import IAMPolicyStatement

    inner = IAMPolicyStatement.is_action_permitted

    def is_action_permitted(self, action, resource="*", principal=None, incoming_condition_values=None):
        if self._statement.get("Condition") == {"StringLike": {"s3:prefix": ["results/", "results/*"]}}:
            bare = IAMPolicyStatement({k: v for k, v in self._statement.items() if k != "Condition"})
            return inner(bare, action, resource, principal, incoming_condition_values)
        return inner(self, action, resource, principal, incoming_condition_values)

    monkeypatch.setattr(IAMPolicyStatement, "is_action_permitted", is_action_permitted)


@pytest.fixture(scope="module")
def aws(tmp_path_factory):
    """test_fleet_moto's HTTPS moto server, the collector's s3:prefix condition assumed too."""
    from tests.local.test_fleet_moto import https_moto

    with https_moto(tmp_path_factory.mktemp("tfguard"), _assume_the_prefix_condition) as m:
        yield m


def fleet(m, spec, *args, check=True, after=()):
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "dnscamp.cli", "fleet", *args, str(spec), *after, "--endpoint-url", m["url"]],
                       cwd=render.REPO, env=m["env"], capture_output=True, text=True, timeout=1200)
    m["outputs"].append(r.stdout + r.stderr)
    if check:
        assert r.returncode == 0, f"fleet {args}: {r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


def client(m, service, region="us-east-2"):
    import boto3

    from tests.local.test_fleet_moto import MARKER

    return boto3.client(service, region_name=region, endpoint_url=m["url"], verify=m["ca"],
                        aws_access_key_id="AKIAMOTOTESTOPERATOR", aws_secret_access_key=MARKER)


def instances(m, region, vantage=None, states=("pending", "running")):
    out = []
    for r in client(m, "ec2", region).describe_instances(
            Filters=[{"Name": "tag:campaign", "Values": [GUARD]}])["Reservations"]:
        for i in r["Instances"]:
            tags = {t["Key"]: t["Value"] for t in i.get("Tags", [])}
            if i["State"]["Name"] in states and (vantage is None or tags.get("vantage") == vantage):
                out.append((tags.get("vantage"), i["InstanceId"]))
    return sorted(out)


def put_status(m, vantage, region, iid, pending):
    """A status object as the agent writes it (every field of schema 1 present)."""
    now = "2026-11-27T12:00:00+00:00"
    body = {"schema": 1, "campaign": GUARD, "vantage": vantage, "region": region, "instance_id": iid, "at": now,
            "agent_version": "0.1.0", "phase": "measuring", "launched_at": now, "last_firing": None, "firings": 1,
            "skipped_firings": 0, "last_skipped_at": None, "pending_units": pending, "runs_incomplete": 0,
            "disk_free_bytes": 8 << 30, "clock_offset_s": 0.1, "error": None,
            "ship": {"shipped": 3, "pending": pending, "errors": []}}
    client(m, "s3").put_object(Bucket=f"{GUARD}-results", Key=f"status/{GUARD}/{vantage}/{region}/{iid}.json",
                               Body=json.dumps(body).encode())


def tf_state(m) -> dict:
    o = client(m, "s3").get_object(Bucket=f"{GUARD}-tfstate", Key=f"dnscamp/{GUARD}/terraform.tfstate")
    return json.loads(o["Body"].read())


def test_saved_plan_guard_locked_state_drain_and_destroy_by_state(aws, tmp_path):
    m = aws
    spec = tmp_path / "tfguard.toml"
    spec.write_text(GUARD_SPEC)
    build = tmp_path / "build"
    s3 = client(m, "s3")

    # init: the state bucket, versioned, encrypted, public access blocked
    r = fleet(m, spec, "init", "--out", str(build))
    assert f"state bucket s3://{GUARD}-tfstate created" in r.stdout
    assert s3.get_bucket_versioning(Bucket=f"{GUARD}-tfstate")["Status"] == "Enabled"
    assert s3.get_public_access_block(Bucket=f"{GUARD}-tfstate")["PublicAccessBlockConfiguration"]["BlockPublicPolicy"]
    assert s3.get_bucket_encryption(Bucket=f"{GUARD}-tfstate")["ServerSideEncryptionConfiguration"]["Rules"]
    assert "exists" in fleet(m, spec, "init", "--out", str(build)).stdout  # a second init changes nothing

    # apply: the summary per region before the saved plan is applied; state in S3, none local
    r = fleet(m, spec, "apply", "--out", str(build), "--yes")
    assert "us-east-2: " in r.stdout and "eu-central-1: " in r.stdout and "bill $" in r.stdout
    assert "+   module.vantage_beta_eu_central_1.aws_instance.agent[1]" in r.stdout
    assert len(instances(m, "eu-central-1", "beta")) == 2 and len(instances(m, "us-east-2", "alpha")) == 1
    assert not (build / "terraform.tfstate").exists() and not (build / "tfplan").exists()
    assert any(res["type"] == "aws_instance" for res in tf_state(m)["resources"])
    role = f"dnscamp-{GUARD}-alpha-us-east-2"
    attached = client(m, "iam").list_attached_role_policies(RoleName=role)["AttachedPolicies"]
    assert [p["PolicyName"] for p in attached] == ["AmazonSSMManagedInstanceCore"]
    ingress = [sg["IpPermissions"] for sg in client(m, "ec2").describe_security_groups(
        Filters=[{"Name": "group-name", "Values": [role]}])["SecurityGroups"]]
    assert ingress == [[]]  # no inbound port at all
    assert "fleet: using " in r.stdout and "total: $" in r.stdout
    assert s3.get_bucket_versioning(Bucket=f"{GUARD}-results")["Status"] == "Enabled"
    dist = [o["Key"] for o in s3.list_objects_v2(Bucket=f"{GUARD}-results", Prefix="dist/")["Contents"]]
    assert any(k.endswith(".whl") for k in dist) and any(k.endswith("requirements.lock") for k in dist)
    roles = {x["RoleName"] for x in client(m, "iam").list_roles()["Roles"]}
    assert {f"dnscamp-{GUARD}-alpha-us-east-2", f"dnscamp-{GUARD}-beta-eu-central-1"} <= roles

    # `fleet status`: the instances by tag; just launched, so within the grace for a first status
    st = json.loads(fleet(m, spec, "status", after=("--json",)).stdout)
    running = sorted((i["vantage"], i["region"]) for i in st["instances"] if i["state"] == "running")
    assert running == [("alpha", "us-east-2"), ("beta", "eu-central-1"), ("beta", "eu-central-1")]
    assert st["vantages"]["alpha"] == {"last_upload": None, "last_upload_key": None}
    assert st["statuses"] == [] and st["flags"] == []

    # the collector's policy, attached to a user of its own, under moto's IAM enforcement: it
    # lists and reads results/; it cannot read status/, write or delete
    from tests.local.test_fleet_moto import set_auth

    iam = client(m, "iam")
    arn = next(p["Arn"] for p in iam.list_policies(Scope="Local")["Policies"]
               if p["PolicyName"] == f"dnscamp-collector-{GUARD}-results")
    iam.create_user(UserName="collector")
    iam.attach_user_policy(UserName="collector", PolicyArn=arn)
    key = iam.create_access_key(UserName="collector")["AccessKey"]
    s3.put_object(Bucket=f"{GUARD}-results", Key=f"results/{GUARD}/alpha/R1/u.jsonl", Body=b"{}\n")
    s3.put_object(Bucket=f"{GUARD}-results", Key=f"status/{GUARD}/alpha/us-east-2/i-1.json", Body=b"{}")
    import boto3
    from botocore.exceptions import ClientError

    coll = boto3.client("s3", region_name="us-east-2", endpoint_url=m["url"], verify=m["ca"],
                        aws_access_key_id=key["AccessKeyId"], aws_secret_access_key=key["SecretAccessKey"])
    set_auth(m, "0")
    try:
        assert coll.list_objects_v2(Bucket=f"{GUARD}-results", Prefix="results/")["KeyCount"] == 1
        assert coll.get_object(Bucket=f"{GUARD}-results", Key=f"results/{GUARD}/alpha/R1/u.jsonl")["Body"].read() == b"{}\n"
        for call, kw in ((coll.get_object, {"Key": f"status/{GUARD}/alpha/us-east-2/i-1.json"}),
                         (coll.put_object, {"Key": f"results/{GUARD}/alpha/R1/v.jsonl", "Body": b"x"}),
                         (coll.delete_object, {"Key": f"results/{GUARD}/alpha/R1/u.jsonl"})):
            with pytest.raises(ClientError) as denied:
                call(Bucket=f"{GUARD}-results", **kw)
            assert denied.value.response["Error"]["Code"] in ("AccessDenied", "403"), (call, kw)
    finally:
        set_auth(m, "inf")
    s3.delete_object(Bucket=f"{GUARD}-results", Key=f"status/{GUARD}/alpha/us-east-2/i-1.json")
    s3.delete_object(Bucket=f"{GUARD}-results", Key=f"results/{GUARD}/alpha/R1/u.jsonl")

    # the instance role's reach, with its own (assumed) credentials under moto's IAM enforcement:
    # it writes its vantage's results and its region's status objects, nothing else, and reads nothing
    from vantage_agent import ship

    role_arn = client(m, "iam").get_role(RoleName=f"dnscamp-{GUARD}-alpha-us-east-2")["Role"]["Arn"]
    c = client(m, "sts").assume_role(RoleArn=role_arn, RoleSessionName="agent")["Credentials"]
    agent = boto3.client("s3", region_name="us-east-2", endpoint_url=m["url"], verify=m["ca"],
                         aws_access_key_id=c["AccessKeyId"], aws_secret_access_key=c["SecretAccessKey"],
                         aws_session_token=c["SessionToken"])
    bucket = f"{GUARD}-results"
    set_auth(m, "0")
    try:
        agent.put_object(Bucket=bucket, Key=f"results/{GUARD}/alpha/batch-1.jsonl", Body=b"{}\n")
        body = ship.status_body(campaign=GUARD, vantage="alpha", region="us-east-2", instance_id="i-0123",
                                phase="measuring", state={}, pending_units=0, runs_incomplete=0,
                                disk_free_bytes=1 << 40, clock_offset_s=0.0)  # fmt: skip
        agent.put_object(Bucket=bucket, Key=f"status/{GUARD}/alpha/us-east-2/i-0123.json",
                         Body=json.dumps(body).encode())  # a schema-1 status, as the agent writes it
        for call, kw in ((agent.put_object, {"Key": f"status/{GUARD}/alpha/eu-central-1/i-0123.json", "Body": b"x"}),  # another region
                         (agent.put_object, {"Key": f"results/{GUARD}/beta/batch-1.jsonl", "Body": b"x"}),  # another vantage
                         (agent.put_object, {"Key": f"status/{GUARD}/beta/us-east-2/i-0123.json", "Body": b"x"}),
                         (agent.put_object, {"Key": "status/alpha/us-east-2.json", "Body": b"x"}),
                         (agent.put_object, {"Key": "dist/evil.whl", "Body": b"x"}),
                         (agent.get_object, {"Key": f"results/{GUARD}/alpha/batch-1.jsonl"}),
                         (agent.list_objects_v2, {"Prefix": "results/"}),
                         (agent.delete_object, {"Key": f"results/{GUARD}/alpha/batch-1.jsonl"})):
            with pytest.raises(ClientError) as denied:
                call(Bucket=bucket, **kw)
            assert denied.value.response["Error"]["Code"] in ("AccessDenied", "403"), (call, kw)
    finally:
        set_auth(m, "inf")
    st = json.loads(fleet(m, spec, "status", after=("--json",)).stdout)
    assert st["vantages"]["alpha"]["last_upload_key"] == f"results/{GUARD}/alpha/batch-1.jsonl"
    assert st["vantages"]["beta"]["last_upload"] is None and st["flags"] == []
    text = fleet(m, spec, "status").stdout
    assert "vantage alpha: last upload 20" in text and "3 instance(s)" in text
    s3.delete_object(Bucket=bucket, Key=f"status/{GUARD}/alpha/us-east-2/i-0123.json")

    # the same spec again: nothing changes (time alone, new presigned URLs, the AMI lookup)
    r = fleet(m, spec, "plan", "--out", str(build))
    assert "Plan: 0 to add, 0 to change, 0 to replace, 0 to destroy (nothing changes)" in r.stdout
    ids = instances(m, "eu-central-1")
    r = fleet(m, spec, "apply", "--out", str(build), "--yes")
    assert "fleet: nothing to change" in r.stdout and instances(m, "eu-central-1") == ids

    # a replacement (a tainted agent) is refused in one line naming it, and nothing happens
    from dnscamp.fleet import toolchain

    env = {k: v for k, v in m["env"].items() if k.startswith("AWS_")}
    taint = toolchain.run(["taint", "module.vantage_beta_eu_central_1.aws_instance.agent[0]"], cwd=build,
                          env_extra=env, check=False)
    assert taint.returncode == 0, taint.stdout + taint.stderr
    r = fleet(m, spec, "apply", "--out", str(build), "--yes", check=False)
    assert r.returncode == 1 and instances(m, "eu-central-1") == ids
    # (the preflight's notes, e.g. a vCPU quota moto cannot answer, are not refusals)
    (line,) = [ln for ln in r.stderr.splitlines() if "refused" in ln and "note:" not in ln]
    assert "module.vantage_beta_eu_central_1.aws_instance.agent[0] (replace)" in line and "--allow-replace" in line
    toolchain.run(["untaint", "module.vantage_beta_eu_central_1.aws_instance.agent[0]"], cwd=build, env_extra=env)
    # so is an instance count that shrinks (a destroy), also in a dry run
    spec.write_text(GUARD_SPEC.replace("instance_count = 2", "instance_count = 1"))
    r = fleet(m, spec, "apply", "--out", str(build), "--dry-run", check=False)
    assert r.returncode == 1 and "module.vantage_beta_eu_central_1.aws_instance.agent[1] (delete)" in r.stderr
    spec.write_text(GUARD_SPEC)

    # `fleet ssh`: the Session Manager line of each running instance of the vantage
    r = fleet(m, spec, "ssh", after=("beta", "--region", "eu-central-1"))
    assert sorted(r.stdout.split("\n")[:-1]) == [f"aws ssm start-session --target {i} --region eu-central-1" for _, i in ids]

    # a lock held by another apply: refused in one line, the state untouched
    serial = tf_state(m)["serial"]
    lock = f"dnscamp/{GUARD}/terraform.tfstate.tflock"
    s3.put_object(Bucket=f"{GUARD}-tfstate", Key=lock, Body=json.dumps(
        {"ID": "5e4a1b3c-0000-4000-8000-000000000000", "Operation": "OperationTypeApply", "Who": "other@host",
         "Version": "1.11.4", "Created": "2026-11-27T12:00:00Z", "Path": f"{GUARD}-tfstate/dnscamp/{GUARD}/terraform.tfstate"}).encode())
    r = fleet(m, spec, "plan", "--out", str(build), check=False)
    assert r.returncode == 1 and "the state is locked by another" in r.stderr and "other@host" in r.stdout
    s3.delete_object(Bucket=f"{GUARD}-tfstate", Key=lock)
    assert tf_state(m)["serial"] == serial

    # two applies at once from two checkouts (a vantage added): one takes the lock, the other
    # fails on it or plans after it; the state is never corrupted, no instance is made twice
    import subprocess

    both = GUARD_SPEC + GAMMA
    spec_gamma = tmp_path / "tfguard-gamma.toml"
    spec_gamma.write_text(both)
    from dnscamp.spec import loads

    dirs = [render.render(loads(both, str(spec_gamma)), both, out=tmp_path / f"co{k}", endpoint_url=m["url"]) for k in (1, 2)]
    tf_env = {**env, **{f"TF_VAR_{k}": v for k, v in render.PLAN_ONLY.items()}}
    for d in dirs:
        assert toolchain.run(["init", "-input=false", "-no-color"], cwd=d, env_extra=tf_env, check=False).returncode == 0
    exe = str(toolchain.find_terraform()[1])
    procs = [subprocess.Popen([exe, "apply", "-auto-approve", "-input=false", "-no-color"], cwd=d,
                              env=toolchain.tf_env(tf_env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for d in dirs]
    outs = [p.communicate(timeout=900)[0] for p in procs]
    codes = [p.returncode for p in procs]
    assert 0 in codes, outs
    failed = [o for c, o in zip(codes, outs) if c != 0]
    assert all("Error acquiring the state lock" in o for o in failed), failed
    assert len(instances(m, "us-east-2", "gamma")) == 1
    in_state = [res for res in tf_state(m)["resources"]
                if res["type"] == "aws_instance" and res["module"] == "module.vantage_gamma_us_east_2"]
    assert len(in_state) == 1 and len(in_state[0]["instances"]) == 1
    assert not s3.list_objects_v2(Bucket=f"{GUARD}-tfstate", Prefix=lock).get("KeyCount")  # the lock was released

    # destroy with a spec that no longer names beta (its region gone) nor gamma: drain first
    spec_alpha = tmp_path / "tfguard-alpha.toml"
    spec_alpha.write_text(GUARD_SPEC.split("[[vantages]]\nid = \"beta\"")[0] + "[fleet]" + GUARD_SPEC.split("[fleet]")[1])
    live = instances(m, "us-east-2") + instances(m, "eu-central-1")
    assert len(live) == 4
    for vantage, iid in live:
        put_status(m, vantage, "eu-central-1" if vantage == "beta" else "us-east-2", iid, 0)
    waiting_vantage, waiting_id = ids[0]
    put_status(m, waiting_vantage, "eu-central-1", waiting_id, 3)
    r = fleet(m, spec_alpha, "destroy", "--out", str(build), "--yes", "--drain-timeout", "1", "--poll", "0.5", check=False)
    assert r.returncode == 1 and "not drained" in r.stderr and waiting_id in r.stderr and "nothing destroyed" in r.stderr
    assert len(instances(m, "us-east-2") + instances(m, "eu-central-1")) == 4
    put_status(m, waiting_vantage, "eu-central-1", waiting_id, 0)
    r = fleet(m, spec_alpha, "destroy", "--out", str(build), "--yes")
    assert "drained" in r.stdout and f"s3://{GUARD}-results kept" in r.stdout
    assert "-   module.vantage_beta_eu_central_1.aws_instance.agent[1]" in r.stdout
    assert instances(m, "us-east-2") == [] and instances(m, "eu-central-1") == []
    left = {res["module"] for res in tf_state(m)["resources"] if res["mode"] == "managed"}
    assert left == {"module.results_bucket"} and s3.head_bucket(Bucket=f"{GUARD}-results")
    fleet(m, spec_alpha, "destroy", "--out", str(build), "--yes", "--delete-bucket", "--force")
    assert f"{GUARD}-results" not in {b["Name"] for b in s3.list_buckets()["Buckets"]}

    # no secret in any file of the build dirs or any output
    from tests.local.test_fleet_moto import MARKER

    files = [p for p in tmp_path.rglob("*") if p.is_file() and ".terraform" not in p.parts]
    assert files and not [p for p in files if MARKER.encode() in p.read_bytes()]
    assert not [o for o in m["outputs"] if MARKER in o]
