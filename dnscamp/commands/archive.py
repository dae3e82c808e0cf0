"""`dnscamp archive`: The Parquet archive tier: write, restore (issue 19)."""

from __future__ import annotations

import typer

app = typer.Typer(help="The Parquet archive tier: write, restore (issue 19).", no_args_is_help=True)
