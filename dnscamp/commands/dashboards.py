"""`dnscamp dashboards`: Grafana dashboards as code (dashboards/)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

app = typer.Typer(help="Grafana dashboards as code: build the JSON that Grafana provisions from dashboards/; "
                       "publish one campaign's public dashboards, list and revoke them.",
                  no_args_is_help=True)

GRAFANA_OPT = typer.Option(None, "--grafana", envvar="DNSCAMP_GRAFANA_API_URL", show_envvar=True,
                           help="Grafana's base URL (credentials: DNSCAMP_GRAFANA_API_TOKEN, a service account's token, "
                                "or DNSCAMP_GRAFANA_API_USER and DNSCAMP_GRAFANA_API_PASSWORD).")
ROOT_OPT = typer.Option(None, "--root-url", envvar="DNSCAMP_GRAFANA_ROOT_URL", show_envvar=True,
                        help="Grafana's address as visitors reach it, for the links printed (default: --grafana).")
SHOW_OPT = typer.Option(False, "--show-links", help="Print each public link in full (the link is what gives access; "
                                                     "by default only its token's last four digits).")


@app.command("build")
def build_command(
    check: bool = typer.Option(False, "--check", help="Write nothing; exit 1 when the committed JSON differs from "
                                                     "what dashboards/ generates (or fails its schema)."),
) -> None:
    """Generate every dashboard with grafana-foundation-sdk, validate it against Grafana 11.6's
    JSON Schemas, and write it to dashboards/provisioning/dashboards/<uid>.json (sorted keys)."""
    import dashboards
    from dashboards import generate
    from dashboards.validate import errors

    built = dashboards.build()
    problems = [e for name, data in built.items() for e in errors(data, name)]
    if problems:
        for p in problems:
            sys.stderr.write(f"dnscamp: {p}\n")
        raise typer.Exit(1)
    root = dashboards.HERE.parent
    if check:
        stale = generate.check()
        for name in stale:
            sys.stderr.write(f"dnscamp: dashboards/.../{name} differs from what dashboards/ generates: "
                             "run `dnscamp dashboards build` and commit it\n")
        if stale:
            raise typer.Exit(1)
        typer.echo(f"{len(built)} dashboards up to date")
        return
    for path in generate.write():
        typer.echo(f"wrote {path.relative_to(root) if path.is_relative_to(root) else path}")


def _grafana(url: str | None):
    import os

    from dashboards.publish import GrafanaClient, PublishError
    from dnscamp.errors import die

    if not url:
        die("say which Grafana: --grafana URL or DNSCAMP_GRAFANA_API_URL")
    try:
        return GrafanaClient(url, token=os.environ.get("DNSCAMP_GRAFANA_API_TOKEN") or None,
                             user=os.environ.get("DNSCAMP_GRAFANA_API_USER") or None,
                             password=os.environ.get("DNSCAMP_GRAFANA_API_PASSWORD") or None)
    except PublishError as exc:
        die(str(exc))


@app.command("publish")
def publish_command(
    campaign: str = typer.Argument(..., envvar="DNSCAMP_PUBLISH_CAMPAIGN", help="The campaign the public dashboards show."),
    grafana: str = GRAFANA_OPT,
    out: Path = typer.Option(None, "--out", help="Also write the public copies' JSON into this directory (for review)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Build and validate the copies (with --out: write them), "
                                                          "change nothing in Grafana."),
    show_links: bool = SHOW_OPT,
    root_url: str = ROOT_OPT,
) -> None:
    """Publish the research dashboards for one campaign as Grafana public dashboards: copies
    with the campaign fixed in their SQL and its first to last record as their time range, each
    shared with an access token generated here (a re-publish keeps the token)."""
    import json

    import psycopg

    from dashboards.expand import ExpandError
    from dashboards.publish import GrafanaError, PublishError, build_public, mask, publish, share_config
    from dashboards.validate import errors, public_errors
    from db import engine
    from dnscamp.errors import die

    if not campaign.strip():
        die("dashboards publish: say which campaign (an argument or DNSCAMP_PUBLISH_CAMPAIGN)")
    client = None if dry_run else _grafana(grafana)
    try:
        with psycopg.connect(engine.database_url("grafana")) as conn:
            copies, notes = build_public(conn, campaign)
            problems = [e for d in copies for e in errors(d, d["uid"]) + public_errors(share_config(d), d["uid"])]
            if problems:
                die(f"dashboards publish: {problems[0]}", 1)
            if out is not None:
                out.mkdir(parents=True, exist_ok=True)
                for d in copies:
                    (out / f"{d['uid']}.json").write_text(json.dumps(d, indent=2, sort_keys=True) + "\n")
            for n in notes:
                typer.echo(n)
            if client is None:
                for d in copies:
                    typer.echo(f"{d['uid']}: built ({d['title']}, {d['time']['from']} to {d['time']['to']})")
                return
            done = publish(client, copies)
    except (PublishError, ExpandError) as exc:
        die(str(exc))
    except GrafanaError as exc:
        die(str(exc), 1)
    except (engine.StoreError, psycopg.Error) as exc:
        die(f"the store: {str(exc).strip().splitlines()[0]}", 1)
    for p in done:
        link = p.url(root_url or client.url) if show_links else mask(p.access_token)
        state = "published, new token" if p.new_token else "republished, same token"
        typer.echo(f"{p.dashboard_uid}: {state} ({p.title}): {link}")


@app.command("list")
def list_command(grafana: str = GRAFANA_OPT, show_links: bool = SHOW_OPT, root_url: str = ROOT_OPT) -> None:
    """The instance's public dashboards: dashboard uid, title, enabled or paused, and the
    token's last four digits (the whole link with --show-links)."""
    from dashboards.publish import GrafanaError, mask
    from dnscamp.errors import die

    client = _grafana(grafana)
    try:
        shares = client.list_shares()
    except GrafanaError as exc:
        die(str(exc), 1)
    if not shares:
        typer.echo("no public dashboards")
    for s in sorted(shares, key=lambda s: s["dashboardUid"]):
        base = (root_url or client.url).rstrip("/")
        token = f"{base}/public-dashboards/{s['accessToken']}" if show_links else mask(s["accessToken"])
        typer.echo(f"{s['dashboardUid']}\t{s.get('title', '')}\t{'enabled' if s.get('isEnabled') else 'paused'}\t{token}")


@app.command("revoke")
def revoke_command(
    target: str = typer.Argument(..., help="A public copy's dashboard uid (see `dnscamp dashboards list`), or with "
                                           "--campaign a campaign: every public dashboard of it."),
    campaign: bool = typer.Option(False, "--campaign", help="TARGET is a campaign."),
    grafana: str = GRAFANA_OPT,
) -> None:
    """Stop sharing: delete the public dashboard(s), whose access token stops working at once
    (the dashboard copy stays for logged-in users; publishing again makes a new token)."""
    from dashboards.publish import GrafanaError, PublishError, revoke
    from dnscamp.errors import die

    client = _grafana(grafana)
    try:
        gone = revoke(client, target, campaign=campaign)
    except PublishError as exc:
        die(str(exc))
    except GrafanaError as exc:
        die(str(exc), 1)
    for uid in gone:
        typer.echo(f"{uid}: revoked")
