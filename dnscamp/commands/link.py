"""`dnscamp link apply|show|clear`: a testbed access profile (fiber, dsl, 4g, 3g, ...) on this
machine's own interface, both directions, with netem (sch_netem) or the linkem emulator.
The logic lives in testbed/linkem/host.py (same profiles and netem parameters as the testbed);
docs/link.md says what is shaped and what is not."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import List, Optional

import typer

from dnscamp.errors import die

app = typer.Typer(help="An access-network profile on this machine's interface (cloud vantages).", no_args_is_help=True)


def _need_root() -> None:
    if os.geteuid() != 0:
        die("dnscamp link needs root (tc, iptables)")


def _profile(name: str, spec: Path | None):
    from testbed.profiles import ProfileError, load_profiles

    extra = None
    if spec is not None:
        try:
            extra = tomllib.loads(spec.read_text()).get("profiles")
        except (OSError, tomllib.TOMLDecodeError) as exc:
            die(f"--spec {spec}: {exc}")
    try:
        profiles = load_profiles(extra)
    except ProfileError as exc:
        die(f"{spec}: {exc}")
    if name not in profiles:
        die(f"unknown profile {name!r} (known: {', '.join(sorted(profiles))})")
    return profiles[name]


@app.command("apply")
def apply_command(
    profile: str = typer.Argument(..., help="Profile name (testbed/profiles.toml, or the --spec's [profiles])."),
    backend: str = typer.Option("auto", "--backend", help="auto (netem where the kernel has sch_netem, else linkem), netem or linkem."),
    dev: Optional[str] = typer.Option(None, "--dev", help="Interface to shape (default: the default route's)."),
    exclude: Optional[List[str]] = typer.Option(None, "--exclude", help="CIDR kept unshaped, repeatable (default: the instance "
                                                "metadata service, 169.254.169.254/32 and fd00:ec2::254/128)."),
    spec: Optional[Path] = typer.Option(None, "--spec", help="Campaign spec whose [profiles] tables add to the built-in ones."),
    as_json: bool = typer.Option(False, "--json", help="Print the applied record as JSON."),
) -> None:
    """Shape this machine's interface like the profile's access link (up = egress, down = ingress). Idempotent: the same request already in place changes nothing; another one replaces it."""
    from testbed.linkem import host

    prof = _profile(profile, spec)
    _need_root()
    try:
        be = host.resolve_backend(backend)
        host.check_tools(be)
        nets = host.parse_excludes(list(exclude) if exclude else list(host.DEFAULT_EXCLUDES))
        dev = dev or host.default_dev()
        if not Path("/sys/class/net", dev).exists():
            die(f"--dev {dev}: no such interface")
        st, changed = host.apply(prof, be, dev, nets)
    except host.HostLinkError as exc:
        die(str(exc))
    except host.LinkError as exc:
        die(str(exc), code=1)
    if as_json:
        typer.echo(json.dumps(st, indent=2))
        return
    s = st["profile"]
    verb = "applied" if changed else "already applied"
    typer.echo(f"{verb}: {s['name']} on {st['dev']} ({st['backend']}): +{s['rtt_ms']} ms RTT, "
               f"up {s['up_mbps'] or '-'} / down {s['down_mbps'] or '-'} Mbit/s, loss up {s['loss_up']} "
               f"down {s['loss_down']}; unshaped: {', '.join(st['excludes']) or 'nothing'}")


@app.command("show")
def show_command(as_json: bool = typer.Option(False, "--json", help="JSON: the applied record and what tc/iptables say now.")) -> None:
    """What is applied: the record of `link apply` and what tc / iptables / linkem say now."""
    from testbed.linkem import host

    _need_root()
    try:
        out = host.show()
    except host.LinkError as exc:
        die(str(exc))
    if as_json:
        typer.echo(json.dumps(out, indent=2))
        return
    st, live = out["applied"], out["live"]
    if st is None:
        typer.echo(f"nothing applied by dnscamp link ({out['state_file']} absent)")
    else:
        s = st["profile"]
        typer.echo(f"profile {s['name']} on {st['dev']} ({st['backend']}) since {st['applied_at']}: "
                   f"{'in place' if out['in_place'] else 'NOT in place (reboot? emulator died?)'}")
        typer.echo(f"  source: {s['source']}")
        typer.echo(f"  unshaped: {', '.join(st['excludes']) or 'nothing'}")
    typer.echo(f"tc qdisc show dev {live['dev']}:\n  " + live["qdiscs"].replace("\n", "\n  "))
    if live["ingress_filters"]:
        typer.echo("ingress filters:\n  " + live["ingress_filters"].replace("\n", "\n  "))
    for ifb, text in live.get("ifb", {}).items():
        typer.echo(f"tc qdisc show dev {ifb}:\n  " + text.replace("\n", "\n  "))
    if live.get("iptables"):
        typer.echo("iptables:\n  " + "\n  ".join(live["iptables"]))
    if st and st["backend"] == "linkem":
        typer.echo(f"linkem: {'running' if live['linkem_alive'] else 'NOT running'}")


@app.command("clear")
def clear_command() -> None:
    """Remove what `link apply` installed (our qdisc handles, filter prefs, chains, ifb, emulator); nothing else."""
    from testbed.linkem import host

    _need_root()
    try:
        done = host.clear()
    except host.LinkError as exc:
        die(str(exc), code=1)
    typer.echo("removed: " + "; ".join(done) if done else "nothing to remove")
