"""The testbed island: namespaces, veths, addresses, static routes and emulated links.

::

    dc-client-<p> --[dc-la-<p>: access profile p]-- dc-isp --[dc-lb: backbone]-- dc-core
                                                                                   |-- dc-dns
                                                                                   |-- dc-web
                                                                                   `--[dc-lp]-- dc-pubres

The island is a tree rooted at ``dc-core``. Every node has a default route towards its
parent (core has none, so an address outside the island is unreachable, never forwarded);
every ancestor of a node has a static route to the node's prefixes (its loopback service
addresses and its uplink segment). A link namespace (``dc-la-*``, ``dc-lb``, ``dc-lp``) is a
router with two interfaces whose forwarded packets go through testbed/linkem.

The plan (names, addresses, routes) is computed by pure functions (``plan_island``,
``routes_for``) and unit-tested; ``build`` / ``teardown`` drive ``ip``. The running island is
described by ``<testbed_dir>/state.json``, written atomically at every step, so that
``teardown`` works from whatever a killed ``up`` left behind, or from nothing but the prefix.
"""

from __future__ import annotations

import fcntl
import importlib
import importlib.util
import ipaddress
import json
import os
import re
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator

from testbed import netns, plan
from testbed.profiles import Profile
from testbed.supervisor import Supervisor

STATE_VERSION = 1

# Transit /30s between routers and server namespaces (not a service range: nothing listens on
# them). Kept apart from every range of testbed/plan.py.
TRANSIT_SUBNET = "10.254.0.0/16"

# Backbone (dc-isp <-> dc-core) default: 10 ms round trip, i.e. ~1,000 km of fibre (5 us/km
# one way) between an access ISP and the regional hosting / IXP site of the servers. It keeps
# the ISP resolver strictly closer than every server, as on the Internet, while the access
# profile (14.8-150 ms) dominates the path. Set 0 to reproduce Kosek et al.'s setup, where the
# profile RTT was the whole client-server RTT.
DEFAULT_BACKBONE_RTT_MS = 10.0
# Public resolver: a further 20 ms round trip beyond the core (an anycast site farther away
# than the servers; the WWW'20 paper saw public resolvers tens of ms slower than the local one).
DEFAULT_PUBLIC_RTT_MS = 20.0

# Node roles whose namespaces make up the island (others with the prefix are left alone by
# `down` while their owner process is alive, e.g. linkem's selftest `dc-lt-<pid>-*`).
ISLAND_NS_RE = re.compile(r"^dc-(client|la|isp|lb|core|lp|pubres|dns|web|probe|lq|fleet)(-|$)")
FOREIGN_PID_NS_RE = re.compile(r"^dc-[a-z]+-(\d+)(-|$)")

LOCK_DIR = Path("/run/lock") if Path("/run/lock").is_dir() else Path("/tmp")


class TopologyError(RuntimeError):
    """The island could not be planned, built or torn down; the message says where."""


# --------------------------------------------------------------------------------------------
# model
# --------------------------------------------------------------------------------------------


@dataclass
class Segment:
    """One veth pair: ``child`` (away from core) -- ``parent`` (towards core), a /30."""

    subnet: str
    child_ns: str
    child_if: str
    child_addr: str
    parent_ns: str
    parent_if: str
    parent_addr: str


@dataclass
class Node:
    ns: str
    role: str  # client | link | isp | core | dns | web | pubres | probe | <custom>
    parent: str | None = None
    profile: str | None = None
    lo: list[str] = field(default_factory=list)  # CIDRs on lo (service addresses)
    address: str | None = None  # main address (uplink side)


@dataclass
class LinkSpec:
    name: str
    ns: str  # router namespace
    role: str  # access | backbone | public | probe
    if_a: str  # edge side (away from core)
    if_b: str  # core side
    a_to_b: dict[str, Any]
    b_to_a: dict[str, Any]
    profile: str | None = None
    emulated: bool = True  # False: plain forwarding (profile "none", 0 ms backbone)
    backend: str | None = None


@dataclass
class Island:
    profiles: list[str] = field(default_factory=list)
    backbone_rtt_ms: float = DEFAULT_BACKBONE_RTT_MS
    public_rtt_ms: float = DEFAULT_PUBLIC_RTT_MS
    nodes: dict[str, Node] = field(default_factory=dict)
    segments: list[Segment] = field(default_factory=list)
    links: list[LinkSpec] = field(default_factory=list)
    profile_defs: dict[str, dict[str, Any]] = field(default_factory=dict)
    transit_next: int = 0

    # -- queries ---------------------------------------------------------------------------------
    def uplink(self, ns: str) -> Segment | None:
        for s in self.segments:
            if s.child_ns == ns:
                return s
        return None

    def ancestors(self, ns: str) -> list[str]:
        out = []
        cur = self.nodes[ns].parent
        while cur is not None:
            out.append(cur)
            cur = self.nodes[cur].parent
        return out

    def client_ns(self, profile: str) -> str:
        return plan.CLIENT_NS.format(profile=profile)

    def link(self, name: str) -> LinkSpec:
        for spec in self.links:
            if spec.name == name:
                return spec
        raise KeyError(name)

    def access_link(self, profile: str) -> LinkSpec:
        return self.link(_access_link_name(profile))

    def isp_side_address(self, profile: str) -> str:
        """Address of dc-isp on the access link of ``profile`` (check endpoint)."""
        return self.uplink(plan.ACCESS_LINK_NS.format(profile=profile)).parent_addr

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Island":
        return cls(
            profiles=list(d.get("profiles", [])),
            backbone_rtt_ms=d.get("backbone_rtt_ms", DEFAULT_BACKBONE_RTT_MS),
            public_rtt_ms=d.get("public_rtt_ms", DEFAULT_PUBLIC_RTT_MS),
            nodes={k: Node(**v) for k, v in d.get("nodes", {}).items()},
            segments=[Segment(**s) for s in d.get("segments", [])],
            links=[LinkSpec(**lk) for lk in d.get("links", [])],
            profile_defs=dict(d.get("profile_defs", {})),
            transit_next=d.get("transit_next", 0),
        )


def _access_link_name(profile: str) -> str:
    return f"la-{profile}"


def _ifname(tag: str) -> str:
    return netns.check_ifname(f"to-{tag}")


# --------------------------------------------------------------------------------------------
# planning (pure)
# --------------------------------------------------------------------------------------------


def _transit(island: Island) -> tuple[str, str, str]:
    """Next transit /30: (subnet, first host, second host)."""
    net = ipaddress.ip_network(TRANSIT_SUBNET)
    k = island.transit_next
    island.transit_next += 1
    sub = ipaddress.ip_network((int(net.network_address) + 4 * k, 30))
    if not sub.subnet_of(net):
        raise TopologyError("transit address space exhausted")
    h = list(sub.hosts())
    return str(sub), str(h[0]), str(h[1])


def _add_segment(island: Island, child: str, child_tag: str, parent: str, parent_tag: str,
                 subnet: str | None = None) -> Segment:
    """Link ``child`` under ``parent``; ``subnet`` (a /30) defaults to the next transit one.
    In the /30 the parent gets the first host, the child the second."""
    if subnet is None:
        sub, a, b = _transit(island)
    else:
        n = ipaddress.ip_network(subnet)
        if n.prefixlen != 30:
            raise TopologyError(f"segment subnet {subnet} must be a /30")
        h = list(n.hosts())
        sub, a, b = str(n), str(h[0]), str(h[1])
    seg = Segment(subnet=sub, child_ns=child, child_if=_ifname(parent_tag), child_addr=b,
                  parent_ns=parent, parent_if=_ifname(child_tag), parent_addr=a)
    for s in island.segments:
        if s.parent_ns == parent and s.parent_if == seg.parent_if:
            raise TopologyError(f"interface name clash in {parent}: {seg.parent_if}")
    island.segments.append(seg)
    island.nodes[child].parent = parent
    if island.nodes[child].address is None:
        island.nodes[child].address = b
    return seg


def _delay_link(name: str, ns: str, role: str, rtt_ms: float, if_a: str, if_b: str) -> LinkSpec:
    half = {"delay_ms": rtt_ms / 2.0, "seed": 1}
    return LinkSpec(name=name, ns=ns, role=role, if_a=if_a, if_b=if_b, a_to_b=dict(half), b_to_a=dict(half),
                    emulated=rtt_ms > 0)


def attach_edge(island: Island, node_ns: str, role: str, parent_ns: str, profile: Profile, base: str,
                link_ns: str, link_name: str, node_tag: str, link_tag: str) -> Node:
    """Pure part of adding a client-like node: ``node_ns`` --[``link_ns``: ``profile``]-- ``parent_ns``.

    ``base`` is a /29 (or larger) network: its first /30 is node<->link (link .1, node .2), the
    second link<->parent (parent .5, link .6). The link's a side faces the node (a_to_b = up)."""
    if parent_ns not in island.nodes:
        raise TopologyError(f"parent namespace {parent_ns} is not part of the island")
    if node_ns in island.nodes or link_ns in island.nodes:
        raise TopologyError(f"{node_ns} or {link_ns} already exists in the island")
    net = ipaddress.ip_network(base)
    if net.prefixlen > 29:
        raise TopologyError(f"address range {base} too small (need a /29)")
    s_node = str(ipaddress.ip_network((int(net.network_address), 30)))
    s_link = str(ipaddress.ip_network((int(net.network_address) + 4, 30)))
    parent_tag = island.nodes[parent_ns].role if island.nodes[parent_ns].role in ("isp", "core") else parent_ns[3:]
    island.nodes[link_ns] = Node(ns=link_ns, role="link", profile=profile.name)
    island.nodes[node_ns] = Node(ns=node_ns, role=role, profile=profile.name)
    seg_up = _add_segment(island, link_ns, link_tag, parent_ns, parent_tag[:12], subnet=s_link)
    seg_dn = _add_segment(island, node_ns, node_tag, link_ns, link_tag, subnet=s_node)
    a_to_b, b_to_a = profile.link_config()
    island.links.append(LinkSpec(name=link_name, ns=link_ns, role="access" if role == "client" else role,
                                 if_a=seg_dn.parent_if, if_b=seg_up.child_if, a_to_b=a_to_b, b_to_a=b_to_a,
                                 profile=profile.name, emulated=not profile.is_null))
    island.profile_defs[profile.name] = profile.model_dump(mode="json")
    return island.nodes[node_ns]


def plan_island(profiles: list[Profile], backbone_rtt_ms: float = DEFAULT_BACKBONE_RTT_MS,
                public_rtt_ms: float = DEFAULT_PUBLIC_RTT_MS) -> Island:
    """The island for ``profiles`` (clients numbered 1.. in the given order: 10.10.<i>.0/24)."""
    if not profiles:
        raise TopologyError("at least one profile is needed")
    if len(profiles) > 250:
        raise TopologyError("at most 250 client profiles")
    if backbone_rtt_ms < 0 or public_rtt_ms < 0:
        raise TopologyError("link delays must be >= 0")
    isl = Island(profiles=[p.name for p in profiles], backbone_rtt_ms=backbone_rtt_ms, public_rtt_ms=public_rtt_ms)
    N = isl.nodes
    N[plan.CORE_NS] = Node(ns=plan.CORE_NS, role="core")
    # backbone: isp --[lb]-- core
    N[plan.BACKBONE_LINK_NS] = Node(ns=plan.BACKBONE_LINK_NS, role="link")
    N[plan.ISP_NS] = Node(ns=plan.ISP_NS, role="isp", lo=[f"{plan.ISP_RESOLVER}/32"])
    s1 = _add_segment(isl, plan.BACKBONE_LINK_NS, "lb", plan.CORE_NS, "core")
    s2 = _add_segment(isl, plan.ISP_NS, "isp", plan.BACKBONE_LINK_NS, "lb")
    isl.links.append(_delay_link("lb", plan.BACKBONE_LINK_NS, "backbone", backbone_rtt_ms, s2.parent_if, s1.child_if))
    # servers right at the core
    N[plan.DNS_NS] = Node(ns=plan.DNS_NS, role="dns", lo=[f"{a}/32" for a in (
        plan.ROOT_SERVER, plan.TLD_SERVER, plan.SITES_AUTH_SERVER, plan.WHOAMI_AUTH_SERVER)])
    _add_segment(isl, plan.DNS_NS, "dns", plan.CORE_NS, "core")
    web = ipaddress.ip_network(plan.WEB_SUBNET)
    N[plan.WEB_NS] = Node(ns=plan.WEB_NS, role="web", lo=[f"{web.network_address + 1}/{web.prefixlen}"])
    _add_segment(isl, plan.WEB_NS, "web", plan.CORE_NS, "core")
    # public resolver, further away: core --[lp]-- pubres
    N[plan.PUBLIC_LINK_NS] = Node(ns=plan.PUBLIC_LINK_NS, role="link")
    N[plan.PUBRES_NS] = Node(ns=plan.PUBRES_NS, role="pubres", lo=[f"{plan.PUBLIC_RESOLVER}/32"])
    s3 = _add_segment(isl, plan.PUBLIC_LINK_NS, "lp", plan.CORE_NS, "core")
    s4 = _add_segment(isl, plan.PUBRES_NS, "pub", plan.PUBLIC_LINK_NS, "lp")
    isl.links.append(_delay_link("lp", plan.PUBLIC_LINK_NS, "public", public_rtt_ms, s4.parent_if, s3.child_if))
    # clients
    cnet = ipaddress.ip_network(plan.CLIENT_SUBNET)
    for i, prof in enumerate(profiles, start=1):
        base = str(ipaddress.ip_network((int(cnet.network_address) + 256 * i, 24)))
        attach_edge(isl, plan.CLIENT_NS.format(profile=prof.name), "client", plan.ISP_NS, prof, base,
                    link_ns=plan.ACCESS_LINK_NS.format(profile=prof.name), link_name=_access_link_name(prof.name),
                    node_tag="c", link_tag=f"la{i}")
    return isl


def _prefix(cidr: str) -> str:
    return str(ipaddress.ip_interface(cidr).network)


def routes_for(island: Island, ns: str) -> list[tuple[str, str, str]]:
    """(namespace, prefix, via) routes that make ``ns`` reachable: its default route towards
    its parent, and on every ancestor a route to its loopback prefixes (and, beyond the first
    hop, to its uplink segment)."""
    node = island.nodes[ns]
    seg = island.uplink(ns)
    out: list[tuple[str, str, str]] = []
    if seg is None:
        return out
    out.append((ns, "default", seg.parent_addr))
    own_lo = [_prefix(c) for c in node.lo]
    path = [ns, *island.ancestors(ns)]
    for k in range(1, len(path)):
        anc = path[k]
        hop = island.uplink(path[k - 1])  # segment between path[k-1] and anc
        prefixes = list(own_lo) if k == 1 else [*own_lo, seg.subnet]
        for p in prefixes:
            out.append((anc, p, hop.child_addr))
    return out


def all_routes(island: Island) -> list[tuple[str, str, str]]:
    out = []
    for ns in island.nodes:
        out.extend(routes_for(island, ns))
    return out


# --------------------------------------------------------------------------------------------
# state file
# --------------------------------------------------------------------------------------------


def state_path(run_dir: Path) -> Path:
    return Path(run_dir) / "state.json"


def write_state(run_dir: Path, island: Island, status: str, **extra: Any) -> dict[str, Any]:
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    old = read_state(run_dir) or {}
    st = {
        "version": STATE_VERSION,
        "status": status,
        "owner": extra.pop("owner", old.get("owner") or owner_token()),
        "created_at": old.get("created_at") or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "updated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **{k: v for k, v in old.items() if k in ("backend", "services")},
        **extra,
        "island": island.to_dict(),
    }
    path = state_path(run_dir)
    tmp = path.with_name(f".state.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(st, indent=1))
    os.replace(tmp, path)
    return st


def read_state(run_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads(state_path(run_dir).read_text())
    except (OSError, ValueError):
        return None


def load_island(run_dir: Path) -> Island | None:
    st = read_state(run_dir)
    if not st or "island" not in st:
        return None
    return Island.from_dict(st["island"])


def owner_token() -> str:
    """Who started the testbed: $DNSCAMP_TESTBED_OWNER (the pytest fixture sets one per
    session) or the starting process."""
    return os.environ.get("DNSCAMP_TESTBED_OWNER") or f"pid:{os.getpid()}"


# --------------------------------------------------------------------------------------------
# lock (namespaces are machine-global: one up/down at a time)
# --------------------------------------------------------------------------------------------


@contextmanager
def ops_lock(timeout: float = 300.0) -> Iterator[None]:
    path = LOCK_DIR / "dnscamp-testbed-ops.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TopologyError(f"another testbed up/down holds {path} for more than {timeout:.0f}s")
                time.sleep(0.2)
        yield
    finally:
        os.close(fd)


# --------------------------------------------------------------------------------------------
# build / teardown (drive `ip`)
# --------------------------------------------------------------------------------------------


def _make_link(spec: LinkSpec, run_dir: Path):
    from testbed.linkem.driver import Link

    return Link(spec.name, spec.ns, spec.if_a, spec.if_b, spec.a_to_b, spec.b_to_a, Path(run_dir) / "links",
                backend=spec.backend)


def _create_nodes(island: Island, names: list[str]) -> None:
    for ns in names:
        netns.add_ns(ns)
    for seg in island.segments:
        if seg.child_ns in names:
            netns.add_veth(seg.child_ns, seg.child_if, seg.parent_ns, seg.parent_if)
            netns.configure_iface(seg.child_ns, seg.child_if, f"{seg.child_addr}/30")
            netns.configure_iface(seg.parent_ns, seg.parent_if, f"{seg.parent_addr}/30")
    for ns in names:
        for cidr in island.nodes[ns].lo:
            netns.add_lo_addr(ns, cidr)
    for ns in names:
        for r_ns, prefix, via in routes_for(island, ns):
            netns.add_route(r_ns, prefix, via)


def _start_links(island: Island, run_dir: Path, names: list[str] | None = None) -> str | None:
    backend = None
    for spec in island.links:
        if names is not None and spec.name not in names:
            continue
        if not spec.emulated:
            spec.backend = "none"
            continue
        link = _make_link(spec, run_dir)
        link.start()
        spec.backend = link.backend
        backend = link.backend
    return backend


def build(profiles: list[Profile], run_dir: Path, backbone_rtt_ms: float = DEFAULT_BACKBONE_RTT_MS,
          public_rtt_ms: float = DEFAULT_PUBLIC_RTT_MS, services: bool = True,
          log=lambda msg: None) -> dict[str, Any]:
    """Build the island (the caller tore down any previous one). Returns the final state."""
    run_dir = Path(run_dir)
    island = plan_island(profiles, backbone_rtt_ms, public_rtt_ms)
    write_state(run_dir, island, "building", owner=owner_token())
    t0 = time.monotonic()
    _create_nodes(island, list(island.nodes))
    log(f"namespaces, veths, addresses and routes: {len(island.nodes)} namespaces in {time.monotonic() - t0:.1f}s")
    write_state(run_dir, island, "links")
    backend = _start_links(island, run_dir)
    log(f"links started (backend {backend or 'none'})")
    st = write_state(run_dir, island, "network-ready", backend=backend or "none")
    if services:
        hook = services_hook()
        if hook is not None:
            log("starting services (testbed.services.start_all)")
            hook(island, Supervisor(run_dir))
            st = write_state(run_dir, island, "up", services="started")
        else:
            st = write_state(run_dir, island, "up", services="absent")
    else:
        st = write_state(run_dir, island, "up", services="skipped")
    return st


def services_hook():
    """``testbed.services.start_all`` if that module exists (the servers' hook)."""
    if importlib.util.find_spec("testbed.services") is None:
        return None
    mod = importlib.import_module("testbed.services")
    return getattr(mod, "start_all", None)


def add_edge_node(run_dir: Path, node_ns: str, parent_ns: str, profile: Profile, base: str,
                  role: str = "probe", link_ns: str | None = None) -> Node:
    """Add a client-like node behind its own emulated link to a running island.

    ``node_ns`` (e.g. ``dc-probe-3``) gets the address ``base``+2 and sits behind the router
    namespace ``link_ns`` (default ``dc-lq-<suffix>``) emulating ``profile``, attached to
    ``parent_ns`` (e.g. ``dc-isp`` or ``dc-core``). ``base`` is a /29 or larger network, from
    ``testbed.plan.PROBE_SUBNET`` for probes. Routes are added on every ancestor, so the node
    reaches (and is reached from) every other node. Recorded in state.json."""
    run_dir = Path(run_dir)
    netns.check_ns_name(node_ns)
    island = load_island(run_dir)
    if island is None:
        raise TopologyError(f"no running testbed in {run_dir} (dnscamp testbed up)")
    if role == "probe" and not ipaddress.ip_network(base).subnet_of(ipaddress.ip_network(plan.PROBE_SUBNET)):
        raise TopologyError(f"probe range {base} is outside {plan.PROBE_SUBNET}")
    suffix = node_ns[len(plan.PREFIX):].split("-", 1)[-1]
    link_ns = link_ns or f"{plan.PREFIX}lq-{suffix}"
    k = sum(1 for n in island.nodes.values() if n.role == "link")
    node = attach_edge(island, node_ns, role, parent_ns, profile, base, link_ns=link_ns,
                       link_name=f"lq-{suffix}", node_tag="n", link_tag=f"lq{k}")
    st = read_state(run_dir) or {}
    write_state(run_dir, island, st.get("status", "up"))
    _create_nodes(island, [link_ns, node_ns])
    _start_links(island, run_dir, names=[f"lq-{suffix}"])
    write_state(run_dir, island, st.get("status", "up"))
    return node


def remove_edge_node(run_dir: Path, node_ns: str) -> None:
    """Undo ``add_edge_node``: stop its link, delete the node and its link router (with the
    processes inside them) and the routes that led to them, and drop them from state.json.
    Idempotent: a node that is not (or no longer) part of the island is nothing to do."""
    run_dir = Path(run_dir)
    island = load_island(run_dir)
    if island is None or node_ns not in island.nodes:
        return
    link_ns = island.nodes[node_ns].parent
    gone = [node_ns, link_ns] if link_ns and island.nodes[link_ns].role == "link" else [node_ns]
    routes = [r for ns in gone for r in routes_for(island, ns) if r[0] not in gone]
    for spec in [lk for lk in island.links if lk.ns in gone]:
        if spec.emulated:
            _make_link(spec, run_dir).stop()
        island.links.remove(spec)
    for r_ns, prefix, via in routes:
        netns.run(["ip", "-n", r_ns, "route", "del", prefix, "via", via], check=False)
    for ns in gone:
        netns.del_ns(ns)
        island.nodes.pop(ns, None)
    # the parent's side of the veth vanished with the namespace; forget the segments
    island.segments = [sg for sg in island.segments if sg.child_ns not in gone]
    st = read_state(run_dir) or {}
    write_state(run_dir, island, st.get("status", "up"))


def add_service_address(run_dir: Path, ns: str, cidr: str) -> None:
    """Put ``cidr`` on ``ns``'s lo and route it from the whole island (recorded in state.json)."""
    island = load_island(run_dir)
    if island is None or ns not in island.nodes:
        raise TopologyError(f"{ns} is not part of the running testbed")
    node = island.nodes[ns]
    node.lo.append(cidr)
    netns.add_lo_addr(ns, cidr)
    seg = island.uplink(ns)
    if seg is not None:
        path = [ns, *island.ancestors(ns)]
        for k in range(1, len(path)):
            netns.add_route(path[k], _prefix(cidr), island.uplink(path[k - 1]).child_addr)
    st = read_state(run_dir) or {}
    write_state(run_dir, island, st.get("status", "up"))


def _pid_alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def island_namespaces() -> list[str]:
    """Every ``dc-`` namespace that `down` removes: the island's families, and any other
    ``dc-`` namespace except per-process ones (``dc-<word>-<pid>...``) whose process lives."""
    out = []
    for ns in netns.list_ns(plan.PREFIX):
        if ISLAND_NS_RE.match(ns):
            out.append(ns)
            continue
        m = FOREIGN_PID_NS_RE.match(ns)
        if m and _pid_alive(int(m.group(1))):
            continue  # someone else's live throwaway namespace (e.g. linkem's selftest)
        out.append(ns)
    return out


def _stop_link_files(run_dir: Path) -> None:
    """Stop linkem processes recorded under <run_dir>/links (state file or not)."""
    from testbed.netns import kill_pids

    links_dir = Path(run_dir) / "links"
    for pidf in sorted(links_dir.glob("*.pid")) if links_dir.is_dir() else []:
        try:
            pid = int(pidf.read_text().strip())
        except (OSError, ValueError):
            pidf.unlink(missing_ok=True)
            continue
        cfg = str(pidf.with_suffix(".json")).encode()
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            cmd = b""
        if cfg in cmd:
            kill_pids([pid])
        pidf.unlink(missing_ok=True)


def teardown(run_dir: Path, log=lambda msg: None) -> dict[str, Any]:
    """Remove the island: supervised processes, link emulators, every island namespace (with
    the processes inside it), then verify. Works with a partial or missing state file.
    Idempotent. Returns {"removed": [...], "left": [...]}."""
    run_dir = Path(run_dir)
    problems: list[str] = []
    sup = Supervisor(run_dir)
    try:
        sup.stop_all()
    except Exception as exc:  # keep tearing down; reported below
        problems.append(f"supervisor: {exc}")
    island = load_island(run_dir)
    if island is not None:
        for spec in island.links:
            if spec.emulated:
                try:
                    _make_link(spec, run_dir).stop()
                except Exception as exc:
                    problems.append(f"link {spec.name}: {exc}")
    _stop_link_files(run_dir)
    names = island_namespaces()
    if island is not None:
        names = sorted(set(names) | {ns for ns in island.nodes if netns.exists(ns)})
    removed = []
    for ns in names:
        try:
            netns.del_ns(ns)
            removed.append(ns)
        except netns.NetnsError as exc:
            problems.append(str(exc))
    left = [ns for ns in island_namespaces()]
    if left:
        problems.append(f"namespaces left: {', '.join(left)}")
    _remove_netns_etc(left)
    if not left:
        try:
            state_path(run_dir).unlink()
        except FileNotFoundError:
            pass
    if removed:
        log(f"removed {len(removed)} namespaces")
    return {"removed": removed, "left": left, "problems": problems}


def _remove_netns_etc(keep: list[str]) -> None:
    """The servers write /etc/netns/<client ns>/resolv.conf (what `ip netns exec` shows as
    /etc/resolv.conf); remove ours for every island namespace that is gone, also after a crash."""
    etc = Path("/etc/netns")
    if not etc.is_dir() or importlib.util.find_spec("testbed.services") is None:
        return
    from testbed.services import remove_client_resolv_conf

    gone = [p.name for p in etc.glob(f"{plan.PREFIX}*") if ISLAND_NS_RE.match(p.name) and p.name not in keep]
    remove_client_resolv_conf(gone)


def is_up(run_dir: Path) -> bool:
    st = read_state(run_dir)
    if not st or st.get("status") != "up":
        return False
    island = Island.from_dict(st["island"])
    return all(netns.exists(ns) for ns in island.nodes)


def link_alive(spec: LinkSpec, run_dir: Path) -> bool:
    if not spec.emulated:
        return netns.exists(spec.ns)
    if spec.backend == "netem":
        return netns.exists(spec.ns)
    pidf = Path(run_dir) / "links" / f"{spec.name}.pid"
    try:
        pid = int(pidf.read_text().strip())
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return False
    return str(pidf.with_suffix(".json")).encode() in cmd


def link_stats(spec: LinkSpec, run_dir: Path) -> dict[str, Any] | None:
    if not spec.emulated:
        return None
    try:
        return _make_link(spec, run_dir).stats()
    except Exception:
        return None


def info(run_dir: Path) -> dict[str, Any]:
    """The static description of the running island (`dnscamp testbed info --json`)."""
    st = read_state(run_dir)
    if not st:
        return {"up": False, "status": "down", "run_dir": str(run_dir)}
    island = Island.from_dict(st["island"])
    clients = {}
    for p in island.profiles:
        ns = island.client_ns(p)
        if ns in island.nodes:
            clients[p] = {"ns": ns, "address": island.nodes[ns].address,
                          "isp_side_address": island.isp_side_address(p),
                          "profile": island.profile_defs.get(p)}
    return {
        "up": st.get("status") == "up",
        "status": st.get("status"),
        "owner": st.get("owner"),
        "created_at": st.get("created_at"),
        "run_dir": str(run_dir),
        "backend": st.get("backend"),
        "services_hook": st.get("services"),
        "profiles": island.profiles,
        "backbone_rtt_ms": island.backbone_rtt_ms,
        "public_rtt_ms": island.public_rtt_ms,
        "clients": clients,
        "service_addresses": {
            "isp_resolver": plan.ISP_RESOLVER, "public_resolver": plan.PUBLIC_RESOLVER,
            "root": plan.ROOT_SERVER, "tld": plan.TLD_SERVER, "sites_auth": plan.SITES_AUTH_SERVER,
            "whoami_auth": plan.WHOAMI_AUTH_SERVER, "web_subnet": plan.WEB_SUBNET,
        },
        "nodes": [{"ns": n.ns, "role": n.role, "parent": n.parent, "profile": n.profile,
                   "address": n.address, "lo": n.lo} for n in island.nodes.values()],
        "links": [{"name": s.name, "ns": s.ns, "role": s.role, "profile": s.profile, "if_a": s.if_a,
                   "if_b": s.if_b, "emulated": s.emulated, "backend": s.backend,
                   "a_to_b": s.a_to_b, "b_to_a": s.b_to_a} for s in island.links],
        "segments": [asdict(s) for s in island.segments],
    }


def status(run_dir: Path) -> dict[str, Any]:
    """info + liveness: namespaces present, link emulators alive (with stats), supervised
    processes alive. ``healthy`` is false if anything recorded is missing or dead."""
    out = info(run_dir)
    present = netns.list_ns(plan.PREFIX)
    out["namespaces_present"] = [ns for ns in present if ISLAND_NS_RE.match(ns)]
    problems = []
    st = read_state(run_dir)
    if st:
        island = Island.from_dict(st["island"])
        for n in out["nodes"]:
            n["exists"] = netns.exists(n["ns"])
            if not n["exists"]:
                problems.append(f"namespace {n['ns']} missing")
        for lk in out["links"]:
            spec = island.link(lk["name"])
            lk["alive"] = link_alive(spec, run_dir)
            if not lk["alive"]:
                problems.append(f"link {spec.name} not running")
            stats = link_stats(spec, run_dir)
            if stats is not None:
                lk["stats"] = {d: {k: v for k, v in s.items() if k != "tc"}
                               for d, s in (stats.get("directions") or {}).items()}
    procs = Supervisor(run_dir).status()
    for p in procs:
        if not p["alive"]:
            problems.append(f"process {p['name']} (ns {p['ns']}) is dead")
    out["processes"] = procs
    out["problems"] = problems
    out["healthy"] = bool(st) and out["up"] and not problems
    return out


# --------------------------------------------------------------------------------------------
# session lease: a test session (tests/testbed/conftest.py) holds the island for its duration
# --------------------------------------------------------------------------------------------

SESSION_LOCK = LOCK_DIR / "dnscamp-testbed-session.lock"


def session_holder() -> str | None:
    """The owner token of the test session holding the island, or None if nobody holds it."""
    try:
        fd = os.open(SESSION_LOCK, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return (Path(SESSION_LOCK).read_text().strip() or "?")
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def check_not_leased() -> None:
    """Raise TopologyError if another test session holds the island."""
    holder = session_holder()
    if holder is not None and holder.split()[0] != owner_token():
        raise TopologyError(f"the testbed is in use by test session {holder} ({SESSION_LOCK}); wait for it to end")


@contextmanager
def session_lease(token: str, timeout: float = 1800.0, log=lambda m: None) -> Iterator[None]:
    """Hold the island for a test session (exclusive flock on SESSION_LOCK, waits up to ``timeout``)."""
    fd = os.open(SESSION_LOCK, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        deadline = time.monotonic() + timeout
        warned = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not warned:
                    log(f"waiting for the testbed lease held by {session_holder()}")
                    warned = True
                if time.monotonic() > deadline:
                    raise TopologyError(f"testbed lease {SESSION_LOCK} still held by {session_holder()} after {timeout:.0f}s")
                time.sleep(1.0)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{token} pid={os.getpid()}\n".encode(), 0)
        yield
    finally:
        try:
            os.ftruncate(fd, 0)
        except OSError:
            pass
        os.close(fd)
