"""`dnscamp export`: Export a campaign's records as open data (issue 16, 19)."""

from __future__ import annotations

import typer

app = typer.Typer(help="Export a campaign's records as open data (issue 16, 19).", no_args_is_help=True)
