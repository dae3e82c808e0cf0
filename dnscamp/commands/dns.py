"""`dnscamp dns`: time DNS queries over Do53 / DoT / DoH / DoH3 / DoQ and spool the records."""

from __future__ import annotations

import json
import os
import platform
import sys
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
    engine: str = typer.Option(
        "dnscamp", "--engine", help="Query engine: dnscamp (ours, every transport) or getdns (do53 and dot; docs/dns-engines.md)."
    ),
    no_warm_cache: bool = typer.Option(
        False, "--no-warm-cache",
        help="Do not resolve each name once, untimed, before timing (the kind's warm_cache = false): cold-cache times.",
    ),
    campaign: str = typer.Option("adhoc", "--campaign", help="Campaign name written into the records."),
    shuffle_seed: Optional[int] = typer.Option(None, "--shuffle-seed", help="Shuffle the names of each round with this seed."),
    as_json: bool = typer.Option(False, "--json", help="Print per-transport figures as JSON on stdout."),
    access_rtt_ms: Optional[float] = typer.Option(None, "--access-rtt-ms", hidden=True),
) -> None:
    """Time DNS queries to one resolver over one or more transports. Runs the dns_query kind
    (the code path of campaigns: cache warm-up, failure records), one unit per transport, and
    writes one dns_query record per query to the spool; prints, per transport, n / ok / p50 /
    p90 / p99 of the resolution time (t_response - t_start, handshakes included) and the errors;
    --json prints {"<transport>": {"n", "ok", "p50_ms", "p90_ms", "p99_ms", "rtt_multiple_p50", ...}}."""
    from pydantic import ValidationError

    from vantage_agent.dns import catalog, names as names_mod, registry
    from vantage_agent.dns.kind import DnsQueryParams
    from vantage_agent.dns.policy import Policy

    transports = _split(transport)
    for t in transports:
        if t not in registry.TRANSPORTS:
            die(f"--transport: unknown transport {t!r} (known: {', '.join(registry.names())})")
    try:
        Policy(policy, idle_timeout)  # type: ignore[arg-type]
    except ValueError as exc:
        die(f"--policy/--idle-timeout: {exc}")
    if bool(name) == bool(names_file):
        die("give either --name N (repeatable) or --names FILE")
    try:
        qnames = [names_mod.normalize(n) for n in name] if name else names_mod.from_file(names_file)
    except names_mod.NamesError as exc:
        die(f"{'--name' if name else '--names'}: {exc}")
    try:
        params = DnsQueryParams(
            resolvers=[resolver], transports=transports, policy=policy, idle_timeout_s=idle_timeout,
            names=qnames, qtype=qtype, count=count, timeout_s=timeout, attempts=attempts,
            doh_method=doh_method.upper() if doh_method else None, warm_cache=not no_warm_cache, engine=engine,
        )  # fmt: skip
    except ValidationError as exc:
        err = exc.errors()[0]
        field = {"engine": "--engine", "timeout_s": "--timeout", "attempts": "--attempts", "count": "--count",
                 "doh_method": "--doh-method", "idle_timeout_s": "--idle-timeout"}.get(str(err["loc"][0]) if err["loc"] else "")
        msg = err["msg"].removeprefix("Value error, ")
        if msg.startswith("engine: "):  # the model's cross-field check names its field first
            field, msg = "--engine", msg.removeprefix("engine: ")
        die(f"{field or 'dnscamp dns'}: {msg}")

    info = None
    if testbed_client or os.environ.get("DNSCAMP_TESTBED_INFO") or resolver.startswith("testbed-"):
        info = catalog.testbed_info()
    ns = None
    if testbed_client:
        from testbed import plan as tb_plan

        if not info or not info.get("up"):
            die("--testbed-client: the testbed is not up (run `dnscamp testbed up`)")
        clients = info.get("clients") or {}
        if testbed_client not in clients:
            die(f"--testbed-client: no client for profile {testbed_client!r} (running: {', '.join(sorted(clients)) or 'none'})")
        ns = clients[testbed_client].get("ns") or tb_plan.CLIENT_NS.format(profile=testbed_client)
    cat = catalog.Catalog.load(testbed=info if info else False)
    try:
        for t in transports:
            cat.endpoint(resolver, t)
    except catalog.CatalogError as exc:
        die(f"--resolver: {exc}")

    results, summaries, paths = _run_units(params, resolver, transports, campaign=campaign, seed=shuffle_seed,
                                           testbed=info, testbed_client=testbed_client, namespace=ns,
                                           access_rtt_ms=access_rtt_ms)
    for p in paths:
        sys.stderr.write(f"dnscamp dns: wrote {p}\n")
    if as_json:
        typer.echo(json.dumps(results, indent=1))
        return
    fmt = lambda x: "-" if x is None else f"{x:.2f}"  # noqa: E731
    where = f" in {ns}" if ns else ""
    eng = f", engine {params.engine}" if params.engine != registry.DEFAULT_ENGINE else ""
    warm = "" if params.warm_cache else ", cold cache"
    typer.echo(f"resolver {resolver}, policy {params.policy}{eng}{warm}{where}; times: t_response - t_start in ms")
    head = f"{'transport':<10} {'n':>5} {'ok':>5} {'p50':>9} {'p90':>9} {'p99':>9} {'xRTT p50':>9}  errors"
    typer.echo(head)
    for t, s in summaries.items():
        errs = ", ".join(f"{k} {v}" for k, v in sorted(s.errors.items())) or "-"
        typer.echo(f"{t:<10} {s.n:>5} {s.ok:>5} {fmt(s.p50_ms):>9} {fmt(s.p90_ms):>9} {fmt(s.p99_ms):>9} "
                   f"{fmt(s.rtt_multiple_p50):>9}  {errs}")


def _run_units(params, resolver: str, transports: list[str], *, campaign: str, seed: Optional[int], testbed,
               testbed_client: Optional[str], namespace: Optional[str], access_rtt_ms: Optional[float]):
    """One dns_query unit per transport, run as a campaign runs it: by the vantage agent
    (``vantage_agent.agent.run_unit``), in this process or, for --testbed-client, in an agent
    inside the client namespace (the runner's ``_Agent``). Returns the per-transport JSON
    figures, the summaries and the spool files, all from the records written."""
    from dnscamp import kinds
    from dnscamp.runner import _Agent
    from vantage_agent.agent import run_unit
    from vantage_agent.dns import runner
    from vantage_agent.kind import RunContext, Unit
    from vantage_agent.paths import spool_dir
    from vantage_agent.records import Vantage, parse_line
    from vantage_agent.spool import SpoolWriter

    vantage = Vantage(
        id=f"testbed-{testbed_client}" if testbed_client else platform.node() or "local",
        provider="testbed" if testbed_client else "local", region=None, network_profile=testbed_client,
    )
    run_id = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + f"-{os.getpid()}"
    spool = spool_dir()
    run_dir = spool / campaign / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    extra = {"shuffle": seed is not None, **({"access_rtt_ms": access_rtt_ms} if access_rtt_ms else {})}
    agent = _Agent(spool, run_dir, namespace) if namespace else None
    results, summaries, paths = {}, {}, []
    try:
        for i, t in enumerate(transports):
            unit = Unit(id=str(uuid.uuid4()), campaign=campaign, run=run_id, kind="dns_query", vantage=vantage,
                        target=f"{resolver}/{t}", repetition=0, params=params.model_dump(), seed=seed or 0, order=i)
            if agent is None:
                ctx = RunContext(spool_dir=spool, artifacts_dir=run_dir / "artifacts", testbed=testbed, extra=extra)
                reply = run_unit(kinds.get("dns_query"), unit, ctx, SpoolWriter(spool))
            else:
                reply = agent.run({"unit": unit.to_dict(), "kind": kinds.KINDS["dns_query"],
                                   "ctx": {"testbed": testbed, "namespace": namespace, "extra": extra,
                                           "artifacts_dir": str(run_dir / "artifacts")}})
                if reply is None:
                    die(f"--testbed-client: {agent.failure_text()}")
            path = Path(reply["file"])
            records = [parse_line(line)[0] for line in path.read_text().splitlines() if line.strip()]
            paths.append(path)
            summaries[t] = runner.summarize_records(records)
            results[t] = summaries[t].to_json()
    finally:
        if agent is not None:
            agent.close()
    return results, summaries, paths
