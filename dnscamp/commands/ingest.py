"""`dnscamp ingest PATH...`: result files into the store (idempotent, loss-free)."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

import typer

from dnscamp.errors import die

if TYPE_CHECKING:
    from collectors.ingest import IngestStats

MAX_REASONS = 20


def run_ingest(paths: list[Path], workers: int | None = None) -> IngestStats:
    """Migrate and ingest as the writer (dnscamp.campaign.ingest), printing the first reasons on
    stderr. A path that cannot be ingested ends the command with one line (exit 2); a database
    that stopped or cannot be reached, with one line naming what to run (exit 1)."""
    from dnscamp import campaign

    with ingest_errors():
        stats = campaign.ingest(paths, workers)
    say_quarantined(stats)
    return stats


@contextlib.contextmanager
def ingest_errors() -> Iterator[None]:
    """An ingest's errors as one line: exit 1 when the store stopped or cannot be reached
    (committed batches are kept), exit 2 for a path that cannot be ingested."""
    from collectors.errors import IngestError, StoreUnavailable

    try:
        yield
    except StoreUnavailable as exc:
        die(str(exc), code=1)
    except IngestError as exc:
        die(str(exc))


def say_quarantined(stats: IngestStats) -> None:
    """The first MAX_REASONS quarantined lines on stderr, one a line."""
    for reason in stats.reasons[:MAX_REASONS]:
        sys.stderr.write(f"quarantined: {reason}\n")
    if len(stats.reasons) > MAX_REASONS:
        sys.stderr.write(f"... and {len(stats.reasons) - MAX_REASONS} more (see the quarantine table)\n")


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
