"""Preflight: what a campaign with ec2 vantages must satisfy before anything is billed.

``offline(spec, path)`` needs nothing but the spec (`dnscamp campaign validate` runs it):

- an ec2 vantage needs ``[campaign.schedule]``: the instances install it at boot and measure
  only when it fires; without it they run, and bill, measuring nothing;
- the schedule must fire within ``[fleet] days`` of any launch: each firing is one run of the
  whole campaign (every unit, ``repetitions`` included; docs/pipeline.md), so the campaign needs
  one firing at least, whenever the instances start; and one run (``jitter_s`` +
  ``max_runtime_s``) must fit in the campaign's days;
- every name the modules derive from the campaign, vantage and region ids (IAM role, instance
  profile, security group, tags, S3 keys) must be one AWS accepts, the buckets names S3
  accepts, and the instance counts within infra/modules/limits.json.

``online(spec, path, session, endpoint_url)`` asks AWS (boto3; `dnscamp fleet apply` runs both):

- every region of the fleet has a default VPC (the vantage module puts the agents there);
- every instance type is offered in its region, and the region's quota of vCPUs of running
  on-demand standard instances (Service Quotas L-1216C47A) holds what already runs there plus
  the plan;
- the buckets' names are not taken by another account.

Each refusal is one line, 'file: field: reason'.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from datetime import datetime, timedelta, timezone
from pathlib import Path

from dnscamp.fleet import limits
from dnscamp.spec import EC2_DEFAULT_INSTANCE_TYPE, CampaignSpec, ScheduleSpec

VCPU_QUOTA = ("ec2", "L-1216C47A")  # Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances, in vCPUs
# Instance families that count against that quota (the AWS EC2 "On-Demand Instance quotas"
# table); the others (F, G, P, X, Inf, DL, Trn, HPC, high memory, Mac) have quotas of their own.
STANDARD_FAMILIES = "acdhimrtz"
OTHER_FAMILY_PREFIXES = ("inf", "dl", "trn", "hpc", "u-", "mac", "vt", "f", "g", "p", "x")
HORIZON_S = 1461 * 86_400  # four years: a leap cycle, so Feb 29 schedules show their gaps
MAX_SAMPLES = 1500


# --- offline --------------------------------------------------------------------------------


def _longest_wait(cron: str, window_s: float, start: datetime) -> tuple[datetime, datetime] | None:
    """The launch time after ``start`` that waits longest for a firing, and that firing, when the
    wait is ``window_s`` or more; None when every launch sees a firing within ``window_s``.

    Launch times are sampled every window_s / 2 (at 30 s past a minute, so never on a firing);
    a gap between firings of window_s or more holds a sample in its first half, whose previous
    and next firings are then the gap's ends, exactly. Raises ValueError when it never fires."""
    from croniter import CroniterBadDateError, croniter

    step = window_s / 2
    horizon = min(HORIZON_S + 2 * window_s, MAX_SAMPLES * step)
    t0 = start.replace(second=30, microsecond=0)
    it = croniter(cron, t0)
    worst: tuple[datetime, datetime] | None = None
    k = 0
    while k * step <= horizon:
        s = t0 + timedelta(seconds=k * step)
        k += 1
        try:
            it.set_current(s, force=True)
            nxt = it.get_next(datetime)
        except CroniterBadDateError:
            raise ValueError("never fires") from None
        if (nxt - s).total_seconds() < step:
            continue
        it.set_current(s, force=True)
        try:
            prev = max(it.get_prev(datetime), t0)
        except CroniterBadDateError:
            prev = t0
        if (nxt - prev).total_seconds() >= window_s and (worst is None or nxt - prev > worst[1] - worst[0]):
            worst = (prev, nxt)
    return worst


def _days(seconds: float) -> str:
    return f"{seconds / 86_400:.3g} days" if seconds >= 86_400 else f"{seconds / 3600:.3g} hours"


def schedule_problems(sched: ScheduleSpec, days: float, *, start: datetime | None = None) -> list[tuple[str, str]]:
    """(field, reason) for a schedule that cannot give a fleet of ``days`` one complete run."""
    window = days * 86_400
    out: list[tuple[str, str]] = []
    try:
        worst = _longest_wait(sched.cron, window, start or datetime.now(timezone.utc))
    except ValueError:
        return [("campaign.schedule.cron", f"{sched.cron!r} never fires (no date matches it)")]
    if worst is not None:
        launch, first = worst
        out.append(("campaign.schedule.cron",
                    f"{sched.cron!r} can go {_days((first - launch).total_seconds())} without firing, not less than "
                    f"[fleet] days = {days:g}: an instance launched at {launch:%Y-%m-%d %H:%M} UTC would reach its end "
                    f"of life before its first firing at {first:%Y-%m-%d %H:%M} (each firing is one run of the whole "
                    "campaign, which needs one at least): fire more often or raise [fleet] days"))
    run = sched.jitter_s + sched.max_runtime_s
    if run > window:
        out.append(("campaign.schedule.max_runtime_s",
                    f"jitter_s + max_runtime_s = {run:g} s is longer than [fleet] days = {days:g} "
                    f"({window:g} s): a run could not end before the instances' end of life"))
    return out


def offline(spec: CampaignSpec, path: Path | str) -> list[str]:
    """Refusals that need only the spec, as 'file: field: reason' lines ([] for a campaign
    without ec2 vantages, or one that passes)."""
    ec2 = [(i, v) for i, v in enumerate(spec.vantages) if v.provider == "ec2"]
    if not ec2:
        return []
    lines: list[str] = []

    def say(field: str, reason: str) -> None:
        lines.append(f"{path}: {field}: {reason}")

    fleet = spec.fleet
    sched = spec.campaign.schedule
    if sched is None:
        say("campaign.schedule", "missing, ec2 vantages need one (their instances install it at boot and measure only "
                                 "when it fires; without one they run, and bill, measuring nothing): add "
                                 "[campaign.schedule] with cron = \"...\" (docs/spec.md)")
    elif fleet is not None:
        for field, reason in schedule_problems(sched, fleet.days):
            say(field, reason)
    name = spec.campaign.name
    if why := limits.id_problem("campaign", name):
        say("campaign.name", why)
    total = 0
    for i, v in ec2:
        for j, region in enumerate(v.all_regions):
            field = f"vantages.{i}.regions.{j}" if v.regions else f"vantages.{i}.region"
            if why := limits.id_problem("region", region):
                say(field, why)
            for why in [limits.id_problem("vantage", v.id), *limits.names_problems(name, v.id, region)]:
                if why:  # a derived name holds the campaign, the vantage and the region: name the vantage
                    say(f"vantages.{i}.id", why)
        count = v.instance_count or 1
        if count > limits.max_instances_per_region():
            say(f"vantages.{i}.instance_count", f"{count} instances per region, at most {limits.max_instances_per_region()} "
                                                "(infra/modules/limits.json)")
        total += count * len(v.all_regions)
    if total > limits.max_instances_total():
        say("vantages", f"{total} ec2 instances in all, at most {limits.max_instances_total()} (infra/modules/limits.json)")
    if fleet is not None:
        for field in ("results_bucket", "state_bucket"):
            bucket = getattr(fleet, field, None)
            if bucket is not None and (why := limits.bucket_problem(bucket)):
                say(f"fleet.{field}", why)
    return list(dict.fromkeys(lines))


# --- online ---------------------------------------------------------------------------------


def _family(instance_type: str) -> str:
    return instance_type.split(".", 1)[0]


def counts_against_standard_quota(instance_type: str) -> bool:
    fam = _family(instance_type)
    return not fam.startswith(OTHER_FAMILY_PREFIXES) and fam[:1] in STANDARD_FAMILIES


def planned_instances(spec: CampaignSpec) -> dict[str, list[tuple[str, int, str]]]:
    """region -> [(instance type, count, field)] of the fleet's instances (the whoami server too)."""
    plan: dict[str, list[tuple[str, int, str]]] = defaultdict(list)
    for i, v in enumerate(spec.vantages):
        if v.provider != "ec2":
            continue
        for j, region in enumerate(v.all_regions):
            field = f"vantages.{i}.regions.{j}" if v.regions else f"vantages.{i}.region"
            plan[region].append((v.instance_type or EC2_DEFAULT_INSTANCE_TYPE, v.instance_count or 1, field))
    if spec.fleet is not None and spec.fleet.whoami_zone:
        plan[spec.fleet.home_region].append((spec.fleet.whoami_instance_type, 1, "fleet.whoami_zone"))
    return dict(plan)


def _code(exc: Exception) -> str:
    return getattr(exc, "response", {}).get("Error", {}).get("Code", "") or type(exc).__name__


def _vcpus(ec2, types: set[str]) -> tuple[dict[str, int], set[str]]:
    """vCPUs by instance type (describe_instance_types), and the types the region does not offer."""
    from botocore.exceptions import ClientError

    found: dict[str, int] = {}
    missing: set[str] = set()
    try:
        for page in ec2.get_paginator("describe_instance_types").paginate(InstanceTypes=sorted(types)):
            for t in page["InstanceTypes"]:
                found[t["InstanceType"]] = int(t["VCpuInfo"]["DefaultVCpus"])
    except ClientError as exc:
        if _code(exc) != "InvalidInstanceType":
            raise
        for t in sorted(types):  # one at a time: which of them is not offered here
            try:
                r = ec2.describe_instance_types(InstanceTypes=[t])["InstanceTypes"]
                found[t] = int(r[0]["VCpuInfo"]["DefaultVCpus"])
            except ClientError as one:
                if _code(one) != "InvalidInstanceType":
                    raise
                missing.add(t)
    return found, missing


def _running_elsewhere(ec2, campaign: str) -> list[str]:
    """Types of the region's pending or running instances that are not this campaign's (a
    re-apply must not count its own running agents twice)."""
    out = []
    pages = ec2.get_paginator("describe_instances").paginate(
        Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}])
    for page in pages:
        for r in page["Reservations"]:
            for i in r["Instances"]:
                tags = {t["Key"]: t["Value"] for t in i.get("Tags", [])}
                if tags.get("campaign") != campaign:
                    out.append(i["InstanceType"])
    return out


def vcpu_quota(sq) -> float | None:
    """The applied quota L-1216C47A (vCPUs), else AWS's default for the account; None when
    neither can be read (Service Quotas answers NoSuchResource for a quota never changed in
    some accounts, and AccessDenied without servicequotas:GetServiceQuota)."""
    from botocore.exceptions import BotoCoreError, ClientError

    service, code = VCPU_QUOTA
    for call in (sq.get_service_quota, sq.get_aws_default_service_quota):
        try:
            return float(call(ServiceCode=service, QuotaCode=code)["Quota"]["Value"])
        except (ClientError, BotoCoreError):
            continue
    return None


def _clients(session, region: str, endpoint_url: str | None):
    from botocore.config import Config

    cfg = Config(retries={"max_attempts": 2, "mode": "standard"}, connect_timeout=10, read_timeout=30)
    return (session.client("ec2", region_name=region, endpoint_url=endpoint_url, config=cfg),
            session.client("service-quotas", region_name=region, endpoint_url=endpoint_url, config=cfg))


def online(spec: CampaignSpec, path: Path | str, session, endpoint_url: str | None = None,
           notes: list[str] | None = None) -> list[str]:
    """Refusals that need AWS (the account behind ``session``), as 'file: field: reason' lines.
    What could not be checked without refusing (an unreadable quota) goes to ``notes``."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    notes = notes if notes is not None else []
    lines: list[str] = []
    plan = planned_instances(spec)
    if not plan:
        return []
    for region, wanted in plan.items():
        field = wanted[0][2]
        ec2, sq = _clients(session, region, endpoint_url)
        try:
            vpcs = ec2.describe_vpcs(Filters=[{"Name": "isDefault", "Values": ["true"]}])["Vpcs"]
            if not vpcs:
                lines.append(f"{path}: {field}: {region} has no default VPC, where the agents run: create one "
                             f"(aws ec2 create-default-vpc --region {region}) or leave the region out")
            vcpus, missing = _vcpus(ec2, {t for t, _, _ in wanted})
            for t, _, f in wanted:
                if t in missing:
                    lines.append(f"{path}: {f}: instance type {t} is not offered in {region}")
            need = sum(vcpus.get(t, 0) * n for t, n, _ in wanted if counts_against_standard_quota(t))
            for t in sorted({t for t, _, _ in wanted if not counts_against_standard_quota(t)}):
                notes.append(f"{path}: {region}: {t} counts against a quota other than {VCPU_QUOTA[1]}: not checked")
            if need:
                others = [t for t in _running_elsewhere(ec2, spec.campaign.name) if counts_against_standard_quota(t)]
                if set(others) - set(vcpus):
                    vcpus |= _vcpus(ec2, set(others) - set(vcpus))[0]
                used = sum(vcpus.get(t, 0) for t in others)
                quota = vcpu_quota(sq)
                if quota is None:
                    notes.append(f"{path}: {region}: the vCPU quota {VCPU_QUOTA[1]} could not be read (Service Quotas "
                                 f"refused or does not know it): not checked; the plan needs {need} vCPUs")
                elif used + need > quota:
                    lines.append(f"{path}: {field}: {region}: the plan needs {need} vCPUs of on-demand standard "
                                 f"instances and {used} already run there, above the account's quota of {quota:g} "
                                 f"({VCPU_QUOTA[1]}): request an increase in Service Quotas or plan fewer or smaller "
                                 "instances")
        except NoCredentialsError:
            return [f"{path}: fleet: no AWS credentials found (standard chain: --profile, environment, SSO, "
                    "instance role): the account cannot be checked"]
        except (ClientError, BotoCoreError) as exc:
            lines.append(f"{path}: {field}: {region} cannot be checked ({' '.join(str(exc).split())[:200]}); "
                         "is the region enabled for this account?")
    lines += _bucket_lines(spec, path, session, endpoint_url)
    return lines


def _bucket_lines(spec: CampaignSpec, path: Path | str, session, endpoint_url: str | None) -> list[str]:
    """A bucket name another account holds (403) or that lives in another region than the
    home region (301) is refused; a free name (404) or one of ours (200) passes."""
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ClientError

    fleet = spec.fleet
    if fleet is None:
        return []
    s3 = session.client("s3", region_name=fleet.home_region, endpoint_url=endpoint_url,
                        config=Config(retries={"max_attempts": 2, "mode": "standard"}))
    out = []
    for field in ("results_bucket", "state_bucket"):
        bucket = getattr(fleet, field, None)
        if bucket is None:
            continue
        try:
            r = s3.head_bucket(Bucket=bucket)
            where = r.get("BucketRegion") or r["ResponseMetadata"].get("HTTPHeaders", {}).get("x-amz-bucket-region")
            if where and where != fleet.home_region:
                out.append(f"{path}: fleet.{field}: {bucket!r} exists in {where}, not in home_region {fleet.home_region}")
        except ClientError as exc:
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if status == 404 or _code(exc) in ("404", "NoSuchBucket", "NotFound"):
                continue
            if status == 403:
                out.append(f"{path}: fleet.{field}: {bucket!r} belongs to another AWS account (S3 names are global): "
                           "pick another name")
            elif status == 301:
                where = exc.response.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("x-amz-bucket-region", "?")
                out.append(f"{path}: fleet.{field}: {bucket!r} exists in {where}, not in home_region {fleet.home_region}")
            else:
                out.append(f"{path}: fleet.{field}: {bucket!r} cannot be checked ({_code(exc)})")
        except BotoCoreError as exc:
            out.append(f"{path}: fleet.{field}: {bucket!r} cannot be checked ({type(exc).__name__})")
    return out


# --- the command line -----------------------------------------------------------------------


def run_preflight(spec_obj: CampaignSpec, path: Path | str, profile: str | None, endpoint_url: str | None) -> None:
    """Offline and online checks; every refusal to stderr ('dnscamp: file: field: reason') and
    exit 2, else one line saying what passed. For `dnscamp fleet apply` (and --dry-run), before
    any terraform."""
    import typer

    from dnscamp.fleet import aws

    lines = offline(spec_obj, path)
    notes: list[str] = []
    try:
        lines += online(spec_obj, path, aws.session(profile), endpoint_url, notes)
    except aws.AwsError as exc:
        lines.append(f"{path}: fleet: {exc}")
    for n in notes:
        sys.stderr.write(f"dnscamp: note: {n}\n")
    if lines:
        for line in lines:
            sys.stderr.write(f"dnscamp: {line}\n")
        sys.stderr.write(f"dnscamp: fleet: preflight refused {spec_obj.campaign.name}: nothing was created\n")
        raise typer.Exit(2)
    plan = planned_instances(spec_obj)
    typer.echo(f"fleet: preflight ok: {sum(n for w in plan.values() for _, n, _ in w)} instances in {len(plan)} regions")
