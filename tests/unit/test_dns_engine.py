"""Pure parts of the DNS engine: policy (fake clock), result type, body model, catalog,
names, summaries, error translation, registry. No sockets."""

from __future__ import annotations

import json
import socket
import ssl

import dns.message
import dns.rdatatype
import dns.rrset
import pytest
from pydantic import ValidationError

from vantage_agent import errors
from vantage_agent.dns import _common as c
from vantage_agent.dns import catalog, names, registry, runner
from vantage_agent.dns.kind import KIND, DnsQueryParams
from vantage_agent.dns.policy import Policy
from vantage_agent.dns.timing import DnsTiming, WireCount
from vantage_agent.records import BODIES, parse_record
from vantage_agent.records.dns_query import DnsQueryBody

pytestmark = pytest.mark.unit
S = 1_000_000_000


# -- policy ------------------------------------------------------------------------------------
def test_policy_idle_timeout_with_fake_clock():
    p = Policy("reuse")
    assert p.idle_timeout_s == 10.0  # Stubby default, 002 §3.1.2
    assert p.may_reuse(0, 9 * S)
    assert not p.may_reuse(0, 10 * S)
    assert not p.may_reuse(None, 1)
    assert not Policy("fresh").may_reuse(0, 1)
    assert not Policy("resume").may_reuse(0, 1) and Policy("resume").resumes
    assert Policy("reuse", 0.5).may_reuse(0, S // 4) and not Policy("reuse", 0.5).may_reuse(0, S)


def test_policy_rejects_unknown():
    with pytest.raises(ValueError, match="known: fresh, reuse, resume"):
        Policy("sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Policy("reuse", 0)


def test_query_options_defaults_are_resolv_conf():
    o = c.QueryOptions()
    assert (o.timeout_s, o.attempts) == (5.0, 2)  # 004 §2
    assert o.doh_method is None  # the transport's default, next test
    with pytest.raises(ValueError):
        c.QueryOptions(attempts=0)


def test_doh_default_method_per_transport():
    # doh: POST as 002 §3.1.2; doh3: GET, so that libcurl/ngtcp2 do not pace the body behind the
    # handshake (doh3.py)
    from vantage_agent.dns import doh, doh3

    assert (doh.Client.default_method, doh3.Client.default_method) == ("POST", "GET")
    with pytest.raises(ValueError):
        c.QueryOptions(doh_method="PUT")


# -- result type and body ------------------------------------------------------------------------
def _timing(**kw):
    base = dict(transport="dot", address="10.53.1.1", port=853, qname="a.test.", qtype="A", policy="fresh",
                t_start=100, t_connected=200, t_tls_done=300, t_query_sent=310, t_response=400,
                tls_version="TLSv1.3", alpn="dot", rcode="NOERROR", answers=("a.test. A 192.0.2.1",),
                handshake=WireCount(500, 1500, 5, 4), query=WireCount(60, 80, 1, 1), wire_basis="tcp_info",
                timeout_s=5.0)
    base.update(kw)
    return DnsTiming(**base)


def test_timing_is_frozen_and_derives_durations():
    t = _timing()
    with pytest.raises(Exception):
        t.t_start = 1  # type: ignore[misc]
    assert t.exchange_ns() == 90 and t.total_ns() == 300 and t.ok
    assert _timing(t_response=None).total_ns() is None
    assert WireCount(1, 2, 3, 4) + WireCount(1, 1, 1, 1) - WireCount(2, 3, 4, 5) == WireCount(0, 0, 0, 0)


def test_body_from_timing_validates_and_registers():
    assert BODIES["dns_query"] is DnsQueryBody
    ep = c.Endpoint("dot", "10.53.1.1", 853, tls_name="isp-resolver.test", resolver="testbed-isp")
    b = runner.body(_timing(), endpoint=ep, policy=Policy("fresh"), options=c.QueryOptions(), sequence=3, access_rtt_ms=14.8)
    assert b.handshake_bytes_received == 1500 and b.query_packets_sent == 1
    assert b.max_attempts == 1 and b.tls_name == "isp-resolver.test" and b.url is None
    rec = {"schema": "dnscamp.result/1", "kind": "dns_query", "id": "00000000-0000-4000-8000-000000000001",
           "campaign": "c", "run": "r", "vantage": {"id": "v", "provider": "testbed"},
           "started_at": "2026-01-01T00:00:00Z", "status": "ok", "body": b.model_dump(mode="json")}
    _, body = parse_record(json.loads(json.dumps(rec)))
    assert body == b


@pytest.mark.parametrize(
    "change,msg",
    [
        ({"t_response": 300, "t_query_sent": 310}, "before t_query_sent"),
        ({"t_connected": 50}, "before t_start"),
        ({"connection_reused": True}, "reused connection"),
        ({"attempts": 3}, "max_attempts"),
        ({"transport": "dnscrypt"}, "transport"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_body_rejects_inconsistent_phases(change, msg):
    d = dict(transport="dot", address="a", port=853, qname="a.", policy="fresh", idle_timeout_s=10, timeout_s=5,
             max_attempts=1, attempts=1, t_start=100, t_connected=200, t_tls_done=300, t_query_sent=310,
             t_response=400, connection_reused=False, wire_basis="tcp_info")
    d.update(change)
    with pytest.raises(ValidationError, match=msg):
        DnsQueryBody(**d)


# -- DNS messages and error translation -----------------------------------------------------------
def _resp(q, rcode=0, tc=False, answers=()):
    r = dns.message.make_response(dns.message.from_wire(q.to_wire()))
    for a in answers:
        r.answer.append(dns.rrset.from_text(*a))
    r.set_rcode(rcode)
    if tc:
        r.flags |= 0x0200
    return r.to_wire()


def test_parse_response_and_rcodes():
    q = c.make_query("a.test.", "A", txid=0)
    assert q.id == 0 and q.to_wire()[2:4] == b"\x01\x00"  # RD
    p = c.parse_response(_resp(q, 3), q)
    assert p.rcode == "NXDOMAIN" and c.rcode_error(p) is None  # NXDOMAIN is an answer
    assert isinstance(c.rcode_error(c.parse_response(_resp(q, 5), q)), errors.Refused)
    assert isinstance(c.rcode_error(c.parse_response(_resp(q, 2), q)), errors.Servfail)
    assert c.parse_response(_resp(q, tc=True), q).truncated


def test_query_wire_matches_dnspython():
    q = c.make_query("Www.Example.test.", "AAAA", txid=0x1234, edns_payload=1232)
    ref = dns.message.make_query("Www.Example.test.", "AAAA", use_edns=0, payload=1232)
    ref.id = 0x1234
    assert q.to_wire() == ref.to_wire()


@pytest.mark.parametrize("answers", [
    (("a.test.", 60, "IN", "A", "192.0.2.1", "192.0.2.2"),),
    (("a.test.", 60, "IN", "CNAME", "b.test."), ("b.test.", 60, "IN", "AAAA", "2001:db8::1")),
    (("a.test.", 60, "IN", "TXT", '"hello world"'),),  # slow path
    (("a.test.", 60, "IN", "MX", "10 mx.a.test."),),  # slow path
])
def test_fast_and_slow_parse_agree(answers):
    q = c.make_query("a.test.", "A", txid=7)
    wire = _resp(q, answers=answers)
    got = c.parse_response(wire, q)
    r = dns.message.from_wire(wire)
    ref = tuple(f"{rr.name} {dns.rdatatype.to_text(rr.rdtype)} {rd.to_text()}" for rr in r.answer for rd in rr)
    assert got.answers == ref and got.rcode == "NOERROR"
    with pytest.raises(errors.MalformedResponse):
        c.parse_response(wire + b"junk", q)
    with pytest.raises(errors.MalformedResponse):
        c.parse_response(wire[:-3], q)


@pytest.mark.parametrize("wire", [b"", b"\x00\x00garbage", b"\x00" * 12])
def test_malformed(wire):
    q = c.make_query("a.test.", "A", txid=0)
    with pytest.raises(errors.MalformedResponse):
        c.parse_response(wire, q)


def test_wrong_id_is_malformed():
    q = c.make_query("a.test.", "A", txid=1)
    other = c.make_query("a.test.", "A", txid=2)
    with pytest.raises(errors.MalformedResponse, match="does not match"):
        c.parse_response(_resp(other), q)


def test_classify_translates_library_errors():
    cert = ssl.SSLCertVerificationError(1, "x")
    cert.verify_message = "unable to get local issuer certificate"
    e = c.classify(cert, "tls_handshake")
    assert e.status == "tls_error" and "unable to get local issuer certificate" in e.message
    assert c.classify(socket.timeout(), "connect").status == "timeout"
    assert c.classify(ConnectionRefusedError(), "connect").status == "connect_error"
    assert c.classify(OSError(101, "Network is unreachable"), "connect").status == "unreachable"
    assert c.classify(errors.Servfail("x"), "q").status == "servfail"
    assert c.classify(RuntimeError("boom"), "q").status == "other"


# -- registry, catalog, names ---------------------------------------------------------------------------
def test_registry_has_every_transport_with_one_signature():
    assert registry.names() == ["do53", "do53-tcp", "dot", "doh", "doh3", "doq"]
    for t in registry.names():
        cls = registry.client_class(t)
        assert cls.transport == t and callable(cls.query) and callable(cls.close)
    with pytest.raises(registry.UnknownTransport, match="known: do53"):
        registry.client_class("dnscrypt")


def test_catalog_public_resolvers_with_sources():
    cat = catalog.Catalog.load(testbed=False)
    for name in ("cloudflare", "google", "quad9"):
        r = cat.resolver(name)
        assert r.sources and {"do53", "dot", "doh"} <= set(r.endpoints)
        assert r.endpoint("doh").url.startswith("https://")
    assert cat.endpoint("quad9", "doq").port == 853
    assert cat.endpoint("google", "do53-tcp").port == 53
    with pytest.raises(catalog.CatalogError, match=r"unknown resolver 'x' \(known: adguard, cloudflare, google"):
        cat.resolver("x")
    with pytest.raises(catalog.CatalogError, match="offers no doq endpoint"):
        cat.endpoint("cloudflare", "doq")


def test_catalog_resolv_conf_and_testbed(tmp_path):
    rc = tmp_path / "resolv.conf"
    rc.write_text("# comment\nsearch example\nnameserver 192.0.2.53\nnameserver 192.0.2.54\noptions timeout:5\n")
    info = {"resolvers": [{"name": "testbed-isp", "endpoints": {
        "do53": {"address": "10.53.1.1", "port": 53},
        "dot": {"address": "10.53.1.1", "port": 853, "tls_name": "isp-resolver.test"},
        "doh": {"url": "https://isp-resolver.test/dns-query", "address": "10.53.1.1", "port": 443, "tls_name": "isp-resolver.test"}}}],
        "ca_file": "/tb/ca.pem"}
    cat = catalog.Catalog.load(testbed=info, resolv_conf=rc)
    assert cat.endpoint("local", "do53").address == "192.0.2.53"
    ep = cat.endpoint("testbed-isp", "doh")
    assert ep.ca_file == "/tb/ca.pem" and ep.resolver == "testbed-isp"
    with pytest.raises(catalog.CatalogError, match="needs a url"):
        catalog.testbed_resolvers({"resolvers": [{"name": "b", "endpoints": {"doh": {"address": "1.2.3.4"}}}]})


def test_catalog_reads_what_the_testbed_describes(tmp_path):
    """The producer's own description (testbed.services), not a hand-typed copy: every
    endpoint the testbed plans reaches the agent's catalog unchanged."""
    from testbed.services import frontends, resolvers, resolvers_description

    desc = {"services": {"resolvers": resolvers_description(tmp_path), "ca_file": "/tb/ca.pem"}}
    cat = catalog.Catalog.load(testbed=desc, resolv_conf=tmp_path / "absent")
    assert resolvers.RESOLVERS
    for r in resolvers.RESOLVERS:
        planned = frontends.endpoints(r)
        for transport, want in planned["endpoints"].items():
            if transport not in catalog.TRANSPORT_KEYS:
                continue
            ep = cat.endpoint(planned["name"], transport)
            assert (ep.address, ep.port) == (want["address"], want["port"]), (r.key, transport)
            assert ep.tls_name == want.get("tls_name") or transport.startswith("do53"), (r.key, transport)
            if transport.startswith("doh"):
                assert ep.url == want["url"] and ep.ca_file == "/tb/ca.pem"


def test_names_from_text_and_har(tmp_path):
    f = tmp_path / "n.txt"
    f.write_text("# top sites\nExample.com\nexample.com.\n\nwww.site1.test  # comment\n")
    assert names.from_file(f) == ["example.com.", "www.site1.test."]
    har = {"log": {"entries": [{"request": {"url": u}} for u in (
        "https://www.site1.test/", "https://cdn.site1.test/a.js", "https://www.site1.test/b.css",
        "http://10.80.0.1/x", "https://cdn.site1.test:8443/c")]}}
    h = tmp_path / "p.har"
    h.write_text(json.dumps(har))
    assert names.from_file(h) == ["www.site1.test.", "cdn.site1.test."]
    with pytest.raises(names.NamesError, match="not a HAR"):
        names.from_har({"x": 1})
    with pytest.raises(names.NamesError, match="not a DNS name"):
        names.normalize("a" * 64 + ".test")


def test_plan_shuffles_reproducibly():
    a = runner.plan(["a.", "b.", "c.", "d."], 3, seed=1)
    assert a == runner.plan(["a.", "b.", "c.", "d."], 3, seed=1) and len(a) == 12
    assert sorted(a[:4]) == ["a.", "b.", "c.", "d."]
    assert runner.plan(["a.", "b."], 2) == ["a.", "b.", "a.", "b."]


def test_summary_percentiles_and_rtt_multiple():
    ts = [_timing(t_start=0, t_response=ms * 1_000_000, t_query_sent=0, t_connected=None, t_tls_done=None) for ms in (10, 20, 30, 40, 50)]
    ts.append(_timing(status="timeout", error="timed out", t_response=None))
    s = runner.summarize(ts, access_rtt_ms=10.0)
    assert (s.n, s.ok, s.p50_ms, s.rtt_multiple_p50) == (6, 5, 30.0, 3.0)
    assert s.p90_ms == pytest.approx(46.0) and s.errors == {"timeout": 1}
    j = runner.summarize([], None).to_json()
    assert j["n"] == 0 and j["p50_ms"] is None


def test_access_rtt_from_testbed_info():
    info = {"clients": {"fiber": {"ns": "dc-client-fiber", "profile": {"up": {"delay_ms": 7.4}, "down": {"delay_ms": 7.4}}},
                        "none": {"profile": {"up": {"delay_ms": 0}, "down": {"delay_ms": 0}}}}}
    assert runner.access_rtt_ms(info, "fiber") == pytest.approx(14.8)
    assert runner.access_rtt_ms(info, "none") is None
    assert runner.access_rtt_ms(info, "4g") is None and runner.access_rtt_ms(None, "fiber") is None


def test_kind_params():
    assert KIND.name == "dns_query" and KIND.where == "client"
    p = DnsQueryParams(names=["www.site1.test"])
    assert p.names == ["www.site1.test."] and p.policy == "reuse" and p.timeout_s == 5.0 and p.attempts == 2
    assert len(KIND.targets(p)) == 5
    with pytest.raises(ValidationError, match="unknown transport"):
        DnsQueryParams(names=["a.test"], transports=["dox"])
    with pytest.raises(ValidationError, match="names"):
        DnsQueryParams()
    with pytest.raises(ValidationError):
        DnsQueryParams(names=["a.test"], colour="red")


def test_doq_client_hello_offers_one_key_share():
    """Real QUIC clients send one key share; aioquic's default generates four."""
    from aioquic.quic.configuration import QuicConfiguration

    from vantage_agent.dns.doq import _OneKeyShareConnection

    quic = _OneKeyShareConnection(configuration=QuicConfiguration(is_client=True, alpn_protocols=["doq"], server_name="x.test"))
    quic.connect(("127.0.0.1", 853), now=0.0)
    assert quic.datagrams_to_send(now=0.0), "no Initial built"
    assert quic.tls._x25519_private_key is not None
    assert quic.tls._x448_private_key is None and quic.tls._ec_private_keys == []


def test_netdev_counts_and_udp_payload(monkeypatch):
    import builtins
    import io

    text = (b"Inter-|   Receive                                                |  Transmit\n"
            b" face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n"
            b"    lo:    9000      90    0    0    0     0          0         0     9000      90    0    0    0     0       0          0\n"
            b"  eth0:    1542       3    0    0    0     0          0         0     2500       2    0    0    0     0       0          0\n")
    real_open = builtins.open
    monkeypatch.setattr(builtins, "open", lambda p, *a, **k: io.BytesIO(text) if p == "/proc/net/dev" else real_open(p, *a, **k))
    frames = c.netdev_counts()
    assert frames == WireCount(2500, 1542, 2, 3)  # loopback left out
    assert c.udp_payload(frames, socket.AF_INET) == WireCount(2500 - 2 * 42, 1542 - 3 * 42, 2, 3)
    assert c.udp_payload(frames, socket.AF_INET6).bytes_sent == 2500 - 2 * 62
    monkeypatch.setenv("DNSCAMP_NETNS", "dc-client-fiber")
    assert c.owns_testbed_namespace()
    monkeypatch.setenv("DNSCAMP_NETNS", "")
    assert not c.owns_testbed_namespace()


# -- invalid names are bad_input before any I/O ------------------------------
_BAD_NAMES = {
    "64-byte label": "a" * 64 + ".test.",
    "empty label": "a..b.",
    "256-byte name": ".".join(["a" * 63] * 3 + ["a" * 62]) + ".",  # wire: 3*64 + 63 + 1 = 256 > 255
}


@pytest.mark.parametrize("name", _BAD_NAMES.values(), ids=_BAD_NAMES.keys())
def test_invalid_name_is_bad_input_in_the_builder(name):
    with pytest.raises(errors.BadInput, match="not a DNS name"):
        c.make_query(name, "A")


@pytest.mark.parametrize("transport", list(registry.TRANSPORTS))
@pytest.mark.parametrize("name", _BAD_NAMES.values(), ids=_BAD_NAMES.keys())
def test_invalid_name_is_a_bad_input_record_and_nothing_is_sent(monkeypatch, transport, name):
    from vantage_agent.dns import doh

    def no_io(*a, **k):
        raise AssertionError("a socket / curl handle was made for an invalid name")

    monkeypatch.setattr(socket, "socket", no_io)
    monkeypatch.setattr(doh.Client, "_new_handle", no_io)
    ep = c.Endpoint(transport=registry.endpoint_key(transport), address="192.0.2.1", port=853, tls_name="x.test",
                    url="https://x.test/dns-query", resolver="fake")
    policy, options = Policy("reuse"), c.QueryOptions(timeout_s=0.5)
    client = registry.client(transport, ep, policy, options)
    try:
        t = client.query(name, "A")
    finally:
        client.close()
    assert t.status == errors.BadInput.status == "bad_input" and "not a DNS name" in t.error
    assert t.t_query_sent is None and t.attempts == 0 and t.qname == name
    body = runner.body(t, endpoint=ep, policy=policy, options=options)  # a valid record body
    assert body.qname == name and body.attempts == 0 and body.timeout_s == 0.5


@pytest.mark.parametrize("name", [
    "www.Example.test.", "a" * 63 + ".test.",
    ".".join(["a" * 63] * 3 + ["a" * 61]) + ".",  # 255 bytes on the wire: the longest name
    "bücher.example.", "_dns.resolver.arpa.", ".",
])
def test_valid_name_wire_equals_dnspython_question(name):
    q = c.make_query(name, "A", txid=0)
    ref = dns.message.make_query(name, "A", use_edns=0, payload=1232)
    ref.id = 0
    assert q.to_wire() == ref.to_wire()
    question = ref.to_wire()[12 : 12 + len(q.qname_wire) + 4]
    assert q.to_wire()[12 : 12 + len(question)] == question


def test_unknown_qtype_is_bad_input():
    with pytest.raises(errors.BadInput, match="query type"):
        c.make_query("a.test.", "NOSUCHTYPE")


# -- a unit that cannot start records what was asked, not placeholders ---------
def _unit(target, params):
    from vantage_agent.kind import Unit
    from vantage_agent.records import Vantage

    return Unit(id="u1", campaign="c", run="r", kind="dns_query", vantage=Vantage(id="v", provider="local"),
                target=target, repetition=0, params=params, seed=1)


def _ctx(tmp_path):
    from vantage_agent.kind import RunContext

    return RunContext(spool_dir=tmp_path, artifacts_dir=tmp_path)


def test_setup_failure_record_carries_the_asked_parameters(tmp_path):
    params = DnsQueryParams(resolvers=["nosuch"], transports=["do53"], policy="resume", idle_timeout_s=7.0,
                            names=["one.example.test"], qtype="AAAA", timeout_s=2.5, attempts=3).model_dump()
    (rec,) = KIND.run(_unit("nosuch/do53", params), _ctx(tmp_path))
    assert rec.status == "setup_error" and "nosuch" in rec.error
    b = DnsQueryBody.model_validate(rec.body)  # strict model
    assert (b.policy, b.qname, b.qtype, b.timeout_s, b.idle_timeout_s, b.max_attempts) == (
        "resume", "one.example.test.", "AAAA", 2.5, 7.0, 3)
    assert (b.resolver, b.transport) == ("nosuch", "do53")
    assert b.address is None and b.port is None and b.t_start is None and b.connection_reused is None
    assert b.attempts == 0 and b.wire_basis == "unavailable"
    assert parse_record(json.loads(rec.to_json()))[1] == b  # and as a line at ingest


def test_setup_failure_of_a_several_name_unit_has_no_qname(tmp_path):
    params = DnsQueryParams(resolvers=["nosuch"], transports=["dot"], policy="fresh", names=["a.test", "b.test"]).model_dump()
    (rec,) = KIND.run(_unit("nosuch/dot", params), _ctx(tmp_path))
    b = DnsQueryBody.model_validate(rec.body)
    assert b.qname is None and b.policy == "fresh" and b.max_attempts == 1 and b.address is None


def test_setup_failure_with_invalid_params_records_nulls(tmp_path):
    (rec,) = KIND.run(_unit("nosuch/dox", {"names": ["a.test"], "policy": "sometimes"}), _ctx(tmp_path))
    b = DnsQueryBody.model_validate(rec.body)
    assert rec.status == "setup_error"
    assert (b.transport, b.policy, b.timeout_s, b.qname, b.qtype, b.address) == (None, None, None, None, None, None)


# -- engines and the CLI's summary from records (§4) ---------------------------------
def test_body_records_the_engine():
    ep = c.Endpoint("do53", "10.53.1.1", 53, resolver="testbed-isp")
    ours = runner.body(_timing(transport="do53", t_connected=None, t_tls_done=None, handshake=None, attempts=2),
                       endpoint=ep, policy=Policy("fresh"), options=c.QueryOptions())
    assert ours.engine == "dnscamp" and ours.engine_version == registry.dnscamp_version() and ours.engine_run_time_ms is None
    assert ours.max_attempts == 2
    g = runner.body(_timing(transport="do53", t_connected=None, t_tls_done=None, handshake=None,
                            details=(("engine_run_time_ms", 12),)),
                    endpoint=ep, policy=Policy("fresh"), options=c.QueryOptions(), engine="getdns",
                    engine_version="getdns-python v1.0.0b; libgetdns 1.6.0")
    assert (g.engine, g.engine_run_time_ms, g.max_attempts) == ("getdns", 12, 1)  # one getdns call, no retry count
    with pytest.raises(ValidationError):
        DnsQueryBody.model_validate({**g.model_dump(), "engine": "bind"})


def test_registry_engines():
    assert registry.ENGINES == ("dnscamp", "getdns")
    assert registry.engine_transports("getdns") == ["do53", "dot"]
    assert registry.engine_transports("dnscamp") == registry.names()
    registry.check_engine("getdns", ["dot", "do53"])
    with pytest.raises(registry.UnsupportedEngine, match=r"transport\(s\) doq, doh"):
        registry.check_engine("getdns", ["doq", "dot", "doh"])


def test_summary_from_records_equals_summary_from_timings():
    from vantage_agent.kind import Unit, make_record, utcnow
    from vantage_agent.records import Vantage

    ts = [_timing(t_start=0, t_response=ms * 1_000_000, t_query_sent=0, t_connected=None, t_tls_done=None) for ms in (10, 20, 30)]
    ts.append(_timing(status="timeout", error="timed out", t_response=None, t_connected=None, t_tls_done=None, t_query_sent=None))
    ep = c.Endpoint("dot", "10.53.1.1", 853, tls_name="isp-resolver.test", resolver="testbed-isp")
    unit = Unit(id="u", campaign="c", run="r", kind="dns_query", vantage=Vantage(id="v", provider="local"),
                target="testbed-isp/dot", repetition=0, params={}, seed=0)
    recs = [make_record(unit, started_at=utcnow(), status=t.status, error=t.error,
                        body=runner.body(t, endpoint=ep, policy=Policy("fresh"), options=c.QueryOptions(), access_rtt_ms=10.0))
            for t in ts]
    assert runner.summarize_records(recs) == runner.summarize(ts, access_rtt_ms=10.0)
