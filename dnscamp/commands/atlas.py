"""`dnscamp atlas ...`: RIPE Atlas campaigns, ingest of Atlas results, the QuicSocks analysis.

Method and assumptions: docs/atlas.md. Heavy modules are imported inside the commands so that
`dnscamp --help` stays fast.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from dnscamp.errors import die

app = typer.Typer(
    help="RIPE Atlas campaigns (plan / submit / fetch / stream / ingest), resolver discovery "
    "and the QuicSocks analysis; `run --testbed` is the offline mode.",
    no_args_is_help=True,
)


def _load_spec(path: Path):
    from atlas.spec import SpecError, load_spec

    try:
        return load_spec(path)
    except SpecError as exc:
        die(str(exc))


@app.command("plan")
def plan_command(
    spec: Path = typer.Argument(..., help="Atlas campaign spec (TOML)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the exact API requests (JSON) and the credit total."),
    as_json: bool = typer.Option(False, "--json", help="Print the plan as JSON."),
    phase: int = typer.Option(1, "--phase", help="1: discovery DNS + probe->server pings; 2: probe->resolver pings "
                              "from the stored discovery (`dnscamp atlas discover`)."),
) -> None:
    """Validate SPEC and price it in credits. Nothing is sent. With --dry-run, print every
    API request that `submit` would send (method, URL, JSON body) and the credit total."""
    from atlas.plan import PlanError, plan

    s = _load_spec(spec)
    try:
        p = plan(s) if phase == 1 else _phase2(s)
    except PlanError as exc:
        die(f"{spec}: {exc}")
    if dry_run or as_json:
        typer.echo(json.dumps(p.to_dict(), indent=None if as_json else 2))
    else:
        typer.echo(p.describe())


def _phase2(s):
    from atlas.plan import Plan, PlanError, plan_resolver_pings
    from collectors.atlas_store import discovered_resolvers
    from db import engine, migrate

    migrate.upgrade(engine.sqlalchemy_url("owner"))
    found = discovered_resolvers(engine.database_url("writer"), s.name)
    if not found:
        raise PlanError(f"no discovery stored for campaign {s.name!r}: run `dnscamp atlas discover` first")
    reqs = plan_resolver_pings(s, found)
    total = sum(r.credits for r in reqs)
    if total > s.max_credits:
        raise PlanError(f"max_credits: phase 2 costs {total} credits, more than max_credits = {s.max_credits}")
    return Plan(campaign=s.name, requests=reqs, query_name="-", credits_phase1=total, credits_phase2_estimate=0,
                max_credits=s.max_credits, notes=[f"phase 2: {len(found)} probes, {len(reqs)} resolver(s)"])


@app.command("submit")
def submit_command(
    spec: Path = typer.Argument(..., help="Atlas campaign spec (TOML)."),
    key_file: Path = typer.Option(None, "--key-file", help="File holding the API key (else RIPE_ATLAS_KEY)."),
    server: str = typer.Option(None, "--server", help="Atlas API host (default atlas.ripe.net)."),
    yes: bool = typer.Option(False, "--yes", help="Spend the credits without asking."),
    as_json: bool = typer.Option(False, "--json", help="Print the created measurement ids as JSON."),
    phase: int = typer.Option(1, "--phase", help="1: discovery DNS + probe->server pings; 2: probe->resolver pings."),
) -> None:
    """Create the measurements of SPEC on RIPE Atlas (spends credits). Needs an API key from
    RIPE_ATLAS_KEY or --key-file; the key is never printed or logged."""
    from atlas import client, key
    from atlas.plan import PlanError, plan

    s = _load_spec(spec)
    try:
        p = plan(s) if phase == 1 else _phase2(s)
    except PlanError as exc:
        die(f"{spec}: {exc}")
    try:
        k = key.load_key(key_file)
    except key.KeyError_ as exc:
        die(str(exc))
    if not yes:
        sys.stderr.write(p.describe() + "\n")
        if not typer.confirm(f"spend up to {p.credits_total} credits?", err=True):
            die("not submitted")
    try:
        created = client.submit(p, k, server=server or s.api_server)
    except client.AtlasApiError as exc:
        die(f"submit failed: {exc}")
    for c in created:  # ids first on stderr, so nothing is lost if the store is unreachable
        sys.stderr.write(f"created {c['role']} msm_id {c['msm_ids'][0]}\n")
    try:
        import psycopg

        from collectors.atlas_store import register_measurement
        from db import engine, migrate

        migrate.upgrade(engine.sqlalchemy_url("owner"))
        with psycopg.connect(engine.database_url("owner")) as conn:
            for c in created:
                register_measurement(conn, c["msm_ids"][0], campaign=s.name, role=c["role"])
    except Exception as exc:  # noqa: BLE001 - the measurements exist: say so, do not fail
        sys.stderr.write(f"dnscamp: warning: measurements not registered in the store: {type(exc).__name__}\n")
    if as_json:
        typer.echo(json.dumps(created))
    else:
        for c in created:
            typer.echo(f"{c['role']}: msm_id {', '.join(map(str, c['msm_ids']))}")


@app.command("discover")
def discover_command(
    spec: Path = typer.Argument(..., help="Atlas campaign spec (TOML) whose phase-1 results are ingested."),
    query_log: Path = typer.Option(None, "--query-log", help="Our authoritative server's query log (else zone.query_log)."),
    as_json: bool = typer.Option(False, "--json", help='Print {"probes","discovered","isp_resolver","methods"}.'),
) -> None:
    """Map each probe of the campaign to its resolver (query log of our zone, or whoami answers)
    with ASNs from the spec's asn_db, and store it (atlas_discovery)."""
    import psycopg

    from collectors.atlas_store import discover_from_store, save_discovery
    from db import engine, migrate

    s = _load_spec(spec)
    migrate.upgrade(engine.sqlalchemy_url("owner"))
    try:
        found = discover_from_store(engine.database_url("reader"), s, query_log=query_log)
    except (OSError, ValueError) as exc:
        die(f"{spec}: {exc}")
    with psycopg.connect(engine.database_url("owner")) as conn:
        save_discovery(conn, s.name, found)
    out = {"campaign": s.name, "discovered": len(found), "isp_resolver": sum(d.isp_resolver for d in found),
           "methods": {m: sum(d.method == m for d in found) for m in sorted({d.method for d in found})}}
    typer.echo(json.dumps(out) if as_json else
               f"{out['discovered']} probes mapped to a resolver ({out['isp_resolver']} in the probe's AS)")


@app.command("server-ping")
def server_ping_command(
    spec: Path = typer.Argument(..., help="Atlas campaign spec (TOML)."),
    src: str = typer.Option(None, "--src", help="This server's address for the results (default: spec server)."),
    out: Path = typer.Option(None, "--out", "-o", help="Also write the results (Atlas JSON lines) here."),
) -> None:
    """RTT_Server: ping every discovered resolver (and the spec's resolvers.addresses) from this host,
    five packets each; store the results as Atlas ping results (role server_resolver)."""
    import time

    import psycopg

    from atlas.ping import server_pings
    from collectors.atlas_ingest import ingest_results
    from collectors.atlas_store import discovered_resolvers, register_measurement
    from db import engine, migrate

    s = _load_spec(spec)
    migrate.upgrade(engine.sqlalchemy_url("owner"))
    targets = sorted(set(discovered_resolvers(engine.database_url("writer"), s.name).values())
                     | set(s.resolvers.addresses))
    if not targets:
        die(f"no resolver to ping for campaign {s.name!r}: run `dnscamp atlas discover` first")
    msm = -int(time.time())  # a local measurement: negative ids never collide with Atlas's
    rows = server_pings(s, targets, src_addr=src or s.server, msm_id=msm)
    with psycopg.connect(engine.database_url("owner")) as conn:
        register_measurement(conn, msm, campaign=s.name, role="server_resolver", target=None,
                             definition={"local": True, "packets": s.ping.packets})
    if out:
        out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    st = ingest_results(rows, engine.database_url("writer"), source=f"server-ping:{s.name}", campaign=s.name)
    typer.echo(f"{len(rows)} resolvers pinged (msm {msm}): {json.dumps(st.as_json())}")


@app.command("fetch")
def fetch_command(
    msm_ids: list[int] = typer.Argument(..., help="Measurement ids."),
    out: Path = typer.Option(None, "--out", "-o", help="Write the results (JSON lines) here instead of stdout."),
    server: str = typer.Option(None, "--server", help="Atlas API host (default atlas.ripe.net)."),
    key_file: Path = typer.Option(None, "--key-file", help="API key file (public measurements need none)."),
) -> None:
    """Download the results of MSM_IDS (retry with backoff on 429 / 5xx) as raw Atlas JSON lines."""
    from atlas import client, key

    k = key.load_key(key_file, required=False)
    fh = out.open("w") if out else sys.stdout
    try:
        for msm in msm_ids:
            try:
                results = client.fetch_results(msm, key=k, server=server)
            except client.AtlasApiError as exc:
                die(f"fetch {msm} failed: {exc}")
            for r in results:
                fh.write(json.dumps(r, sort_keys=True) + "\n")
            sys.stderr.write(f"msm {msm}: {len(results)} results\n")
    finally:
        if out:
            fh.close()


@app.command("probes")
def probes_command(
    campaign: str = typer.Option(..., "--campaign", help="Campaign whose probes (those with ingested results) to look up."),
    server: str = typer.Option(None, "--server", help="Atlas API host (default atlas.ripe.net)."),
    key_file: Path = typer.Option(None, "--key-file", help="API key file (public probes need none)."),
    as_json: bool = typer.Option(False, "--json", help='Print {"campaign","probes","stored","unknown"}.'),
) -> None:
    """Fetch the probe metadata (country, IPv4 AS, coordinates, status) of every probe with
    results in CAMPAIGN from the Atlas probe API and store it (atlas_probes, read by the QuicSocks
    dashboard's map). Run after `ingest`; again to refresh."""
    import psycopg

    from atlas import client, key, probes
    from collectors import atlas_store
    from db import engine, migrate

    k = key.load_key(key_file, required=False)
    migrate.upgrade(engine.sqlalchemy_url("owner"))
    with psycopg.connect(engine.database_url("writer")) as conn:
        ids = atlas_store.campaign_probe_ids(conn, campaign)
        if not ids:
            die(f"campaign {campaign!r}: no Atlas results ingested (run `dnscamp atlas ingest --campaign` first)")
        try:
            found = probes.fetch_probes(ids, key=k, server=server)
        except (client.AtlasApiError, ValueError) as exc:
            die(f"probes of {campaign}: {exc}")
        stored = atlas_store.save_probes(conn, campaign, found)
    out = {"campaign": campaign, "probes": len(ids), "stored": stored,
           "unknown": sorted(set(ids) - {p.prb_id for p in found})}
    typer.echo(json.dumps(out) if as_json else
               f"{stored} of {len(ids)} probes stored" + (f"; unknown to Atlas: {out['unknown']}" if out["unknown"] else ""))


@app.command("stream")
def stream_command(
    msm_ids: list[int] = typer.Argument(..., help="Measurement ids to follow."),
    seconds: float = typer.Option(60.0, "--seconds", help="How long to follow the stream."),
    out: Path = typer.Option(None, "--out", "-o", help="Append results (JSON lines) here instead of stdout."),
    base_url: str = typer.Option("https://atlas-stream.ripe.net", "--base-url", help="Atlas stream URL."),
) -> None:
    """Follow live results of MSM_IDS; reconnects and resubscribes by itself when the stream
    drops (ripe-atlas-cousteau issue #43)."""
    from atlas import client

    fh = out.open("a") if out else sys.stdout
    n = 0
    try:
        for r in client.stream_results(msm_ids, seconds=seconds, base_url=base_url):
            fh.write(json.dumps(r, sort_keys=True) + "\n")
            fh.flush()
            n += 1
    finally:
        if out:
            fh.close()
    sys.stderr.write(f"{n} results\n")


@app.command("ingest")
def ingest_command(
    files: list[Path] = typer.Argument(..., help="Atlas result files: JSON arrays or JSON lines."),
    campaign: str = typer.Option(None, "--campaign", help="Campaign the results belong to."),
    as_json: bool = typer.Option(
        False, "--json", help='Print {"ingested","duplicates","quarantined","by_type":{"ping","dns"}}.'
    ),
) -> None:
    """Ingest RIPE Atlas results of any firmware (raw + parsed with sagan). Error results are
    stored with a status; only what is not an Atlas result at all is quarantined (exit 3)."""
    from collectors.atlas_ingest import ingest_files
    from db import engine, migrate

    for f in files:
        if not f.exists():
            die(f"{f}: no such file")
    migrate.upgrade(engine.sqlalchemy_url("owner"))
    stats = ingest_files(files, engine.database_url("writer"), campaign=campaign)
    for reason in stats.reasons[:20]:
        sys.stderr.write(f"quarantined: {reason}\n")
    if as_json:
        typer.echo(json.dumps(stats.as_json()))
    else:
        typer.echo(
            f"ingested {stats.ingested}, duplicates {stats.duplicates}, quarantined {stats.quarantined} "
            f"(ping {stats.by_type.get('ping', 0)}, dns {stats.by_type.get('dns', 0)})"
        )
    raise typer.Exit(3 if stats.quarantined else 0)


@app.command("quicsocks")
def quicsocks_command(
    campaign: str = typer.Option(None, "--campaign", help="Only this campaign (default: all)."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary (or the model) as JSON."),
    all_resolvers: bool = typer.Option(
        False, "--all-resolvers", help="Keep probes whose resolver is in another AS (the paper keeps ISP resolvers only)."
    ),
    use_model: bool = typer.Option(False, "--model", help="Evaluate Table I for one case instead of the store."),
    rtt_dns: float = typer.Option(None, "--rtt-dns", help="With --model: RTT client-resolver (ms)."),
    rtt_server: float = typer.Option(None, "--rtt-server", help="With --model: RTT resolver-server (ms)."),
    rtt_direct: float = typer.Option(None, "--rtt-direct", help="With --model: RTT client-server (ms)."),
) -> None:
    """The QuicSocks analysis (001_3c494309ab66be23.txt Table I, §IV-B): shares of probes saving
    at least 5..50 ms with and without a stateless retry, the share with RTT_DNS < 10 ms, CDF
    data. With --model, the latencies of one case (Table II: --rtt-dns 30 --rtt-server 30
    --rtt-direct 60)."""
    from atlas import quicsocks

    if use_model:
        missing = [n for n, v in (("--rtt-dns", rtt_dns), ("--rtt-server", rtt_server), ("--rtt-direct", rtt_direct)) if v is None]
        if missing:
            die(f"--model needs {', '.join(missing)}")
        try:
            m = quicsocks.model(rtt_dns, rtt_server, rtt_direct)
        except ValueError as exc:
            die(str(exc))
        typer.echo(json.dumps(m.to_dict()) if as_json else quicsocks.format_model(m))
        return
    from collectors.atlas_store import probe_rtts
    from db import engine, migrate

    migrate.upgrade(engine.sqlalchemy_url("owner"))
    probes = probe_rtts(engine.database_url("reader"), campaign=campaign)
    s = quicsocks.summarize(probes, isp_only=not all_resolvers)
    s["campaign"] = campaign
    typer.echo(json.dumps(s) if as_json else quicsocks.format_summary(s))


@app.command("run")
def run_command(
    testbed: bool = typer.Option(False, "--testbed", help="Offline mode: Atlas-like probes on the testbed."),
    probes: int = typer.Option(6, "--probes", help="Number of Atlas-like probes (offline mode)."),
    campaign: str = typer.Option("atlas-offline", "--campaign", help="Campaign name of the results."),
    seed: int = typer.Option(1, "--seed", help="Seed of the probes' link delays."),
    keep: bool = typer.Option(False, "--keep", help="Leave the probe namespaces up afterwards."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary and ground-truth errors as JSON."),
) -> None:
    """Run the whole Atlas pipeline (discovery, pings, ingest, analysis). Only the offline
    mode exists (--testbed); a real campaign is `plan` / `submit` / `fetch` / `ingest`."""
    if not testbed:
        die("only the offline mode exists: use --testbed (a real campaign: plan, submit, fetch, ingest)")
    from db import engine, migrate
    from dnscamp.atlas_offline import format_report
    from dnscamp.atlas_run import run_offline
    from testbed.atlas_probes.island import IslandError

    migrate.upgrade(engine.sqlalchemy_url("owner"))
    try:
        report = run_offline(n_probes=probes, campaign=campaign, seed=seed, keep=keep,
                             db_url=engine.database_url("owner"))
    except IslandError as exc:
        die(f"atlas run --testbed: {exc}")
    typer.echo(json.dumps(report) if as_json else format_report(report))
    raise typer.Exit(0 if report.get("ok") else 1)
