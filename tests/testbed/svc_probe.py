"""Client-side probes of the testbed servers, run INSIDE a client namespace by the testbed
tests (``ip netns exec dc-client-fiber python -m tests.testbed.svc_probe ...``); prints one
JSON object. Independent of vantage_agent/dns: plain dnspython / aioquic / pycurl calls,
each on a fresh connection."""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import socket
import ssl
import statistics
import struct
import time

import dns.message
import dns.query
import dns.rcode
import pycurl


def _answer(msg: dns.message.Message) -> dict:
    addrs = [rr.address for rrset in msg.answer for rr in rrset if hasattr(rr, "address")]
    return {"rcode": dns.rcode.to_text(msg.rcode()), "addresses": addrs}


def do53(name: str, addr: str, tls_name: str, ca: str) -> dict:
    return _answer(dns.query.udp(dns.message.make_query(name, "A"), addr, timeout=5))


def do53tcp(name: str, addr: str, tls_name: str, ca: str) -> dict:
    return _answer(dns.query.tcp(dns.message.make_query(name, "A"), addr, timeout=5))


def dot(name: str, addr: str, tls_name: str, ca: str) -> dict:
    """DoT on a fresh TCP connection with TCP_NODELAY and the length prefix and message in one
    write (dnspython's two writes meet Nagle + delayed ACK: +1 RTT or +40 ms)."""
    ctx = ssl.create_default_context(cafile=ca)
    ctx.set_alpn_protocols(["dot"])
    wire = dns.message.make_query(name, "A").to_wire()
    t0 = time.perf_counter()
    raw = socket.create_connection((addr, 853), timeout=5)
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    with ctx.wrap_socket(raw, server_hostname=tls_name) as s:
        s.sendall(struct.pack(">H", len(wire)) + wire)
        need = struct.unpack(">H", _recv_exact(s, 2))[0]
        data = _recv_exact(s, need)
        ms = (time.perf_counter() - t0) * 1e3
    out = _answer(dns.message.from_wire(data))
    out["ms"] = ms
    return out


def _recv_exact(s, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed")
        buf += chunk
    return buf


def doq(name: str, addr: str, tls_name: str, ca: str) -> dict:
    """DoQ (RFC 9250) on a fresh QUIC connection with aioquic; the time stops when the answer
    arrives (dnspython's quic() also waits ~0.8 s for the connection to close)."""
    return asyncio.run(_doq(name, addr, tls_name, ca))


async def _doq(name: str, addr: str, tls_name: str, ca: str) -> dict:
    from aioquic.asyncio import connect
    from aioquic.asyncio.protocol import QuicConnectionProtocol
    from aioquic.quic.configuration import QuicConfiguration
    from aioquic.quic.events import StreamDataReceived

    cfg = QuicConfiguration(is_client=True, alpn_protocols=["doq"], server_name=tls_name)
    cfg.load_verify_locations(ca)
    q = dns.message.make_query(name, "A")
    q.id = 0  # RFC 9250 §4.2.1
    wire = q.to_wire()

    class Proto(QuicConnectionProtocol):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            self.answer = asyncio.get_running_loop().create_future()
            self.buf = b""

        def quic_event_received(self, event) -> None:
            if isinstance(event, StreamDataReceived):
                self.buf += event.data
                if event.end_stream and not self.answer.done():
                    self.answer.set_result(self.buf)

    t0 = time.perf_counter()
    async with connect(addr, 853, configuration=cfg, create_protocol=Proto, wait_connected=True) as p:
        sid = p._quic.get_next_available_stream_id()
        p._quic.send_stream_data(sid, struct.pack(">H", len(wire)) + wire, end_stream=True)
        p.transmit()
        data = await asyncio.wait_for(p.answer, 5)
        ms = (time.perf_counter() - t0) * 1e3
        p.close()
    out = _answer(dns.message.from_wire(data[2:]))
    out["ms"] = ms
    return out


def _curl_doh(name: str, addr: str, tls_name: str, ca: str, version: int) -> dict:
    q = dns.message.make_query(name, "A")
    q.id = 0
    c = pycurl.Curl()
    buf = io.BytesIO()
    try:
        c.setopt(c.URL, f"https://{tls_name}/dns-query")
        c.setopt(c.RESOLVE, [f"{tls_name}:443:{addr}"])
        c.setopt(c.HTTP_VERSION, version)
        c.setopt(c.CAINFO, ca)
        c.setopt(c.POSTFIELDS, q.to_wire())
        c.setopt(c.HTTPHEADER, ["Content-Type: application/dns-message", "Accept: application/dns-message"])
        c.setopt(c.WRITEDATA, buf)
        c.setopt(c.TIMEOUT, 10)
        c.setopt(c.TCP_NODELAY, 1)
        c.perform()
        out = _answer(dns.message.from_wire(buf.getvalue()))
        out["http_version"] = c.getinfo(c.INFO_HTTP_VERSION)
        out["status"] = c.getinfo(c.RESPONSE_CODE)
        return out
    finally:
        c.close()


def doh(name: str, addr: str, tls_name: str, ca: str) -> dict:
    return _curl_doh(name, addr, tls_name, ca, pycurl.CURL_HTTP_VERSION_2TLS)


def doh3(name: str, addr: str, tls_name: str, ca: str) -> dict:
    return _curl_doh(name, addr, tls_name, ca, pycurl.CURL_HTTP_VERSION_3ONLY)


TRANSPORTS = {"do53": do53, "do53tcp": do53tcp, "dot": dot, "doh": doh, "doh3": doh3, "doq": doq}


def fetch(url: str, ca: str, h3: bool) -> dict:
    """GET ``url`` (system resolver of the namespace) with certificate verification."""
    c = pycurl.Curl()
    body, hdr = io.BytesIO(), io.BytesIO()
    try:
        c.setopt(c.URL, url)
        c.setopt(c.CAINFO, ca)
        c.setopt(c.HTTP_VERSION, pycurl.CURL_HTTP_VERSION_3ONLY if h3 else pycurl.CURL_HTTP_VERSION_2TLS)
        c.setopt(c.WRITEDATA, body)
        c.setopt(c.HEADERFUNCTION, hdr.write)
        c.setopt(c.TIMEOUT, 15)
        c.perform()
        headers = {}
        for line in hdr.getvalue().decode("latin-1").splitlines():
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        return {"status": c.getinfo(c.RESPONSE_CODE), "http_version": c.getinfo(c.INFO_HTTP_VERSION),
                "bytes": len(body.getvalue()), "headers": headers,
                "ip": c.getinfo(c.PRIMARY_IP), "verify_result": c.getinfo(c.SSL_VERIFYRESULT)}
    finally:
        c.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    q = sub.add_parser("query")
    q.add_argument("transport", choices=sorted(TRANSPORTS))
    q.add_argument("--name", required=True)
    q.add_argument("--addr", required=True)
    q.add_argument("--tls-name", required=True)
    q.add_argument("--ca", required=True)
    t = sub.add_parser("timing")
    t.add_argument("--name", required=True)
    t.add_argument("--addr", required=True)
    t.add_argument("--tls-name", required=True)
    t.add_argument("--ca", required=True)
    t.add_argument("--n", type=int, default=5)
    t.add_argument("--transports", default="do53,doq,dot,doh")
    f = sub.add_parser("fetch")
    f.add_argument("url")
    f.add_argument("--ca", required=True)
    f.add_argument("--h3", action="store_true")
    a = ap.parse_args()
    if a.cmd == "query":
        t0 = time.perf_counter()
        out = TRANSPORTS[a.transport](a.name, a.addr, a.tls_name, a.ca)
        out["ms"] = (time.perf_counter() - t0) * 1e3
    elif a.cmd == "timing":
        # warm the resolver cache (and this process's imports) first, then time fresh connections
        do53(a.name, a.addr, a.tls_name, a.ca)
        out = {}
        for tr in a.transports.split(","):
            TRANSPORTS[tr](a.name, a.addr, a.tls_name, a.ca)  # warm-up of the code path
            times = []
            for _ in range(a.n):
                t0 = time.perf_counter()
                res = TRANSPORTS[tr](a.name, a.addr, a.tls_name, a.ca)
                times.append(res.get("ms") or (time.perf_counter() - t0) * 1e3)
                if res["rcode"] != "NOERROR":
                    raise SystemExit(f"{tr}: {res}")
            out[tr] = {"median_ms": statistics.median(times), "min_ms": min(times), "all_ms": times}
    else:
        out = fetch(a.url, a.ca, a.h3)
    print(json.dumps(out))


if __name__ == "__main__":
    socket.setdefaulttimeout(10)
    main()
