"""What a page-load DNS mode and a browser can do is asked of the mode (dnsmode.MODES) and the
browser module (pageload.registry), never decided by comparing their names."""

import pytest

from vantage_agent.dns import registry as dns_registry
from vantage_agent.pageload import dnsmode, kind, registry
from vantage_agent.pageload.stub import Forwarder

pytestmark = pytest.mark.unit


def test_modes_are_the_system_resolver_and_one_per_transport_a_browser_load_can_use():
    assert dnsmode.TRANSPORTS == tuple(dnsmode.MODES) == ("system", "do53", "dot", "doh", "doq", "doh3")
    for name, m in dnsmode.MODES.items():
        assert m.name == name
        assert dnsmode.parse(f"{name}:192.0.2.1" if not m.uses_os_resolver else name).driver is m


def test_capabilities_of_each_mode():
    table = {n: (m.uses_os_resolver, m.via_stub, m.wire_transport) for n, m in dnsmode.MODES.items()}
    assert table == {
        "system": (True, False, "do53"),
        "do53": (False, False, "do53"),
        "dot": (False, False, "dot"),
        "doh": (False, False, "doh"),
        "doq": (False, True, "doq"),
        "doh3": (False, True, "doh3"),
    }


def test_the_stub_serves_exactly_the_transports_over_quic():
    stubbed = {n for n, m in dnsmode.MODES.items() if m.via_stub}
    assert stubbed == {t for t in dns_registry.names() if dns_registry.transport(t).quic}
    r = dnsmode.Resolver("192.0.2.1", 853)
    for t in ("do53", "dot", "doh", "do53-tcp", "nope"):
        with pytest.raises(ValueError, match=rf"stub transport must be one over QUIC \(doh3 or doq\), not '{t}'"):
            Forwarder(t, r, None)


def test_stub_forwards_over_http3_for_doh3_and_over_doq_otherwise():
    r = dnsmode.Resolver("192.0.2.1", 853, "r.example")
    doq, doh3 = Forwarder("doq", r, None), Forwarder("doh3", r, None)
    try:
        assert (doq.http, doh3.http) == (False, True)
        assert (doq.manager._h3, doh3.manager._h3) == (False, True)
    finally:
        doq.close()
        doh3.close()


def test_verify_asks_the_mode():
    stats = {"names": ["a.test"], "answered": ["a.test"], "queries": 2, "failures": 0, "errors": []}
    assert kind.verify(dnsmode.parse("doq:192.0.2.1"), ["a.test"], stats) == (
        True, "stub forwarded 2 queries over doq (1 page names answered)")
    assert kind.verify(dnsmode.parse("doq:192.0.2.1"), ["a.test"], None) == (None, "")
    assert kind.verify(dnsmode.parse("system"), ["a.test"], stats) == (
        None, "system resolver: no resolver-side evidence in the harness")
    assert kind.verify(dnsmode.parse("dot:192.0.2.1"), ["a.test"], None) == (
        None, "Stubby, DoT only, authentication required (check the frontend log)")


def test_mode_parse_errors_name_every_mode():
    for bad in ("system:isp", "do53", "dnscrypt:isp", ""):
        with pytest.raises(dnsmode.DnsModeError, match=r"use system, do53:R, dot:R, doh:R, doq:R or doh3:R; R = isp"):
            dnsmode.parse(bad)


def test_default_ports_of_a_mode_resolver_are_the_transports():
    for t in ("do53", "dot", "doh", "doq", "doh3"):
        assert dnsmode.parse(f"{t}:192.0.2.1").resolver.port == dns_registry.transport(t).default_port


def test_only_browsers_that_can_warm_an_origin_are_accepted_with_warm_origin():
    assert {b: registry.get(b).WARM_ORIGIN for b in registry.names()} == {"chromium": True, "firefox": False}
    ok = kind.PageLoadParams(urls=["https://a.test/"], browsers=["chromium"], warm_origin=[True])
    assert ok.warm_origin == [True]
    with pytest.raises(ValueError, match=r'warm_origin: only Chromium .* use browsers = \["chromium"\]'):
        kind.PageLoadParams(urls=["https://a.test/"], browsers=["firefox", "chromium"], warm_origin=[False, True])
