"""Shared pieces of the transport drivers: endpoints, DNS messages, kernel counters, and the
translation of library exceptions into the error taxonomy (vantage_agent/errors.py) at the
boundary (STYLE.md §7)."""

from __future__ import annotations

import errno
import socket
import ssl
import struct
import time
from dataclasses import dataclass
from typing import Any

import dns.exception
import dns.message
import dns.rcode
import dns.rdatatype

from vantage_agent import errors

from .timing import WireCount

now = time.monotonic_ns


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
    doh_method: str = "POST"  # POST (002_6fa4cf280535d36b.txt §3.1.2) or GET
    edns_payload: int = 1232

    def __post_init__(self) -> None:
        if self.timeout_s <= 0:
            raise ValueError("timeout must be > 0")
        if self.attempts < 1:
            raise ValueError("attempts must be >= 1")
        if self.doh_method not in ("POST", "GET"):
            raise ValueError("doh_method must be POST or GET")


def make_query(qname: str, qtype: str, *, txid: int | None = None, edns_payload: int = 1232) -> dns.message.Message:
    q = dns.message.make_query(qname, qtype, use_edns=0, payload=edns_payload)
    q.flags |= 0x0100  # RD
    if txid is not None:
        q.id = txid
    return q


@dataclass(frozen=True)
class Parsed:
    rcode: str
    answers: tuple[str, ...]
    size: int
    truncated: bool


def parse_response(wire: bytes, query: dns.message.Message, *, check_id: bool = True) -> Parsed:
    """Parse a DNS response; raise MalformedResponse if it is not one (or not for ``query``)."""
    try:
        r = dns.message.from_wire(wire, ignore_trailing=False, one_rr_per_rrset=False)
    except (dns.exception.DNSException, ValueError, struct.error, IndexError) as exc:
        raise errors.MalformedResponse(f"undecodable DNS response ({len(wire)} B): {exc}") from None
    if not r.flags & 0x8000:
        raise errors.MalformedResponse("DNS message is not a response (QR=0)")
    if check_id and r.id != query.id:
        raise errors.MalformedResponse(f"response id {r.id} does not match query id {query.id}")
    if r.question and query.question and r.question[0].name != query.question[0].name:
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


def tls_version_name(v: str | None) -> str | None:
    return v
