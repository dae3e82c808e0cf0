"""The one result type of every DNS transport: ``DnsTiming`` (phase timestamps, not one elapsed time).

Every timestamp is ``time.monotonic_ns()`` of the measuring process (CLOCK_MONOTONIC), so
durations are differences of two integers and never depend on a library's own timer
(ARCHITECTURE.md: dnspython's ``r.time`` starts at a different point per transport).

Phases (absent phases are ``None``; e.g. Do53/UDP has no connection and no handshake):

``t_start``        the query was handed to the engine (before any socket work);
``t_connected``    TCP connect() returned (TCP transports) — for QUIC the first datagram left;
``t_tls_done``     TLS handshake finished (TLS) / QUIC handshake completed (DoQ, DoH3);
``t_query_sent``   the DNS query (last byte of it) was handed to the kernel;
``t_response``     the complete DNS response was received.

On a reused connection ``t_connected`` and ``t_tls_done`` are ``None`` and ``connection_reused``
is true. Durations are derived in SQL (db/views/v_dns_query.sql).

Bytes/packets: separate counters for the handshake (connection set-up until ``t_tls_done``)
and the query (from then until ``t_response``), per direction. ``wire_basis`` says how they
were obtained: ``tcp_info`` (kernel per-socket counters ``tcpi_bytes_acked`` /
``tcpi_bytes_received`` / ``tcpi_segs_out`` / ``tcpi_segs_in``: TCP payload bytes and all
segments incl. SYN and pure ACKs), ``udp_count`` (datagrams and UDP payload bytes counted by
us at send/recv), ``quic_count`` (QUIC datagrams counted by us), ``netdev_count`` (DoH3 in a
testbed client namespace: the namespace's interface counters, headers subtracted) or
``unavailable``.
Bytes are layer-4 payload bytes; add the IP/UDP/TCP headers per packet for on-the-wire bytes
(the view does it).

``tls_version`` / ``alpn`` / ``quic_version`` are what the connection that carried the query
negotiated, read from the library that negotiated it (``ssl``, OpenSSL under libcurl,
aioquic); null where no library says (e.g. DoH3's QUIC version: docs/dns.md), never assumed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from vantage_agent import errors


@dataclass(frozen=True)
class WireCount:
    """Bytes (layer-4 payload) and packets in each direction for one phase."""

    bytes_sent: int = 0
    bytes_received: int = 0
    packets_sent: int = 0
    packets_received: int = 0

    def __add__(self, other: "WireCount") -> "WireCount":
        return WireCount(
            self.bytes_sent + other.bytes_sent,
            self.bytes_received + other.bytes_received,
            self.packets_sent + other.packets_sent,
            self.packets_received + other.packets_received,
        )

    def __sub__(self, other: "WireCount") -> "WireCount":
        return WireCount(
            self.bytes_sent - other.bytes_sent,
            self.bytes_received - other.bytes_received,
            self.packets_sent - other.packets_sent,
            self.packets_received - other.packets_received,
        )


@dataclass(frozen=True)
class DnsTiming:
    transport: str
    address: str
    port: int
    qname: str
    qtype: str
    policy: str
    t_start: int
    status: str = errors.OK
    error: str | None = None
    t_connected: int | None = None
    t_tls_done: int | None = None
    t_query_sent: int | None = None
    t_response: int | None = None
    connection_reused: bool = False
    resumed: bool | None = None  # TLS session resumption / QUIC 0-RTT actually happened
    early_data: bool | None = None  # query sent as 0-RTT early data (DoQ/DoH3 resume)
    tls_version: str | None = None
    alpn: str | None = None
    quic_version: str | None = None
    http_version: str | None = None
    http_method: str | None = None
    http_status: int | None = None
    rcode: str | None = None
    answers: tuple[str, ...] = ()
    response_size: int | None = None
    attempts: int = 1
    timeout_s: float | None = None
    handshake: WireCount | None = None
    query: WireCount | None = None
    wire_basis: str = "unavailable"
    details: tuple[tuple[str, Any], ...] = ()

    @property
    def ok(self) -> bool:
        return self.status == errors.OK

    def exchange_ns(self) -> int | None:
        if self.t_response is None or self.t_query_sent is None:
            return None
        return self.t_response - self.t_query_sent

    def total_ns(self) -> int | None:
        if self.t_response is None:
            return None
        return self.t_response - self.t_start

    def replace(self, **kw: Any) -> "DnsTiming":
        return dataclasses.replace(self, **kw)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["answers"] = list(self.answers)
        d["details"] = dict(self.details)
        return d


_QUIC_VERSIONS = {0x00000001: "1", 0x6B3343CF: "2"}  # RFC 9000, RFC 9369


def quic_version_name(version: int | None) -> str | None:
    """A QUIC version number as recorded in ``quic_version``: "1", "2", else its hex code
    ("0x...", e.g. a draft or grease version); None if unknown."""
    if version is None:
        return None
    return _QUIC_VERSIONS.get(version, f"0x{version:08x}")


def failed(base: DnsTiming, exc: errors.MeasurementError, **kw: Any) -> DnsTiming:
    """``base`` (with the phases reached so far) turned into a failure record."""
    return dataclasses.replace(base, status=exc.status, error=exc.message, **kw)


@dataclass
class PhaseClock:
    """Mutable scratchpad while a query runs; frozen into a DnsTiming at the end."""

    t_start: int
    t_connected: int | None = None
    t_tls_done: int | None = None
    t_query_sent: int | None = None
    t_response: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
