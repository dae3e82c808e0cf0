"""`dnscamp agent ...`: what a scheduled vantage agent does besides measuring (ship its records)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from dnscamp.errors import die
from vantage_agent import paths

app = typer.Typer(help="The vantage agent: ship completed runs to the results bucket.", no_args_is_help=True)

BUCKET_OPT = typer.Option(None, "--bucket", envvar="DNSCAMP_RESULTS_BUCKET", help="Results bucket (default $DNSCAMP_RESULTS_BUCKET).")
VANTAGE_OPT = typer.Option(None, "--vantage", envvar="DNSCAMP_VANTAGE", help="This vantage's id (default $DNSCAMP_VANTAGE).")


def shipper(spool: Path, bucket: str | None, vantage: str | None, campaign: str | None = None):
    """The ship step of a firing, ``ship(phase=..., error=...) -> dict`` (ship, then the status
    object), or None when this machine ships nowhere (no bucket)."""
    if not bucket:
        return None
    if not vantage:
        die("agent ship: no vantage id: pass --vantage or set DNSCAMP_VANTAGE (/etc/dnscamp/vantage.env)")
    from vantage_agent.ship import ship_and_report

    def ship(phase: str = "measuring", error: dict | None = None) -> dict:
        return ship_and_report(spool, bucket, vantage, campaign=campaign, home=paths.home(), phase=phase, error=error)

    return ship


@app.command("ship")
def ship_command(
    bucket: str = BUCKET_OPT,
    vantage: str = VANTAGE_OPT,
    spool: Path = typer.Option(None, help="Spool directory (default $DNSCAMP_HOME/spool)."),
) -> None:
    """Upload every completed run's unit files not shipped yet to
    results/<campaign>/<vantage>/<run>/<unit>.jsonl.gz (Content-MD5; a local ledger, since the
    instance role may only PutObject), its artifacts, then its manifest.json; then the status
    object status/<campaign>/<vantage>/<region>/<instance-id>.json. S3 unreachable: the files
    wait on disk for the next ship (exit 4, the queue's size on stdout). Credentials and endpoint
    come from boto3's default chain (AWS_ENDPOINT_URL_S3 for an S3-compatible server)."""
    if not bucket:
        die("agent ship: no bucket: pass --bucket or set DNSCAMP_RESULTS_BUCKET")
    out = shipper(spool or paths.spool_dir(), bucket, vantage)()
    typer.echo(json.dumps(out))
    raise typer.Exit(4 if out["pending"] else 0)
