"""The `dnscamp` command. Each area is a Typer sub-app in dnscamp/commands/<area>.py."""

from __future__ import annotations

import importlib
import inspect
import re
import sys
import types

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


# typer.rich_utils, which renders --help, imports rich.markdown (markdown-it-py) and
# rich.traceback (pygments, attrs) at its top: ~50 ms of CPU of the ~200 of `dnscamp --help`,
# for Markdown help texts (dnscamp's are rich markup) and pretty tracebacks (off here). While
# it loads, those two names are stand-ins that import the real class when first used.
_DEFERRED = {"rich.markdown": "Markdown", "rich.traceback": "Traceback"}


class _Deferred(type):
    """The metaclass of a stand-in for class ``cls.__name__`` of module ``cls._module``:
    calling it, reading its attributes and isinstance / issubclass go to the real class."""

    def _real(cls) -> type:
        return getattr(importlib.import_module(cls._module), cls.__name__)

    def __call__(cls, *args, **kwargs):
        return cls._real()(*args, **kwargs)

    def __getattr__(cls, name: str):
        return getattr(cls._real(), name)

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, cls._real())

    def __subclasscheck__(cls, sub) -> bool:
        return issubclass(sub, cls._real())


def load_help_renderer() -> None:
    """Import typer.rich_utils with stand-ins for the classes of ``_DEFERRED``; only typer.rich_utils
    holds them: the real modules are left to be imported as usual."""
    if "typer.rich_utils" in sys.modules or any(m in sys.modules for m in _DEFERRED):
        return
    for module, name in _DEFERRED.items():
        stand_in = types.ModuleType(module)
        setattr(stand_in, name, _Deferred(name, (), {"_module": module}))
        sys.modules[module] = stand_in
    try:
        import typer.rich_utils  # noqa: F401
    finally:
        for module in _DEFERRED:
            sys.modules.pop(module, None)


def main() -> None:
    args = sys.argv[1:]
    if not args or "--help" in args:  # the help is rendered (a group without arguments shows its help)
        load_help_renderer()
    try:
        app()
    except KeyboardInterrupt:
        sys.stderr.write("dnscamp: interrupted\n")
        raise SystemExit(130) from None
    except StoreError as exc:  # the store misconfigured or unreachable: one line, not a traceback
        die(str(exc), code=1)


if __name__ == "__main__":
    main()
