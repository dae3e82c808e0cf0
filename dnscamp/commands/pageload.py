"""`dnscamp pageload`: load pages with one browser and one DNS mode, print a summary.

Each load is a full ``page_load`` record (the kind's own code path), written to
``<spool>/adhoc/<run>/pageload.jsonl`` with its HAR under ``.../artifacts/har/`` so that
`dnscamp ingest` can store it. With ``--testbed-client PROFILE`` the loads run inside the
testbed's client namespace ``dc-client-PROFILE`` (the command re-executes itself there).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, Optional

import typer

from dnscamp.errors import die
from vantage_agent.stats import median, percentile

def pageload_command(
    urls: list[str] = typer.Argument(..., metavar="URL...", help="Pages to load (http:// or https://)."),
    browser: list[str] = typer.Option(["chromium"], "--browser", help="firefox or chromium (repeatable)."),
    dns: list[str] = typer.Option(["system"], "--dns", help="DNS mode (repeatable), e.g. doh:isp."),
    http: str = typer.Option("h2", "--http", help="h2 (QUIC off) or h3 (HTTP/3 forced for the URLs' origins)."),
    repeat: int = typer.Option(1, "--repeat", min=1, max=10000, help="Loads per (URL, browser, DNS mode)."),
    testbed_client: Optional[str] = typer.Option(
        None, "--testbed-client", metavar="PROFILE", help="Run inside the testbed client namespace dc-client-PROFILE."
    ),
    timeout: float = typer.Option(30.0, "--timeout", min=1, help="Page-load timeout in seconds (WWW'20: 30)."),
    ca_file: Optional[Path] = typer.Option(None, "--ca-file", help="Extra trusted CA (default: the testbed CA)."),
    h3_origin: list[str] = typer.Option([], "--h3-origin", help="Extra host:port forced to HTTP/3 (repeatable)."),
    seed: int = typer.Option(1, "--seed", help="Seed of the shuffled load order."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per (browser, DNS mode) on stdout."),
    names_out: Optional[Path] = typer.Option(
        None, "--names-out", help="Write the unique hostnames seen in the HARs, one per line (the DNS engine's target list)."
    ),
) -> None:
    """Load URL(s) in a fresh browser per load with each DNS mode; print n, success rate, PLT
    p50/p90 and DNS lookups per (browser, DNS mode). DNS modes: system, do53:R, dot:R, doh:R,
    doq:R, doh3:R (R = isp, public, an address or name@address, or https://name/path@address for doh)."""
    from vantage_agent.pageload import dnsmode, registry

    for b in browser:
        if b not in registry.names():
            die(f"--browser: unknown browser {b!r} (known: {', '.join(registry.names())})")
    modes = []
    for d in dns:
        try:
            modes.append(dnsmode.parse(d))
        except dnsmode.DnsModeError as exc:
            die(f"--dns: {exc}")
    if http not in ("h2", "h3"):
        die(f"--http: must be h2 or h3, not {http!r}")
    from urllib.parse import urlsplit

    for u in urls:
        sp = urlsplit(u)
        if sp.scheme not in ("http", "https") or not sp.hostname:
            die(f"URL: not an http(s) URL: {u!r}")
    if ca_file is not None and not ca_file.is_file():
        die(f"--ca-file: no such file: {ca_file}")

    if not testbed_client and not os.environ.get("DNSCAMP_NETNS", "").startswith("dc-client-"):
        # Testbed names and resolvers exist only inside the island: never ask the real ones.
        for m in modes:
            if str(m).split(":", 1)[-1] in dnsmode.ALIASES:
                die(f"--dns {m}: a testbed resolver; use --testbed-client PROFILE")
        for u in urls:
            host = urlsplit(u).hostname or ""
            if (host == "test" or host.endswith(".test")) and any(m.driver.uses_os_resolver for m in modes):
                die(f"URL {u}: a testbed site with the system resolver; use --testbed-client PROFILE")
    if testbed_client:
        ns = f"dc-client-{testbed_client}"
        if os.environ.get("DNSCAMP_NETNS") != ns:
            if not Path(f"/run/netns/{ns}").exists():
                die(f"--testbed-client: namespace {ns} does not exist (dnscamp testbed up?)")
            argv = ["ip", "netns", "exec", ns, "env", f"DNSCAMP_NETNS={ns}", sys.executable, "-m", "dnscamp.cli", "pageload", *sys.argv[2:]]
            raise typer.Exit(subprocess.call(argv))

    tb = None
    if testbed_client or os.environ.get("DNSCAMP_NETNS", "").startswith("dc-client-"):
        from vantage_agent.dns import catalog

        # The testbed description (as a campaign's ctx.testbed): the resolvers that isp/public
        # name, the CA, the frontends' query logs. The agent code reads them from it only.
        tb = catalog.testbed_info()
        try:
            modes = [dnsmode.parse(str(m), testbed=tb) for m in modes]
        except dnsmode.DnsModeError as exc:  # a malformed description, not the user's input
            die(f"testbed description: {exc}", code=1)
    rows = _run(urls, browser, modes, http, repeat, timeout, str(ca_file) if ca_file else None, h3_origin, seed, testbed_client, tb)
    summary = _summarise(rows)
    if names_out is not None:
        names = sorted({h for r in rows for h in r.body.get("hostnames") or []})
        names_out.write_text("".join(f"{n}\n" for n in names))
        sys.stderr.write(f"{len(names)} unique names: {names_out}\n")
    if as_json:
        for s in summary:
            typer.echo(json.dumps(s))
    else:
        _table(summary)


def _run(urls, browsers, modes, http, repeat, timeout, ca_file, h3_extra, seed, profile, tb) -> list[Any]:
    import random
    import uuid

    from vantage_agent.kind import Unit
    from vantage_agent.pageload import dnsmode
    from vantage_agent.pageload.common import LoadOptions
    from vantage_agent.pageload.kind import find_ca, measure, origins_for
    from vantage_agent.paths import spool_dir
    from vantage_agent.records import Vantage
    from vantage_agent.spool import SpoolWriter

    run = "pl-" + uuid.uuid4().hex[:10]
    out_dir = spool_dir() / "adhoc" / run
    artifacts = out_dir / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    ca = find_ca(ca_file, tb)
    vantage = Vantage(id="testbed" if profile else "local", provider="testbed" if profile else "local", network_profile=profile)
    jobs = [(u, b, m, r) for u in urls for b in browsers for m in modes for r in range(repeat)]
    random.Random(seed).shuffle(jobs)
    setups: dict[str, Any] = {}
    records = []
    try:
        for i, (u, b, m, r) in enumerate(jobs):
            if str(m) not in setups:
                try:
                    setups[str(m)] = dnsmode.setup(m, artifacts / "dns" / str(len(setups)), ca_file=ca)
                except (OSError, dnsmode.DnsModeError) as exc:
                    setups[str(m)] = None
                    sys.stderr.write(f"dnscamp: DNS mode {m}: {exc}\n")
            ds = setups[str(m)]
            unit = Unit(
                id=f"{run}-{i}", campaign="adhoc", run=run, kind="page_load", vantage=vantage, target=u,
                repetition=r, params={}, seed=seed, order=i,
            )  # fmt: skip
            opts = LoadOptions(
                timeout_s=timeout, http=http, ca_file=ca, work_dir=str(artifacts / "work"),
                h3_origins=origins_for(u, list(h3_extra)) if http == "h3" else (),
            )  # fmt: skip
            # ds is None when the mode could not be set up: measure() retries and records why.
            rec = measure(unit, u, b, m, opts, artifacts, dns=ds, rtt_count=None, order={"seed": seed, "index": i}, testbed=tb)
            records.append(rec)
            sys.stderr.write(f"  {i + 1}/{len(jobs)} {b} {m} {u}: {rec.status}"
                             f"{'' if rec.body.get('plt_ms') is None else ' plt %.0f ms' % rec.body['plt_ms']}\n")
    finally:
        for s in setups.values():
            if s is not None:
                s.close()
    path = SpoolWriter(spool_dir()).write(records, name="pageload") if records else None
    if path:
        sys.stderr.write(f"records: {path}\n")
    return records


def _summarise(records: list[Any]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str, str], list[Any]] = defaultdict(list)
    for r in records:
        groups[(r.body["browser"], r.body["dns_mode"], r.body["http"])].append(r)
    out = []
    for (b, m, h), rs in sorted(groups.items()):
        plts = [r.body["plt_ms"] for r in rs if r.status == "ok" and r.body.get("plt_ms") is not None]
        lookups = [r.body["dns_lookups"] for r in rs if r.status == "ok"]
        ver = [r.body.get("dns_transport_verified") for r in rs]
        verified = False if False in ver else (True if ver and all(v is True for v in ver) else None)
        statuses: dict[str, int] = defaultdict(int)
        for r in rs:
            statuses[r.status] += 1
        ok = statuses.get("ok", 0)
        out.append(
            {
                "browser": b,
                "dns_mode": m,
                "http": h,
                "n": len(rs),
                "success": ok,
                "success_rate": round(ok / len(rs), 4) if rs else None,
                "plt_ms_p50": _round(percentile(plts, 50)),
                "plt_ms_p90": _round(percentile(plts, 90)),
                "dns_lookups_p50": median(lookups),
                "dns_transport_verified": verified,
                "statuses": dict(statuses),
            }
        )
    return out


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 1)


def _table(summary: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title="page loads")
    for c in ("browser", "dns mode", "http", "n", "success", "PLT p50 ms", "PLT p90 ms", "DNS lookups", "verified"):
        t.add_column(c)
    for s in summary:
        t.add_row(
            s["browser"], s["dns_mode"], s["http"], str(s["n"]), f"{100 * (s['success_rate'] or 0):.0f} %",
            _fmt(s["plt_ms_p50"]), _fmt(s["plt_ms_p90"]), _fmt(s["dns_lookups_p50"]),
            {True: "yes", False: "NO", None: "-"}[s["dns_transport_verified"]],
        )  # fmt: skip
    Console().print(t)


def _fmt(v: Any) -> str:
    return "-" if v is None else (f"{v:.0f}" if isinstance(v, float) else str(v))
