"""`dnscamp dashboards`: Grafana dashboards as code (dashboards/)."""

from __future__ import annotations

import sys

import typer

app = typer.Typer(help="Grafana dashboards as code: build the JSON that Grafana provisions from dashboards/.",
                  no_args_is_help=True)


@app.command("build")
def build_command(
    check: bool = typer.Option(False, "--check", help="Write nothing; exit 1 when the committed JSON differs from "
                                                     "what dashboards/ generates (or fails its schema)."),
) -> None:
    """Generate every dashboard with grafana-foundation-sdk, validate it against Grafana 11.6's
    JSON Schemas, and write it to dashboards/provisioning/dashboards/<uid>.json (sorted keys),
    with the public-dashboard configurations of the published ones in dashboards/public/."""
    import dashboards
    from dashboards import generate
    from dashboards.validate import errors, public_errors

    built = dashboards.build()
    problems = [e for name, data in built.items() for e in errors(data, name)]
    problems += [e for name, data in dashboards.public_configs().items() for e in public_errors(data, f"public/{name}")]
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
        typer.echo(f"{len(built)} dashboards and {len(dashboards.public_configs())} public configurations up to date")
        return
    for path in generate.write():
        typer.echo(f"wrote {path.relative_to(root) if path.is_relative_to(root) else path}")
