"""`dnscamp fleet ...`: the cloud vantages of a campaign spec (its ec2 vantages and [fleet]
section) as Terraform/OpenTofu code (infra/modules) plus boto3 (docs/fleet.md).

render -> infra/build/<campaign>/main.tf.json; plan / apply / destroy run tofu or terraform on
it; status and cost ask AWS and the shipped price table. Credentials come only from the AWS
standard chain (--profile, environment, SSO, instance role) and are never written anywhere."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import typer

from dnscamp.errors import UsageError, die

app = typer.Typer(help="The cloud fleet of a campaign's ec2 vantages: render, plan, apply, destroy, status, cost.",
                  no_args_is_help=True)

SPEC = typer.Argument(..., help="Campaign spec (TOML) with ec2 vantages and a fleet section.")
OUT = typer.Option(None, "--out", help="Build directory (default: infra/build/<campaign>).")
ENDPOINT = typer.Option(None, "--endpoint-url", help="A stand-in AWS endpoint for every service (moto in server "
                                                     "mode, for tests); default: the real AWS endpoints.")
PROFILE = typer.Option(None, "--profile", help="AWS profile (~/.aws/config); default: the standard credential chain.")
YES = typer.Option(False, "--yes", "-y", help="Do not ask before creating or destroying anything.")


def _spec(path: Path):
    from dnscamp.spec import SpecError, load

    try:
        return load(path), path.read_text()
    except SpecError as exc:
        for line in exc.lines:
            sys.stderr.write(f"dnscamp: {line}\n")
        raise typer.Exit(2) from None


def _render(path: Path, out: Path | None, endpoint_url: str | None):
    from dnscamp.fleet import render

    s, text = _spec(path)
    try:
        return s, render.render(s, text, out=out, endpoint_url=endpoint_url)
    except render.RenderError as exc:
        die(str(exc))


def _tool() -> None:
    """Say which tool runs (and fail in one line when there is none)."""
    from dnscamp.fleet import toolchain

    try:
        name, exe = toolchain.find_terraform()
    except toolchain.ToolchainError as exc:
        die(str(exc))
    typer.echo(f"fleet: using {name} ({exe})")


def _tf(args: list[str], build: Path, env: dict[str, str]) -> None:
    """Run tofu/terraform in the build dir, streaming its output; a failure exits 1 naming the step."""
    from dnscamp.fleet import toolchain

    try:
        toolchain.run(args, cwd=build, env_extra=env, capture=False)
    except subprocess.CalledProcessError as exc:
        die(f"fleet: `{' '.join(['terraform', *args[:1]])}` in {build} failed (exit {exc.returncode}); see above", code=1)
    except toolchain.ToolchainError as exc:
        die(str(exc))


def _env(profile: str | None, agent: dict[str, str] | None = None) -> dict[str, str]:
    """The terraform environment beyond the toolchain's: the profile's name (the provider reads the
    standard chain itself) and the agent variables (TF_VAR_*; never written to the build dir)."""
    from dnscamp.fleet.render import PLAN_ONLY

    env = {"AWS_PROFILE": profile} if profile else {}
    env.update({f"TF_VAR_{k}": v for k, v in (PLAN_ONLY | (agent or {})).items()})
    return env


def _init(build: Path, env: dict[str, str]) -> None:
    _tf(["init", "-input=false", "-no-color"], build, env)


def _bill(s) -> None:
    from dnscamp.fleet import cost

    try:
        typer.echo(cost.bill(s).describe())
    except cost.CostError as exc:
        die(str(exc))


@app.command("render")
def render_command(spec: Path = SPEC, out: Path | None = OUT, endpoint_url: str | None = ENDPOINT) -> None:
    """Write the fleet's Terraform root module (main.tf.json, Terraform JSON syntax): one aliased aws
    provider per region, the results bucket, one vantage module per (ec2 vantage, region), the whoami
    server when the spec's fleet section names a zone. The agent's URLs and digests stay variables (apply sets them)."""
    _, build = _render(spec, out, endpoint_url)
    typer.echo(f"{build / 'main.tf.json'}")


@app.command("plan")
def plan_command(spec: Path = SPEC, out: Path | None = OUT, endpoint_url: str | None = ENDPOINT,
                 profile: str | None = PROFILE, plan_json: Path | None = typer.Option(
                     None, "--plan-json", help="Also write the plan as JSON (`terraform show -json`), e.g. for checkov.")) -> None:
    """Render, then `init` and `plan` (read-only; the agent URLs are plan-only placeholders)."""
    _, build = _render(spec, out, endpoint_url)
    _tool()
    env = _env(profile)
    _init(build, env)
    if plan_json is None:
        _tf(["plan", "-input=false", "-no-color"], build, env)
        return
    _tf(["plan", "-input=false", "-no-color", "-out=tfplan"], build, env)
    from dnscamp.fleet import toolchain

    shown = toolchain.run(["show", "-json", "tfplan"], cwd=build, env_extra=env, check=True)
    plan_json.write_text(shown.stdout)
    typer.echo(f"fleet: plan JSON written to {plan_json}")


@app.command("apply")
def apply_command(spec: Path = SPEC, out: Path | None = OUT, endpoint_url: str | None = ENDPOINT,
                  profile: str | None = PROFILE, dry_run: bool = typer.Option(
                      False, "--dry-run", help="Print the bill and the plan; create nothing."), yes: bool = YES) -> None:
    """Create the fleet: print the bill, build this checkout's agent wheel, create the results bucket,
    upload the wheel and lock under dist/<version>/, then create everything else with presigned URLs."""
    from dnscamp.fleet import artifacts, aws, preflight, render

    preflight.run_preflight(_spec(spec)[0], spec, profile, endpoint_url)  # exit 2 before any terraform
    s, build = _render(spec, out, endpoint_url)
    _bill(s)
    _tool()
    env = _env(profile)
    _init(build, env)
    if dry_run:
        _tf(["plan", "-input=false", "-no-color"], build, env)
        typer.echo("fleet: dry run: nothing created")
        return
    if not yes and not typer.confirm(f"create the fleet of {s.campaign.name} (billed as above)?", default=False):
        raise typer.Exit(1)
    try:
        with tempfile.TemporaryDirectory(prefix="dnscamp-agent-") as tmp:
            b = artifacts.build(Path(tmp))
            dns_binary = artifacts.coredns() if s.fleet and s.fleet.whoami_zone else None
            typer.echo(f"fleet: agent {b.wheel.name} sha256 {b.wheel.sha256[:16]}... from commit "
                       f"{(b.commit or 'none')[:12]}{' (uncommitted changes are not deployed)' if b.dirty else ''}")
            # 1) the bucket alone: the wheel needs somewhere to go before any instance can fetch it
            _tf(["apply", "-input=false", "-no-color", "-auto-approve", "-target=module.results_bucket"], build, env)
            assert s.fleet is not None
            sess = aws.session(profile)
            s3 = aws.client(sess, "s3", s.fleet.home_region, endpoint_url)
            try:
                agent = artifacts.upload(s3, s.fleet.results_bucket, b)
                if dns_binary is not None:
                    agent |= artifacts.upload_coredns(s3, s.fleet.results_bucket, dns_binary)
            except Exception as exc:  # botocore: no credentials, access denied, ...
                die(f"fleet: uploading the agent to s3://{s.fleet.results_bucket}/dist/ failed: {aws.one_line(exc)}", code=1)
    except UsageError as exc:
        die(str(exc), code=1)
    if any(agent.get(k) == render.PLAN_ONLY[k] for k in render.PLAN_ONLY):  # never ship a placeholder
        die("fleet: refusing to apply with plan-only agent values", code=1)
    # 2) everything else, with the presigned URLs and digests (environment only, never a file)
    _tf(["apply", "-input=false", "-no-color", "-auto-approve"], build, _env(profile, agent))
    typer.echo(f"fleet: applied; `dnscamp fleet status {spec}` lists the instances")


@app.command("destroy")
def destroy_command(spec: Path = SPEC, out: Path | None = OUT, endpoint_url: str | None = ENDPOINT,
                    profile: str | None = PROFILE, yes: bool = YES, delete_bucket: bool = typer.Option(
                        False, "--delete-bucket", help="Also empty (every object version) and delete the results "
                                                       "bucket. Default: keep it, results outlive the fleet.")) -> None:
    """Remove the fleet's instances, roles, security groups and whoami server; the results bucket
    stays unless --delete-bucket."""
    from dnscamp.fleet import aws

    s, build = _render(spec, out, endpoint_url)
    _tool()
    env = _env(profile)
    _init(build, env)
    what = "everything, the results bucket included" if delete_bucket else "all but the results bucket"
    if not yes and not typer.confirm(f"destroy the fleet of {s.campaign.name} ({what})?", default=False):
        raise typer.Exit(1)
    cfg = json.loads((build / "main.tf.json").read_text())
    if delete_bucket:
        assert s.fleet is not None
        s3 = aws.client(aws.session(profile), "s3", s.fleet.home_region, endpoint_url)
        try:
            n = aws.empty_bucket(s3, s.fleet.results_bucket)
        except Exception as exc:
            die(f"fleet: emptying s3://{s.fleet.results_bucket} failed: {aws.one_line(exc)}", code=1)
        typer.echo(f"fleet: deleted {n} object version(s) from {s.fleet.results_bucket}")
        targets = []
    else:
        targets = [f"-target=module.{m}" for m in cfg["module"] if m != "results_bucket"]
    _tf(["destroy", "-input=false", "-no-color", "-auto-approve", *targets], build, env)


@app.command("status")
def status_command(spec: Path = SPEC, endpoint_url: str | None = ENDPOINT, profile: str | None = PROFILE,
                   as_json: bool = typer.Option(False, "--json", help="One JSON document."),
                   launch_grace_min: float = typer.Option(20.0, "--launch-grace-min", min=0,
                                                          help="Minutes a new instance may go without a status."),
                   seen: Path | None = typer.Option(None, "--seen", help=(
                       "A file of skipped-firing counts already reported (read, then rewritten): only new "
                       "skipped firings raise the flag, so a cron job alerts once per skip.")),
                   no_ec2: bool = typer.Option(False, "--no-ec2", help=(
                       "Judge the status objects alone, asking EC2 nothing (a rehearsal's S3, where no "
                       "instance exists): every status counts as live, no_status is never raised."))) -> None:
    """The fleet's instances (tag campaign=<name>, every region of the spec) with each one's status
    object (status/<campaign>/<vantage>/<region>/<instance_id>.json) and what needs an operator:
    no status after launch, stale, skipped firings, low disk, clock skew, bootstrap error, disk
    floor, corrupt status, ended but still running. Exit 1 when anything is flagged."""
    from dnscamp.fleet import aws, render
    from dnscamp.fleet import status as fstatus

    s, _ = _spec(spec)
    if s.fleet is None:
        die(f"{spec}: fleet: no [fleet] section")
    try:
        sess = aws.session(profile)
        found = [] if no_ec2 else aws.instances(sess, s, render.regions(s), endpoint_url)
        s3 = aws.client(sess, "s3", s.fleet.home_region, endpoint_url)
        statuses = fstatus.read_statuses(s3, s.fleet.results_bucket, s.campaign.name)
        vantages = {}
        for v in s.ec2_vantages():
            up = aws.last_upload(s3, s.fleet.results_bucket, s.campaign.name, v.id)
            vantages[v.id] = {"last_upload": up[1].isoformat() if up else None, "last_upload_key": up[0] if up else None}
    except UsageError as exc:
        die(str(exc), code=1)
    except Exception as exc:  # botocore: no credentials, no such bucket, access denied, ...
        die(f"fleet status: {aws.one_line(exc)}", code=1)
    from datetime import datetime, timezone

    baseline = None
    if seen is not None:
        try:
            baseline = {str(k): int(v) for k, v in json.loads(seen.read_text()).items()} if seen.exists() else {}
        except (ValueError, TypeError, AttributeError, OSError) as exc:
            die(f"{seen}: not a JSON object of instance id -> count ({' '.join(str(exc).split())[:120]})")
    raised = fstatus.flags(statuses, None if no_ec2 else found, datetime.now(timezone.utc), launch_grace_min=launch_grace_min,
                           stale_min=fstatus.stale_minutes(s.campaign.schedule),
                           disk_floor_bytes=int(getattr(s.fleet, "disk_floor_mib", fstatus.DEFAULT_DISK_FLOOR_MIB))
                           * fstatus.MIB, skipped_seen=baseline)
    if seen is not None:
        counts = dict(baseline or {})
        counts.update({st["instance_id"]: st.get("skipped_firings") or 0 for st in statuses if not st.get("corrupt")})
        seen.write_text(json.dumps(counts, indent=1, sort_keys=True) + "\n")
    by_id = {st["instance_id"]: st for st in statuses}
    if as_json:
        typer.echo(json.dumps({
            "campaign": s.campaign.name,
            "instances": [{"region": i.region, "id": i.id, "state": i.state, "type": i.type, "vantage": i.vantage,
                           "launched": i.launched.isoformat() if i.launched else None, "public_ip": i.public_ip,
                           "status_key": by_id[i.id]["key"] if i.id in by_id else None}
                          for i in found],
            "statuses": [{k: v for k, v in st.items()} for st in statuses],
            "pending_units": fstatus.pending_total(
                statuses, None if no_ec2 else [i.id for i in found if i.state in fstatus.LIVE_STATES]),
            "flags": [f.as_json() for f in raised],
            "vantages": vantages,
        }, indent=2, default=str))
        raise typer.Exit(1 if raised else 0)
    typer.echo(f"campaign {s.campaign.name}: {len(found)} instance(s) tagged campaign={s.campaign.name}, "
               f"{len(statuses)} status object(s)")
    ids = {i.id for i in found}
    for i in sorted(found, key=lambda i: (i.vantage, i.region, i.id)):
        st = by_id.get(i.id)
        typer.echo(f"  {i.vantage:<16} {i.region:<15} {i.id:<20} {i.state:<11} {i.type:<12} "
                   f"{i.public_ip or '-':<15} launched {i.launched.isoformat() if i.launched else '-'}")
        typer.echo(f"      status: {fstatus.summary(st) + ' at ' + str(st.get('last_modified')) if st else 'none'}")
    for st in statuses:
        if st["instance_id"] not in ids:
            typer.echo(f"  {st['vantage']:<16} {st['region']:<15} {st['instance_id']:<20} "
                       f"{'' if no_ec2 else '(not in EC2) '}"
                       f"status: {fstatus.summary(st)} at {st.get('last_modified')}")
    for vid, d in vantages.items():
        typer.echo(f"  vantage {vid}: last upload {d['last_upload'] or 'none'}")
    if raised:
        typer.echo(f"{len(raised)} flag(s):")
        for f in raised:
            typer.echo(f"  FLAG {f.line()}")
        raise typer.Exit(1)
    typer.echo("no flags")


@app.command("cost")
def cost_command(spec: Path = SPEC, as_json: bool = typer.Option(False, "--json", help="One JSON document.")) -> None:
    """The bill before anything is created, each line a count x a price (infra/prices/ec2-on-demand.json,
    every price with its source and date; `fleet prices update` refreshes the instance-hours):
    instances, IPv4, EBS, uploads as the agents make them (objects per firing x the schedule's
    firings), the collector's GET/LIST and egress, S3 storage with noncurrent versions, Atlas credits."""
    from dnscamp.fleet import cost

    s, _ = _spec(spec)
    try:
        b = cost.bill(s)
    except cost.CostError as exc:
        die(str(exc))
    typer.echo(json.dumps(b.to_dict(), indent=2) if as_json else b.describe())


prices_app = typer.Typer(help="The price table `fleet cost` multiplies (infra/prices/ec2-on-demand.json).",
                         no_args_is_help=True)
app.add_typer(prices_app, name="prices")


@prices_app.command("update")
def prices_update_command(
    regions: str = typer.Option(None, "--regions", help="Comma list of regions (default: every region of the table)."),
    types: str = typer.Option(None, "--types", help="Comma list of instance types to add (beside the table's)."),
    file: Path = typer.Option(None, "--file", help="The price table (default: infra/prices/ec2-on-demand.json)."),
    profile: str | None = PROFILE, endpoint_url: str | None = ENDPOINT,
) -> None:
    """Read the on-demand Linux instance-hour prices (shared tenancy) of the table's regions and
    types from the AWS Price List API (boto3 `pricing`, us-east-1) and rewrite the table, each
    price with its source and today's date. Nothing is written when any price cannot be read."""
    import os

    from dnscamp.fleet import aws, cost

    path = file or cost.PRICES
    try:
        table = cost.load_prices(path)
    except (OSError, ValueError) as exc:
        die(f"{path}: {' '.join(str(exc).split())[:200]}")
    try:
        pricing = aws.client(aws.session(profile), "pricing", cost.PRICING_REGION, endpoint_url)
        new, changed = cost.update_prices(pricing, table, _csv(regions), _csv(types))
    except cost.CostError as exc:
        die(f"{path}: {exc}", code=1)
    except UsageError as exc:
        die(str(exc), code=1)
    except Exception as exc:  # botocore: no credentials, access denied, throttled, ...
        die(f"fleet prices update: {aws.one_line(exc)}", code=1)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(new, indent=2) + "\n")
    os.replace(tmp, path)
    for line in changed:
        typer.echo(f"  {line}")
    typer.echo(f"fleet: {path.name}: instance-hour prices read on {new['date']}, {len(changed)} changed")


def _csv(v: str | None) -> list[str] | None:
    return [x.strip() for x in v.split(",") if x.strip()] if v else None


@app.command("rehearse")
def rehearse_command(
    spec: Path = SPEC,
    firings: int = typer.Option(2, "--firings", min=1, max=20, help="Scheduled firings every instance must complete."),
    vantages: str = typer.Option(None, "--vantages", help="Comma list of the spec's ec2 vantage ids (default: all)."),
    regions: str = typer.Option(None, "--regions", help="Comma list of regions (default: every region of the vantages)."),
    rtt: list[str] = typer.Option(None, "--rtt", help="REGION=MS: this region's round trip to home_region instead of the table's."),
    out: Path = typer.Option(None, "--out", help="Where instances' homes, spools and logs go (default: $DNSCAMP_HOME/rehearsals)."),
    as_json: bool = typer.Option(False, "--json", help="The report as one JSON document."),
    faults: bool = typer.Option(False, "--faults", help="Kill a firing mid-run, skew a clock, fill a disk and cut "
                                                       "S3 for a while; report how each fault showed."),
    outage_s: float = typer.Option(40.0, "--outage-s", min=0, max=600, help="With --faults: how long S3 is unreachable."),
) -> None:
    """Rehearse the spec's cloud fleet on the testbed: every (ec2 vantage, region) becomes a
    namespace behind that region's RTT to home_region (dnscamp/fleet/region_rtt.toml), set up
    as its user data sets up an instance (vantage.env, link apply, schedule install), with a
    real cron daemon firing the schedule and shipping to an S3 server in the island, while
    `dnscamp collect --watch` on the host fills Postgres. Ends with every record checked to
    be in Postgres exactly once and the per-region RTT table. Exit 3 when a check failed.
    Needs root; brings the testbed up (fiber) if it is not."""
    from dnscamp.fleet import rehearse
    from vantage_agent import paths

    over: dict[str, float] = {}
    for item in rtt or []:
        r, sep, ms = item.partition("=")
        try:
            over[r.strip()] = float(ms)
            if not sep or not 0 <= over[r.strip()] < 1000:
                raise ValueError
        except ValueError:
            die(f"--rtt {item!r}: want REGION=MS (0 <= MS < 1000)")
    log = (lambda m: None) if as_json else (lambda m: typer.echo(f"rehearse: {m}", err=True))
    s, _ = _spec(spec)
    try:
        r = rehearse.Rehearsal(spec, out_dir=out or paths.home() / "rehearsals", firings=firings,
                               vantages=_csv(vantages), regions=_csv(regions), rtt_override=over, log=log,
                               faults=rehearse.Faults(s3_outage_s=outage_s) if faults else None)
        rep = r.run()
    except rehearse.RehearsalError as exc:
        die(str(exc))
    if as_json:
        typer.echo(json.dumps(rehearse.asdict(rep), indent=1, default=str))
    else:
        typer.echo(f"rehearsal {rep.campaign} ({rep.tag}) in {rep.seconds:g} s; files in {rep.out_dir}")
        for i in rep.instances:
            typer.echo(f"  {i['vantage']:<14} {i['region']:<16} {i['ns']:<22} rtt {i['rtt_ms']:>6g} ms  "
                       f"runs {len(i['runs'])}  records {i['records']}")
        c = rep.collected
        typer.echo(f"  collected: {c.get('records_made')} records made, {c.get('records_stored')} in Postgres "
                   f"(last pass: {json.dumps({k: v for k, v in c.items() if not k.startswith('records_')})})")
        typer.echo(f"  per region (RTT to {rep.home_region}: {rep.rtt_source})")
        typer.echo(f"    {'vantage':<14} {'region':<16} {'table RTT':>9} {'ping p50':>9} {'do53 p50':>9}")
        for g in rep.regions:
            typer.echo(f"    {g['vantage']:<14} {g['region']:<16} {g['configured_rtt_ms']:>9g} "
                       f"{g['ping_rtt_median_ms'] if g['ping_rtt_median_ms'] is not None else '-':>9} "
                       f"{g['do53_total_median_ms'] if g['do53_total_median_ms'] is not None else '-':>9}")
        if rep.completeness:
            planned = sum(r.get("units_planned") or 0 for r in rep.completeness)
            got = sum(r.get("units_collected") or 0 for r in rep.completeness)
            typer.echo(f"  completeness: {len(rep.completeness)} run(s), {got} of {planned} planned units collected "
                       f"({100.0 * got / planned if planned else 0:.1f} %), "
                       f"{sum(1 for r in rep.completeness if r.get('manifest'))} manifest(s)")
        if rep.faults:
            for line in rehearse.describe_faults(rep):
                typer.echo(f"  fault: {line}")
        for p in rep.problems:
            typer.echo(f"  PROBLEM: {p}")
    raise typer.Exit(0 if rep.ok else 3)
