"""Real DNS servers on loopback for the dns tests and benchmarks: Do53 (UDP, TCP), DoT, DoH
(HTTP/2 via the ``h2`` library), DoQ and DoH3 (aioquic), with a private test CA made with
``cryptography``. Each server counts connections, TLS resumptions and 0-RTT server-side so
tests can prove which connection policy happened.

Answers depend on the first label of the query name:
``drop.`` no answer · ``nx.`` NXDOMAIN · ``servfail.`` · ``refused.`` · ``tc.`` TC bit ·
``malformed.`` garbage · ``http500.`` HTTP 500 (DoH/DoH3) · anything else: A 192.0.2.1.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import ipaddress
import select
import socket
import ssl
import struct
import threading
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import dns.flags
import dns.message
import dns.rcode
import dns.rrset

TLS_NAME = "dns.test"


# -- certificates -------------------------------------------------------------------------------
def make_certs(directory: Path, name: str = TLS_NAME) -> tuple[str, str, str]:
    """A test CA and a server certificate for ``name`` + 127.0.0.1. Returns (ca, cert, key)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    directory.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "dnscamp test CA")])
    ca = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1)).not_valid_after(now + dt.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1)).not_valid_after(now + dt.timedelta(days=2))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    ca_file, cert_file, key_file = directory / "ca.pem", directory / "server.pem", directory / "server.key"
    ca_file.write_bytes(ca.public_bytes(pem))
    cert_file.write_bytes(cert.public_bytes(pem))
    key_file.write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return str(ca_file), str(cert_file), str(key_file)


# -- the answering logic -----------------------------------------------------------------------
def answer(wire: bytes) -> bytes | None:
    q = dns.message.from_wire(wire)
    name = q.question[0].name
    first = name.labels[0].decode().lower() if name.labels else ""
    if first == "drop":
        return None
    if first == "malformed":
        return wire[:2] + b"\x81\x80garbage"  # right id, QR set, undecodable rest
    r = dns.message.make_response(q)
    r.flags |= dns.flags.RA
    if first == "nx":
        r.set_rcode(dns.rcode.NXDOMAIN)
    elif first == "servfail":
        r.set_rcode(dns.rcode.SERVFAIL)
    elif first == "refused":
        r.set_rcode(dns.rcode.REFUSED)
    elif first == "tc":
        r.flags |= dns.flags.TC
    else:
        qtype = q.question[0].rdtype
        if qtype == 28:
            r.answer.append(dns.rrset.from_text(name, 60, "IN", "AAAA", "2001:db8::1"))
        else:
            r.answer.append(dns.rrset.from_text(name, 60, "IN", "A", "192.0.2.1"))
    return r.to_wire()


@dataclass
class Stats:
    connections: int = 0
    queries: int = 0
    resumed: int = 0
    early_data: int = 0
    alpns: list = field(default_factory=list)
    txids: list = field(default_factory=list)
    methods: list = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, **kw: int) -> None:
        with self.lock:
            for k, v in kw.items():
                setattr(self, k, getattr(self, k) + v)

    def reset(self) -> None:
        with self.lock:
            self.connections = self.queries = self.resumed = self.early_data = 0
            self.alpns.clear(); self.txids.clear(); self.methods.clear()


def _txid(wire: bytes) -> int:
    return struct.unpack("!H", wire[:2])[0] if len(wire) >= 2 else -1


# -- Do53 UDP -------------------------------------------------------------------------------------
class UdpServer:
    def __init__(self, host: str = "127.0.0.1", port: int = 0):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((host, port))
        self.port = self.sock.getsockname()[1]
        self.stats = Stats()
        self._stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self._stop:
            r, _, _ = select.select([self.sock], [], [], 0.2)
            if not r:
                continue
            try:
                data, peer = self.sock.recvfrom(65535)
            except OSError:
                return
            self.stats.add(queries=1)
            self.stats.txids.append(_txid(data))
            out = answer(data)
            if out is not None:
                self.sock.sendto(out, peer)

    def close(self) -> None:
        self._stop = True
        self.thread.join(2)
        self.sock.close()


# -- Do53 TCP / DoT / DoH (h2) over TCP -------------------------------------------------------------
class TcpServer:
    """Threaded TCP server; ``mode`` is "dns" (length-prefixed, RFC 7766/7858) or "h2" (DoH)."""

    def __init__(self, *, tls: tuple[str, str] | None = None, mode: str = "dns", alpn: str | None = None,
                 host: str = "127.0.0.1", port: int = 0, close_after: int | None = None):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self.mode = mode
        self.close_after = close_after
        self.stats = Stats()
        self.ctx = None
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(tls[0], tls[1])
            if alpn:
                ctx.set_alpn_protocols([alpn])
            self.ctx = ctx
        self._stop = False
        self._conns: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while not self._stop:
            r, _, _ = select.select([self.sock], [], [], 0.2)
            if not r:
                continue
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.stats.add(connections=1)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            if self.ctx is not None:
                conn.settimeout(5)
                conn = self.ctx.wrap_socket(conn, server_side=True)
                conn.settimeout(None)
                if conn.session_reused:
                    self.stats.add(resumed=1)
                self.stats.alpns.append(conn.selected_alpn_protocol())
            self._conns.append(conn)
            if self.mode == "h2":
                self._serve_h2(conn)
            else:
                self._serve_dns(conn)
        except (OSError, ssl.SSLError, ValueError):
            pass
        finally:
            try:
                conn.close()
            except OSError:
                pass

    def _recv_exact(self, conn: socket.socket, n: int) -> bytes | None:
        buf = b""
        while len(buf) < n:
            chunk = conn.recv(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return buf

    def _serve_dns(self, conn: socket.socket) -> None:
        served = 0
        while not self._stop:
            hdr = self._recv_exact(conn, 2)
            if hdr is None:
                return
            msg = self._recv_exact(conn, struct.unpack("!H", hdr)[0])
            if msg is None:
                return
            self.stats.add(queries=1)
            out = answer(msg)
            if out is not None:
                conn.sendall(struct.pack("!H", len(out)) + out)
            served += 1
            if self.close_after and served >= self.close_after:
                return

    def _serve_h2(self, conn: socket.socket) -> None:
        import h2.config
        import h2.connection
        import h2.events

        h = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        h.initiate_connection()
        conn.sendall(h.data_to_send())
        reqs: dict[int, dict] = {}
        while not self._stop:
            data = conn.recv(65535)
            if not data:
                return
            for ev in h.receive_data(data):
                if isinstance(ev, h2.events.RequestReceived):
                    reqs[ev.stream_id] = {"headers": dict(ev.headers), "body": b""}
                elif isinstance(ev, h2.events.DataReceived):
                    reqs[ev.stream_id]["body"] += ev.data
                    h.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                elif isinstance(ev, h2.events.StreamEnded):
                    req = reqs.pop(ev.stream_id)
                    status, body = doh_respond(req["headers"][":method"], req["headers"][":path"], req["body"], self.stats)
                    if status is None:
                        continue
                    h.send_headers(ev.stream_id, [(":status", str(status)), ("content-type", "application/dns-message"),
                                                  ("content-length", str(len(body)))])
                    h.send_data(ev.stream_id, body, end_stream=True)
            out = h.data_to_send()
            if out:
                conn.sendall(out)

    def close(self) -> None:
        self._stop = True
        self.thread.join(2)
        self.sock.close()
        for c in self._conns:
            try:
                c.close()
            except OSError:
                pass


def doh_respond(method: str, path: str, body: bytes, stats: Stats) -> tuple[int | None, bytes]:
    stats.methods.append(method)
    if method == "GET":
        qs = parse_qs(urlsplit(path).query)
        b64 = qs.get("dns", [""])[0]
        wire = base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4))
    else:
        wire = body
    stats.add(queries=1)
    stats.txids.append(_txid(wire))
    q = dns.message.from_wire(wire)
    if q.question[0].name.labels[0].lower() == b"http500":
        return 500, b"internal error"
    out = answer(wire)
    if out is None:
        return None, b""
    return 200, out


# -- QUIC: DoQ (RFC 9250) and DoH3 ---------------------------------------------------------------------
class QuicServer:
    """aioquic server in its own thread/event loop; ``alpn`` "doq" or "h3"."""

    def __init__(self, cert: str, key: str, *, alpn: str = "doq", host: str = "127.0.0.1", port: int = 0):
        from aioquic.asyncio import serve
        from aioquic.asyncio.protocol import QuicConnectionProtocol
        from aioquic.h3.connection import H3_ALPN, H3Connection
        from aioquic.h3.events import DataReceived, HeadersReceived
        from aioquic.quic.configuration import QuicConfiguration
        from aioquic.quic.events import HandshakeCompleted, StreamDataReceived

        self.stats = stats = Stats()
        tickets: dict[bytes, object] = {}
        self.alpn = alpn
        if port == 0:
            probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            probe.bind((host, 0))
            port = probe.getsockname()[1]
            probe.close()
        self.port = port

        class Proto(QuicConnectionProtocol):
            def __init__(self, *a, **kw):
                super().__init__(*a, **kw)
                self._h3 = H3Connection(self._quic) if alpn == "h3" else None
                self._bufs: dict[int, bytes] = {}
                self._reqs: dict[int, dict] = {}
                self._counted = False
                stats.add(connections=1)

            def _count_tls(self):
                # once per connection, at the handshake's end or at the first request (a 0-RTT
                # request can be answered, and the connection closed, before the handshake ends)
                if not self._counted:
                    self._counted = True
                    tls = self._quic.tls
                    if tls.session_resumed:
                        stats.add(resumed=1)
                    if tls.early_data_accepted:
                        stats.add(early_data=1)

            def quic_event_received(self, ev):
                if isinstance(ev, HandshakeCompleted):
                    self._count_tls()
                    stats.alpns.append(ev.alpn_protocol)
                elif isinstance(ev, StreamDataReceived):
                    self._count_tls()
                if self._h3 is not None:
                    for h3ev in self._h3.handle_event(ev):
                        self._h3_event(h3ev)
                    return
                if isinstance(ev, StreamDataReceived):
                    buf = self._bufs.get(ev.stream_id, b"") + ev.data
                    self._bufs[ev.stream_id] = buf
                    if ev.end_stream:
                        del self._bufs[ev.stream_id]
                        (n,) = struct.unpack("!H", buf[:2])
                        msg = buf[2 : 2 + n]
                        stats.add(queries=1)
                        stats.txids.append(_txid(msg))
                        out = answer(msg)
                        if out is not None:
                            self._quic.send_stream_data(ev.stream_id, struct.pack("!H", len(out)) + out, end_stream=True)
                            self.transmit()

            def _h3_event(self, ev):
                if isinstance(ev, HeadersReceived):
                    self._reqs[ev.stream_id] = {"headers": {k.decode(): v.decode() for k, v in ev.headers}, "body": b""}
                    if ev.stream_ended:
                        self._h3_answer(ev.stream_id)
                elif isinstance(ev, DataReceived):
                    self._reqs[ev.stream_id]["body"] += ev.data
                    if ev.stream_ended:
                        self._h3_answer(ev.stream_id)

            def _h3_answer(self, sid):
                req = self._reqs.pop(sid)
                status, body = doh_respond(req["headers"][":method"], req["headers"][":path"], req["body"], stats)
                if status is None:
                    return
                self._h3.send_headers(sid, [(b":status", str(status).encode()), (b"content-type", b"application/dns-message"),
                                            (b"content-length", str(len(body)).encode())])
                self._h3.send_data(sid, body, end_stream=True)
                self.transmit()

        cfg = QuicConfiguration(is_client=False, alpn_protocols=H3_ALPN if alpn == "h3" else ["doq"])
        cfg.load_cert_chain(cert, key)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

        async def start():
            return await serve(host, port, configuration=cfg, create_protocol=Proto,
                               session_ticket_fetcher=lambda k: tickets.pop(k, None), session_ticket_handler=lambda t: tickets.__setitem__(t.ticket, t))

        self.server = asyncio.run_coroutine_threadsafe(start(), self.loop).result(5)

    def close(self) -> None:
        async def stop():
            self.server.close()

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(2)


class AllServers:
    """One of each server on 127.0.0.1; ``endpoint(transport)`` gives the engine's Endpoint."""

    def __init__(self, directory: Path):
        self.ca, self.cert, self.key = make_certs(directory)
        self.udp = UdpServer()
        self.tcp = TcpServer(port=self.udp.port)
        self.dot = TcpServer(tls=(self.cert, self.key), alpn="dot")
        self.doh = TcpServer(tls=(self.cert, self.key), alpn="h2", mode="h2")
        self.doq = QuicServer(self.cert, self.key, alpn="doq")
        self.doh3 = QuicServer(self.cert, self.key, alpn="h3")

    def server(self, transport: str):
        return {"do53": self.udp, "do53-tcp": self.tcp, "dot": self.dot, "doh": self.doh, "doh3": self.doh3, "doq": self.doq}[transport]

    def endpoint(self, transport: str):
        from vantage_agent.dns._common import Endpoint

        port = self.server(transport).port
        kind = "do53" if transport == "do53-tcp" else transport
        url = f"https://{TLS_NAME}:{port}/dns-query" if transport in ("doh", "doh3") else None
        return Endpoint(kind, "127.0.0.1", port, tls_name=TLS_NAME, url=url, ca_file=self.ca, resolver="local-fake")

    def close(self) -> None:
        for s in (self.udp, self.tcp, self.dot, self.doh, self.doq, self.doh3):
            try:
                s.close()
            except Exception:  # noqa: BLE001 - best-effort teardown
                pass
