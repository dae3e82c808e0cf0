"""`dnscamp sql`: SQL over the Parquet archive with DuckDB (issue 19)."""

from __future__ import annotations

import typer

app = typer.Typer(help="SQL over the Parquet archive with DuckDB (issue 19).", no_args_is_help=True)
