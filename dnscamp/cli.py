"""The `dnscamp` command. Each area is a Typer sub-app in dnscamp/commands/<area>.py."""

from __future__ import annotations

import sys

import typer

from dnscamp import __version__
from db.embedded import StoreError
from dnscamp.commands import campaign, db, ingest
from dnscamp.errors import die

app = typer.Typer(
    name="dnscamp",
    help="Measurement campaigns on DNS transports and web performance.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# -- areas (one line each) ------------------------------------------------------------------
app.add_typer(db.app, name="db")
app.add_typer(__import__("dnscamp.commands.atlas", fromlist=["app"]).app, name="atlas")
app.add_typer(campaign.app, name="campaign")
app.add_typer(__import__("dnscamp.commands.testbed", fromlist=["app"]).app, name="testbed")
app.command("ingest")(ingest.ingest_command)
app.command("dns")(__import__("dnscamp.commands.dns", fromlist=["x"]).dns_command)
app.command("pageload")(__import__("dnscamp.commands.pageload", fromlist=["x"]).pageload_command)
app.add_typer(__import__("dnscamp.commands.fleet", fromlist=["app"]).app, name="fleet")
app.add_typer(__import__("dnscamp.commands.schedule", fromlist=["app"]).app, name="schedule")
app.add_typer(__import__("dnscamp.commands.agent", fromlist=["app"]).app, name="agent")
app.command("collect")(__import__("dnscamp.commands.collect", fromlist=["x"]).collect_command)
app.add_typer(__import__("dnscamp.commands.link", fromlist=["app"]).app, name="link")
app.add_typer(__import__("dnscamp.commands.dashboards", fromlist=["app"]).app, name="dashboards")
app.add_typer(__import__("dnscamp.commands.report", fromlist=["app"]).app, name="report")
app.add_typer(__import__("dnscamp.commands.export", fromlist=["app"]).app, name="export")
app.add_typer(__import__("dnscamp.commands.archive", fromlist=["app"]).app, name="archive")
app.add_typer(__import__("dnscamp.commands.sql", fromlist=["app"]).app, name="sql")
app.add_typer(__import__("dnscamp.commands.experiment", fromlist=["app"]).app, name="experiment")


@app.command("version")
def version() -> None:
    """Print the dnscamp version."""
    typer.echo(__version__)


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.stderr.write("dnscamp: interrupted\n")
        raise SystemExit(130) from None
    except StoreError as exc:  # the store misconfigured or unreachable: one line, not a traceback
        die(str(exc), code=1)


if __name__ == "__main__":
    main()
