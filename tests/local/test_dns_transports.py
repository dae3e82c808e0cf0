"""The DNS engine against real servers on loopback (tests/local/dnsfake.py): every transport
and policy, with server-side connection / resumption counts proving which policy happened."""

from __future__ import annotations

import dataclasses
import socket
import time

import pytest

from tests.local import dnsfake
from vantage_agent import errors
from vantage_agent.dns import registry
from vantage_agent.dns._common import QueryOptions
from vantage_agent.dns.policy import Policy

pytestmark = pytest.mark.local

ENCRYPTED = ["dot", "doh", "doh3", "doq"]
CONNECTED = ["do53-tcp", *ENCRYPTED]
ALL = ["do53", *CONNECTED]


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    s = dnsfake.AllServers(tmp_path_factory.mktemp("dnsfake"))
    yield s
    s.close()


def _client(servers, transport, mode="reuse", **opt):
    return registry.client(transport, servers.endpoint(transport), Policy(mode, opt.pop("idle", 10.0)), QueryOptions(**opt))


def _queries(servers, transport, mode, names, **opt):
    srv = servers.server(transport)
    srv.stats.reset()
    c = _client(servers, transport, mode, **opt)
    try:
        return [c.query(n) for n in names], srv.stats
    finally:
        c.close()


def _phases_ok(t):
    assert t.t_query_sent is not None and t.t_response is not None
    assert t.t_start <= t.t_query_sent <= t.t_response
    for p in (t.t_connected, t.t_tls_done):
        if p is not None:
            assert t.t_start <= p <= t.t_response


@pytest.mark.parametrize("transport", ALL)
def test_answer_and_phase_timestamps(servers, transport):
    res, _ = _queries(servers, transport, "fresh", ["www.example.test."])
    t = res[0]
    assert t.status == "ok", t.error
    assert t.rcode == "NOERROR"
    assert t.answers == ("www.example.test. A 192.0.2.1",)
    assert t.transport == transport
    _phases_ok(t)
    if transport == "do53":
        assert t.t_connected is None and t.t_tls_done is None
    elif transport == "do53-tcp":
        assert t.t_connected is not None and t.t_tls_done is None
    else:
        assert t.t_tls_done is not None and t.tls_version == "TLSv1.3"
        assert t.alpn == {"dot": "dot", "doh": "h2", "doh3": "h3", "doq": "doq"}[transport]
    # read from aioquic for DoQ; libcurl has no getter for DoH3's (docs/dns.md): null, not "1"
    assert t.quic_version == ("1" if transport == "doq" else None)


@pytest.mark.parametrize("transport", CONNECTED)
def test_fresh_opens_one_connection_per_query(servers, transport):
    res, stats = _queries(servers, transport, "fresh", [f"n{i}.example.test." for i in range(4)])
    assert [t.status for t in res] == ["ok"] * 4
    assert stats.connections == 4
    assert not any(t.connection_reused for t in res)
    assert stats.resumed == 0


@pytest.mark.parametrize("transport", CONNECTED)
def test_reuse_keeps_one_connection(servers, transport):
    res, stats = _queries(servers, transport, "reuse", [f"n{i}.example.test." for i in range(5)])
    assert [t.status for t in res] == ["ok"] * 5
    assert stats.connections == 1
    assert [t.connection_reused for t in res] == [False, True, True, True, True]
    for t in res[1:]:
        assert t.t_connected is None and t.t_tls_done is None and t.handshake is None
        # the reused connection's negotiated parameters, as read when it was opened
        assert (t.tls_version, t.alpn, t.quic_version) == (res[0].tls_version, res[0].alpn, res[0].quic_version)


@pytest.mark.parametrize("transport", ["do53-tcp", "dot", "doh", "doq"])
def test_reuse_idle_timeout_reconnects(servers, transport):
    srv = servers.server(transport)
    srv.stats.reset()
    c = _client(servers, transport, "reuse", idle=0.3)
    try:
        a = c.query("a.example.test.")
        b = c.query("b.example.test.")
        time.sleep(0.45)
        d = c.query("d.example.test.")
    finally:
        c.close()
    assert (a.connection_reused, b.connection_reused, d.connection_reused) == (False, True, False)
    assert srv.stats.connections == 2


@pytest.mark.parametrize("transport", ENCRYPTED)
def test_resume_resumes_tls_sessions(servers, transport):
    res, stats = _queries(servers, transport, "resume", [f"n{i}.example.test." for i in range(3)])
    assert [t.status for t in res] == ["ok"] * 3, [t.error for t in res]
    assert stats.connections == 3  # a new connection per query ...
    assert res[0].resumed is False
    assert stats.resumed >= 1  # ... resuming the session (server-side count)
    assert sum(bool(t.resumed) for t in res) == stats.resumed  # and we record exactly that


def test_doq_resume_sends_0rtt(servers):
    res, stats = _queries(servers, "doq", "resume", [f"z{i}.example.test." for i in range(3)])
    assert [t.early_data for t in res] == [False, True, True]
    assert stats.early_data == 2
    # 0-RTT: the query left before the handshake completed
    assert res[1].t_query_sent < res[1].t_tls_done


def test_doq_rejected_ticket_falls_back(servers, tmp_path):
    c = _client(servers, "doq", "resume")
    other = dnsfake.QuicServer(servers.cert, servers.key, alpn="doq")
    try:
        assert c.query("a.example.test.").ok
        c.endpoint = dataclasses.replace(c.endpoint, port=other.port)  # a server that never saw the ticket
        t = c.query("b.example.test.")
        assert t.ok and t.resumed is False and t.early_data is False
        assert other.stats.queries == 1
    finally:
        c.close()
        other.close()


@pytest.mark.parametrize("transport", ["doh", "doh3"])
@pytest.mark.parametrize("method", ["POST", "GET"])
def test_doh_method_and_txid_zero(servers, transport, method):
    res, stats = _queries(servers, transport, "reuse", ["a.example.test.", "b.example.test."], doh_method=method)
    assert [t.status for t in res] == ["ok", "ok"]
    assert stats.methods == [method, method]
    assert stats.txids == [0, 0]  # RFC 8484 §4.1
    assert res[0].http_version == ("2" if transport == "doh" else "3")
    assert all(t.http_status == 200 for t in res)


@pytest.mark.parametrize("transport,expected", [("doh", "POST"), ("doh3", "GET")])
def test_doh_default_method_is_sent_and_recorded(servers, transport, expected):
    res, stats = _queries(servers, transport, "fresh", ["a.example.test."])
    assert [t.status for t in res] == ["ok"]
    assert stats.methods == [expected] and res[0].http_method == expected


@pytest.mark.parametrize("transport", ALL)
def test_nxdomain_is_an_rcode_not_an_error(servers, transport):
    (t,), _ = _queries(servers, transport, "fresh", ["nx.example.test."])
    assert t.status == "ok" and t.rcode == "NXDOMAIN" and t.answers == ()


@pytest.mark.parametrize("transport", ALL)
@pytest.mark.parametrize("label,status", [("refused", "refused"), ("servfail", "servfail")])
def test_refused_and_servfail(servers, transport, label, status):
    (t,), _ = _queries(servers, transport, "fresh", [f"{label}.example.test."])
    assert t.status == status and t.error
    assert t.rcode == status.upper() and t.t_response is not None


@pytest.mark.parametrize("transport", ["do53", "do53-tcp", "dot"])
def test_malformed_response(servers, transport):
    (t,), _ = _queries(servers, transport, "fresh", ["malformed.example.test."])
    assert t.status == "malformed_response", t.error


def test_udp_truncated(servers):
    (t,), _ = _queries(servers, "do53", "fresh", ["tc.example.test."])
    assert t.status == "truncated" and "TC" in t.error


@pytest.mark.parametrize("transport", ["doh", "doh3"])
def test_http_error_carries_status(servers, transport):
    (t,), _ = _queries(servers, transport, "fresh", ["http500.example.test."])
    assert t.status == "http_error" and t.http_status == 500 and "500" in t.error


def test_do53_timeout_and_retries_recorded(servers):
    (t,), stats = _queries(servers, "do53", "fresh", ["drop.example.test."], timeout_s=0.2, attempts=3)
    assert t.status == "timeout" and t.attempts == 3
    assert stats.queries == 3  # the server saw every retransmission
    assert t.query.packets_sent == 3 and t.query.packets_received == 0
    assert t.t_response is None
    assert "3 attempt(s) of 0.2 s" in t.error


@pytest.mark.parametrize("transport", CONNECTED)
def test_timeout_on_connections(servers, transport):
    t0 = time.monotonic()
    (t,), _ = _queries(servers, transport, "fresh", ["drop.example.test."], timeout_s=0.3)
    assert t.status == "timeout", t.error
    assert time.monotonic() - t0 < 2.0


@pytest.mark.parametrize("transport", ENCRYPTED)
def test_tls_error_names_the_certificate_problem(servers, tmp_path, transport):
    other_ca, _, _ = dnsfake.make_certs(tmp_path / "otherca")
    ep = dataclasses.replace(servers.endpoint(transport), ca_file=other_ca)
    c = registry.client(transport, ep, Policy("fresh"), QueryOptions(timeout_s=2))
    try:
        t = c.query("a.example.test.")
    finally:
        c.close()
    if transport == "doq":
        assert t.status in ("tls_error", "quic_error"), t.error
    else:
        assert t.status == "tls_error", t.error
    assert "certif" in t.error.lower() or "verif" in t.error.lower()


def _closed_port(kind):
    s = socket.socket(socket.AF_INET, kind)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.mark.parametrize("transport", ["do53-tcp", "dot", "doh"])
def test_connect_error(servers, transport):
    ep = dataclasses.replace(servers.endpoint(transport), port=_closed_port(socket.SOCK_STREAM))
    if ep.url:
        ep = dataclasses.replace(ep, url=f"https://{dnsfake.TLS_NAME}:{ep.port}/dns-query")
    c = registry.client(transport, ep, Policy("fresh"), QueryOptions(timeout_s=1))
    try:
        t = c.query("a.example.test.")
    finally:
        c.close()
    assert t.status == "connect_error", t.error


@pytest.mark.parametrize("transport", ["do53", "doq"])
def test_udp_port_unreachable(servers, transport):
    ep = dataclasses.replace(servers.endpoint(transport), port=_closed_port(socket.SOCK_DGRAM))
    c = registry.client(transport, ep, Policy("fresh"), QueryOptions(timeout_s=1, attempts=1))
    try:
        t = c.query("a.example.test.")
    finally:
        c.close()
    assert t.status == "connect_error", t.error


def test_server_closing_a_reused_connection_is_noticed(tmp_path):
    srv = dnsfake.TcpServer(close_after=1)
    try:
        from vantage_agent.dns._common import Endpoint

        c = registry.client("do53-tcp", Endpoint("do53", "127.0.0.1", srv.port), Policy("reuse"), QueryOptions())
        a = c.query("a.example.test.")
        time.sleep(0.1)
        b = c.query("b.example.test.")
        c.close()
        assert a.ok and b.ok and not b.connection_reused
        assert srv.stats.connections == 2
    finally:
        srv.close()


def test_wire_counts(servers):
    (u,), _ = _queries(servers, "do53", "fresh", ["a.example.test."])
    assert u.wire_basis == "udp_count"
    assert u.query.packets_sent == 1 and u.query.packets_received == 1
    assert u.query.bytes_received == u.response_size
    res, _ = _queries(servers, "dot", "reuse", ["a.example.test.", "b.example.test."])
    first, second = res
    assert first.wire_basis == "tcp_info"
    assert first.handshake.packets_sent >= 2 and first.handshake.bytes_received > 500  # certificate
    # a reused DoT query: 2-byte length + message each way (TLS record overhead on top)
    assert second.query.bytes_sent >= 2 + 30 and second.query.bytes_received >= second.response_size
    (q,), _ = _queries(servers, "doq", "fresh", ["a.example.test."])
    assert q.wire_basis == "quic_count" and q.handshake.bytes_sent >= 1200  # padded Initial
