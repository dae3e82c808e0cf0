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


def _tee(args: list[str], build: Path, env: dict[str, str]) -> str:
    """Run tofu/terraform, streaming its output, and return it; a failure exits 1 in one line
    (naming a held state lock or a stale plan when that is the cause)."""
    from dnscamp.fleet import toolchain

    try:
        r = toolchain.tee(args, cwd=build, env_extra=env)
    except toolchain.ToolchainError as exc:
        die(str(exc))
    if r.returncode != 0:
        if "Error acquiring the state lock" in r.stdout:
            die(f"fleet: the state is locked by another `fleet apply` or `destroy` (see its lock info above); "
                f"nothing was changed here: run again when it is done", code=1)
        if "Saved plan is stale" in r.stdout:
            die("fleet: the state changed since this plan was made (another apply?); nothing was applied: "
                "run again to plan afresh", code=1)
        die(f"fleet: `terraform {args[0]}` in {build} failed (exit {r.returncode}); see above", code=1)
    return r.stdout


def _state(build: Path, env: dict[str, str]):
    """What the state holds (local or remote)."""
    from dnscamp.fleet import state, toolchain

    r = toolchain.run(["state", "pull"], cwd=build, env_extra=env, check=False)
    if r.returncode != 0:
        die(f"fleet: `terraform state pull` in {build} failed: {' '.join((r.stderr or r.stdout).split())[:300]}", code=1)
    try:
        return state.parse(r.stdout)
    except state.StateError as exc:
        die(f"fleet: {build}: {exc}", code=1)


def _prepare(spec: Path, out: Path | None, endpoint_url: str | None, profile: str | None):
    """Render, check the state bucket, init; then re-render with a provider for every region the
    state still holds resources in (a vantage that left the spec must stay destroyable)."""
    from dnscamp.fleet import aws, render

    s, text = _spec(spec)
    _, build = _render(spec, out, endpoint_url)
    _tool()
    env = _env(profile)
    sb = render.state_bucket(s)
    if sb is not None:
        assert s.fleet is not None
        try:
            s3 = aws.client(aws.session(profile), "s3", s.fleet.home_region, endpoint_url)
            s3.head_bucket(Bucket=sb)
        except UsageError as exc:
            die(str(exc), code=1)
        except Exception as exc:
            die(f"{spec}: fleet.state_bucket: s3://{sb} cannot be reached ({aws.one_line(exc)}): "
                f"`dnscamp fleet init {spec}` creates it", code=1)
    _init(build, env)
    st = _state(build, env)
    extra = [r for r in st.regions if r not in render.regions(s)]
    if extra:
        render.render(s, text, out=out, endpoint_url=endpoint_url, extra_regions=extra)
    return s, build, env, st


def _saved_plan(build: Path, env: dict[str, str], args: list[str], s, *, destroy: bool = False):
    """`plan -out=tfplan ARGS`, then its summary (per region, by address, with the bill)."""
    from dnscamp.fleet import cost, plan, toolchain

    _tee(["plan", "-input=false", "-no-color", "-out=tfplan", *args], build, env)
    shown = toolchain.run(["show", "-json", "tfplan"], cwd=build, env_extra=env, check=False)
    if shown.returncode != 0:
        die(f"fleet: `terraform show -json tfplan` in {build} failed: {' '.join(shown.stderr.split())[:300]}", code=1)
    try:
        bill = None if destroy else cost.bill(s)
    except cost.CostError:
        bill = None  # the bill was refused in one line already; the plan stands without it
    try:
        summary = plan.summarize(json.loads(shown.stdout), json.loads((build / "main.tf.json").read_text()), bill)
    except (ValueError, plan.PlanError) as exc:
        die(f"fleet: {build}/tfplan: {exc}", code=1)
    summary.destroy = destroy
    return summary


def _drop_plan(build: Path) -> None:
    """A saved plan holds the variables' values (the presigned URLs): never leave one behind."""
    (build / "tfplan").unlink(missing_ok=True)


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


@app.command("init")
def init_command(spec: Path = SPEC, out: Path | None = OUT, endpoint_url: str | None = ENDPOINT,
                 profile: str | None = PROFILE) -> None:
    """Create the state bucket of [fleet] state_bucket when it does not exist (versioned,
    encrypted, public access blocked, in home_region), then render and `terraform init`. Without
    state_bucket the state stays local in the build dir (rehearsals, tests)."""
    from dnscamp.fleet import aws, render, statebucket

    s, _ = _spec(spec)
    sb = render.state_bucket(s) if s.fleet else None
    if sb is not None:
        assert s.fleet is not None
        try:
            s3 = aws.client(aws.session(profile), "s3", s.fleet.home_region, endpoint_url)
            created = statebucket.ensure(s3, sb, s.fleet.home_region)
        except UsageError as exc:
            die(str(exc), code=1)
        except Exception as exc:
            die(f"{spec}: fleet.state_bucket: s3://{sb}: {aws.one_line(exc)}", code=1)
        typer.echo(f"fleet: state bucket s3://{sb} {'created' if created else 'exists'}; state key "
                   f"{render.state_key(s.campaign.name)} (locked by a lock file beside it)")
    _, build = _render(spec, out, endpoint_url)
    _tool()
    _init(build, _env(profile))
    typer.echo(f"fleet: {build} initialised ({'state in s3://' + sb if sb else 'local state in the build dir'})")


@app.command("plan")
def plan_command(spec: Path = SPEC, out: Path | None = OUT, endpoint_url: str | None = ENDPOINT,
                 profile: str | None = PROFILE, plan_json: Path | None = typer.Option(
                     None, "--plan-json", help="Also write the plan as JSON (`terraform show -json`), e.g. for checkov.")) -> None:
    """Render, then `init` and `plan` (read-only; the agent URLs are plan-only placeholders):
    Terraform's plan, then the summary per region (to add, change, replace, destroy; the bill)."""
    from dnscamp.fleet import toolchain

    s, build, env, _ = _prepare(spec, out, endpoint_url, profile)
    try:
        summary = _saved_plan(build, env, [], s)
        typer.echo(summary.describe())
        if plan_json is not None:
            shown = toolchain.run(["show", "-json", "tfplan"], cwd=build, env_extra=env, check=True)
            plan_json.write_text(shown.stdout)
            typer.echo(f"fleet: plan JSON written to {plan_json}")
    finally:
        _drop_plan(build)


ALLOW_REPLACE = typer.Option(False, "--allow-replace", help=(
    "Accept a plan that replaces or destroys an agent instance (or the results bucket); default: such a "
    "plan is refused, naming the addresses."))


@app.command("apply")
def apply_command(spec: Path = SPEC, out: Path | None = OUT, endpoint_url: str | None = ENDPOINT,
                  profile: str | None = PROFILE, dry_run: bool = typer.Option(
                      False, "--dry-run", help="Print the bill and the plan; create nothing."), yes: bool = YES,
                  allow_replace: bool = ALLOW_REPLACE) -> None:
    """Create or update the fleet. Prints the bill; then (1) plans the results bucket alone and
    applies that saved plan when it changes anything, (2) builds this checkout's agent wheel and
    uploads it with its lock under dist/<version>/, (3) plans everything else with the presigned
    URLs, prints the plan's summary (per region: to add, change, replace, destroy; the bill per
    day), asks, and applies exactly that saved plan. A plan that replaces or destroys an agent
    instance or the results bucket is refused unless --allow-replace."""
    from dnscamp.fleet import plan, preflight, render

    preflight.run_preflight(_spec(spec)[0], spec, profile, endpoint_url)  # exit 2 before any terraform
    s, build, env, _ = _prepare(spec, out, endpoint_url, profile)
    _bill(s)
    try:
        if dry_run:
            summary = _saved_plan(build, env, [], s)
            typer.echo(summary.describe())
            try:
                summary.check(allow_replace)
            except plan.PlanRefused as exc:
                die(f"{exc} (dry run: nothing created)", code=1)
            typer.echo("fleet: dry run: nothing created")
            return
        # 1) the bucket alone: the wheel needs somewhere to go before any instance can fetch it
        bucket = _saved_plan(build, env, ["-target=module.results_bucket"], s)
        if not bucket.empty:
            typer.echo(bucket.describe())
            _guard(bucket, allow_replace)
            if not yes and not typer.confirm(f"apply this plan to the results bucket of {s.campaign.name}?", default=False):
                raise typer.Exit(1)
            _tee(["apply", "-input=false", "-no-color", "tfplan"], build, env)
        _drop_plan(build)
        agent = _upload_agent(s, profile, endpoint_url)
        if any(agent.get(k) == render.PLAN_ONLY[k] for k in render.PLAN_ONLY):  # never ship a placeholder
            die("fleet: refusing to apply with plan-only agent values", code=1)
        # 2) everything else, with the presigned URLs and digests (environment only, never a file)
        env = _env(profile, agent)
        summary = _saved_plan(build, env, [], s)
        typer.echo(summary.describe())
        _guard(summary, allow_replace)
        if summary.empty:
            typer.echo(f"fleet: nothing to change; `dnscamp fleet status {spec}` lists the instances")
            return
        if not yes and not typer.confirm(f"apply this plan to the fleet of {s.campaign.name} (billed as above)?",
                                         default=False):
            raise typer.Exit(1)
        _tee(["apply", "-input=false", "-no-color", "tfplan"], build, env)
    finally:
        _drop_plan(build)
    typer.echo(f"fleet: applied; `dnscamp fleet status {spec}` lists the instances, `dnscamp fleet ssh {spec} VANTAGE` "
               "opens a shell")


def _guard(summary, allow_replace: bool) -> None:
    from dnscamp.fleet import plan

    try:
        summary.check(allow_replace)
    except plan.PlanRefused as exc:
        die(str(exc), code=1)


def _upload_agent(s, profile: str | None, endpoint_url: str | None) -> dict[str, str]:
    """Build this checkout's agent wheel (and CoreDNS for the whoami server), upload under dist/,
    return the TF_VAR values (presigned URLs and digests)."""
    from dnscamp.fleet import artifacts, aws

    assert s.fleet is not None
    try:
        with tempfile.TemporaryDirectory(prefix="dnscamp-agent-") as tmp:
            b = artifacts.build(Path(tmp))
            dns_binary = artifacts.coredns() if s.fleet.whoami_zone else None
            typer.echo(f"fleet: agent {b.wheel.name} sha256 {b.wheel.sha256[:16]}... from commit "
                       f"{(b.commit or 'none')[:12]}{' (uncommitted changes are not deployed)' if b.dirty else ''}")
            s3 = aws.client(aws.session(profile), "s3", s.fleet.home_region, endpoint_url)
            try:
                agent = artifacts.upload(s3, s.fleet.results_bucket, b)
                if dns_binary is not None:
                    agent |= artifacts.upload_coredns(s3, s.fleet.results_bucket, dns_binary)
            except Exception as exc:  # botocore: no credentials, access denied, ...
                die(f"fleet: uploading the agent to s3://{s.fleet.results_bucket}/dist/ failed: {aws.one_line(exc)}", code=1)
    except UsageError as exc:
        die(str(exc), code=1)
    return agent


@app.command("destroy")
def destroy_command(spec: Path = SPEC, out: Path | None = OUT, endpoint_url: str | None = ENDPOINT,
                    profile: str | None = PROFILE, yes: bool = YES, delete_bucket: bool = typer.Option(
                        False, "--delete-bucket", help="Also empty (every object version) and delete the results "
                                                       "bucket. Default: keep it, results outlive the fleet."),
                    force: bool = typer.Option(False, "--force", help=(
                        "Do not wait for the agents to drain: results still in a spool are lost.")),
                    drain_timeout: float = typer.Option(
                        3600.0, "--drain-timeout", min=0, help="Seconds to wait for the drain before giving up (exit 1).",),
                    poll: float = typer.Option(30.0, "--poll", min=0.1, help="Seconds between looks at the status objects.")) -> None:
    """Drain, then destroy everything in the Terraform state but the results bucket. Draining
    waits until every live instance's status object shows nothing pending (or --force); the
    destroy covers what the state holds, vantages removed from the spec included; the results
    bucket stays unless --delete-bucket."""
    from dnscamp.fleet import aws, drain, render, status

    s, build, env, st = _prepare(spec, out, endpoint_url, profile)
    if st.empty:
        typer.echo(f"fleet: the state of {s.campaign.name} holds nothing: nothing to destroy")
        return
    assert s.fleet is not None
    bucket = s.fleet.results_bucket
    if not force:
        try:
            sess = aws.session(profile)
            s3 = aws.client(sess, "s3", s.fleet.home_region, endpoint_url)
            where = render.regions(s, st.regions)
            left = drain.drain(lambda: status.read_statuses(s3, bucket, s.campaign.name),
                               lambda: aws.instances(sess, s, where, endpoint_url),
                               timeout_s=drain_timeout, poll_s=poll, log=lambda m: typer.echo(f"fleet: {m}"))
        except UsageError as exc:
            die(str(exc), code=1)
        except Exception as exc:  # botocore: no credentials, no such bucket, ...
            die(f"fleet destroy: draining: {aws.one_line(exc)}", code=1)
        if left:
            for line in left:
                typer.echo(f"  still holding results: {line}", err=True)
            die(f"fleet: not drained after {drain_timeout:g} s: {len(left)} instance(s) may still hold results "
                f"(first: {left[0]}); nothing destroyed (wait longer with --drain-timeout, or --force to lose them)",
                code=1)
        typer.echo("fleet: drained: every live instance's status shows nothing pending")
    targets = [f"-target=module.{m}" for m in st.modules if delete_bucket or m != "results_bucket"]
    if not targets:
        typer.echo("fleet: the state holds only the results bucket, which stays (--delete-bucket deletes it)")
        return
    try:
        summary = _saved_plan(build, env, ["-destroy", *targets], s, destroy=True)
        typer.echo(summary.describe())
        what = "everything, the results bucket included" if delete_bucket else "all but the results bucket"
        if not yes and not typer.confirm(f"destroy the fleet of {s.campaign.name} ({what})?", default=False):
            raise typer.Exit(1)
        if delete_bucket:
            s3 = aws.client(aws.session(profile), "s3", s.fleet.home_region, endpoint_url)
            try:
                n = aws.empty_bucket(s3, bucket)
            except Exception as exc:
                die(f"fleet: emptying s3://{bucket} failed: {aws.one_line(exc)}", code=1)
            typer.echo(f"fleet: deleted {n} object version(s) from {bucket}")
        _tee(["apply", "-input=false", "-no-color", "tfplan"], build, env)
    finally:
        _drop_plan(build)
    typer.echo(f"fleet: destroyed {summary.counts()['delete']} resource(s)"
               + ("" if delete_bucket else f"; s3://{bucket} kept"))


@app.command("ssh")
def ssh_command(spec: Path = SPEC, vantage: str = typer.Argument(..., help="The ec2 vantage id."),
                region: str | None = typer.Option(None, "--region", help="Only this region's instances."),
                endpoint_url: str | None = ENDPOINT, profile: str | None = PROFILE) -> None:
    """Print the `aws ssm start-session` line of each running instance of VANTAGE (found by its
    tags): SSM Session Manager, no SSH key and no open port (needs the AWS CLI's Session Manager plugin)."""
    from dnscamp.fleet import aws, render

    s, _ = _spec(spec)
    if s.fleet is None:
        die(f"{spec}: fleet: no [fleet] section")
    known = {v.id: v for v in s.ec2_vantages()}
    if vantage not in known:
        die(f"{spec}: vantages: no ec2 vantage {vantage!r} (ec2 vantages: {', '.join(known) or 'none'})")
    where = [region] if region else render.regions(s)
    if region and region not in known[vantage].all_regions:
        die(f"{spec}: vantages.{vantage}: not in region {region!r} (its regions: {', '.join(known[vantage].all_regions)})")
    try:
        found = [i for i in aws.instances(aws.session(profile), s, where, endpoint_url)
                 if i.vantage == vantage and i.state == "running"]
    except UsageError as exc:
        die(str(exc), code=1)
    except Exception as exc:
        die(f"fleet ssh: {aws.one_line(exc)}", code=1)
    if not found:
        die(f"fleet: no running instance of {vantage}{' in ' + region if region else ''} tagged "
            f"campaign={s.campaign.name}", code=1)
    for i in sorted(found, key=lambda i: (i.region, i.id)):
        typer.echo(f"aws ssm start-session --target {i.id} --region {i.region}" + (f" --profile {profile}" if profile else ""))


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
