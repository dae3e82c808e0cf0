"""`dnscamp archive`: a campaign's records as Parquet (zstd, Hive-partitioned kind=/day=) with
a manifest, to a directory or s3://bucket/prefix; `archive restore` loads one back.
docs/archive.md."""

from __future__ import annotations

import json

import typer
from typer.core import TyperGroup

from dnscamp.errors import die
from vantage_agent.errors import first_line


class _DefaultWrite(TyperGroup):
    """`dnscamp archive --campaign C DEST` is `archive write ...`: a first argument that is no
    subcommand selects ``write``."""

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["write", *args]
        return super().parse_args(ctx, args)


app = typer.Typer(cls=_DefaultWrite, no_args_is_help=True,
                  help="The Parquet archive tier: `archive --campaign C DEST` writes, `archive restore SRC` "
                       "loads back, `archive verify SRC` checks (docs/archive.md).")  # fmt: skip


def _store_error(exc: Exception) -> None:
    die(f"cannot reach the store ({first_line(exc)}): run `dnscamp db up` (or check DNSCAMP_DATABASE_URL)", code=1)


@app.command("write")
def write_command(
    dest: str = typer.Argument(..., help="A new directory, or s3://bucket/prefix (boto3's credentials; "
                                         "AWS_ENDPOINT_URL_S3 for an S3-compatible server)."),
    campaign: str = typer.Option(..., "--campaign", "-c", help="Campaign to archive."),
    as_json: bool = typer.Option(False, "--json", help="Print the manifest's summary as JSON."),
) -> None:
    """Write CAMPAIGN's records as Parquet files kind=<kind>/day=<UTC day>/part-0000.parquet
    and manifest.json (rows, bytes, sha256 per file; schema version; the views' columns)."""
    import psycopg

    from db import engine
    from dnscamp.opendata import archive as arc

    try:
        with psycopg.connect(engine.database_url("owner")) as conn:
            m = arc.write(conn, campaign, dest)
    except arc.ArchiveError as exc:
        die(str(exc))
    except (psycopg.OperationalError, engine.StoreError) as exc:
        _store_error(exc)
    summary = {"dest": dest, "rows": m["rows"], "files": len(m["files"]),
               "bytes": sum(f["bytes"] for f in m["files"]), "kinds": {k: v["rows"] for k, v in m["kinds"].items()}}
    typer.echo(json.dumps(summary) if as_json else
               f"archived {summary['rows']} records of {campaign} in {summary['files']} files "
               f"({summary['bytes']} bytes) to {dest}")  # fmt: skip


@app.command("verify")
def verify_command(src: str = typer.Argument(..., help="Archive directory or s3://bucket/prefix.")) -> None:
    """Check an archive against its manifest: every file present, listed, of its size and
    sha256, readable Parquet with its row count. Exit 2 with one line naming the first bad file."""
    from dnscamp.opendata import archive as arc

    try:
        _, _, m = arc.verify(src)
    except arc.ArchiveError as exc:
        die(str(exc))
    typer.echo(f"ok: {m['rows']} records in {len(m['files'])} files ({m['campaign']})")


@app.command("restore")
def restore_command(
    src: str = typer.Argument(..., help="Archive directory or s3://bucket/prefix."),
    as_json: bool = typer.Option(False, "--json", help='Print {"ingested","duplicates","quarantined"}.'),
    workers: int = typer.Option(2, help="Parser processes of the ingest."),
) -> None:
    """Load an archive back into the store, idempotently: the manifest and every file are
    verified and converted before anything is ingested (a corrupt or partial archive is
    refused whole, naming the file); records go through the normal ingest (dedup by id and
    content hash) and Atlas raw results through the Atlas ingest (unique per result), so
    restoring twice adds nothing."""
    import psycopg
    import sqlalchemy.exc

    from collectors.ingest import IngestError, StoreUnavailable
    from db import engine, migrate
    from dnscamp.opendata import archive as arc

    try:
        migrate.upgrade(engine.sqlalchemy_url("owner"))  # a new store gets its schema first
        stats, atlas = arc.restore(src, engine.database_url("writer"), owner_url=engine.database_url("owner"),
                                   workers=workers)  # fmt: skip
    except arc.ArchiveError as exc:
        die(str(exc))
    except StoreUnavailable as exc:
        die(str(exc), code=1)
    except IngestError as exc:
        die(str(exc))
    except sqlalchemy.exc.OperationalError as exc:
        _store_error(exc.orig or exc)
    except (psycopg.OperationalError, engine.StoreError) as exc:
        _store_error(exc)
    out = {**stats.as_json(), "atlas": atlas.as_json() if atlas else None}
    for reason in (stats.reasons + (atlas.reasons if atlas else []))[:20]:
        typer.echo(f"quarantined: {reason}", err=True)
    typer.echo(json.dumps(out) if as_json else
               f"ingested {stats.ingested}, duplicates {stats.duplicates}, quarantined {stats.quarantined}"
               + (f"; Atlas results: ingested {atlas.ingested}, duplicates {atlas.duplicates}, "
                  f"quarantined {atlas.quarantined}" if atlas else ""))  # fmt: skip
    raise typer.Exit(3 if stats.quarantined or (atlas and atlas.quarantined) else 0)

