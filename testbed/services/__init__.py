"""The testbed's servers: CA, DNS hierarchy, recursive resolvers, encrypted-DNS frontends and
web sites, started under the testbed supervisor once the island's network is up.

``start_all(island, supervisor)`` is the hook ``testbed.topology.build`` calls; it

1. generates the sites (``sites.generate``, seeded) and writes their document roots,
2. makes sure the testbed CA exists (kept across `up`s in ``<run_dir>/ca``) and issues a
   certificate per server name,
3. writes the zone files, Unbound configs, Corefiles and the Caddyfile into
   ``<run_dir>/services``,
4. starts every server (``PROCESSES``) under the supervisor (logs in ``<run_dir>/logs``),
   all at once, then waits until each one listens on all of its sockets,
5. writes ``<run_dir>/services.json``: what ``dnscamp testbed info`` reports.

Every process runs in the foreground under the supervisor, so ``dnscamp testbed status``
sees a dead one and ``down`` stops them all.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any, Callable

from testbed import plan
from testbed.services import ca as ca_mod
from testbed.services import dns_hierarchy, frontends, resolvers, sites as sites_mod, web

COREDNS_VERSION = "1.15.0"

# Supervisor names of the servers, in start order.
PROCESSES = ["dns-auth", "dns-whoami", "unbound-isp", "unbound-public", "frontend-isp", "frontend-public", "web"]


class ServicesError(RuntimeError):
    """A server could not be configured or did not come up; the message names it and its log."""


def coredns_path() -> Path:
    """The CoreDNS binary built by install/40-testbed-servers.sh ($DNSCAMP_COREDNS overrides)."""
    if os.environ.get("DNSCAMP_COREDNS"):
        return Path(os.environ["DNSCAMP_COREDNS"])
    from vantage_agent.paths import bin_dir

    return bin_dir() / f"coredns-{COREDNS_VERSION}"


def services_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "services"


def state_path(run_dir: Path) -> Path:
    return Path(run_dir) / "services.json"


# ---------------------------------------------------------------------------------------------
# readiness: the sockets a process must have open, read from /proc/<pid>/net (per namespace)
# ---------------------------------------------------------------------------------------------


def _hex_addr(s: str) -> tuple[str, int]:
    ip_hex, port_hex = s.split(":")
    ip = ipaddress.IPv4Address(bytes.fromhex(ip_hex)[::-1]) if len(ip_hex) == 8 else None
    return (str(ip) if ip else ip_hex), int(port_hex, 16)


def sockets_of(pid: int) -> set[tuple[str, str, int]]:
    """(proto, address, port) of every listening TCP and bound UDP socket in ``pid``'s netns."""
    out: set[tuple[str, str, int]] = set()
    for proto in ("tcp", "udp", "tcp6", "udp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{proto}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if proto.startswith("tcp") and f[3] != "0A":  # LISTEN
                continue
            addr, port = _hex_addr(f[1])
            out.add((proto[:3], addr, port))
    return out


def _listening(want: list[tuple[str, str, int]]) -> Callable[[Any, str], bool]:
    def ready(supervisor, name: str) -> bool:
        pid = supervisor.pid(name)
        if pid is None:
            return False
        have = sockets_of(pid)
        for proto, addr, port in want:
            if (proto, addr, port) not in have and (proto, "0.0.0.0", port) not in have:
                return False
        return True

    return ready


# ---------------------------------------------------------------------------------------------
# configuration (no processes)
# ---------------------------------------------------------------------------------------------


def resolvers_description(run_dir: Path) -> dict[str, Any]:
    """The description's ``resolvers``: per frontend (key ``isp`` / ``public``) its catalog entry
    (name, endpoints) and ``query_log``, the frontend's own query log (the supervisor's log of
    ``frontend-<key>``) from which the page-load kind verifies a load's transport. The vantage
    agent reads all of this from the description; it never imports testbed/."""
    return {r.key: {**frontends.endpoints(r), "query_log": str(Path(run_dir) / "logs" / f"frontend-{r.key}.log")}
            for r in resolvers.RESOLVERS}


def configure(run_dir: Path, seed: int = sites_mod.DEFAULT_SEED) -> dict[str, Any]:
    """Generate sites, certificates and every config file; returns the process specs
    ({name: {ns, argv, env, sockets}}) and the description for ``services.json``."""
    run_dir = Path(run_dir)
    sdir = services_dir(run_dir)
    sdir.mkdir(parents=True, exist_ok=True)
    coredns = coredns_path()
    if not coredns.exists():
        raise ServicesError(f"CoreDNS not found at {coredns}: run install/40-testbed-servers.sh")
    for tool in ("unbound", "unbound-control", "caddy"):
        if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists():
            raise ServicesError(f"{tool} not found: run install/40-testbed-servers.sh")
    site_set = sites_mod.generate(seed)
    docroot = run_dir / "sites"
    sites_mod.write(site_set, docroot)
    ca = ca_mod.CA(run_dir / "ca").ensure()
    certs: dict[str, tuple[Path, Path]] = {}
    for host in site_set.hosts:
        leaf = ca.issue(host, [host])
        certs[host] = (leaf.cert, leaf.key)
    res_certs = {}
    for r in resolvers.RESOLVERS:
        leaf = ca.issue(r.tls_name, [r.tls_name], [r.address])
        res_certs[r.key] = leaf
    zone_files = dns_hierarchy.write_zones(site_set, sdir / "zones")
    (sdir / "Corefile.dns-auth").write_text(dns_hierarchy.auth_corefile(site_set, zone_files))
    (sdir / "Corefile.dns-whoami").write_text(dns_hierarchy.whoami_corefile())
    specs: dict[str, dict[str, Any]] = {}
    auth_sockets = [(p, a, 53) for a in (plan.ROOT_SERVER, plan.TLD_SERVER, plan.SITES_AUTH_SERVER)
                    for p in ("udp", "tcp")]
    specs["dns-auth"] = {"ns": plan.DNS_NS, "argv": [str(coredns), "-conf", str(sdir / "Corefile.dns-auth")],
                         "sockets": auth_sockets}
    specs["dns-whoami"] = {"ns": plan.DNS_NS, "argv": [str(coredns), "-conf", str(sdir / "Corefile.dns-whoami")],
                           "sockets": [("udp", plan.WHOAMI_AUTH_SERVER, 53), ("tcp", plan.WHOAMI_AUTH_SERVER, 53)]}
    for r in resolvers.RESOLVERS:
        conf = resolvers.write_config(r, sdir / f"unbound-{r.key}")
        specs[f"unbound-{r.key}"] = {
            "ns": r.ns, "argv": resolvers.argv(conf), "conf": str(conf),
            "sockets": [("udp", resolvers.LISTEN_ADDR, resolvers.LISTEN_PORT),
                        ("tcp", resolvers.LISTEN_ADDR, resolvers.LISTEN_PORT)]}
    for r in resolvers.RESOLVERS:
        leaf = res_certs[r.key]
        cf = frontends.write_config(r, sdir, leaf.cert, leaf.key)
        specs[f"frontend-{r.key}"] = {
            "ns": r.ns, "argv": [str(coredns), "-conf", str(cf)],
            "sockets": [("udp", r.address, 53), ("tcp", r.address, 53), ("tcp", r.address, 853),
                        ("tcp", r.address, 443), ("udp", r.address, 443), ("udp", r.address, 853)]}
    caddyfile = web.write_config(site_set, sdir, docroot, certs)
    specs["web"] = {"ns": plan.WEB_NS, "argv": web.argv(caddyfile), "env": web.env(sdir),
                    "sockets": [(proto, h.address, 443) for h in site_set.hosts.values() for proto in ("tcp", "udp")]}
    description = {
        "seed": seed,
        "ca_file": str(ca.cert_path),
        "ca_fingerprint_sha256": ca.fingerprint,
        "coredns": str(coredns),
        "resolvers": resolvers_description(run_dir),
        "sites": site_set.describe(),
        "hosts": {h.name: {"address": h.address, "page": h.page, "depth": h.depth, "role": h.role}
                  for h in site_set.hosts.values()},
        "whoami": {"zone": plan.WHOAMI_ZONE, "server": plan.WHOAMI_AUTH_SERVER,
                   "log": str(run_dir / "logs" / "dns-whoami.log"),
                   "log_format": dns_hierarchy.WHOAMI_LOG,
                   "answers": "A record of the asking resolver's address (TTL 0)"},
        "dns_servers": {"root": plan.ROOT_SERVER, "tld": plan.TLD_SERVER, "sites": plan.SITES_AUTH_SERVER,
                        "whoami": plan.WHOAMI_AUTH_SERVER},
        "frontend_log_format": frontends.LOG_FORMAT.format(transport="<transport>").replace("{{", "{").replace("}}", "}"),
        "processes": {n: {"ns": s["ns"], "log": str(run_dir / "logs" / f"{n}.log")} for n, s in specs.items()},
        "unbound_configs": {r.key: specs[f"unbound-{r.key}"]["conf"] for r in resolvers.RESOLVERS},
    }
    return {"specs": specs, "description": description}


# ---------------------------------------------------------------------------------------------
# the hooks
# ---------------------------------------------------------------------------------------------


def start_all(topo: Any, supervisor: Any, seed: int = sites_mod.DEFAULT_SEED, timeout: float = 15.0,
              log: Callable[[str], None] = lambda msg: None) -> dict[str, Any]:
    """Start every server of the testbed under ``supervisor`` (the island's network must be up).
    Raises ServicesError naming the server (and its log tail) if one does not come up; the
    servers already started are then stopped."""
    run_dir = Path(supervisor.run_dir)
    t0 = time.monotonic()
    cfg = configure(run_dir, seed)
    log(f"services configured in {time.monotonic() - t0:.1f}s")
    web.ensure_web_addresses()
    write_client_resolv_conf(client_namespaces(topo))
    started = []
    try:
        for name in PROCESSES:
            spec = cfg["specs"][name]
            if supervisor.alive(name):
                supervisor.stop(name)
            supervisor.start(name, spec["ns"], spec["argv"], env=spec.get("env"), ready=None)
            started.append(name)
        deadline = time.monotonic() + timeout
        pending = list(PROCESSES)
        while pending:
            for name in list(pending):
                if not supervisor.alive(name):
                    raise ServicesError(f"{name} exited during start-up: {supervisor.log_tail(name)}")
                if _listening(cfg["specs"][name]["sockets"])(supervisor, name):
                    pending.remove(name)
            if pending:
                if time.monotonic() > deadline:
                    raise ServicesError(f"not listening after {timeout:.0f}s: " + "; ".join(
                        f"{n}: {supervisor.log_tail(n, 300)}" for n in pending))
                time.sleep(0.05)
    except Exception:
        for name in reversed(started):
            try:
                supervisor.stop(name)
            except Exception:
                pass
        raise
    desc = dict(cfg["description"])
    desc["started_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    desc["start_seconds"] = round(time.monotonic() - t0, 3)
    tmp = state_path(run_dir).with_suffix(".tmp")
    tmp.write_text(json.dumps(desc, indent=1))
    os.replace(tmp, state_path(run_dir))
    log(f"services up in {time.monotonic() - t0:.1f}s: {', '.join(PROCESSES)}")
    return desc


NETNS_ETC = Path("/etc/netns")


def client_namespaces(topo: Any) -> list[str]:
    """Client namespaces of the island (``topo`` is a testbed.topology.Island)."""
    nodes = getattr(topo, "nodes", None) or {}
    return sorted(ns for ns, n in nodes.items() if getattr(n, "role", None) == "client")


def write_client_resolv_conf(namespaces: list[str], etc: Path = NETNS_ETC) -> list[Path]:
    """``/etc/netns/<client ns>/resolv.conf`` naming the ISP resolver: what `ip netns exec`
    shows a client's programs as /etc/resolv.conf (the ISP's DHCP-given resolver), so the OS
    resolver of a client namespace is the testbed's ISP resolver."""
    out = []
    for ns in namespaces:
        if not ns.startswith(plan.PREFIX):
            continue
        d = Path(etc) / ns
        d.mkdir(parents=True, exist_ok=True)
        p = d / "resolv.conf"
        p.write_text(f"# dnscamp testbed: the ISP resolver (testbed/services)\nnameserver {plan.ISP_RESOLVER}\n"
                     "options timeout:2 attempts:2\n")
        out.append(p)
    return out


def remove_client_resolv_conf(namespaces: list[str], etc: Path = NETNS_ETC) -> None:
    for ns in namespaces:
        if not ns.startswith(plan.PREFIX):
            continue
        p = Path(etc) / ns / "resolv.conf"
        try:
            if p.read_text().startswith("# dnscamp testbed"):
                p.unlink()
                p.parent.rmdir()
        except OSError:
            pass


def stop_all(topo: Any, supervisor: Any) -> None:
    """Stop the servers (reverse start order). ``down`` also stops them via the supervisor."""
    remove_client_resolv_conf(client_namespaces(topo))
    errors = []
    for name in reversed(PROCESSES):
        try:
            supervisor.stop(name)
        except Exception as exc:
            errors.append(f"{name}: {exc}")
    try:
        state_path(Path(supervisor.run_dir)).unlink()
    except FileNotFoundError:
        pass
    if errors:
        raise ServicesError("; ".join(errors))


def flush_caches(run_dir: Path) -> list[str]:
    """Flush both resolvers' caches; returns the resolver keys flushed."""
    done = []
    for r in resolvers.RESOLVERS:
        conf = services_dir(run_dir) / f"unbound-{r.key}" / f"unbound-{r.key}.conf"
        if not conf.exists():
            raise ServicesError(f"no resolver config {conf}: is the testbed up (dnscamp testbed up)?")
        resolvers.flush(conf)
        done.append(r.key)
    return done
