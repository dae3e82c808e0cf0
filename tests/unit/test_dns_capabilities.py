"""What each transport can do is an attribute of its driver, asked through the registry; the
records, the catalog and the open-loop runner take their per-transport differences from there."""

import pytest

from vantage_agent import errors
from vantage_agent.dns import catalog, load, registry, runner
from vantage_agent.dns._common import Capabilities, Endpoint, QueryOptions
from vantage_agent.dns.policy import Policy
from vantage_agent.dns.timing import DnsTiming

pytestmark = pytest.mark.unit

CAPABILITIES = ("default_port", "encrypted", "uses_url", "http", "chooses_http_version", "quic", "retransmits",
                "counts_wire")
# transport: (default_port, encrypted, uses_url, http, chooses_http_version, quic, retransmits, counts_wire)
EXPECTED = {
    "do53": (53, False, False, False, False, False, True, True),
    "do53-tcp": (53, False, False, False, False, False, False, True),
    "dot": (853, True, False, False, False, False, False, True),
    "doh": (443, True, True, True, True, False, False, True),
    "doh3": (443, True, True, True, False, True, False, False),
    "doq": (853, True, False, False, False, True, False, True),
}


def test_every_transport_states_every_capability():
    assert sorted(registry.names()) == sorted(EXPECTED)
    for name, want in EXPECTED.items():
        driver = registry.transport(name)
        assert issubclass(driver, Capabilities)
        assert driver.transport == name
        assert tuple(getattr(driver, c) for c in CAPABILITIES) == want, name


def test_the_transport_is_our_engines_driver_and_an_unknown_one_is_refused():
    assert registry.transport("dot") is registry.client_class("dot")
    with pytest.raises(registry.UnknownTransport, match="known: do53"):
        registry.transport("dnscrypt")


def test_every_driver_of_our_engine_runs_its_own_open_loop_and_getdns_has_none():
    for name in registry.names():
        assert callable(getattr(registry.transport(name), "open_loop", None)), name
    for name in registry.engine_transports("getdns"):
        assert getattr(registry.client_class(name, "getdns"), "open_loop", None) is None


def test_open_loop_refuses_a_driver_without_one():
    class Other:
        closed = False

        def close(self):
            self.closed = True

    with pytest.raises(errors.SetupError, match="needs a dnscamp engine driver, not Other"):
        load.run(Other(), ["a.test"], [0.0])


def test_open_loop_hands_the_schedule_to_the_driver_and_closes_it():
    class Driver:
        closed = False

        def open_loop(self, qnames, at, qtype, txid):
            assert not self.closed
            return [(q, t, qtype, txid()) for q, t in zip(qnames, at)]

        def close(self):
            self.closed = True

    d = Driver()
    out = load.run(d, ["a.test", "b.test"], [0.0, 0.5], qtype="AAAA", seed=1, start_ns=10)
    first = load.Txids(1)()
    assert out == [("a.test", 10, "AAAA", first), ("b.test", 500_000_010, "AAAA", (first + 1) & 0xFFFF)]
    assert d.closed


@pytest.mark.parametrize("transport", sorted(EXPECTED))
def test_the_record_takes_tls_name_url_method_and_attempts_from_the_capabilities(transport):
    can = registry.transport(transport)
    ep = Endpoint(registry.endpoint_key(transport), "192.0.2.1", can.default_port, tls_name="r.example",
                  url="https://r.example/dns-query", resolver="r")
    t = DnsTiming(transport=transport, address=ep.address, port=ep.port, qname="a.test", qtype="A",
                  policy="reuse", t_start=1, http_method="POST")
    b = runner.body(t, endpoint=ep, policy=Policy("reuse"), options=QueryOptions(attempts=3))
    assert b.tls_name == ("r.example" if transport not in ("do53", "do53-tcp") else None)
    assert b.url == ("https://r.example/dns-query" if transport in ("doh", "doh3") else None)
    assert b.http_method == ("POST" if transport in ("doh", "doh3") else None)
    assert b.max_attempts == (3 if transport == "do53" else 1)
    getdns = runner.body(t, endpoint=ep, policy=Policy("reuse"), options=QueryOptions(attempts=3), engine="getdns",
                         engine_version="getdns x")
    assert getdns.max_attempts == 1


def test_max_attempts_of_a_unit_that_never_started_is_one():
    assert runner.max_attempts(None, registry.DEFAULT_ENGINE, 4) == 1
    assert runner.max_attempts("do53", registry.DEFAULT_ENGINE, 4) == 4
    assert runner.max_attempts("do53", "getdns", 4) == 1


def test_catalog_endpoints_take_default_port_and_url_rule_from_the_capabilities():
    for key in catalog.TRANSPORT_KEYS:
        ep = catalog._endpoint("r", key, {"address": "192.0.2.1", "url": "https://r.example/dns-query"}, None)
        assert ep.port == EXPECTED[key][0]
    for key in ("doh", "doh3"):
        with pytest.raises(catalog.CatalogError, match=f"endpoint '{key}' needs a url"):
            catalog._endpoint("r", key, {"address": "192.0.2.1"}, None)
    assert catalog._endpoint("r", "doq", {"address": "192.0.2.1"}, None).url is None


def test_http_version_is_refused_for_transports_that_cannot_choose_it():
    from vantage_agent.dns.kind import DnsQueryParams

    assert DnsQueryParams(names=["a.test"], transports=["doh"], http_version="1.1").http_version == "1.1"
    with pytest.raises(ValueError, match=r'http_version applies to transport doh only: list transports = \["doh"\]'):
        DnsQueryParams(names=["a.test"], transports=["doh", "doh3"], http_version="1.1")
