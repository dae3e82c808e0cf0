"""The `dnscamp` command. Each area is a Typer sub-app in dnscamp/commands/<area>.py."""

from __future__ import annotations

import inspect
import re
import sys

import typer

from db.errors import StoreError
from dnscamp import __version__
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


_ITEM = re.compile(r"(?:[-*•]|\d+[.)])\s")  # a list item's first line


def reflow(text: str) -> str:
    """A docstring with each paragraph on one line (a list: one line an item), so that --help
    wraps it to the terminal: rich keeps a docstring's own line breaks and wraps the long lines
    between them again, which left ragged text. An indented paragraph (code) stays as it is."""
    out = []
    for para in inspect.cleandoc(text).split("\n\n"):
        if not para.strip():
            continue
        lines = para.split("\n")
        if all(ln.startswith("    ") for ln in lines):
            out.append(para)
            continue
        items: list[str] = []
        for ln in (ln.strip() for ln in lines):
            if ln and (not items or _ITEM.match(ln)):
                items.append(ln)
            elif ln:
                items[-1] += " " + ln
        out.append("\n".join(items))
    return "\n\n".join(out)


def _reflow_help(t: typer.Typer) -> None:
    """`reflow` every command's and group's help under ``t`` (given or from the docstring)."""
    for info in t.registered_commands:
        doc = info.help if isinstance(info.help, str) else inspect.getdoc(info.callback)
        if doc:
            info.help = reflow(doc)
    cb = t.registered_callback
    if cb is not None and isinstance(cb.help, str):
        cb.help = reflow(cb.help)
    elif cb is not None and cb.callback.__doc__:  # in place: a group's own help still comes first
        cb.callback.__doc__ = reflow(inspect.getdoc(cb.callback))
    if isinstance(t.info.help, str):
        t.info.help = reflow(t.info.help)
    for g in t.registered_groups:
        if isinstance(g.help, str):
            g.help = reflow(g.help)
        _reflow_help(g.typer_instance)


_reflow_help(app)


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
