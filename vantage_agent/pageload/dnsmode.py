"""DNS modes of a page load, and how each is put in force for one browser run.

A mode is ``system`` or ``<transport>:<resolver>``:

==========  ==================================================================================
system      the OS resolver (``/etc/resolv.conf``; on the testbed the ISP resolver, dc-isp)
do53:R      ``/etc/resolv.conf`` -> R (UDP/TCP 53), in the browser's private mount namespace
dot:R       Stubby on a private loopback address, DoT to R (002_6fa4cf280535d36b.txt §3.2.2)
doh:R       the browser's own DoH: Firefox TRR mode 3 (§3.2.1); Chromium secure DNS (policy)
doq:R       dnscamp's stub (stub.py) on a private loopback address, DoQ to R
doh3:R      dnscamp's stub, DoH over HTTP/3 to R
==========  ==================================================================================

A resolver R is ``isp`` / ``public`` (the testbed's frontends: their addresses, ports and TLS
names come from the testbed description's ``resolvers``, ``ctx.testbed`` or ``dnscamp testbed
info --json``, never from the ``testbed`` package, which a cloud vantage does not have), or
``[tls-name@]address[:port]``, or for DoH an ``https://`` URL (``https://name/dns-query``, with
``@address`` appended to bootstrap the name: ``https://isp-resolver.test/dns-query@10.53.1.1``).
Without a description an alias parses (so a spec validates anywhere) but stays unresolved, and
``setup`` refuses it with the reason.

Nothing here changes machine-global state: the resolver file and Chromium's managed-policy
directory are bind-mounted in a private mount namespace of the browser's driver (see
``common.ns_wrapper``), and each stub listens on its own ``127.53.x.y:53``.
"""

from __future__ import annotations

import ipaddress
import json
import os
import random
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from vantage_agent.dns import catalog
from vantage_agent.dns import registry as dns_registry
from vantage_agent.pageload.resolver import Resolver

# Keys of the testbed description's ``resolvers`` (testbed/services: frontends); names only,
# the addresses are the description's.
ALIASES = ("isp", "public")


class DnsModeError(ValueError):
    """A DNS mode string that cannot be parsed (message names the part)."""


@dataclass(frozen=True)
class DnsMode:
    transport: str
    resolver: Resolver | None = None
    text: str = "system"
    alias: str | None = None  # "isp" / "public": resolved from the testbed description

    def __str__(self) -> str:
        return self.text

    @property
    def driver(self) -> "Mode":
        """What this mode can do and how it is put in force (``MODES``)."""
        return MODES[self.transport]


def _valid_ip(s: str) -> bool:
    try:
        ipaddress.ip_address(s)
    except ValueError:
        return False
    return True


def testbed_resolver(transport: str, alias: str, testbed: dict[str, Any] | None) -> Resolver | None:
    """The endpoint of the description's resolver ``alias`` for ``transport``; None if the
    description (or that resolver, or that transport) is missing."""
    try:
        r = catalog.testbed_resolver(testbed, alias)
    except catalog.CatalogError as exc:
        raise DnsModeError(f"{transport}:{alias}: {exc}") from None
    ep = r.endpoints.get(transport) if r is not None else None
    if ep is None:
        return None
    path = urlsplit(ep.url).path if ep.url else ""
    return Resolver(ep.address, ep.port, ep.tls_name, path or "/dns-query")


def parse_resolver(transport: str, spec: str) -> Resolver:
    default_port = dns_registry.transport(transport).default_port
    spec = spec.strip()
    if not spec:
        raise DnsModeError(f"{transport}: missing resolver (e.g. {transport}:isp or {transport}:10.53.1.1)")
    if spec.startswith("https://"):
        url, _, boot = spec.partition("@") if "@" in spec.split("//", 1)[1] else (spec, "", "")
        u = urlsplit(url)
        host = u.hostname or ""
        if not host:
            raise DnsModeError(f"{transport}: no host in URL {spec!r}")
        addr = boot or host
        if not _valid_ip(addr):
            raise DnsModeError(f"{transport}: {spec!r} needs an address: https://name/path@ADDRESS")
        return Resolver(addr, u.port or default_port, None if _valid_ip(host) else host, u.path or "/dns-query")
    name = None
    if "@" in spec:
        name, _, spec = spec.partition("@")
    port = default_port
    if spec.startswith("["):
        addr, _, rest = spec[1:].partition("]")
        if rest.startswith(":"):
            port = int(rest[1:])
    elif spec.count(":") == 1:
        addr, _, p = spec.partition(":")
        try:
            port = int(p)
        except ValueError:
            raise DnsModeError(f"{transport}: bad port {p!r}") from None
    else:
        addr = spec
    if not _valid_ip(addr):
        raise DnsModeError(f"{transport}: resolver {addr!r} is not an IP address (or isp/public)")
    return Resolver(addr, port, name or None)


def parse(text: str, testbed: dict[str, Any] | None = None) -> DnsMode:
    """Parse ``system`` or ``<transport>:<resolver>``; raises DnsModeError naming the part.
    ``testbed``: the testbed description that resolves the aliases ``isp`` / ``public``."""
    text = text.strip()
    transport, sep, rest = text.partition(":")
    mode = MODES.get(transport)
    if mode is None or mode.uses_os_resolver == bool(sep):  # "system" alone; the others name a resolver
        use = [m if MODES[m].uses_os_resolver else f"{m}:R" for m in MODES]
        raise DnsModeError(
            f"unknown DNS mode {text!r} (use {', '.join(use[:-1])} or {use[-1]}; R = isp, public or an address)"
        )
    if mode.uses_os_resolver:
        return DnsMode(transport, None, text)
    if rest.strip() in ALIASES:
        return DnsMode(transport, testbed_resolver(transport, rest.strip(), testbed), text, rest.strip())
    return DnsMode(transport, parse_resolver(transport, rest), text)


# -- putting a mode in force ----------------------------------------------------------------


@dataclass
class DnsSetup:
    """What a browser module needs to apply one DNS mode, plus the processes behind it."""

    mode: DnsMode
    resolv_conf: str | None = None  # file to bind-mount over /etc/resolv.conf
    firefox_prefs: dict[str, Any] = field(default_factory=dict)
    chromium_policy: dict[str, Any] | None = None
    chromium_args: list[str] = field(default_factory=list)
    listen: str | None = None  # local stub address (dot / doq / doh3)
    stub: Any = None  # stub.Stub for doq / doh3
    procs: list[subprocess.Popen] = field(default_factory=list)
    workdir: Path | None = None

    def stats(self) -> dict[str, Any] | None:
        return self.stub.stats() if self.stub is not None else None

    def reset_stats(self) -> None:
        if self.stub is not None:
            self.stub.reset()

    def fresh_upstream(self) -> None:
        """Drop the stub's upstream connection and ticket (doq / doh3): its next query
        handshakes in full, as a cold load's first one. Stubby (dot) keeps its connection."""
        if self.stub is not None:
            self.stub.fwd.reconnect()

    def close(self) -> None:
        if self.stub is not None:
            self.stub.close()
            self.stub = None
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(3)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.procs.clear()

    def __enter__(self) -> "DnsSetup":
        return self

    def __exit__(self, *a: Any) -> None:
        self.close()


def _udp_listening(addr: str, port: int) -> bool:
    want = f"{socket.htonl(int(ipaddress.IPv4Address(addr))):08X}:{port:04X}"
    try:
        text = Path("/proc/net/udp").read_text()
    except OSError:
        return False
    return any(line.split()[1] == want for line in text.splitlines()[1:] if len(line.split()) > 1)


def free_loopback(port: int = 53) -> str:
    """A 127.53.x.y address with ``port`` free on UDP and TCP (each stub gets its own)."""
    rnd = random.Random(os.getpid() ^ time.monotonic_ns())
    for _ in range(200):
        addr = f"127.53.{rnd.randint(0, 255)}.{rnd.randint(2, 254)}"
        ok = True
        for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
            s = socket.socket(socket.AF_INET, kind)
            try:
                s.bind((addr, port))
            except OSError:
                ok = False
            finally:
                s.close()
        if ok:
            return addr
    raise OSError("no free 127.53.x.y address for a local stub")


def _resolv(workdir: Path, nameserver: str) -> str:
    p = workdir / "resolv.conf"
    # One attempt, 5 s: glibc's defaults (the 5 s Do53 timeout WWW'20 §4.3 discusses).
    p.write_text(f"# dnscamp page-load DNS mode\nnameserver {nameserver}\noptions timeout:5 attempts:2\n")
    return str(p)


def stubby_config(listen: str, r: Resolver, ca_file: str | None) -> str:
    """Stubby's YAML: DoT only, authentication required, 10 s idle timeout (Stubby's default,
    which WWW'20 §3.1.2 mirrors in its own tool)."""
    lines = [
        "resolution_type: GETDNS_RESOLUTION_STUB",
        "dns_transport_list:",
        "  - GETDNS_TRANSPORT_TLS",
        "tls_authentication: GETDNS_AUTHENTICATION_REQUIRED" if r.tls_name else "tls_authentication: GETDNS_AUTHENTICATION_NONE",
        "tls_query_padding_blocksize: 128",
        "edns_client_subnet_private: 1",
        "idle_timeout: 10000",
        "round_robin_upstreams: 0",
        "listen_addresses:",
        f"  - {listen}",
    ]
    if ca_file:
        lines.append(f"tls_ca_file: {json.dumps(ca_file)}")
    lines += ["upstream_recursive_servers:", f"  - address_data: {r.address}", f"    tls_port: {r.port}"]
    if r.tls_name:
        lines.append(f"    tls_auth_name: {json.dumps(r.tls_name)}")
    return "\n".join(lines) + "\n"


def _wait_listening(addr: str, proc: subprocess.Popen | None, what: str, timeout: float = 10.0) -> None:
    t_end = time.monotonic() + timeout
    while time.monotonic() < t_end:
        if proc is not None and proc.poll() is not None:
            raise OSError(f"{what} exited with code {proc.returncode}")
        if _udp_listening(addr, 53):
            return
        time.sleep(0.02)
    raise OSError(f"{what} did not listen on {addr}:53 within {timeout:.0f} s")


def setup(mode: DnsMode, workdir: Path, *, ca_file: str | None = None, stubby: str = "stubby") -> DnsSetup:
    """Start what ``mode`` needs (Stubby, dnscamp's stub) and describe it for the browsers.

    The caller closes the returned DnsSetup (a context manager) when its loads are done; one
    set-up serves many loads (the stubs keep no cache, so every load still resolves afresh).
    """
    workdir.mkdir(parents=True, exist_ok=True)
    ds = DnsSetup(mode=mode, workdir=workdir)
    r = mode.resolver
    if not mode.driver.uses_os_resolver and r is None:
        raise DnsModeError(f"{mode}: {mode.alias!r} is a testbed resolver and the testbed description "
                           f"(ctx.testbed / dnscamp testbed info --json) gives no {mode.transport} endpoint for it")
    try:
        mode.driver.apply(ds, r, workdir, ca_file=ca_file, stubby=stubby)
    except BaseException:
        ds.close()
        raise
    return ds


# -- the modes ------------------------------------------------------------------------------


class Mode:
    """One DNS mode: what it can do (class attributes) and how it is put in force (``apply``).
    ``MODES`` maps each mode's name to it; nothing else compares mode names."""

    name = ""
    uses_os_resolver = False  # the OS resolver as configured; the others name a resolver R
    via_stub = False  # dnscamp's stub forwards the browser's Do53 (its stats are the evidence)
    # What the harness can say of the transport without evidence of its own (verify in kind.py)
    evidence = ""

    @property
    def wire_transport(self) -> str:
        """The transport a resolver frontend sees the page's lookups arrive over."""
        return self.name

    def apply(self, ds: DnsSetup, r: Resolver | None, workdir: Path, *, ca_file: str | None, stubby: str) -> None:
        raise NotImplementedError


class SystemMode(Mode):
    name = "system"
    uses_os_resolver = True
    evidence = "system resolver: no resolver-side evidence in the harness"

    @property
    def wire_transport(self) -> str:
        # resolv.conf's nameserver (on a testbed client the ISP resolver): plain Do53
        return Do53Mode.name

    def apply(self, ds: DnsSetup, r: Resolver | None, workdir: Path, *, ca_file: str | None, stubby: str) -> None:
        pass


class Do53Mode(Mode):
    name = "do53"
    evidence = "resolv.conf -> resolver in the browser's mount namespace (check the frontend log)"

    def apply(self, ds: DnsSetup, r: Resolver | None, workdir: Path, *, ca_file: str | None, stubby: str) -> None:
        assert r is not None
        if r.port != 53:
            raise DnsModeError("do53: /etc/resolv.conf can only name port 53")
        ds.resolv_conf = _resolv(workdir, r.address)


class DotMode(Mode):
    name = "dot"
    evidence = "Stubby, DoT only, authentication required (check the frontend log)"

    def apply(self, ds: DnsSetup, r: Resolver | None, workdir: Path, *, ca_file: str | None, stubby: str) -> None:
        assert r is not None
        listen = free_loopback()
        conf = workdir / "stubby.yml"
        conf.write_text(stubby_config(listen, r, ca_file))
        log = open(workdir / "stubby.log", "ab")
        p = subprocess.Popen([stubby, "-C", str(conf)], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        ds.procs.append(p)
        _wait_listening(listen, p, "stubby")
        ds.listen = listen
        ds.resolv_conf = _resolv(workdir, listen)


class DohMode(Mode):
    name = "doh"
    evidence = "browser DoH without fallback (Firefox TRR 3 / Chromium secure mode; check the frontend log)"

    def apply(self, ds: DnsSetup, r: Resolver | None, workdir: Path, *, ca_file: str | None, stubby: str) -> None:
        assert r is not None
        ds.firefox_prefs = firefox_trr_prefs(r)
        ds.chromium_policy = {
            "DnsOverHttpsMode": "secure",
            "DnsOverHttpsTemplates": r.doh_url,
        }
        if r.tls_name:
            # Chromium bootstraps the DoH server's name through the system resolver; pin
            # it so the only DNS traffic of the load is the DoH exchange itself.
            ds.chromium_args.append(f"--host-resolver-rules=MAP {r.tls_name} {r.address}")


class StubMode(Mode):
    """Neither browser speaks this transport: dnscamp's stub (stub.py) does, for every
    transport whose driver runs over QUIC."""

    via_stub = True

    def __init__(self, transport: str) -> None:
        self.name = transport

    def apply(self, ds: DnsSetup, r: Resolver | None, workdir: Path, *, ca_file: str | None, stubby: str) -> None:
        assert r is not None
        from vantage_agent.pageload import stub as stubmod

        listen = free_loopback()
        ds.stub = stubmod.Stub.start(listen, 53, self.name, r, ca_file=ca_file)
        ds.listen = listen
        ds.resolv_conf = _resolv(workdir, listen)


MODES: dict[str, Mode] = {m.name: m for m in (SystemMode(), Do53Mode(), DotMode(), DohMode(), StubMode("doq"),
                                              StubMode("doh3"))}
TRANSPORTS = tuple(MODES)


def firefox_trr_prefs(r: Resolver) -> dict[str, Any]:
    """Firefox DoH only (TRR mode 3, 002_6fa4cf280535d36b.txt §3.2.1), no fallback."""
    prefs: dict[str, Any] = {
        "network.trr.mode": 3,
        "network.trr.uri": r.doh_url,
        "network.trr.custom_uri": r.doh_url,
        "network.trr.allow-rfc1918": True,
        "network.trr.confirmationNS": "skip",
        "network.trr.useGET": False,  # POST, as WWW'20 §3.1.2 measured
        "network.trr.disable-ECS": True,
        "network.trr.max-fails": 100,
        "network.trr.strict_native_fallback": False,
        "doh-rollout.disable-heuristics": True,
        "network.trr.exclude-etc-hosts": False,
    }
    if r.tls_name:
        prefs["network.trr.bootstrapAddr"] = r.address
        prefs["network.trr.bootstrapAddress"] = r.address
    return prefs
