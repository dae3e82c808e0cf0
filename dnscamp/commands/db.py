"""`dnscamp db ...`: the store (embedded Postgres by default, or DNSCAMP_DATABASE_URL)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import typer

from db import embedded, engine, migrate
from dnscamp.errors import die

app = typer.Typer(help="The store: embedded Postgres (default) or DNSCAMP_DATABASE_URL.", no_args_is_help=True)


@app.command("up")
def up() -> None:
    """Start the embedded Postgres (initialising it the first time) and migrate it."""
    if engine.external_url():
        typer.echo("DNSCAMP_DATABASE_URL is set: using that database (nothing to start)")
    else:
        c = embedded.up()
        typer.echo(f"embedded Postgres running: {c.data}")
    migrate.upgrade(engine.sqlalchemy_url("owner"))
    typer.echo(f"schema at {', '.join(migrate.current_heads())}")


@app.command("down")
def down() -> None:
    """Stop the embedded Postgres (data is kept)."""
    if engine.external_url():
        die("DNSCAMP_DATABASE_URL is set: dnscamp does not stop an external database")
    typer.echo("stopped" if embedded.down() else "not running")


@app.command("status")
def status(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Is the store up, which schema revision, how many records."""
    info: dict = {"external": bool(engine.external_url())}
    if not info["external"]:
        c = embedded.cluster()
        info.update(data_dir=str(c.data), running=embedded.is_running(c))
        if not info["running"]:
            _print(info, as_json)
            raise typer.Exit(1)
    try:
        with engine.connect("owner", start=False) as conn:
            info["results"] = conn.execute("SELECT count(*) FROM results").fetchone()[0]
            info["quarantined"] = conn.execute("SELECT count(*) FROM quarantine").fetchone()[0]
        info["revision"] = migrate.current_heads(engine.sqlalchemy_url("owner", start=False))
        info["latest"] = migrate.script_heads()
    except Exception as exc:  # noqa: BLE001 - status reports, it does not crash
        info["error"] = str(exc).splitlines()[0]
    _print(info, as_json)


def _print(info: dict, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(info))
    else:
        for k, v in info.items():
            typer.echo(f"{k}: {v}")


@app.command("migrate")
def migrate_cmd(target: str = typer.Argument("heads", help="Alembic target revision.")) -> None:
    """Apply migrations (default: every head)."""
    migrate.upgrade(engine.sqlalchemy_url("owner"), target)
    typer.echo(f"schema at {', '.join(migrate.current_heads())}")


@app.command("url")
def url(role: str = typer.Option("owner", help="owner | writer | reader")) -> None:
    """Print the libpq connection URL of the store for ROLE."""
    if role not in ("owner", "writer", "reader"):
        die(f"--role: unknown role {role!r} (owner, writer, reader)")
    typer.echo(engine.database_url(role))


@app.command("psql", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def psql(ctx: typer.Context, role: str = typer.Option("owner", help="owner | writer | reader")) -> None:
    """Open psql on the store (extra arguments go to psql, e.g. -c 'SELECT ...')."""
    exe = None if engine.external_url() else embedded.cluster().bin("psql")
    exe = exe or shutil.which("psql")
    if not exe:
        die("psql not found")
    raise typer.Exit(subprocess.call([exe, engine.database_url(role), *ctx.args], env=os.environ))
