"""`dnscamp collect s3://bucket/prefix`: result objects of a results bucket into the store."""

from __future__ import annotations

import json
import logging
import sys

import typer

from dnscamp.errors import die
from vantage_agent.errors import first_line


def collect_command(
    uri: str = typer.Argument(..., help="s3://bucket/prefix (e.g. s3://dnscamp-results/results/www20/)."),
    watch: bool = typer.Option(False, "--watch", help="Collect again every --interval seconds until interrupted."),
    interval: float = typer.Option(30.0, "--interval", min=0.1, help="Seconds between passes with --watch."),
    endpoint_url: str = typer.Option(None, "--endpoint-url", help="An S3-compatible server (default: boto3's, AWS_ENDPOINT_URL_S3)."),
    as_json: bool = typer.Option(False, "--json", help="One JSON line of counts per pass."),
    incremental: bool = typer.Option(False, "--incremental", help="Without --watch: list only each vantage's recent runs "
                                     "(from its watermark back --lookback-hours), not the whole prefix."),
    full_every: int = typer.Option(20, "--full-every", min=1, help="With --watch: list the whole prefix on the first "
                                   "pass and every this many passes; the others list incrementally."),
    lookback_hours: float = typer.Option(6.0, "--lookback-hours", min=0.0, help="An incremental listing lists the runs "
                                         "up to this long before the newest run seen under each vantage."),
) -> None:
    """List the bucket, download new or changed objects (by ETag), ingest them (each record
    once; a corrupt object quarantined under its key, the rest go on) and record them in
    collected_objects; read run manifests (a corrupt one: one line, quarantined under its
    key). Killed at any point, the same command again stores every record exactly once; two
    collectors at once split the objects. With --watch an S3 outage is waited out (backoff
    1 s doubling to 60 s, each failure logged once). Exit 3 when a pass quarantined
    something (a corrupt manifest included), 1 when the store cannot be reached."""
    import psycopg
    import sqlalchemy.exc

    from collectors import s3
    from collectors.ingest import IngestError
    from db import engine, migrate

    logging.getLogger("psycopg").addHandler(logging.NullHandler())
    try:
        migrate.upgrade(engine.sqlalchemy_url("owner"))
    except sqlalchemy.exc.OperationalError as exc:
        die(f"cannot reach the store ({first_line(exc.orig)}): run `dnscamp db up`", code=1)
    except sqlalchemy.exc.ProgrammingError as exc:  # a login that may read the revision but not migrate
        die(f"the store's schema is behind this dnscamp and this login cannot migrate it ({first_line(exc.orig)}): "
            "run `dnscamp db migrate` as the store's owner", code=1)
    url = engine.database_url("writer")
    quarantined = 0

    def show(st: s3.CollectStats) -> None:
        nonlocal quarantined
        quarantined += st.quarantined + st.manifests_corrupt
        for line in st.errors:
            sys.stderr.write(f"dnscamp: {line}\n")
        if as_json:
            typer.echo(json.dumps(st.as_json()))
        else:
            typer.echo(f"objects {st.listed}: collected {st.collected}, unchanged {st.unchanged}, busy {st.locked}; "
                       f"records ingested {st.ingested}, duplicates {st.duplicates}, quarantined {st.quarantined}; "
                       f"manifests {st.manifests} ({st.manifests_corrupt} corrupt); "
                       f"{'full' if st.full_listing else 'incremental'} listing, requests LIST {st.list_requests}, "
                       f"GET {st.get_requests}")  # fmt: skip
        sys.stdout.flush()

    try:
        if watch:
            s3.watch(uri, url, interval_s=interval, on_pass=show, endpoint_url=endpoint_url, full_every=full_every,
                     lookback_h=lookback_hours)  # fmt: skip
        else:
            show(s3.collect(uri, url, endpoint_url=endpoint_url, full=not incremental, lookback_h=lookback_hours))
    except psycopg.OperationalError as exc:
        die(f"the store stopped or cannot be reached ({first_line(exc)}): run `dnscamp db up`, then collect again", code=1)
    except IngestError as exc:
        die(str(exc))
    raise typer.Exit(3 if quarantined else 0)
