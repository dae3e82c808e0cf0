"""`dnscamp report`: The campaign report as a static site (issue 16)."""

from __future__ import annotations

import typer

app = typer.Typer(help="The campaign report as a static site (issue 16).", no_args_is_help=True)
