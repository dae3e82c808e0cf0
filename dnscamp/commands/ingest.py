"""`dnscamp ingest PATH...`: result files into the store (idempotent, loss-free)."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from dnscamp.errors import die
from vantage_agent.errors import first_line

if TYPE_CHECKING:
    from collectors.ingest import IngestStats

MAX_REASONS = 20


def run_ingest(paths: list[Path], workers: int | None = None) -> IngestStats:
    """Migrate, ingest as the writer and print the first reasons on stderr. A path that
    cannot be ingested ends the command with one line (exit 2); a database that stopped or
    cannot be reached, with one line naming what to run (exit 1)."""
    import sqlalchemy.exc

    from collectors.ingest import IngestError, StoreUnavailable, ingest
    from db import engine, migrate

    # psycopg logs a warning while it abandons a COPY on a lost connection; our one line says it.
    logging.getLogger("psycopg").addHandler(logging.NullHandler())
    try:
        migrate.upgrade(engine.sqlalchemy_url("owner"))
    except sqlalchemy.exc.OperationalError as exc:
        die(f"cannot reach the store ({first_line(exc.orig)}): run `dnscamp db up` "
            "(or check DNSCAMP_DATABASE_URL), then the same ingest again", code=1)  # fmt: skip
    try:
        stats = ingest(paths, engine.database_url("writer"), workers=workers)  # collectors write as the writer
    except StoreUnavailable as exc:
        die(str(exc), code=1)
    except IngestError as exc:
        die(str(exc))
    for reason in stats.reasons[:MAX_REASONS]:
        sys.stderr.write(f"quarantined: {reason}\n")
    if len(stats.reasons) > MAX_REASONS:
        sys.stderr.write(f"... and {len(stats.reasons) - MAX_REASONS} more (see the quarantine table)\n")
    return stats


def ingest_command(
    paths: list[Path] = typer.Argument(..., help="Files (*.jsonl, *.jsonl.gz) or directories of them."),
    as_json: bool = typer.Option(False, "--json", help='Print {"ingested","duplicates","quarantined"} on stdout.'),
    workers: int = typer.Option(2, help="Parser processes."),
) -> None:
    """Ingest result files. Exit 0 when nothing was quarantined, 3 when something was
    (one line per quarantined line on stderr, first 20), 1 when the database stopped or
    cannot be reached (committed batches are kept: run the same ingest again).

    A bad line never stops the run: invalid records, JSON that is not strict (NaN, Infinity,
    a BOM, lone surrogates, invalid UTF-8), NUL characters, lines over 16 MiB, a *.gz file
    that is not gzip, a different record under a stored id (id_conflict) are quarantined
    with file, line and reason; a quarantined line that later ingests leaves the quarantine."""
    stats = run_ingest(paths, workers)
    if as_json:
        typer.echo(json.dumps(stats.as_json()))
    else:
        typer.echo(f"ingested {stats.ingested}, duplicates {stats.duplicates}, quarantined {stats.quarantined}")
    raise typer.Exit(3 if stats.quarantined else 0)
