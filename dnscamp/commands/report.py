"""`dnscamp report`: the campaign report as a static site (docs/report.md)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import typer

from dnscamp.errors import die

app = typer.Typer(
    help="The campaign report as a static site: `dnscamp report --html DIR`, `dnscamp report publish s3://...`.",
    no_args_is_help=True,
)

CAMPAIGN_OPT = typer.Option(None, "--campaign", help="Only this campaign (default: every campaign, one sub-site each).")
RUN_OPT = typer.Option(None, "--run", help="Only this run of the campaign.")
GRAFANA_OPT = typer.Option(None, "--grafana-url", help="Grafana's URL for the figures' dashboard-panel links "
                           "(default: $DNSCAMP_GRAFANA_ROOT_URL, else http://localhost:3000).")


def _build(out: Path, campaign: str | None, run: str | None, grafana: str | None = None) -> Path:
    import psycopg

    from db import engine
    from dnscamp.site.build import ReportError, build

    if run and not campaign:
        die("--run needs --campaign")
    try:
        return build(engine.database_url("reader"), out, campaign, run, grafana)
    except ReportError as exc:
        die(str(exc))
    except (engine.StoreError, psycopg.OperationalError) as exc:
        die(f"the store: {str(exc).strip().splitlines()[0]}", 1)


@app.callback(invoke_without_command=True)
def main(
    ctx: typer.Context,
    html: Path = typer.Option(None, "--html", help="Write the site into this directory (created if missing)."),
    campaign: str = CAMPAIGN_OPT,
    run: str = RUN_OPT,
    grafana: str = GRAFANA_OPT,
) -> None:
    """Build the report from the reader views: per campaign an overview and one page per seed
    paper, figures as SVG with the CSV of their data and their SQL; prints the index page."""
    if ctx.invoked_subcommand is not None:
        return
    if html is None:
        die("say where to write the site: dnscamp report --html DIR")
    typer.echo(_build(html, campaign, run, grafana))


@app.command("publish")
def publish_cmd(
    uri: str = typer.Argument(..., help="s3://bucket/prefix"),
    site: Path = typer.Option(None, "--dir", help="Upload this built site (default: build one now)."),
    campaign: str = CAMPAIGN_OPT,
    run: str = RUN_OPT,
    grafana: str = GRAFANA_OPT,
    endpoint_url: str = typer.Option(None, "--endpoint-url", help="An S3-compatible endpoint (default: AWS, or $AWS_ENDPOINT_URL_S3)."),
    delete: bool = typer.Option(False, "--delete", help="Remove objects under the prefix that the site does not have."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Upload the report as a static site (boto3), each file with its Content-Type."""
    from botocore.exceptions import BotoCoreError, ClientError

    from collectors.s3 import CollectError
    from dnscamp.site.publish import PublishError, publish

    with tempfile.TemporaryDirectory(prefix="dnscamp-report-") as tmp:
        if site is None:
            site = Path(tmp)
            _build(site, campaign, run, grafana)
        try:
            out = publish(site, uri, endpoint_url=endpoint_url, delete=delete)
        except (PublishError, CollectError) as exc:
            die(str(exc))
        except (BotoCoreError, ClientError) as exc:
            die(f"{uri}: {exc}", 1)
    typer.echo(json.dumps(out) if as_json else f"published {out['uploaded']} files ({out['deleted']} deleted): {out['index']}")
