"""`dnscamp dns`: time DNS queries over Do53 / DoT / DoH / DoH3 / DoQ and spool the records."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

import typer

from dnscamp.errors import die


def _split(values: list[str]) -> list[str]:
    out: list[str] = []
    for v in values:
        out += [x.strip() for x in v.split(",") if x.strip()]
    return out


def dns_command(
    resolver: str = typer.Option(..., "--resolver", "-r", help="Catalog name: cloudflare, google, quad9, adguard, local, testbed-isp, ..."),
    transport: list[str] = typer.Option(
        ..., "--transport", "-t",
        help="do53, do53-tcp, dot, doh, doh3 or doq; repeat or comma-separate for several.",
    ),
    policy: str = typer.Option("reuse", "--policy", help="Connection policy: fresh | reuse | resume."),
    name: list[str] = typer.Option([], "--name", "-n", help="Name to query (repeatable)."),
    names_file: Optional[Path] = typer.Option(None, "--names", help="File of names (one per line) or a HAR file."),
    count: int = typer.Option(1, "--count", "-c", min=1, help="Rounds over the names."),
    qtype: str = typer.Option("A", "--qtype", help="Query type."),
    timeout: float = typer.Option(5.0, "--timeout", help="Query timeout in s (per attempt for Do53/UDP; resolv.conf default 5)."),
    attempts: int = typer.Option(2, "--attempts", min=1, help="Do53/UDP attempts (resolv.conf default 2)."),
    idle_timeout: float = typer.Option(10.0, "--idle-timeout", help="Idle timeout of a reused connection in s."),
    doh_method: Optional[str] = typer.Option(
        None, "--doh-method", help="DoH/DoH3 request method: POST or GET (default: POST for doh, GET for doh3)."
    ),
    testbed_client: Optional[str] = typer.Option(
        None, "--testbed-client", help="Run inside the testbed client namespace of this access profile (e.g. fiber)."
    ),
    campaign: str = typer.Option("adhoc", "--campaign", help="Campaign name written into the records."),
    shuffle_seed: Optional[int] = typer.Option(None, "--shuffle-seed", help="Shuffle the names of each round with this seed."),
    as_json: bool = typer.Option(False, "--json", help="Print per-transport figures as JSON on stdout."),
    access_rtt_ms: Optional[float] = typer.Option(None, "--access-rtt-ms", hidden=True),
    vantage_profile: Optional[str] = typer.Option(None, "--vantage-profile", hidden=True),
) -> None:
    """Time DNS queries to one resolver over one or more transports. Writes one dns_query
    record per query to the spool and prints, per transport, n / ok / p50 / p90 / p99 of the
    resolution time (t_response - t_start, handshakes included) and the errors; --json prints
    {"<transport>": {"n", "ok", "p50_ms", "p90_ms", "p99_ms", "rtt_multiple_p50", ...}}."""
    from vantage_agent.dns import catalog, names as names_mod, registry, runner
    from vantage_agent.dns._common import QueryOptions
    from vantage_agent.dns.policy import Policy

    transports = _split(transport)
    for t in transports:
        if t not in registry.TRANSPORTS:
            die(f"--transport: unknown transport {t!r} (known: {', '.join(registry.names())})")
    try:
        pol = Policy(policy, idle_timeout)  # type: ignore[arg-type]
        opts = QueryOptions(timeout_s=timeout, attempts=attempts, doh_method=doh_method.upper() if doh_method else None)
    except ValueError as exc:
        die(f"--policy/--timeout/--doh-method: {exc}")
    if bool(name) == bool(names_file):
        die("give either --name N (repeatable) or --names FILE")
    try:
        qnames = [names_mod.normalize(n) for n in name] if name else names_mod.from_file(names_file)
    except names_mod.NamesError as exc:
        die(f"{'--name' if name else '--names'}: {exc}")

    if testbed_client:
        _reexec_in_namespace(testbed_client)
        return

    info = None
    if os.environ.get("DNSCAMP_TESTBED_INFO"):
        info = catalog.testbed_info()
    cat = catalog.Catalog.load(testbed=info if info else None)
    try:
        endpoints = {t: cat.endpoint(resolver, t) for t in transports}
    except catalog.CatalogError as exc:
        die(f"--resolver: {exc}")

    from vantage_agent.kind import Unit, make_record, utcnow
    from vantage_agent.paths import spool_dir
    from vantage_agent.records import Vantage
    from vantage_agent.spool import SpoolWriter

    netns = os.environ.get("DNSCAMP_NETNS")
    vantage = Vantage(
        id=f"testbed-{vantage_profile}" if vantage_profile else platform.node() or "local",
        provider="testbed" if vantage_profile else "local",
        region=None, network_profile=vantage_profile,
    )
    run_id = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + f"-{os.getpid()}"
    env = {"dns": runner.tool_versions(), "command": "dnscamp dns"}
    writer = SpoolWriter(spool_dir())
    plan = runner.plan(qnames, count, seed=shuffle_seed)
    results: dict[str, dict] = {}
    summaries = {}
    paths = []
    for t in transports:
        unit = Unit(id=str(uuid.uuid4()), campaign=campaign, run=run_id, kind="dns_query", vantage=vantage,
                    target=f"{resolver}/{t}", repetition=0, params={}, seed=shuffle_seed or 0)
        ep = endpoints[t]
        records = []
        timings = []
        client = registry.client(t, ep, pol, opts)
        try:
            for i, qn in enumerate(plan):
                at = utcnow()
                tm = client.query(qn, qtype)
                timings.append(tm)
                body = runner.body(tm, endpoint=ep, policy=pol, options=opts, sequence=i, access_rtt_ms=access_rtt_ms)
                records.append(make_record(unit, started_at=at, body=body, status=tm.status, error=tm.error, env=env))
        finally:
            client.close()
        p = writer.write(records, name=f"dns-{t}-{unit.id}")
        if p:
            paths.append(p)
        summaries[t] = runner.summarize(timings, access_rtt_ms)
        results[t] = summaries[t].to_json()
    for p in paths:
        sys.stderr.write(f"dnscamp dns: wrote {p}\n")
    if as_json:
        typer.echo(json.dumps(results, indent=1))
        return
    fmt = lambda x: "-" if x is None else f"{x:.2f}"  # noqa: E731
    where = f" in {netns}" if netns else ""
    typer.echo(f"resolver {resolver}, policy {pol.mode}{where}; times: t_response - t_start in ms")
    head = f"{'transport':<10} {'n':>5} {'ok':>5} {'p50':>9} {'p90':>9} {'p99':>9} {'xRTT p50':>9}  errors"
    typer.echo(head)
    for t, s in summaries.items():
        errs = ", ".join(f"{k} {v}" for k, v in sorted(s.errors.items())) or "-"
        typer.echo(f"{t:<10} {s.n:>5} {s.ok:>5} {fmt(s.p50_ms):>9} {fmt(s.p90_ms):>9} {fmt(s.p99_ms):>9} "
                   f"{fmt(s.rtt_multiple_p50):>9}  {errs}")


def _reexec_in_namespace(profile: str) -> None:
    """Re-run this very command inside dc-client-<profile> (ip netns exec), passing the
    testbed description and the profile's configured access RTT along."""
    from testbed import plan as tb_plan
    from vantage_agent.dns import catalog, runner

    info = catalog.testbed_info()
    if not info or not info.get("up"):
        die("--testbed-client: the testbed is not up (run `dnscamp testbed up`)")
    clients = info.get("clients") or {}
    if profile not in clients:
        die(f"--testbed-client: no client for profile {profile!r} (running: {', '.join(sorted(clients)) or 'none'})")
    ns = clients[profile].get("ns") or tb_plan.CLIENT_NS.format(profile=profile)
    rtt = runner.access_rtt_ms(info, profile)
    args = list(sys.argv[1:])
    out: list[str] = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a == "--testbed-client":
            skip = True
            continue
        if a.startswith("--testbed-client="):
            continue
        out.append(a)
    if rtt:
        out += ["--access-rtt-ms", str(rtt)]
    out += ["--vantage-profile", profile]
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="dnscamp-testbed-info-", delete=False) as f:
        json.dump(info, f)
        info_file = f.name
    env = dict(os.environ, DNSCAMP_NETNS=ns, DNSCAMP_TESTBED_INFO=info_file)
    try:
        p = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-m", "dnscamp.cli", *out], env=env)
    finally:
        os.unlink(info_file)
    raise typer.Exit(p.returncode)
