"""`dnscamp sql [--archive SRC] "SELECT ..."`: the same SQL over the store (as the reader
role) or over a Parquet archive with DuckDB, whose views have the store's names and columns
(docs/archive.md)."""

from __future__ import annotations

import csv
import io
import json
import sys
from typing import Any, Sequence

import typer
from typer.core import TyperGroup

from dnscamp.errors import die
from vantage_agent.errors import first_line



class _OneCommand(TyperGroup):
    """`dnscamp sql [OPTIONS] QUERY` is one command: the group (which cli.py registers) hands
    every argument to it, options before or after the query."""

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, ["query", *args] if args[:1] != ["query"] else args)


app = typer.Typer(cls=_OneCommand, help="SQL over the store's reader views, or over a Parquet archive with DuckDB "
                  "(same view names and columns; docs/archive.md).")  # fmt: skip
FORMATS = ("table", "csv", "json")


def run_query(query: str, archive: str | None = None, *, checksums: bool = True) -> tuple[list[str], list[tuple]]:
    """(column names, rows) of ``query`` over the archive at ``archive`` (DuckDB; its files
    verified against the manifest first, sha256 included unless ``checksums`` is false) or,
    without one, over the store as the reader role (read-only transaction)."""
    if archive:
        import duckdb

        from dnscamp.opendata import archive as arc
        from dnscamp.opendata import duck

        try:
            return duck.run(archive, query, checksums=checksums)
        except arc.ArchiveError as exc:
            die(str(exc))
        except duckdb.Error as exc:
            die(f"sql: {first_line(exc)}")
    import psycopg

    from db import engine

    try:
        url = engine.database_url("reader")
    except engine.StoreError as exc:
        die(str(exc), code=1)
    try:
        with psycopg.connect(url) as conn:
            conn.read_only = True
            cur = conn.execute(query)
            return [d.name for d in cur.description or []], cur.fetchall()
    except psycopg.OperationalError as exc:
        die(f"cannot reach the store ({first_line(exc)}): run `dnscamp db up`", code=1)
    except psycopg.Error as exc:
        die(f"sql: {first_line(exc)}")


def _plain(v: Any) -> Any:
    """A value as JSON has it (UUIDs, times and decimals as their text)."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if hasattr(v, "isoformat"):
        return v.isoformat()
    return str(v)


def _cell(v: Any) -> str:
    v = _plain(v)
    if v is None:
        return ""
    return json.dumps(v) if isinstance(v, (list, dict)) else str(v)


def render(cols: Sequence[str], rows: Sequence[tuple], fmt: str) -> str:
    if fmt == "json":
        return json.dumps([dict(zip(cols, map(_plain, r))) for r in rows], indent=1) + "\n"
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(cols)
        w.writerows([_cell(v) for v in r] for r in rows)
        return buf.getvalue()
    cells = [list(cols)] + [[_cell(v) for v in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cols))]
    lines = [" | ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines) + f"\n({len(rows)} rows)\n"


@app.command("query")
def sql_command(
    query: str = typer.Argument(..., help='SQL, e.g. "SELECT transport, count(*) FROM v_dns_query GROUP BY 1".'),
    archive: str = typer.Option(None, "--archive", "-a", help="Archive directory or s3://bucket/prefix: run on "
                                "DuckDB over it instead of the store."),
    fmt: str = typer.Option("table", "--format", "-f", help="table, csv or json (an array of objects)."),
    quick: bool = typer.Option(False, "--quick", help="Check the archive's files by size, row count and footer "
                               "only, not by sha256 (a large archive on S3 is read once more otherwise)."),
) -> None:
    """Run one query and print its result. Without --archive it runs on the store as the
    read-only reader role (the v_* views); with it, on DuckDB over the archive's Parquet files
    with views of the same names and columns (the files are checked against the manifest first)."""
    if fmt not in FORMATS:
        die(f"--format: {fmt!r} is not one of {', '.join(FORMATS)}")
    cols, rows = run_query(query, archive, checksums=not quick)
    sys.stdout.write(render(cols, rows, fmt))
