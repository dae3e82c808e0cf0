"""`dnscamp ingest PATH...`: result files into the store (idempotent, loss-free)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from collectors.ingest import IngestError, ingest
from db import engine, migrate
from dnscamp.errors import die

MAX_REASONS = 20


def ingest_command(
    paths: list[Path] = typer.Argument(..., help="Files (*.jsonl, *.jsonl.gz) or directories of them."),
    as_json: bool = typer.Option(False, "--json", help='Print {"ingested","duplicates","quarantined"} on stdout.'),
    workers: int = typer.Option(2, help="Parser processes."),
) -> None:
    """Ingest result files. Exit 0 when nothing was quarantined, 3 when something was
    (one line per quarantined line on stderr, first 20)."""
    migrate.upgrade(engine.sqlalchemy_url("owner"))
    url = engine.database_url("writer")  # collectors write with the writer role
    try:
        stats = ingest(paths, url, workers=workers)
    except IngestError as exc:
        die(str(exc))
    for reason in stats.reasons[:MAX_REASONS]:
        sys.stderr.write(f"quarantined: {reason}\n")
    if len(stats.reasons) > MAX_REASONS:
        sys.stderr.write(f"... and {len(stats.reasons) - MAX_REASONS} more (see the quarantine table)\n")
    if as_json:
        typer.echo(json.dumps(stats.as_json()))
    else:
        typer.echo(f"ingested {stats.ingested}, duplicates {stats.duplicates}, quarantined {stats.quarantined}")
    raise typer.Exit(3 if stats.quarantined else 0)
