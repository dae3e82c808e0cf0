"""Campaign spec -> infra/build/<campaign>/main.tf.json (Terraform JSON syntax), the root module
of the fleet (docs/fleet.md):

- one aliased ``aws`` provider per region the spec uses (alias = region with '-' -> '_');
- ``module.results_bucket`` in the home region; one ``module.vantage_<vantage>_<alias>`` per
  (ec2 vantage, region); ``module.whoami_dns`` in the home region when [fleet] names a zone;
  ``module.budget`` (AWS Budgets) when [fleet] names a ``budget_email``;
- a ``backend "s3"`` (state in ``state_bucket`` under dnscamp/<campaign>/terraform.tfstate,
  locked by a lock file beside it) when [fleet] names a ``state_bucket``; local state in the
  build dir otherwise (rehearsals, tests).

The agent's wheel and lock file are root *variables* without defaults (their URLs marked
sensitive): `dnscamp fleet apply` builds and uploads them and passes the presigned URLs and
sha256s through the environment (TF_VAR_*), so they are never written into the build directory,
and a hand-run ``terraform apply`` without them stops at "No value for required variable".
`plan`/`apply --dry-run` pass PLAN_ONLY values (an ``.invalid`` URL, RFC 6761, and a zero
digest) that no code path applies. Credentials are never rendered: the provider takes them from
the AWS standard chain (environment, --profile as AWS_PROFILE, SSO, instance role).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from dnscamp import __version__
from dnscamp.spec import EC2_DEFAULT_INSTANCE_TYPE, CampaignSpec

REPO = Path(__file__).resolve().parents[2]
MODULES = REPO / "infra" / "modules"
BUILD = REPO / "infra" / "build"
PROVIDER_VERSION = "~> 5.100"  # the provider of the image's mirror is 5.100.0 (TOOLCHAIN.md)
AGENT_VARS = ("agent_wheel_url", "agent_wheel_sha256", "agent_lock_url", "agent_lock_sha256")
COREDNS_VARS = ("coredns_url", "coredns_sha256")  # the whoami server's CoreDNS binary, uploaded like the agent
PLAN_ONLY = {
    "agent_wheel_url": "https://plan-only.invalid/dnscamp-agent-not-uploaded.whl",
    "agent_wheel_sha256": "0" * 64,
    "agent_lock_url": "https://plan-only.invalid/requirements-not-uploaded.lock",
    "agent_lock_sha256": "0" * 64,
    "coredns_url": "https://plan-only.invalid/coredns-not-uploaded",
    "coredns_sha256": "0" * 64,
}
_IDENT = re.compile(r"[^A-Za-z0-9_]")


class RenderError(ValueError):
    """A spec that cannot be rendered (one line naming the field)."""


def alias(region: str) -> str:
    return region.replace("-", "_")


def module_name(vantage: str, region: str) -> str:
    """A Terraform identifier for (vantage, region): vantage ids may hold '.', identifiers not."""
    return f"vantage_{_IDENT.sub('_', vantage)}_{alias(region)}"


def build_dir(spec: CampaignSpec, out: Path | None = None) -> Path:
    return Path(out) if out is not None else BUILD / spec.campaign.name


def lit(text: str) -> str:
    """A literal string in Terraform JSON syntax, where strings are templates: '${' and '%{'
    in a spec (a TOML comment, a description) must not be evaluated."""
    return text.replace("${", "$${").replace("%{", "%%{")


def regions(spec: CampaignSpec, extra: tuple[str, ...] | list[str] = ()) -> list[str]:
    """Every region the fleet uses, home region first, then in spec order, then ``extra`` (regions
    the state still has resources in after their vantage left the spec)."""
    assert spec.fleet is not None
    out = [spec.fleet.home_region]
    for v in spec.ec2_vantages():
        out += [r for r in v.all_regions if r not in out]
    return out + [r for r in dict.fromkeys(extra) if r not in out]


STANDIN_SERVICES = ("s3", "ec2", "iam", "sts", "budgets")
BUDGET_MARGIN = 1.2  # the default monthly budget: the fleet's bill for a month (or its days) plus 20 %


def state_key(campaign: str) -> str:
    return f"dnscamp/{campaign}/terraform.tfstate"


def state_bucket(spec: CampaignSpec) -> str | None:
    return getattr(spec.fleet, "state_bucket", None)


def backend(spec: CampaignSpec, endpoint_url: str | None = None) -> dict[str, Any] | None:
    """The S3 backend block of the root, or None (local state) without [fleet] state_bucket.
    ``use_lockfile``: S3's conditional PUT (If-None-Match) on <key>.tflock is the lock, so a
    second `apply` fails to take it instead of writing a state beside the first's (Terraform
    >= 1.11, OpenTofu >= 1.10); no DynamoDB table."""
    bucket = state_bucket(spec)
    if bucket is None:
        return None
    assert spec.fleet is not None
    b: dict[str, Any] = {"bucket": bucket, "key": state_key(spec.campaign.name), "region": spec.fleet.home_region,
                         "encrypt": True, "use_lockfile": True}
    if endpoint_url:
        b.update(endpoints={"s3": endpoint_url}, use_path_style=True, skip_credentials_validation=True,
                 skip_requesting_account_id=True, skip_metadata_api_check=True, skip_region_validation=True)
    return b


def budget_usd(spec: CampaignSpec) -> float:
    """The monthly budget: [fleet] budget_usd_per_month, else the bill per day x the days of a
    month the fleet runs (at most 31) x 1.2, rounded up to a dollar."""
    import math

    from dnscamp.fleet import cost

    assert spec.fleet is not None
    given = getattr(spec.fleet, "budget_usd_per_month", None)
    if given:
        return float(given)
    try:
        b = cost.bill(spec)
    except cost.CostError as exc:
        raise RenderError(f"{spec.source or '<spec>'}: fleet.budget_usd_per_month: not set and no bill to derive it "
                          f"from ({exc})") from None
    return float(math.ceil(b.per_day_usd * min(b.days, 31.0) * BUDGET_MARGIN))


def _provider(region: str, campaign: str, endpoint_url: str | None) -> dict[str, Any]:
    p: dict[str, Any] = {
        "alias": alias(region),
        "region": region,
        "default_tags": [{"tags": {"campaign": lit(campaign), "managed-by": "dnscamp"}}],
    }
    if endpoint_url:  # a stand-in AWS (moto in server mode): every service at one URL, no account checks
        p.update(
            endpoints=[{svc: endpoint_url for svc in STANDIN_SERVICES}],
            skip_credentials_validation=True, skip_metadata_api_check=True, skip_requesting_account_id=True,
            s3_use_path_style=True,
        )
    return p


def config(spec: CampaignSpec, spec_text: str, *, out_dir: Path, endpoint_url: str | None = None,
           extra_regions: tuple[str, ...] | list[str] = ()) -> dict[str, Any]:
    """The root module as a dict (what main.tf.json holds)."""
    fleet = spec.fleet
    if fleet is None:
        raise RenderError(f"{spec.source or '<spec>'}: fleet: no [fleet] section (results_bucket, home_region)")
    if not spec.ec2_vantages():
        raise RenderError(f"{spec.source or '<spec>'}: vantages: no vantage has provider = 'ec2': nothing to render")
    src = Path(os.path.relpath(MODULES, out_dir)).as_posix()
    home = f"aws.{alias(fleet.home_region)}"
    name = spec.campaign.name
    modules: dict[str, Any] = {
        "results_bucket": {
            "source": f"{src}/results_bucket",
            "providers": {"aws": home},
            "bucket_name": fleet.results_bucket,
            "transition_days": fleet.transition_days,
        }
    }
    outputs: dict[str, Any] = {"results_bucket": {"value": "${module.results_bucket.bucket}"},
                               "collector_policy_arn": {"value": "${module.results_bucket.collector_policy_arn}"}}
    instance_ids: dict[str, str] = {}
    for v in spec.ec2_vantages():
        for region in v.all_regions:
            m = module_name(v.id, region)
            if m in modules:
                raise RenderError(f"{spec.source}: vantages: {v.id!r} and another vantage id both become module {m!r}")
            modules[m] = {
                "source": f"{src}/vantage",
                "providers": {"aws": f"aws.{alias(region)}"},
                "campaign": name,
                "vantage": v.id,
                "region": region,
                "network_profile": v.network_profiles[0],
                "instance_type": v.instance_type or EC2_DEFAULT_INSTANCE_TYPE,
                "instance_count": v.instance_count or 1,
                "results_bucket": "${module.results_bucket.bucket}",
                "ssh_cidr": v.ssh_cidr,
                "ami_id": fleet.ami_ids.get(region),
                "spec_toml": "${local.spec_toml}",
                "agent_version": "${var.agent_version}",
                **{k: f"${{var.{k}}}" for k in AGENT_VARS},
            }
            instance_ids[f"{v.id}/{region}"] = f"${{module.{m}.instance_ids}}"
    outputs["instance_ids"] = {"value": instance_ids}
    if fleet.whoami_zone:
        modules["whoami_dns"] = {
            "source": f"{src}/whoami_dns",
            "providers": {"aws": home},
            "zone": fleet.whoami_zone,
            "instance_type": fleet.whoami_instance_type,
            "ami_id": fleet.ami_ids.get(fleet.home_region),
            "coredns_url": "${var.coredns_url}",
            "coredns_sha256": "${var.coredns_sha256}",
            "tags": {"campaign": lit(name)},
        }
        outputs["whoami_public_ip"] = {"value": "${module.whoami_dns.public_ip}"}
    email = getattr(fleet, "budget_email", None)
    if email:
        modules["budget"] = {
            "source": f"{src}/budget",
            "providers": {"aws": home},
            "campaign": lit(name),
            "amount_usd": budget_usd(spec),
            "email": lit(email),
        }
        outputs["budget"] = {"value": "${module.budget.name}"}
    variables: dict[str, Any] = {
        "agent_version": {"type": "string", "default": __version__,
                          "description": "dnscamp version of the wheel (the checkout's, set by `dnscamp fleet apply`)."},
    }
    for k in AGENT_VARS + (COREDNS_VARS if fleet.whoami_zone else ()):
        is_url = k.endswith("_url")
        what = {"wheel": "agent wheel", "lock": "agent requirements.lock", "coredns": "CoreDNS binary"}[k.split("_")[1 if k.startswith("agent") else 0]]
        variables[k] = {
            "type": "string",
            "description": (f"Presigned GET URL of the {what} under dist/ of the results bucket, set by `dnscamp fleet "
                            f"apply` through TF_VAR_{k} (never written here)." if is_url else
                            f"sha256 of the {what} (checked on the instance before installing it)."),
            "sensitive": is_url,  # a presigned URL carries a signature (and a session token with temporary credentials)
        }  # the modules validate the values (https:// URL, 64 hex digits)
    terraform: dict[str, Any] = {
        "required_version": ">= 1.6",
        "required_providers": {"aws": {"source": "hashicorp/aws", "version": PROVIDER_VERSION}},
    }
    be = backend(spec, endpoint_url)
    if be is not None:
        terraform["backend"] = {"s3": be}
        terraform["required_version"] = ">= 1.10"  # use_lockfile: an older tool would refuse the attribute anyway
    return {
        "//": f"Rendered by `dnscamp fleet render` from {lit(Path(spec.source).name) if spec.source else 'a spec'}; "
              "do not edit (re-render). Credentials come from the AWS standard chain, never from here.",
        "terraform": terraform,
        "provider": {"aws": [_provider(r, name, endpoint_url) for r in regions(spec, extra_regions)]},
        "variable": variables,
        "locals": {"spec_toml": lit(spec_text)},
        "module": modules,
        "output": outputs,
    }


def render(spec: CampaignSpec, spec_text: str, *, out: Path | None = None, endpoint_url: str | None = None,
           extra_regions: tuple[str, ...] | list[str] = ()) -> Path:
    """Write <out or infra/build/<campaign>>/main.tf.json; returns the build directory."""
    d = build_dir(spec, out)
    d.mkdir(parents=True, exist_ok=True)
    text = json.dumps(config(spec, spec_text, out_dir=d.resolve(), endpoint_url=endpoint_url,
                             extra_regions=extra_regions), indent=2) + "\n"
    target = d / "main.tf.json"
    if not target.is_file() or target.read_text() != text:  # unchanged: leave the mtime (and terraform) alone
        target.write_text(text)
    return d
