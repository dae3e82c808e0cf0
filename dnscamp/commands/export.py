"""`dnscamp export`: a campaign's records as open data: jsonl (the records as
ingested), parquet or csv (one file per reader view), with a README (docs/archive.md)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from typer.core import TyperGroup

from dnscamp.errors import die
from vantage_agent.errors import first_line


class _OneCommand(TyperGroup):
    """`dnscamp export [OPTIONS] DIR` is one command (the group cli.py registers hands it every argument)."""

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, ["run", *args] if args[:1] != ["run"] else args)


app = typer.Typer(cls=_OneCommand, help="Export a campaign as open data: jsonl records, or one Parquet/CSV file "
                  "per view, with a README (docs/archive.md).")  # fmt: skip


@app.command("run")
def export_command(
    out: Path = typer.Argument(..., help="A new (or empty) directory."),
    campaign: str = typer.Option(..., "--campaign", "-c", help="Campaign to export."),
    fmt: str = typer.Option("parquet", "--format", "-f", help="jsonl, parquet or csv."),
    licence: str = typer.Option("CC-BY-4.0", "--licence", help="Licence stated in the README and the files' metadata."),
    spec: Path = typer.Option(None, "--spec", help="The campaign's spec (TOML) to publish beside the data "
                              "(default: campaigns/<campaign>.toml when it exists)."),
    as_json: bool = typer.Option(False, "--json", help="Print the files and their rows as JSON."),
) -> None:
    """Export CAMPAIGN into OUT. jsonl: records/<kind>.jsonl, each record JSON-equal to the
    line that was ingested (`dnscamp ingest` takes them back). parquet / csv: <view>.parquet
    or <view>.csv for every reader view with a campaign column, and schema.json (columns,
    types, units). Every format writes README.md (files, columns and units, licence, versions,
    the campaign spec)."""
    import psycopg

    from db import engine
    from dnscamp.opendata import export as exp

    try:
        info = exp.export(engine.database_url("owner"), engine.database_url("reader"), campaign, out, fmt,
                          licence=licence, spec=spec)  # fmt: skip
    except exp.ExportError as exc:
        die(str(exc))
    except (psycopg.OperationalError, engine.StoreError) as exc:
        die(f"cannot reach the store ({first_line(exc)}): run `dnscamp db up` (or check DNSCAMP_DATABASE_URL)", code=1)
    if as_json:
        typer.echo(json.dumps(info["files"]))
    else:
        typer.echo(f"exported {campaign} as {fmt}: {len(info['files'])} files in {out}")
