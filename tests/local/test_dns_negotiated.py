"""``tls_version``, ``alpn`` and ``quic_version`` are what the connection
negotiated, read from the TLS/QUIC library, never parsed from libcurl's verbose text nor
assumed. Each server below is configured for something other than the usual values (TLS 1.2
only, HTTP/1.1 only, no ALPN at all, QUIC version 2 only), and the record must say so."""

from __future__ import annotations

import ast
import http.server
import ssl
import threading
from pathlib import Path

import aioquic.quic.configuration
import pytest
from aioquic.quic.packet import QuicProtocolVersion

from tests.local import dnsfake
from vantage_agent.dns import registry
from vantage_agent.dns._common import Endpoint, QueryOptions
from vantage_agent.dns.policy import Policy
from vantage_agent.dns.timing import quic_version_name

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return dnsfake.make_certs(tmp_path_factory.mktemp("negotiated"))  # (ca, cert, key)


def _endpoint(transport: str, port: int, ca: str) -> Endpoint:
    url = f"https://{dnsfake.TLS_NAME}:{port}/dns-query" if transport in ("doh", "doh3") else None
    return Endpoint(transport, "127.0.0.1", port, tls_name=dnsfake.TLS_NAME, url=url, ca_file=ca, resolver="negotiated")


def _run(transport, port, ca, mode="fresh", n=1):
    c = registry.client(transport, _endpoint(transport, port, ca), Policy(mode, 10.0), QueryOptions(timeout_s=3))
    try:
        res = [c.query(f"n{i}.example.test.") for i in range(n)]
    finally:
        c.close()
    assert [t.status for t in res] == ["ok"] * n, [t.error for t in res]
    return res


class Http1Doh:
    """DoH over HTTP/1.1 (keep-alive) with ``http.server``: the ALPN list the server accepts
    is ``alpn`` (None: the server does no ALPN at all)."""

    def __init__(self, cert: str, key: str, alpn: list[str] | None, max_tls=None):
        stats = self.stats = dnsfake.Stats()

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self):  # once per connection
                super().setup()
                stats.add(connections=1, resumed=int(self.connection.session_reused))
                stats.alpns.append(self.connection.selected_alpn_protocol())

            def _answer(self, body: bytes) -> None:
                status, out = dnsfake.doh_respond(self.command, self.path, body, stats)
                self.send_response(status or 500)
                self.send_header("Content-Type", "application/dns-message")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def do_GET(self):  # noqa: N802 - http.server's naming
                self._answer(b"")

            def do_POST(self):  # noqa: N802
                self._answer(self.rfile.read(int(self.headers["Content-Length"])))

            def log_message(self, *args):
                pass

        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        if alpn:
            ctx.set_alpn_protocols(alpn)
        if max_tls:
            ctx.maximum_version = max_tls
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _quic_server(monkeypatch, cert, key, alpn, versions):
    """dnsfake's aioquic server accepting only ``versions`` (its configuration is built inside
    its constructor, so the class it instantiates is swapped for that moment)."""

    class Only(aioquic.quic.configuration.QuicConfiguration):
        def __init__(self, **kw):
            super().__init__(supported_versions=list(versions), **kw)

    with monkeypatch.context() as m:
        m.setattr(aioquic.quic.configuration, "QuicConfiguration", Only)
        return dnsfake.QuicServer(cert, key, alpn=alpn)


# -- DoH (libcurl, TCP) --------------------------------------------------------------------------
@pytest.mark.local
@pytest.mark.parametrize("alpn,expected_alpn,http_version", [
    (["http/1.1"], "http/1.1", "1.1"),  # the server refuses h2: ALPN says so
    (None, None, "1.1"),  # no ALPN at all: null, not an assumed protocol
])
def test_doh_records_the_alpn_the_server_chose(certs, alpn, expected_alpn, http_version):
    ca, cert, key = certs
    srv = Http1Doh(cert, key, alpn)
    try:
        res = _run("doh", srv.port, ca, "reuse", n=3)
    finally:
        srv.close()
    assert [t.connection_reused for t in res] == [False, True, True]
    for t in res:  # a reused connection carries what it negotiated when it was opened
        assert (t.alpn, t.http_version, t.tls_version) == (expected_alpn, http_version, "TLSv1.3")
        assert t.quic_version is None


@pytest.mark.local
@pytest.mark.parametrize("mode", ["fresh", "reuse", "resume"])
@pytest.mark.parametrize("http", ["h2", "http/1.1"])
def test_doh_tls12_server(certs, mode, http):
    ca, cert, key = certs
    if http == "h2":
        srv = dnsfake.TcpServer(tls=(cert, key), alpn="h2", mode="h2")
        srv.ctx.maximum_version = ssl.TLSVersion.TLSv1_2  # used for every connection it accepts
    else:
        srv = Http1Doh(cert, key, ["http/1.1"], max_tls=ssl.TLSVersion.TLSv1_2)
    try:
        res = _run("doh", srv.port, ca, mode, n=3)
    finally:
        srv.close()
    hv = "2" if http == "h2" else "1.1"
    assert [(t.tls_version, t.alpn, t.http_version) for t in res] == [("TLSv1.2", http, hv)] * 3
    assert srv.stats.alpns == [http] * srv.stats.connections
    if mode == "resume":
        # libcurl 8.23 offers its TLS 1.2 session ("SSL reusing session" in its trace) and
        # these servers resume it or not (the h2 one never did here, the http.server one now
        # and then): the record says what the server did, not what libcurl offered
        assert res[0].resumed is False
        assert sum(bool(t.resumed) for t in res) == srv.stats.resumed
    elif mode == "fresh":
        assert [t.resumed for t in res] == [False] * 3 and srv.stats.resumed == 0
    else:
        assert [t.resumed for t in res] == [False, None, None]


# -- DoT (Python ssl) ----------------------------------------------------------------------------
@pytest.mark.local
def test_dot_tls12_without_alpn(certs):
    ca, cert, key = certs
    srv = dnsfake.TcpServer(tls=(cert, key), alpn=None)
    srv.ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    try:
        res = _run("dot", srv.port, ca, "reuse", n=2)
    finally:
        srv.close()
    assert [(t.tls_version, t.alpn) for t in res] == [("TLSv1.2", None)] * 2


# -- QUIC ----------------------------------------------------------------------------------------
@pytest.mark.local
@pytest.mark.parametrize("versions,expected", [
    ([QuicProtocolVersion.VERSION_2], "2"),  # Version Negotiation moves the client to v2
    ([QuicProtocolVersion.VERSION_1], "1"),
])
@pytest.mark.parametrize("mode", ["fresh", "reuse"])
def test_doq_records_the_negotiated_quic_version(monkeypatch, certs, versions, expected, mode):
    ca, cert, key = certs
    srv = _quic_server(monkeypatch, cert, key, "doq", versions)
    try:
        res = _run("doq", srv.port, ca, mode, n=2)
    finally:
        srv.close()
    assert [(t.quic_version, t.alpn, t.tls_version) for t in res] == [(expected, "doq", "TLSv1.3")] * 2
    assert srv.stats.alpns and set(srv.stats.alpns) == {"doq"}


@pytest.mark.local
def test_doh3_reads_tls_and_alpn_and_leaves_the_quic_version_null(certs):
    """libcurl offers no getter for the QUIC version of its connection: null, not "1"."""
    ca, cert, key = certs
    srv = dnsfake.QuicServer(cert, key, alpn="h3")
    try:
        res = _run("doh3", srv.port, ca, "reuse", n=2)
    finally:
        srv.close()
    assert [(t.tls_version, t.alpn, t.http_version, t.quic_version) for t in res] == [("TLSv1.3", "h3", "3", None)] * 2


@pytest.mark.local
def test_doh3_resume_records_what_openssl_saw(certs):
    ca, cert, key = certs
    srv = dnsfake.QuicServer(cert, key, alpn="h3")
    try:
        res = _run("doh3", srv.port, ca, "resume", n=3)
    finally:
        srv.close()
    assert res[0].resumed is False and res[0].early_data is False
    assert sum(bool(t.resumed) for t in res) == srv.stats.resumed >= 1
    assert sum(bool(t.early_data) for t in res) == srv.stats.early_data


# -- no free text ----------------------------------------------------------------------------------
@pytest.mark.unit
def test_no_engine_reads_libcurls_verbose_text():
    """The fields come from getinfo / OpenSSL: nothing in vantage_agent/dns turns libcurl's
    verbose output on or installs a debug callback (its text is for humans, and it costs CPU)."""
    bad = []
    for f in sorted((ROOT / "vantage_agent" / "dns").rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if isinstance(node, ast.Attribute) and node.attr in ("VERBOSE", "DEBUGFUNCTION"):
                bad.append(f"{f.relative_to(ROOT)}:{node.lineno} {node.attr}")
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and any(
                    s in node.value for s in ("SSL connection using", "ALPN: server", "reusing session")):
                bad.append(f"{f.relative_to(ROOT)}:{node.lineno} {node.value!r}")
    assert not bad, bad


@pytest.mark.unit
def test_libcurl_handle_is_found_in_this_pycurl():
    """The ctypes path to the connection's SSL* (doh._TlsInfo) depends on pycurl's object
    layout; a pycurl that moves the handle must fail here, not record nulls silently."""
    import pycurl

    from vantage_agent.dns import doh

    h = pycurl.Curl()
    try:
        assert doh._tls().ok and doh._tls().handle(h) is not None
        assert doh._tls().read(doh._tls().handle(h)) == (None, None, None, None)  # no connection yet
    finally:
        h.close()


@pytest.mark.unit
def test_quic_version_names():
    assert [quic_version_name(v) for v in (1, 0x6B3343CF, 0xFF00001D, None)] == ["1", "2", "0xff00001d", None]
