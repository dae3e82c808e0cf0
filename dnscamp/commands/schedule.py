"""`dnscamp schedule ...`: install a campaign's [campaign.schedule] into cron, and what cron runs."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import typer

from dnscamp.commands.agent import BUCKET_OPT, VANTAGE_OPT, shipper
from dnscamp.commands.campaign import _load
from dnscamp.errors import die
from vantage_agent import paths

app = typer.Typer(help="Scheduled agents: cron entries that fire campaign runs and ship them.", no_args_is_help=True)
SPEC_ARG = typer.Argument(..., help="Campaign spec (TOML) with a [campaign.schedule] table.")
# The vantage's identity (campaign, vantage, bucket), written by cloud-init; a $DNSCAMP_HOME/
# vantage.env comes first, so several agents on one machine (the rehearsal) each have their own.
# ec2.env holds what only a real instance does (DNSCAMP_SHUTDOWN_AT_END=1: power off at the end).
ENV_FILES = ("vantage.env", Path("/etc/dnscamp/vantage.env"), Path("/etc/dnscamp/ec2.env"))


def _scheduled(spec: Path):
    s = _load(spec)
    if s.campaign.schedule is None:
        die(f"{spec}: campaign.schedule: missing (add a [campaign.schedule] table with cron = \"...\")")
    return s


@app.command("install")
def install(spec: Path = SPEC_ARG) -> None:
    """Write /etc/cron.d/dnscamp-<campaign> (root; DNSCAMP_CRON_D overrides the directory) or a
    marked block in your crontab (DNSCAMP_CRONTAB overrides the command). Replaces a previous
    install of the same campaign; touches nothing else."""
    from dnscamp import schedule as sch

    s = _scheduled(spec)
    try:
        where = sch.install(s.campaign.schedule, s.campaign.name, spec, paths.home())
    except sch.ScheduleError as exc:
        die(str(exc))
    nxt = ", ".join(t.strftime("%Y-%m-%d %H:%M") for t in sch.next_firings(s.campaign.schedule))
    typer.echo(f"installed {s.campaign.name} in {where}: {s.campaign.schedule.cron} (next: {nxt} UTC)")
    if warning := sch.overlap_warning(s.campaign.schedule):
        sys.stderr.write(f"dnscamp: warning: {spec}: campaign.schedule: {warning}\n")


@app.command("list")
def list_cmd(spec: Path = SPEC_ARG) -> None:
    """Print the campaign's installed cron line(s) (nothing when not installed; exit 1)."""
    from dnscamp import schedule as sch

    s = _scheduled(spec)
    lines = sch.installed(s.campaign.name)
    for ln in lines:
        typer.echo(ln)
    raise typer.Exit(0 if lines else 1)


@app.command("remove")
def remove(spec: Path = SPEC_ARG) -> None:
    """Remove the campaign's cron entry (only that one)."""
    from dnscamp import schedule as sch

    s = _scheduled(spec)
    typer.echo(f"removed {s.campaign.name}" if sch.remove(s.campaign.name) else f"{s.campaign.name}: not installed")


@app.command("fire")
def fire(
    spec: Path = SPEC_ARG,
    bucket: str = BUCKET_OPT,
    vantage: str = VANTAGE_OPT,
    spool: Path = typer.Option(None, help="Spool directory (default $DNSCAMP_HOME/spool)."),
) -> None:
    """What cron runs (under flock -n): past the agent's end of life ([fleet] days after its
    launch) ship everything, write the final status, remove the schedule (and on EC2 shut down);
    else prune spool files shipped long enough ago; below [fleet] disk_floor_mib ship and say so
    without measuring; else jitter, run or resume the campaign in a supervised child, stop it at
    max_runtime_s (unfinished units become timeout records), ship. Logs to
    $DNSCAMP_HOME/logs/<campaign>.log (rotated by size)."""
    from dnscamp import schedule as sch

    _load_env()
    s = _scheduled(spec)
    home = paths.home()
    log = sch.firing_log(home, s.campaign.name)
    spool = spool or paths.spool_dir()
    try:
        res = sch.fire(s, spec.resolve(), home=home, spool_dir=spool, log=log,
                       ship=shipper(spool, bucket or os.environ.get("DNSCAMP_RESULTS_BUCKET"),
                                    vantage or os.environ.get("DNSCAMP_VANTAGE"), s.campaign.name),
                       shutdown=lambda: sch.shutdown_at_end(log))  # fmt: skip
    except Exception as exc:
        log.exception("firing failed: %s", exc)
        raise
    typer.echo(json.dumps(res.__dict__))


def _load_env() -> None:
    from dnscamp import schedule as sch

    for f in ENV_FILES:
        sch.load_env_file(paths.home() / f)  # an absolute path stays itself


@app.command("skipped")
def skipped(spec: Path = SPEC_ARG, code: int = typer.Option(..., help="flock's exit code.")) -> None:
    """What cron runs when a firing did not run: flock found the lock held (exit 75: counted as
    a skipped firing, and the status object says so) or the firing failed (logged)."""
    from dnscamp import schedule as sch

    _load_env()
    s = _load(spec)
    home = paths.home()
    log = sch.firing_log(home, s.campaign.name)
    if code != sch.SKIPPED:
        log.warning("firing ended with exit code %d", code)
        raise typer.Exit(code)
    state = sch.record_skipped(home, s.campaign.name)
    log.warning("firing skipped (%d so far): the previous firing still holds %s", state["skipped_firings"],
                sch.lock_path(home, s.campaign.name))  # fmt: skip
    bucket, vantage = os.environ.get("DNSCAMP_RESULTS_BUCKET"), os.environ.get("DNSCAMP_VANTAGE")
    if bucket and vantage:  # the status only: the running firing ships (two shippers would race on the ledger)
        from vantage_agent import ship

        try:
            key = ship.put_status(ship.s3_client(), bucket, paths.spool_dir(), home=home, campaign=s.campaign.name,
                                  vantage=vantage)  # fmt: skip
            log.info("status %s", key)
        except Exception as exc:  # the next status carries the count
            log.warning("status not written: %s", ship._error_line(exc))
    raise typer.Exit(code)
