"""`dnscamp testbed ...`: bring the emulated-Internet island up and down, inspect it, run
commands in it and check its links' fidelity."""

from __future__ import annotations

import json
import os
import sys
from typing import List, Optional

import typer

from dnscamp.errors import die

app = typer.Typer(help="The testbed island: network namespaces, emulated links, servers.", no_args_is_help=True)

PROFILES_HELP = "Comma-separated access profiles (testbed/profiles.toml), one client namespace each."


def _need_root() -> None:
    if os.geteuid() != 0:
        die("the testbed needs root (network namespaces, iptables): run as root")


def _run_dir():
    from vantage_agent.paths import testbed_dir

    return testbed_dir()


def _split(profiles: str) -> list[str]:
    return [p.strip() for p in profiles.split(",") if p.strip()]


def _err(msg: str) -> None:
    sys.stderr.write(f"dnscamp: {msg}\n")


@app.command("up")
def up(
    profiles: str = typer.Option("fiber,4g", "--profiles", "-p", help=PROFILES_HELP),
    backbone_rtt_ms: float = typer.Option(10.0, "--backbone-rtt-ms", help="Round trip added between dc-isp and dc-core (0: none)."),
    public_rtt_ms: float = typer.Option(20.0, "--public-rtt-ms", help="Extra round trip between dc-core and dc-pubres (0: none)."),
    no_services: bool = typer.Option(False, "--no-services", help="Network only: do not call testbed.services.start_all."),
    as_json: bool = typer.Option(False, "--json", help="Print the testbed description (as `info --json`)."),
) -> None:
    """Build the island: one dc-client-<profile> per profile behind its access link, dc-isp, dc-core, server namespaces; then start the servers. Already up with the same profiles: no-op."""
    from testbed import topology
    from testbed.profiles import ProfileError, select

    _need_root()
    try:
        chosen = select(_split(profiles))
    except ProfileError as exc:
        die(f"--profiles: {exc}")
    run_dir = _run_dir()
    try:
        topology.check_not_leased()
        with topology.ops_lock():
            st = topology.read_state(run_dir)
            if st and topology.is_up(run_dir):
                isl = st["island"]
                same = (isl.get("profiles") == [p.name for p in chosen]
                        and isl.get("backbone_rtt_ms") == backbone_rtt_ms and isl.get("public_rtt_ms") == public_rtt_ms)
                if same and topology.status(run_dir)["healthy"]:
                    _err(f"testbed already up with profiles {','.join(isl['profiles'])} (nothing to do)")
                    if as_json:
                        typer.echo(json.dumps(topology.info(run_dir), indent=1))
                    return
            res = topology.teardown(run_dir)
            if res["left"]:
                die(f"cannot tear down the previous testbed: {'; '.join(res['problems'])}", code=1)
            try:
                topology.build(chosen, run_dir, backbone_rtt_ms, public_rtt_ms, services=not no_services, log=_err)
            except Exception as exc:
                _err(f"testbed up failed: {exc}; tearing down")
                topology.teardown(run_dir)
                raise SystemExit(1) from None
    except topology.TopologyError as exc:
        die(str(exc), code=1)
    _err(f"testbed up: profiles {','.join(p.name for p in chosen)}; state in {topology.state_path(run_dir)}")
    if as_json:
        typer.echo(json.dumps(topology.info(run_dir), indent=1))


@app.command("down")
def down(as_json: bool = typer.Option(False, "--json", help="Print what was removed as JSON.")) -> None:
    """Remove the island: supervised servers, link emulators, every dc- namespace (and the processes in them). Idempotent; works after a killed `up` without a state file."""
    from testbed import topology

    _need_root()
    try:
        topology.check_not_leased()
        with topology.ops_lock():
            res = topology.teardown(_run_dir())
    except topology.TopologyError as exc:
        die(str(exc), code=1)
    if as_json:
        typer.echo(json.dumps(res, indent=1))
    if res["left"]:
        die(f"testbed down incomplete: {'; '.join(res['problems'])}", code=1)
    for p in res["problems"]:
        _err(f"warning: {p}")
    _err(f"testbed down: removed {len(res['removed'])} namespaces" if res["removed"] else "testbed down: nothing to remove")


@app.command("status")
def status(as_json: bool = typer.Option(False, "--json", help="Machine-readable status on stdout.")) -> None:
    """Nodes, links (alive, with linkem stats), backend and supervised processes. Exit 1 if the testbed is not up or something recorded is missing or dead."""
    from rich.console import Console
    from rich.table import Table

    from testbed import topology

    _need_root()
    st = topology.status(_run_dir())
    if as_json:
        typer.echo(json.dumps(st, indent=1))
    else:
        con = Console()
        if not st.get("island") and st.get("status") == "down":
            con.print("testbed: down" + (f" (stray namespaces: {', '.join(st['namespaces_present'])})"
                                         if st.get("namespaces_present") else ""))
        else:
            con.print(f"testbed: {st['status']}  profiles: {','.join(st.get('profiles', []))}  backend: {st.get('backend')}")
            t = Table("link", "ns", "profile", "backend", "alive", "packets a>b / b>a", "lateness p99 (ms)")
            for lk in st.get("links", []):
                s = lk.get("stats") or {}
                pk = " / ".join(str((s.get(d) or {}).get("packets", "-")) for d in ("a_to_b", "b_to_a"))
                lat = [((s.get(d) or {}).get("lateness_ns") or {}).get("p99") for d in ("a_to_b", "b_to_a")]
                lat_s = " / ".join("-" if v is None else f"{v / 1e6:.3f}" for v in lat)
                t.add_row(lk["name"], lk["ns"], lk.get("profile") or "-", str(lk.get("backend")), str(lk.get("alive")), pk, lat_s)
            con.print(t)
            if st.get("processes"):
                pt = Table("process", "ns", "pid", "alive")
                for p in st["processes"]:
                    pt.add_row(p["name"], str(p["ns"]), str(p["pid"]), str(p["alive"]))
                con.print(pt)
            for p in st.get("problems", []):
                con.print(f"[red]problem:[/red] {p}")
    if not st.get("healthy"):
        raise SystemExit(1)


@app.command("info")
def info(as_json: bool = typer.Option(True, "--json/--text", help="JSON (default) or a short text summary.")) -> None:
    """The running testbed's description: clients and their addresses, service addresses, nodes, links (what kinds and other tools read; no root needed)."""
    from testbed import lifecycle

    d = lifecycle.describe()  # topology.info + the servers' description when installed
    if as_json:
        typer.echo(json.dumps(d, indent=1))
    else:
        typer.echo(f"status: {d.get('status')}")
        for p, c in (d.get("clients") or {}).items():
            typer.echo(f"client {p}: {c['ns']} {c['address']}")
    if not d.get("up"):
        raise SystemExit(1)


def _resolve_node(node: str) -> str:
    from testbed import netns, plan, topology

    candidates = [node, f"{plan.PREFIX}{node}", plan.CLIENT_NS.format(profile=node)]
    for c in candidates:
        if c.startswith(plan.PREFIX) and netns.exists(c):
            return c
    known = [n for n in netns.list_ns(plan.PREFIX) if topology.ISLAND_NS_RE.match(n)]
    die(f"no testbed node {node!r} (known: {', '.join(known) or 'none, run `dnscamp testbed up`'})")


@app.command("exec", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def exec_(
    node: str = typer.Argument(..., help="Namespace (dc-isp or isp) or a profile name (its client namespace)."),
    cmd: Optional[List[str]] = typer.Argument(None, help="Command to run (after --)."),
) -> None:
    """Run CMD inside a testbed namespace: `dnscamp testbed exec fiber -- ping 10.53.1.1`."""
    _need_root()
    if not cmd:
        die("exec: no command given (dnscamp testbed exec NODE -- CMD ...)")
    ns = _resolve_node(node)
    os.environ["DNSCAMP_NETNS"] = ns
    try:
        os.execvp("ip", ["ip", "netns", "exec", ns, *cmd])
    except OSError as exc:
        die(f"exec: {exc}", code=1)


@app.command("check")
def check(
    profiles: Optional[str] = typer.Option(None, "--profiles", "-p", help="Profiles to check (default: every client of the running testbed)."),
    as_json: bool = typer.Option(False, "--json", help="Print the per-profile results as JSON on stdout."),
    probes: int = typer.Option(500, "--probes", min=10, help="UDP round-trip probes per profile."),
    loss_packets: int = typer.Option(10000, "--loss-packets", min=100, help="Packets per direction for the loss estimate."),
    goodput_seconds: float = typer.Option(4.0, "--goodput-seconds", min=1.0, help="Measured seconds per TCP goodput direction (after 2 s of warm-up)."),
    no_spool: bool = typer.Option(False, "--no-spool", help="Do not write link_check records to the spool."),
) -> None:
    """The fidelity self-test: per client profile, across exactly its access link (client <-> dc-isp), UDP round trips (p5/p50/p95), loss per direction, TCP goodput up and down and a QUIC handshake; configured versus measured, written as link_check records."""
    from rich.console import Console

    from testbed import check as chk
    from testbed import topology

    _need_root()
    run_dir = _run_dir()
    st = topology.read_state(run_dir)
    if not st or not topology.is_up(run_dir):
        die("testbed is not up (dnscamp testbed up --profiles ...)", code=1)
    island = topology.Island.from_dict(st["island"])
    names = _split(profiles) if profiles else list(island.profiles)
    for n in names:
        if n not in island.profiles:
            die(f"--profiles: {n!r} is not a client of the running testbed (up: {', '.join(island.profiles)})")
    con = Console(stderr=True)
    results = chk.run_check(island, run_dir, names, probes=probes, loss_packets=loss_packets,
                            goodput_seconds=goodput_seconds, log=lambda m: con.print(m, highlight=False))
    chk.print_table(results, con)
    if not no_spool:
        path = chk.spool_results(results)
        if path:
            _err(f"link_check records: {path}")
    if as_json:
        typer.echo(json.dumps({r["summary"]["profile"]: r["summary"] for r in results}, indent=1))
    if not all(r["summary"].get("passed") for r in results):
        raise SystemExit(1)


# --- testbed servers (testbed/services) -------------------------------------------------------
@app.command("flush-caches")
def flush_caches(as_json: bool = typer.Option(False, "--json", help="Print the flushed resolvers as JSON.")) -> None:
    """Empty the caches of both testbed resolvers (ISP and public Unbound: records, negative
    answers, delegations and server round-trip data), so the next lookup of any name is a
    cache miss that walks root, TLD and site servers across the backbone."""
    from testbed.services import ServicesError
    from testbed.services import flush_caches as _flush

    _need_root()
    try:
        done = _flush(_run_dir())
    except (ServicesError, RuntimeError, OSError) as exc:
        die(f"flush-caches: {exc}", code=1)
    if as_json:
        typer.echo(json.dumps({"flushed": done}))
    _err(f"flushed resolver caches: {', '.join(done)}")
