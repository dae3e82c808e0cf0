"""`dnscamp campaign ...`: validate, plan and run campaign specs."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from dnscamp.errors import die
from dnscamp.limits import MAX_UNITS

if TYPE_CHECKING:
    from dnscamp import planner
    from dnscamp.spec import SpecError

app = typer.Typer(help="Campaign specs: validate, plan, run.", no_args_is_help=True)


MAX_UNITS_OPT = typer.Option(
    MAX_UNITS, "--max-units", min=1,
    help="Refuse a plan with more units than this (a spec typo can multiply a plan into millions).",
)  # fmt: skip


def _refuse(exc: SpecError):
    for line in exc.lines:
        sys.stderr.write(f"dnscamp: {line}\n")
    return typer.Exit(2)


def _load(spec_path: Path):
    from dnscamp.spec import SpecError, load

    try:
        return load(spec_path)
    except SpecError as exc:
        raise _refuse(exc) from None


def _plan(s, run: str, max_units: int) -> planner.Plan:
    from dnscamp import planner
    from dnscamp.spec import SpecError

    try:
        return planner.plan(s, run, max_units=max_units)
    except SpecError as exc:
        raise _refuse(exc) from None


def _breakdown(p: planner.Plan) -> str:
    return ", ".join(f"{k} {n}" for k, n in p.counts().items())


@app.command("validate")
def validate(
    spec: Path = typer.Argument(..., help="Campaign spec (TOML)."),
    max_units: int = MAX_UNITS_OPT,
) -> None:
    """Check a spec; print every error as 'file: field.path: reason' (all of them, in one pass),
    or the size of its plan. A plan above --max-units is an error (exit 2). A spec with ec2
    vantages also gets the fleet's offline preflight (a schedule that fires within [fleet] days,
    names and counts AWS accepts; docs/spec.md)."""
    from dnscamp.fleet import preflight

    s = _load(spec)
    if refused := preflight.offline(s, spec):
        for line in refused:
            sys.stderr.write(f"dnscamp: {line}\n")
        raise typer.Exit(2)
    p = _plan(s, "validate", max_units)
    typer.echo(f"{spec}: ok ({p.size} units: {len(s.vantages)} vantages; kinds {_breakdown(p)})")


@app.command("plan")
def plan_cmd(
    spec: Path = typer.Argument(..., help="Campaign spec (TOML)."),
    as_json: bool = typer.Option(False, "--json", help="Print the units as JSON lines."),
    count: bool = typer.Option(False, "--count", help="Print only the number of units (per kind too), building none."),
    max_units: int = MAX_UNITS_OPT,
) -> None:
    """Print the shuffled plan (units in execution order, streamed) without running anything."""
    s = _load(spec)
    p = _plan(s, "plan", max_units)
    if count:
        typer.echo(json.dumps({"units": p.size, "kinds": p.counts()}) if as_json else f"{p.size} units ({_breakdown(p)})")
        return
    for u in p.units():
        if as_json:
            typer.echo(json.dumps(u.to_dict()))
        else:
            typer.echo(f"{u.order:5d} {u.id} {u.vantage.id}/{u.vantage.network_profile or '-'} {u.kind} {u.target} rep={u.repetition}")


@app.command("run")
def run_cmd(
    spec: Path = typer.Argument(..., help="Campaign spec (TOML)."),
    run_id: str = typer.Option(None, "--run", help="Run id to create or resume (default: resume the latest unfinished run of this spec, else a new one)."),
    spool: Path = typer.Option(None, help="Spool directory (default $DNSCAMP_HOME/spool)."),
    ingest: bool = typer.Option(True, help="Ingest the run's records into the store afterwards."),
    show_report: bool = typer.Option(True, "--report/--no-report", help="Print the report afterwards."),
    as_json: bool = typer.Option(False, "--json", help="Print the run summary as JSON."),
    keep_testbed: bool = typer.Option(False, "--keep-testbed", help="Leave a testbed this run brought up running afterwards."),
    max_units: int = MAX_UNITS_OPT,
) -> None:
    """Run (or resume) a campaign: units -> spool -> (ingest) -> (report). Exit 3 when the
    ingest quarantined a line (as `dnscamp ingest`).

    Execution order: the units run one at a time, in the order of `dnscamp campaign plan`
    (the seeded shuffle, which interleaves access profiles and kinds); units already done
    (resume) are skipped. Each client network namespace has one vantage agent, started at
    its first unit and kept until the run ends; host kinds run in the dnscamp process in
    their turn. The run directory's executed.ndjson has one line per unit as it starts
    (unit id, plan order, start time, where it ran)."""
    from dnscamp import campaign, report
    from dnscamp.commands.ingest import ingest_errors, say_quarantined
    from dnscamp.spec import SpecError

    s = _load(spec)
    options = campaign.RunOptions(run_id=run_id, spool_dir=spool, ingest=ingest,
                                  report=show_report and not as_json, keep_testbed=keep_testbed,
                                  max_units=max_units, show_progress=not as_json)  # fmt: skip
    try:
        with ingest_errors():  # migrates; bad lines quarantined; one-line errors
            result = campaign.run(s, options, log=lambda m: sys.stderr.write(f"{m}\n"))
    except SpecError as exc:
        raise _refuse(exc) from None
    except campaign.CampaignError as exc:
        die(str(exc))
    summary = result.summary
    if result.ingest is not None:
        say_quarantined(result.ingest)
    if as_json:
        typer.echo(json.dumps(result.as_json()))
    else:
        typer.echo(
            f"run {summary.run} of {summary.campaign}: {summary.units_run} units run, {summary.units_skipped} already done, "
            f"{summary.records} records {dict(summary.statuses)}" + (f"; ingest {result.ingest.as_json()}" if ingest else "")
        )
    if result.report is not None:
        report.render(result.report)
    if result.quarantined:
        raise typer.Exit(3)  # like `dnscamp ingest`: a scheduled run must not hide a quarantined line


@app.command("report")
def report_cmd(
    campaign: str = typer.Argument(..., help="Campaign name."),
    run_id: str = typer.Option(None, "--run", help="Only this run."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Print the report of a campaign from the SQL views."""
    from db import engine
    from dnscamp import report

    sections = report.gather(engine.database_url("reader"), campaign, run_id)
    if as_json:
        typer.echo(json.dumps(sections, default=str))
    else:
        report.render(sections)
