"""A self-contained loopback world for page-load tests and benchmarks without the testbed.

- a CA and one server certificate (``*.site.test``, ``site.test``, ``dns.test``, the IP);
- an HTTPS server (TLS + ALPN h2, the ``h2`` library) serving the pages ``/single``,
  ``/js``, ``/multi`` (resources from N hostnames) and DoH (RFC 8484 POST/GET ``/dns-query``);
- a DNS server on UDP/TCP 53 and DoT 853 of its own loopback address, answering every name
  under ``site.test`` / ``dns.test`` with the web address and anything else NXDOMAIN at once
  (browser background lookups must never wait), logging (time, transport, qname, qtype).

The query log is how the local tests check that a DNS mode used its transport and nothing
else, the same check the testbed tests make on the CoreDNS frontends' logs.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import ipaddress
import socket
import ssl
import struct
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dns.flags
import dns.message
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rrset

ZONE = "site.test"
DNS_NAME = "dns.test"


def make_ca(dirpath: Path, ip: str) -> tuple[Path, Path, Path]:
    """Write ca.crt, server.crt, server.key under ``dirpath`` (EC P-256, 2 days)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    dirpath.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "dnscamp local test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    sans = [x509.DNSName(ZONE), x509.DNSName(f"*.{ZONE}"), x509.DNSName(DNS_NAME), x509.IPAddress(ipaddress.ip_address(ip))]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ZONE)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=2))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    (dirpath / "ca.crt").write_bytes(ca.public_bytes(pem))
    (dirpath / "server.crt").write_bytes(cert.public_bytes(pem))
    (dirpath / "server.key").write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return dirpath / "ca.crt", dirpath / "server.crt", dirpath / "server.key"


def pages(port: int, n_hosts: int = 5) -> dict[str, tuple[str, bytes]]:
    """path -> (content type, body). ``/single``, ``/js``, ``/multi`` as the testbed's kinds."""
    js = b"document.addEventListener('DOMContentLoaded',()=>{const p=document.createElement('p');" \
         b"p.textContent='js ran';document.body.appendChild(p);});" + b"//" + b"x" * 20000 + b"\n"
    css = b"body{font-family:sans-serif;color:#123}" + b"/*" + b"y" * 4000 + b"*/\n"
    img = base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
    )
    multi_res = "".join(
        f'<img src="https://h{i}.{ZONE}:{port}/img.png" width=20 height=20>' for i in range(n_hosts)
    )
    text = "<p>" + "dnscamp page " * 100 + "</p>"
    return {
        "/single": ("text/html", f"<!doctype html><title>single</title><h1>single</h1>{text}".encode()),
        "/js": (
            "text/html",
            f'<!doctype html><title>js</title><link rel=stylesheet href="/s.css"><h1>js</h1>{text}'
            f'<script src="/a.js"></script><script src="/b.js"></script>'.encode(),
        ),
        "/multi": ("text/html", f"<!doctype html><title>multi</title><h1>multi</h1>{text}{multi_res}".encode()),
        "/a.js": ("application/javascript", js),
        "/b.js": ("application/javascript", js),
        "/s.css": ("text/css", css),
        "/img.png": ("image/png", img),
    }


@dataclass
class QueryLog:
    entries: list[tuple[float, str, str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, transport: str, qname: str, qtype: str) -> None:
        with self.lock:
            self.entries.append((time.time(), transport, qname.lower().rstrip("."), qtype))

    def since(self, t: float) -> list[tuple[float, str, str, str]]:
        with self.lock:
            return [e for e in self.entries if e[0] >= t]


class LocalSite:
    """Start with ``LocalSite.start(dir)``; ``close()`` stops everything (one asyncio thread)."""

    def __init__(self, workdir: Path, ip: str, web_port: int):
        self.workdir = workdir
        self.ip = ip
        self.web_port = web_port
        self.log = QueryLog()
        self.ca, self.cert, self.key = make_ca(workdir / "pki", ip)
        self.pages = pages(web_port)
        self.loop = asyncio.new_event_loop()
        self._servers: list[Any] = []
        self._udp: list[Any] = []
        self._thread = threading.Thread(target=self.loop.run_forever, name="localsite", daemon=True)
        self.requests: list[tuple[float, str, str]] = []

    # -- lifecycle
    @classmethod
    def start(cls, workdir: Path, ip: str | None = None) -> "LocalSite":
        from vantage_agent.pageload.dnsmode import free_loopback

        ip = ip or free_loopback()
        s = socket.socket()
        s.bind((ip, 0))
        port = s.getsockname()[1]
        s.close()
        self = cls(workdir, ip, port)
        self._thread.start()
        fut = asyncio.run_coroutine_threadsafe(self._start(), self.loop)
        fut.result(10)
        return self

    def url(self, page: str, host: str = "www") -> str:
        return f"https://{host}.{ZONE}:{self.web_port}/{page.lstrip('/')}"

    @property
    def origins(self) -> list[str]:
        return [f"www.{ZONE}:{self.web_port}"] + [f"h{i}.{ZONE}:{self.web_port}" for i in range(5)]

    def resolver(self, transport: str) -> str:
        """The DNS-mode resolver spec for this server."""
        if transport == "doh":
            return f"https://{DNS_NAME}:{self.web_port}/dns-query@{self.ip}"
        if transport == "do53":
            return self.ip
        return f"{DNS_NAME}@{self.ip}"

    def close(self) -> None:
        async def stop() -> None:
            for s in self._servers:
                s.close()
            for t in self._udp:
                t.close()

        try:
            asyncio.run_coroutine_threadsafe(stop(), self.loop).result(5)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(5)

    def __enter__(self) -> "LocalSite":
        return self

    def __exit__(self, *a: Any) -> None:
        self.close()

    # -- DNS
    def answer(self, wire: bytes, transport: str) -> bytes:
        q = dns.message.from_wire(wire)
        r = dns.message.make_response(q)
        r.flags |= dns.flags.RA
        if q.question:
            qn = q.question[0].name
            qt = q.question[0].rdtype
            name = qn.to_text().lower().rstrip(".")
            self.log.add(transport, name, dns.rdatatype.to_text(qt))
            ours = name in (ZONE, DNS_NAME) or name.endswith("." + ZONE)
            if not ours:
                r.set_rcode(dns.rcode.NXDOMAIN)
            elif qt == dns.rdatatype.A:
                r.answer.append(dns.rrset.from_text(qn, 60, "IN", "A", self.ip))
        return r.to_wire()

    async def _start(self) -> None:
        loop = asyncio.get_running_loop()
        site = self

        class Udp(asyncio.DatagramProtocol):
            def connection_made(self, tr: Any) -> None:
                self.tr = tr

            def datagram_received(self, data: bytes, addr: Any) -> None:
                try:
                    self.tr.sendto(site.answer(data, "do53"), addr)
                except Exception:  # noqa: BLE001 - a malformed query is dropped
                    pass

        tr, _ = await loop.create_datagram_endpoint(Udp, local_addr=(self.ip, 53))
        self._udp.append(tr)

        async def stream_dns(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, transport: str) -> None:
            try:
                while True:
                    n = struct.unpack("!H", await reader.readexactly(2))[0]
                    ans = self.answer(await reader.readexactly(n), transport)
                    writer.write(struct.pack("!H", len(ans)) + ans)
                    await writer.drain()
            except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
                pass
            finally:
                writer.close()

        self._servers.append(await asyncio.start_server(lambda r, w: stream_dns(r, w, "do53-tcp"), self.ip, 53))
        dot_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        dot_ctx.load_cert_chain(self.cert, self.key)
        self._servers.append(await asyncio.start_server(lambda r, w: stream_dns(r, w, "dot"), self.ip, 853, ssl=dot_ctx))

        web_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        web_ctx.load_cert_chain(self.cert, self.key)
        web_ctx.set_alpn_protocols(["h2"])
        self._servers.append(await loop.create_server(lambda: _H2(self), self.ip, self.web_port, ssl=web_ctx))


class _H2(asyncio.Protocol):
    def __init__(self, site: LocalSite):
        import h2.config
        import h2.connection

        self.site = site
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        self.streams: dict[int, dict[str, Any]] = {}
        self._pending: dict[int, bytes] = {}

    def connection_made(self, transport: Any) -> None:
        self.tr = transport
        self.conn.initiate_connection()
        self.tr.write(self.conn.data_to_send())

    def data_received(self, data: bytes) -> None:
        import h2.events
        import h2.exceptions

        try:
            events = self.conn.receive_data(data)
        except h2.exceptions.ProtocolError:
            self.tr.write(self.conn.data_to_send())
            self.tr.close()
            return
        for ev in events:
            if isinstance(ev, h2.events.RequestReceived):
                self.streams[ev.stream_id] = {"headers": dict(ev.headers), "body": b""}
            elif isinstance(ev, h2.events.DataReceived):
                st = self.streams.get(ev.stream_id)
                if st is not None:
                    st["body"] += ev.data
                self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded):
                st = self.streams.pop(ev.stream_id, None)
                if st is not None:
                    self.respond(ev.stream_id, st)
            elif isinstance(ev, h2.events.ConnectionTerminated):
                self.tr.close()
        for sid in list(self._pending):  # flow-control window opened: send the rest
            body = self._pending.pop(sid)
            try:
                self._send(sid, body)
            except h2.exceptions.StreamClosedError:
                pass
        self.tr.write(self.conn.data_to_send())

    def respond(self, sid: int, st: dict[str, Any]) -> None:
        h = st["headers"]
        path = h.get(":path", "/")
        host = h.get(":authority", "")
        self.site.requests.append((time.time(), host, path))
        base, _, query = path.partition("?")
        status, ctype, body = 200, "text/plain", b""
        if base == "/dns-query":
            wire = st["body"]
            if h.get(":method") == "GET":
                from urllib.parse import parse_qs

                d = parse_qs(query).get("dns", [""])[0]
                wire = base64.urlsafe_b64decode(d + "=" * (-len(d) % 4))
            try:
                body, ctype = self.site.answer(wire, "doh"), "application/dns-message"
            except Exception:  # noqa: BLE001
                status, body = 400, b"bad dns message"
        elif base in self.site.pages:
            ctype, body = self.site.pages[base]
        else:
            status, body = 404, b"not found"
        self.conn.send_headers(
            sid,
            [
                (":status", str(status)),
                ("content-type", ctype),
                ("content-length", str(len(body))),
                ("cache-control", "no-store"),
                ("timing-allow-origin", "*"),
            ],
        )
        # Respect flow control: send what the window allows now, the rest on WindowUpdated.
        self._send(sid, body)

    def _send(self, sid: int, body: bytes) -> None:
        while body:
            window = self.conn.local_flow_control_window(sid)
            if window <= 0:
                self._pending[sid] = body
                return
            n = min(window, self.conn.max_outbound_frame_size, len(body))
            self.conn.send_data(sid, body[:n])
            body = body[n:]
        self.conn.end_stream(sid)

    def connection_lost(self, exc: Any) -> None:
        pass
