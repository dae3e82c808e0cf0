"""`dnscamp dashboards`: Dashboards as code: build the Grafana JSON from dashboards/ (issue 15)."""

from __future__ import annotations

import typer

app = typer.Typer(help="Dashboards as code: build the Grafana JSON from dashboards/ (issue 15).", no_args_is_help=True)
