"""Island planning (pure): names, addresses, routes, links, state round trip; supervisor and
check statistics helpers."""

from __future__ import annotations

import ipaddress
import math

import pytest

from testbed import check, plan, topology
from testbed.profiles import load_profiles, select
from vantage_agent.stats import binomial_interval

pytestmark = pytest.mark.unit


@pytest.fixture()
def island():
    return topology.plan_island(select(["fiber", "4g", "none"]))


def test_namespaces_and_roles(island):
    ns = set(island.nodes)
    assert {plan.CORE_NS, plan.ISP_NS, plan.BACKBONE_LINK_NS, plan.PUBLIC_LINK_NS, plan.PUBRES_NS, plan.DNS_NS,
            plan.WEB_NS} <= ns
    for p in ("fiber", "4g", "none"):
        assert plan.CLIENT_NS.format(profile=p) in ns and plan.ACCESS_LINK_NS.format(profile=p) in ns
    assert all(n.startswith(plan.PREFIX) for n in ns)
    assert all(topology.ISLAND_NS_RE.match(n) for n in ns)
    assert island.nodes[plan.CORE_NS].parent is None


def test_tree_shape(island):
    assert island.ancestors("dc-client-fiber") == ["dc-la-fiber", "dc-isp", "dc-lb", "dc-core"]
    assert island.ancestors(plan.PUBRES_NS) == [plan.PUBLIC_LINK_NS, plan.CORE_NS]
    assert island.ancestors(plan.DNS_NS) == [plan.CORE_NS]


def test_addresses_unique_in_their_ranges(island):
    addrs = []
    for s in island.segments:
        net = ipaddress.ip_network(s.subnet)
        assert net.prefixlen == 30
        assert ipaddress.ip_address(s.child_addr) in net and ipaddress.ip_address(s.parent_addr) in net
        addrs += [s.child_addr, s.parent_addr]
    assert len(addrs) == len(set(addrs))
    clients = ipaddress.ip_network(plan.CLIENT_SUBNET)
    transit = ipaddress.ip_network(topology.TRANSIT_SUBNET)
    for i, p in enumerate(["fiber", "4g", "none"], start=1):
        a = ipaddress.ip_address(island.nodes[f"dc-client-{p}"].address)
        assert a in clients and str(a) == f"10.10.{i}.2"
        assert island.isp_side_address(p) == f"10.10.{i}.5"
    for s in island.segments:
        if not s.child_ns.startswith(("dc-client-", "dc-la-")):
            assert ipaddress.ip_network(s.subnet).subnet_of(transit)
    # transit never overlaps a plan range
    for r in (plan.CLIENT_SUBNET, plan.WEB_SUBNET, plan.PROBE_SUBNET, "10.53.0.0/16"):
        assert not transit.overlaps(ipaddress.ip_network(r))


def test_service_addresses_on_lo(island):
    assert island.nodes[plan.ISP_NS].lo == [f"{plan.ISP_RESOLVER}/32"]
    assert island.nodes[plan.PUBRES_NS].lo == [f"{plan.PUBLIC_RESOLVER}/32"]
    assert set(island.nodes[plan.DNS_NS].lo) == {f"{a}/32" for a in (plan.ROOT_SERVER, plan.TLD_SERVER,
                                                                       plan.SITES_AUTH_SERVER, plan.WHOAMI_AUTH_SERVER)}
    assert island.nodes[plan.WEB_NS].lo == ["10.80.0.1/16"]


def test_interface_names_fit(island):
    for s in island.segments:
        assert len(s.child_if) <= 15 and len(s.parent_if) <= 15
    per_ns: dict[str, list[str]] = {}
    for s in island.segments:
        per_ns.setdefault(s.child_ns, []).append(s.child_if)
        per_ns.setdefault(s.parent_ns, []).append(s.parent_if)
    for ns, ifs in per_ns.items():
        assert len(ifs) == len(set(ifs)), ns


def _lookup(routes, ns, dst):
    """Longest-prefix match in the planned routes of ``ns`` (connected segments included)."""
    best = None
    for r_ns, prefix, via in routes:
        if r_ns != ns:
            continue
        net = ipaddress.ip_network("0.0.0.0/0" if prefix == "default" else prefix)
        if ipaddress.ip_address(dst) in net and (best is None or net.prefixlen > best[0].prefixlen):
            best = (net, via)
    return best


def _forward(island, routes, src_ns, dst):
    """Follow the planned routes hop by hop; returns the namespace that owns ``dst``, or None."""
    owner = {}
    for s in island.segments:
        owner[s.child_addr] = s.child_ns
        owner[s.parent_addr] = s.parent_ns
    for n in island.nodes.values():
        for c in n.lo:
            owner[str(ipaddress.ip_interface(c).ip)] = n.ns
    ns = src_ns
    for _ in range(20):
        for s in island.segments:  # local?
            if dst in (s.child_addr if s.child_ns == ns else None, s.parent_addr if s.parent_ns == ns else None):
                return ns
        if any(ipaddress.ip_address(dst) in ipaddress.ip_interface(c).network for c in island.nodes[ns].lo):
            return ns
        # directly connected?
        nxt = None
        for s in island.segments:
            if ns in (s.child_ns, s.parent_ns) and ipaddress.ip_address(dst) in ipaddress.ip_network(s.subnet):
                nxt = s.parent_ns if s.child_ns == ns else s.child_ns
        if nxt is None:
            r = _lookup(routes, ns, dst)
            if r is None:
                return None
            nxt = owner[r[1]]
        ns = nxt
    return None


def test_routes_reach_every_service_from_every_node(island):
    routes = topology.all_routes(island)
    targets = {plan.ROOT_SERVER: plan.DNS_NS, plan.WHOAMI_AUTH_SERVER: plan.DNS_NS, plan.ISP_RESOLVER: plan.ISP_NS,
               plan.PUBLIC_RESOLVER: plan.PUBRES_NS, "10.80.9.9": plan.WEB_NS}
    for p in ("fiber", "4g", "none"):
        targets[island.nodes[f"dc-client-{p}"].address] = f"dc-client-{p}"
    for src in island.nodes:
        for dst, want in targets.items():
            assert _forward(island, routes, src, dst) == want, (src, dst)


def test_core_has_no_default_route(island):
    assert not any(ns == plan.CORE_NS and prefix == "default" for ns, prefix, _ in topology.all_routes(island))
    assert _forward(island, topology.all_routes(island), "dc-client-fiber", "192.0.2.1") is None


def test_links_and_profiles(island):
    la = island.access_link("fiber")
    assert la.ns == "dc-la-fiber" and la.emulated and la.if_a == "to-c" and la.if_b == "to-isp"
    assert la.a_to_b["delay_ms"] == pytest.approx(7.4) and la.a_to_b["rate_mbps"] == 109.1
    assert la.b_to_a["rate_mbps"] == 99.9
    assert not island.access_link("none").emulated  # plain forwarding, no emulator
    lb = island.link("lb")
    assert lb.emulated and lb.a_to_b["delay_ms"] == lb.b_to_a["delay_ms"] == topology.DEFAULT_BACKBONE_RTT_MS / 2
    lp = island.link("lp")
    assert lp.a_to_b["delay_ms"] == topology.DEFAULT_PUBLIC_RTT_MS / 2
    zero = topology.plan_island(select(["fiber"]), backbone_rtt_ms=0, public_rtt_ms=0)
    assert not zero.link("lb").emulated and not zero.link("lp").emulated


def test_attach_probe_node(island):
    prof = load_profiles()["dsl"]
    node = topology.attach_edge(island, "dc-probe-1", "probe", plan.ISP_NS, prof, "10.90.1.0/29",
                                link_ns="dc-lq-1", link_name="lq-1", node_tag="n", link_tag="lq0")
    assert node.address == "10.90.1.2" and island.ancestors("dc-probe-1")[:2] == ["dc-lq-1", plan.ISP_NS]
    assert island.link("lq-1").a_to_b["rate_mbps"] == 0.8
    routes = topology.all_routes(island)
    assert _forward(island, routes, "dc-client-4g", "10.90.1.2") == "dc-probe-1"
    assert _forward(island, routes, "dc-probe-1", plan.PUBLIC_RESOLVER) == plan.PUBRES_NS
    with pytest.raises(topology.TopologyError):
        topology.attach_edge(island, "dc-probe-1", "probe", plan.ISP_NS, prof, "10.90.2.0/29", link_ns="dc-lq-2",
                             link_name="lq-2", node_tag="n", link_tag="lq1")
    with pytest.raises(topology.TopologyError):
        topology.attach_edge(island, "dc-probe-2", "probe", plan.ISP_NS, prof, "10.90.2.0/30", link_ns="dc-lq-2",
                             link_name="lq-2", node_tag="n", link_tag="lq1")


def test_state_roundtrip(island, tmp_path):
    topology.write_state(tmp_path, island, "up", backend="nfqueue")
    st = topology.read_state(tmp_path)
    assert st["status"] == "up" and st["backend"] == "nfqueue" and st["owner"]
    again = topology.load_island(tmp_path)
    assert again.to_dict() == island.to_dict()
    assert topology.all_routes(again) == topology.all_routes(island)
    info = topology.info(tmp_path)
    assert info["clients"]["fiber"]["address"] == "10.10.1.2"
    assert not list(tmp_path.glob(".state*.tmp"))


def test_plan_rejects_bad_input():
    with pytest.raises(topology.TopologyError):
        topology.plan_island([])
    with pytest.raises(topology.TopologyError):
        topology.plan_island(select(["fiber"]), backbone_rtt_ms=-1)


def test_foreign_pid_namespaces_are_spared(monkeypatch):
    import os

    me = os.getpid()
    monkeypatch.setattr(topology.netns, "list_ns", lambda prefix="dc-": [
        "dc-client-fiber", "dc-isp", f"dc-lt-{me}-a", "dc-lt-999999999-a", "dc-other"])
    assert topology.island_namespaces() == ["dc-client-fiber", "dc-isp", "dc-lt-999999999-a", "dc-other"]


# -- check statistics ------------------------------------------------------------------------


def test_binomial_interval():
    assert check.binomial_interval is binomial_interval  # one definition (vantage_agent.stats)
    assert binomial_interval(10000, 0.0) == (0, 0)
    lo, hi = binomial_interval(10000, 0.01)
    # normal approximation: 100 +- 2.576 * sqrt(99) = [74.4, 125.6]; the exact one is a little
    # to the right (the binomial is skewed)
    assert (lo, hi) == (75, 127)
    lo, hi = binomial_interval(10000, 0.5)
    assert lo < 5000 < hi and math.isclose(5000 - lo, hi - 5000, abs_tol=2)


def test_loss_result_pass_flags():
    assert check.loss_result(0.0, 10000, 0)["passed"] is True
    assert check.loss_result(0.0, 10000, 1)["passed"] is False
    assert check.loss_result(0.01, 10000, 100)["passed"] is True
    assert check.loss_result(0.01, 10000, 200)["passed"] is False
    assert check.loss_result(0.01, 10000, 200, bursty=True)["passed"] is None


def test_expected_goodput_and_serialisation():
    assert check.expected_goodput(None) is None
    assert check.expected_goodput(100.0) == pytest.approx(100 * 1448 / 1538)
    assert check.serialization_ms(60, 1.0) == pytest.approx(98 * 8 / 1000)
    assert check.serialization_ms(60, None) == 0
    assert check.stream_pps(None) == check.MAX_PPS
    assert check.stream_pps(1.0) == int(0.3 * 1e6 / (98 * 8))


def test_percentile():
    assert check.percentile([], 50) is None
    assert check.percentile([1, 2, 3, 4], 50) == 2.5
    assert check.percentile(list(range(101)), 95) == 95


def test_link_check_body_validates():
    from vantage_agent.records.link_check import LinkCheckBody

    b = check._empty_body("fiber")
    assert LinkCheckBody.model_validate(b).profile == "fiber"
    with pytest.raises(Exception):
        LinkCheckBody.model_validate({**b, "bogus": 1})


def test_link_check_kind_without_testbed_is_a_record(tmp_path, monkeypatch):
    from vantage_agent.kind import RunContext, Unit
    from vantage_agent.records import Vantage

    monkeypatch.setenv("DNSCAMP_HOME", str(tmp_path))
    unit = Unit(id="u1", campaign="c", run="r", kind="link_check",
                vantage=Vantage(id="testbed", provider="testbed", network_profile="fiber"),
                target="access", repetition=0, params={}, seed=0)
    recs = list(check.KIND.run(unit, RunContext(spool_dir=tmp_path, artifacts_dir=tmp_path)))
    assert len(recs) == 1 and recs[0].status == "setup_error" and recs[0].error
    assert check.KIND.where == "host" and check.KIND.targets(check.LinkCheckParams()) == ["access"]


def test_rtt_tolerance_only_widens_for_jitter():
    ps = load_profiles()
    assert check.rtt_tolerance(ps["fiber"], 500) == check.RTT_TARGET_MS
    assert check.rtt_tolerance(ps["4g-www"], 500) == pytest.approx(0.2 + 2.576 * 1.0 / math.sqrt(500))
    assert check.rtt_tolerance(ps["3g"], 500) == pytest.approx(0.2 + 2.576 * 8.0 / math.sqrt(500))
