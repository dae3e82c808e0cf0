"""`dnscamp db ...`: the store (embedded Postgres by default, or DNSCAMP_DATABASE_URL and
DNSCAMP_READER_URL). Security model: docs/store.md."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys

import typer

from db.errors import StoreError
from dnscamp.errors import die
from vantage_agent.errors import first_line

app = typer.Typer(help="The store: embedded Postgres (default) or DNSCAMP_DATABASE_URL.", no_args_is_help=True)


def _one_line_errors(fn):
    """A store that cannot be used (StoreError) ends the command with its one line, exit 1."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except StoreError as exc:
            die(str(exc), code=1)

    return wrapper


@app.command("up")
@_one_line_errors
def up() -> None:
    """Start the embedded Postgres (initialising it the first time) and migrate it."""
    from db import embedded, engine, migrate

    if engine.external_url():
        typer.echo("DNSCAMP_DATABASE_URL is set: using that database (nothing to start)")
    else:
        c = embedded.up()
        typer.echo(f"embedded Postgres running: {c.data}")
    migrate.upgrade(engine.sqlalchemy_url("owner"))
    typer.echo(f"schema at {', '.join(migrate.current_heads())}")


@app.command("down")
@_one_line_errors
def down() -> None:
    """Stop the embedded Postgres (data is kept)."""
    from db import embedded, engine

    if engine.external_url():
        die("DNSCAMP_DATABASE_URL is set: dnscamp does not stop an external database")
    typer.echo("stopped" if embedded.down() else "not running")


@app.command("status")
@_one_line_errors
def status(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Is the store up, which schema revision, how many records. Exit 0 only when it connected,
    1 (with a one-line reason on stderr) when the store is unreachable."""
    import psycopg

    from db import embedded, engine, migrate

    info: dict = {"external": bool(engine.external_url())}
    if not info["external"]:
        c = embedded.cluster()
        info.update(data_dir=str(c.data), running=embedded.is_running(c))
        if not info["running"]:
            info["error"] = "the embedded Postgres is not running (run `dnscamp db up`)"
    if "error" not in info:
        try:
            with psycopg.connect(engine.database_url("owner", start=False), connect_timeout=10) as conn:
                # since 0012 every record has one result_ids row; counting the results view would
                # join the store's tables (seconds at 10M records); a store not upgraded yet has the table
                table = "result_ids" if conn.execute("SELECT to_regclass('result_ids')").fetchone()[0] else "results"
                info["results"] = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                info["quarantined"] = conn.execute("SELECT count(*) FROM quarantine").fetchone()[0]
            info["revision"] = migrate.current_heads(engine.sqlalchemy_url("owner", start=False))
            info["latest"] = migrate.script_heads()
        except psycopg.OperationalError as exc:  # unreachable, refused, bad password
            info["error"] = f"cannot connect to the store: {first_line(exc)}"
        except psycopg.Error as exc:  # reachable, but e.g. not migrated yet
            info["warning"] = first_line(exc)
    _print(info, as_json)
    if "error" in info:
        sys.stderr.write(f"dnscamp: {info['error']}\n")
        raise typer.Exit(1)


def _print(info: dict, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(info))
    else:
        for k, v in info.items():
            typer.echo(f"{k}: {v}")


@app.command("migrate")
@_one_line_errors
def migrate_cmd(target: str = typer.Argument("heads", help="Alembic target revision.")) -> None:
    """Apply migrations (default: the head; the history is linear)."""
    from db import engine, migrate

    migrate.upgrade(engine.sqlalchemy_url("owner"), target)
    typer.echo(f"schema at {', '.join(migrate.current_heads())}")


@app.command("url")
@_one_line_errors
def url(role: str = typer.Option("owner", help="owner | writer | reader | grafana")) -> None:
    """Print the libpq connection URL of the store for ROLE."""
    from db import engine

    if role not in engine.ROLE_NAMES:
        die(f"--role: unknown role {role!r} ({', '.join(engine.ROLE_NAMES)})")
    typer.echo(engine.database_url(role))


@app.command("psql", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
@_one_line_errors
def psql(ctx: typer.Context, role: str = typer.Option("owner", help="owner | writer | reader | grafana")) -> None:
    """Open psql on the store (extra arguments go to psql, e.g. -c 'SELECT ...')."""
    from db import embedded, engine

    if role not in engine.ROLE_NAMES:
        die(f"--role: unknown role {role!r} ({', '.join(engine.ROLE_NAMES)})")
    exe = None if engine.external_url() else embedded.cluster().bin("psql")
    exe = exe or shutil.which("psql")
    if not exe:
        die("psql not found")
    conninfo, env = _without_password(engine.database_url(role))
    raise typer.Exit(subprocess.call([exe, conninfo, *ctx.args], env=env))


def _without_password(url: str) -> tuple[str, dict]:
    """psql's argv is visible to every local user (ps): a password from the URL (external
    stores) goes into the child's environment instead, readable by its own user only."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(url)
    env = dict(os.environ)
    password = params.pop("password", None)
    if password:
        env["PGPASSWORD"] = password
    return make_conninfo(**params), env
