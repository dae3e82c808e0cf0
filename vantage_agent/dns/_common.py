"""Shared pieces of the transport drivers: endpoints, DNS messages, kernel counters, and the
translation of library exceptions into the error taxonomy (vantage_agent/errors.py) at the
boundary (STYLE.md §7)."""

from __future__ import annotations

import errno
import functools
import os
import re
import socket
import ssl
import struct
import time
from dataclasses import dataclass
from typing import Any

import dns.exception
import dns.ipv6
import dns.message
import dns.name
import dns.rcode
import dns.rdatatype

from vantage_agent import errors

from .timing import WireCount

now = time.monotonic_ns


class Capabilities:
    """What a transport can do, as class attributes of its driver (registry.transport(name)):
    the defaults of a plain, unencrypted exchange over TCP or UDP; each driver overrides what
    differs, so no caller compares transport names to know it."""

    default_port = 53
    encrypted = False  # TLS or QUIC: the endpoint has a TLS name
    uses_url = False  # the endpoint is an https:// URL template (RFC 8484)
    http = False  # every query is an HTTP request (it has a method)
    chooses_http_version = False  # QueryOptions.http_version applies
    quic = False  # runs over QUIC (UDP)
    retransmits = False  # resolv.conf retransmission after timeout_s, up to attempts
    counts_wire = True  # counts its bytes and packets on the wire wherever it runs


@dataclass(frozen=True)
class Endpoint:
    """Where one transport of one resolver listens."""

    transport: str  # do53 | dot | doh | doh3 | doq (do53-tcp uses the do53 endpoint)
    address: str
    port: int
    tls_name: str | None = None
    url: str | None = None  # DoH / DoH3 URL template (RFC 8484), e.g. https://host/dns-query
    ca_file: str | None = None  # private CA (testbed); None = system trust store
    resolver: str | None = None


@dataclass(frozen=True)
class QueryOptions:
    """Per-query knobs, recorded in every result."""

    timeout_s: float = 5.0  # resolv.conf default timeout (004_9d5842b322ef90bc.txt §2)
    attempts: int = 2  # resolv.conf default attempts (Do53/UDP retries only)
    # POST or GET; None = the transport's default (doh: POST as 002_6fa4cf280535d36b.txt
    # §3.1.2; doh3: GET, see doh3.py for why)
    doh_method: str | None = None
    edns_payload: int = 1232
    http_version: str | None = None  # DoH only: "1.1" forces HTTP/1.1; None = the transport's own (h2 / h3)

    def __post_init__(self) -> None:
        if self.timeout_s <= 0:
            raise ValueError("timeout must be > 0")
        if self.attempts < 1:
            raise ValueError("attempts must be >= 1")
        if self.doh_method not in (None, "POST", "GET"):
            raise ValueError("doh_method must be POST or GET")
        if self.http_version not in (None, "1.1", "2"):
            raise ValueError("http_version must be 1.1 or 2")


_RCODES = {i: dns.rcode.to_text(i) for i in range(16)}


@functools.lru_cache(maxsize=65536)
def _qtype_num(qtype: str) -> int:
    try:
        return int(dns.rdatatype.from_text(qtype))
    except dns.exception.DNSException as exc:
        raise errors.BadInput(f"not a DNS query type: {qtype!r} ({exc})") from None


@functools.lru_cache(maxsize=65536)
def qname_wire(qname: str) -> bytes:
    """``qname`` (absolute) in wire format, by dnspython: a label over 63 bytes, an empty label
    or a name over 255 bytes is BadInput, never sent. Cached: campaigns repeat their names."""
    try:
        return dns.name.from_text(qname).to_wire()
    except (dns.exception.DNSException, UnicodeError) as exc:
        raise errors.BadInput(f"not a DNS name: {qname[:80]!r}{'...' if len(qname) > 80 else ''} ({exc})") from None


class Query:
    """A DNS query in wire format: RD set, one question, an EDNS(0) OPT record (what
    ``dns.message.make_query(qname, qtype, use_edns=0)`` builds, without its per-call cost:
    the name comes from ``qname_wire``, the header and OPT record are packed here).
    Raises BadInput for an invalid name or type, before any I/O."""

    __slots__ = ("id", "qname", "qtype", "qname_wire", "wire")

    def __init__(self, qname: str, qtype: str, txid: int, edns_payload: int):
        self.id = txid
        self.qname = qname if qname.endswith(".") else qname + "."
        self.qtype = qtype
        self.qname_wire = qname_wire(self.qname)
        self.wire = (
            struct.pack("!HHHHHH", txid, 0x0100, 1, 0, 0, 1)
            + self.qname_wire
            + struct.pack("!HH", _qtype_num(qtype), 1)
            + b"\x00" + struct.pack("!HHIH", 41, edns_payload, 0, 0)
        )

    def to_wire(self) -> bytes:
        return self.wire


def make_query(qname: str, qtype: str, *, txid: int | None = None, edns_payload: int = 1232) -> Query:
    if txid is None:
        txid = int.from_bytes(os.urandom(2), "big")
    return Query(qname, qtype, txid, edns_payload)


@dataclass(frozen=True)
class Parsed:
    rcode: str
    answers: tuple[str, ...]
    size: int
    truncated: bool


class _Slow(Exception):
    pass


_SIMPLE_LABEL = re.compile(rb"^[A-Za-z0-9_-]{1,63}$")


def _name(wire: bytes, off: int) -> tuple[str, int]:
    """A domain name at ``off`` (with compression) as text; raises _Slow on anything unusual."""
    labels: list[str] = []
    end = None
    hops = 0
    while True:
        n = wire[off]
        if n == 0:
            off += 1
            break
        if n & 0xC0 == 0xC0:
            if end is None:
                end = off + 2
            off = ((n & 0x3F) << 8) | wire[off + 1]
            hops += 1
            if hops > 32:
                raise _Slow
            continue
        if n & 0xC0:
            raise _Slow
        lb = wire[off + 1 : off + 1 + n]
        if len(lb) != n or not _SIMPLE_LABEL.match(lb):
            raise _Slow
        labels.append(lb.decode())
        off += 1 + n
    return (".".join(labels) + "."), (end if end is not None else off)


def _fast_parse(wire: bytes, query: Query, check_id: bool) -> Parsed:
    """Header, question and answer section for the common record types; _Slow otherwise."""
    if len(wire) < 12:
        raise _Slow
    txid, flags, qd, an, _ns, _ar = struct.unpack_from("!HHHHHH", wire, 0)
    if not flags & 0x8000 or (check_id and txid != query.id) or qd != 1 or (flags & 0x7800):
        raise _Slow
    off = 12
    qn = wire[off : off + len(query.qname_wire)]
    if qn.lower() != query.qname_wire.lower():
        raise _Slow
    off += len(query.qname_wire) + 4
    answers = []
    for _ in range(an):
        name, off = _name(wire, off)
        rtype, _rclass, _ttl, rdlen = struct.unpack_from("!HHIH", wire, off)
        off += 10
        rd = wire[off : off + rdlen]
        if len(rd) != rdlen:
            raise _Slow
        if rtype == 1 and rdlen == 4:
            text = "%d.%d.%d.%d" % tuple(rd)
            tname = "A"
        elif rtype == 28 and rdlen == 16:
            text = dns.ipv6.inet_ntoa(rd)
            tname = "AAAA"
        elif rtype in (5, 2, 12):
            text, end = _name(wire, off)
            if end != off + rdlen:
                raise _Slow
            tname = {5: "CNAME", 2: "NS", 12: "PTR"}[rtype]
        else:
            raise _Slow
        off += rdlen
        answers.append(f"{name} {tname} {text}")
    for _ in range(_ns + _ar):  # walk (not decode) the other sections: structure must hold
        _, off = _name(wire, off)
        (rdlen,) = struct.unpack_from("!H", wire, off + 8)
        off += 10 + rdlen
    if off != len(wire):
        raise _Slow  # truncated or trailing bytes: let dnspython judge
    rcode = flags & 0x000F
    return Parsed(rcode=_RCODES[rcode], answers=tuple(answers), size=len(wire), truncated=bool(flags & 0x0200))


def parse_response(wire: bytes, query: Query, *, check_id: bool = True) -> Parsed:
    """Parse a DNS response; raise MalformedResponse if it is not one (or not for ``query``).

    A fast path reads the header, question and A/AAAA/CNAME/NS/PTR answers directly (the
    bulk of the engine's per-query CPU otherwise goes into dnspython); anything else, and
    every error, goes through ``dns.message.from_wire``."""
    try:
        return _fast_parse(wire, query, check_id)
    except (_Slow, IndexError, struct.error):
        pass
    try:
        r = dns.message.from_wire(wire, ignore_trailing=False, one_rr_per_rrset=False)
    except (dns.exception.DNSException, ValueError, struct.error, IndexError) as exc:
        raise errors.MalformedResponse(f"undecodable DNS response ({len(wire)} B): {exc}") from None
    if not r.flags & 0x8000:
        raise errors.MalformedResponse("DNS message is not a response (QR=0)")
    if check_id and r.id != query.id:
        raise errors.MalformedResponse(f"response id {r.id} does not match query id {query.id}")
    if r.question and r.question[0].name != dns.name.from_text(query.qname):
        raise errors.MalformedResponse(f"response question {r.question[0].name} does not match the query")
    answers: list[str] = []
    for rrset in r.answer:
        for rd in rrset:
            answers.append(f"{rrset.name} {dns.rdatatype.to_text(rrset.rdtype)} {rd.to_text()}")
    return Parsed(
        rcode=dns.rcode.to_text(r.rcode()),
        answers=tuple(answers),
        size=len(wire),
        truncated=bool(r.flags & 0x0200),
    )


def rcode_error(parsed: Parsed) -> errors.MeasurementError | None:
    """REFUSED and SERVFAIL are failures; NXDOMAIN (and the rest) are answers."""
    if parsed.rcode == "REFUSED":
        return errors.Refused("resolver answered REFUSED")
    if parsed.rcode == "SERVFAIL":
        return errors.Servfail("resolver answered SERVFAIL")
    return None


# -- kernel TCP counters ----------------------------------------------------------------------
# struct tcp_info (include/uapi/linux/tcp.h): tcpi_bytes_acked @120 (u64),
# tcpi_bytes_received @128 (u64), tcpi_segs_out @136 (u32), tcpi_segs_in @140 (u32).
_TCP_INFO_LEN = 232
_TCPI = struct.Struct("=QQII")


def tcp_counts(sock: socket.socket | int) -> WireCount | None:
    """TCP payload bytes (acked out / received in) and all segments (incl. SYN, ACKs)."""
    try:
        if isinstance(sock, int):
            s = socket.socket(fileno=sock)
            try:
                raw = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_LEN)
            finally:
                s.detach()
        else:
            raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_LEN)
    except OSError:
        return None
    if len(raw) < 144:
        return None
    acked, received, segs_out, segs_in = _TCPI.unpack_from(raw, 120)
    # bytes_acked counts the SYN's sequence number as one byte: not payload.
    return WireCount(max(acked - 1, 0), received, segs_out, segs_in)


def netdev_counts() -> WireCount | None:
    """Frames and bytes on every non-loopback interface of this network namespace
    (``/proc/net/dev``, tx as sent, rx as received). Only meaningful where the measurement owns
    the namespace: a testbed client (``DNSCAMP_NETNS=dc-client-*``) runs one query at a time."""
    try:
        with open("/proc/net/dev", "rb") as f:
            lines = f.read().split(b"\n")[2:]
    except OSError:
        return None
    rb = rp = tb = tp = 0
    for line in lines:
        name, sep, rest = line.partition(b":")
        if not sep or name.strip() == b"lo":
            continue
        v = rest.split()
        rb += int(v[0])
        rp += int(v[1])
        tb += int(v[8])
        tp += int(v[9])
    return WireCount(tb, rb, tp, rp)


def owns_testbed_namespace() -> bool:
    """True inside a dnscamp testbed client namespace (set by the runner / ``--testbed-client``)."""
    return os.environ.get("DNSCAMP_NETNS", "").startswith("dc-client-")


def udp_payload(frames: WireCount, family: int) -> WireCount:
    """Layer-4 (UDP payload) bytes from Ethernet frame counts: minus Ethernet (14 B), IP (20 B
    IPv4 / 40 B IPv6) and UDP (8 B) headers per frame."""
    hdr = 14 + (40 if family == socket.AF_INET6 else 20) + 8
    return WireCount(
        max(frames.bytes_sent - hdr * frames.packets_sent, 0),
        max(frames.bytes_received - hdr * frames.packets_received, 0),
        frames.packets_sent,
        frames.packets_received,
    )


def tcp_socket(family: int) -> socket.socket:
    s = socket.socket(family, socket.SOCK_STREAM)
    # Nagle + delayed ACK add ~40 ms to small writes on loopback (TOOLCHAIN.md): off.
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def family_of(address: str) -> int:
    return socket.AF_INET6 if ":" in address else socket.AF_INET


def remaining(deadline_ns: int) -> float:
    left = (deadline_ns - now()) / 1e9
    if left <= 0:
        raise errors.Timeout("timed out")
    return left


def classify(exc: BaseException, phase: str) -> errors.MeasurementError:
    """Translate a library exception raised during ``phase`` into the taxonomy."""
    if isinstance(exc, errors.MeasurementError):
        return exc
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return errors.Timeout(f"timed out during {phase}")
    if isinstance(exc, ssl.SSLCertVerificationError):
        return errors.TlsError(f"certificate verification failed: {exc.verify_message or exc.reason}")
    if isinstance(exc, ssl.SSLError):
        return errors.TlsError(f"TLS error during {phase}: {exc.reason or exc}")
    if isinstance(exc, ConnectionRefusedError):
        return errors.ConnectError(f"connection refused during {phase}")
    if isinstance(exc, (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)):
        if phase == "connect":
            return errors.ConnectError(f"connection reset during {phase}")
        return errors.ConnectError(f"connection closed by the server during {phase}: {exc}")
    if isinstance(exc, OSError) and exc.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH, errno.EADDRNOTAVAIL):
        return errors.Unreachable(f"{phase}: {exc.strerror}")
    if isinstance(exc, OSError):
        return errors.ConnectError(f"{phase}: {exc}")
    if isinstance(exc, (dns.exception.DNSException, struct.error)):
        return errors.MalformedResponse(f"{phase}: {exc}")
    return errors.Other(f"{phase}: {type(exc).__name__}: {exc}")


def recv_exact(sock: Any, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionResetError("connection closed by peer")
        buf += chunk
    return bytes(buf)

