"""`dnscamp experiment list|run NAME|report NAME`: the seed papers' experiments
(docs/experiments.md)."""

from __future__ import annotations

import sys

import typer

from dnscamp.errors import die
from dnscamp.experiments import EXPERIMENTS, Experiment, ExperimentError, common, get

app = typer.Typer(help="Replay the seed papers' experiments on the testbed; the paper's figure beside ours.",
                  no_args_is_help=True)

REDUCED = typer.Option(False, "--reduced", help="The reduced size (campaigns/experiments/<spec>-reduced.toml): "
                                                "what the testbed tests run, a few minutes at most.")


def _experiment(name: str) -> Experiment:
    try:
        return get(name)
    except ExperimentError as exc:
        die(str(exc))


@app.command("list")
def list_cmd() -> None:
    """The experiments, their papers and specs."""
    rows = []
    for e in EXPERIMENTS.values():
        specs = ", ".join(f"{s}.toml" for s in e.load().SPECS)
        rows.append([e.number, e.name, e.title, e.paper, specs])
    typer.echo(common.table(["#", "name", "experiment", "paper", "campaign specs (campaigns/experiments/)"], rows))


@app.command("run")
def run_cmd(
    name: str = typer.Argument(..., help="Experiment name (dnscamp experiment list)."),
    reduced: bool = REDUCED,
    keep_testbed: bool = typer.Option(False, "--keep-testbed", help="Leave a testbed this run brought up running."),
) -> None:
    """Run the experiment's campaigns as `dnscamp campaign run` does (testbed, runner, ingest),
    then print its analysis."""
    from dnscamp import campaign
    from dnscamp.commands.campaign import _refuse
    from dnscamp.commands.ingest import ingest_errors
    from dnscamp.spec import SpecError

    experiment = _experiment(name)
    try:
        with ingest_errors():
            runs = common.run_experiment(experiment, reduced, keep_testbed=keep_testbed,
                                         log=lambda m: sys.stderr.write(f"{m}\n"))  # fmt: skip
    except SpecError as exc:
        raise _refuse(exc) from None
    except (ExperimentError, campaign.CampaignError) as exc:
        die(str(exc))
    with common.connect() as conn:
        typer.echo(experiment.load().analyse(conn, runs))


@app.command("report")
def report_cmd(
    name: str = typer.Argument(..., help="Experiment name (dnscamp experiment list)."),
    reduced: bool = REDUCED,
) -> None:
    """Re-run only the analysis, on the latest stored run of each of the experiment's campaigns."""
    mod = _experiment(name).load()
    with common.connect() as conn:
        if hasattr(mod, "stored_runs"):
            runs = mod.stored_runs(conn, reduced)
        else:
            names = [common.campaign_name(common.spec_path(s, reduced)) for s in mod.SPECS]
            runs = {c: r for c in names if (r := common.latest_run(conn, c))}
        if not runs:
            die(f"experiment {name}: nothing stored yet; run `dnscamp experiment run {name}"
                f"{' --reduced' if reduced else ''}` first")
        typer.echo(mod.analyse(conn, runs))
