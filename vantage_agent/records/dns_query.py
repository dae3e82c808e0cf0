"""Body of ``dns_query`` records: one DNS query over one transport, with phase timestamps.

Timestamps are CLOCK_MONOTONIC nanoseconds of the measuring process (comparable within one
record, and between records of the same run and host; the envelope's ``started_at`` is the
wall-clock anchor). Absent phases are null (Do53/UDP has no connection; a reused connection
has no connect or handshake). Durations are derived in SQL (db/views/v_dns_query.sql).
See docs/dns.md for the meaning of every field and how bytes/packets are counted.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .envelope import Frozen
from .types import BigCount, Count, Positive

Transport = Literal["do53", "do53-tcp", "dot", "doh", "doh3", "doq"]


class DnsQueryBody(Frozen):
    # A unit that could not start (setup_error) records what was asked and null for what was
    # never known (address, port, t_start, ...): no placeholder values.
    resolver: str | None = Field(None, description="Catalog name of the resolver (cloudflare, testbed-isp, local, ...).")
    transport: Transport | None = Field(description="null only when the unit's target names no known transport.")
    address: str | None = Field(description="Resolver address queried; null if never resolved (setup_error).")
    port: int | None = Field(ge=1, le=65535, description="null if never resolved (setup_error).")
    tls_name: str | None = Field(None, description="TLS server name verified (DoT/DoH/DoH3/DoQ).")
    url: str | None = Field(None, description="DoH/DoH3 URL.")
    qname: str | None = Field(description="Name queried; null for a setup_error of a unit asked for several names.")
    qtype: str | None = Field("A", description="null only if the unit's parameters were invalid.")
    sequence: Count = Field(0, description="Index of this query within its unit / CLI run.")
    policy: Literal["fresh", "reuse", "resume"] | None = Field(description="null only if the unit's parameters were invalid.")
    idle_timeout_s: float | None = Field(gt=0, description="Idle timeout of a reused connection.")
    timeout_s: float | None = Field(gt=0, description="Query timeout (per attempt for Do53/UDP).")
    max_attempts: Positive | None = Field(description="Configured attempts (Do53/UDP retries; 1 elsewhere).")
    attempts: Count = Field(description="Transmissions actually sent (0: none, e.g. setup_error, bad_input).")
    t_start: BigCount | None = Field(description="monotonic ns: query handed to the engine; null if it never was (setup_error).")
    t_connected: BigCount | None = Field(None, description="monotonic ns: TCP connected / first QUIC datagram sent.")
    t_tls_done: BigCount | None = Field(None, description="monotonic ns: TLS or QUIC handshake completed.")
    t_query_sent: BigCount | None = Field(None, description="monotonic ns: query handed to the kernel (first transmission).")
    t_response: BigCount | None = Field(None, description="monotonic ns: complete response received.")
    connection_reused: bool | None = Field(description="The query used an already open connection; null if no query was made.")
    resumed: bool | None = Field(None, description="New connection resumed a TLS session (PSK); null if no new TLS connection.")
    early_data: bool | None = Field(None, description="Query sent (and accepted) as QUIC/TLS 0-RTT early data.")
    tls_version: str | None = Field(
        None, description="TLS version the connection negotiated (e.g. TLSv1.3), read from the TLS library (ssl; "
        "OpenSSL under libcurl; DoQ: TLSv1.3 once the handshake completed, aioquic offers no other); null without "
        "TLS or if the library gave none (docs/dns.md, Negotiated parameters).")
    alpn: str | None = Field(
        None, description="ALPN protocol the server selected, read from the TLS/QUIC library; null if none was "
        "negotiated or it could not be read.")
    quic_version: str | None = Field(
        None, description="QUIC version of the connection: '1', '2' or 0x-hex, read from aioquic (DoQ); null for "
        "DoH3 (libcurl exposes no getter, docs/dns.md) and non-QUIC transports.")
    http_version: str | None = Field(None, description="'2' or '3' for DoH/DoH3.")
    http_method: Literal["GET", "POST"] | None = None
    http_status: Count | None = None
    rcode: str | None = Field(None, description="DNS rcode text (NOERROR, NXDOMAIN, ...); null if no response.")
    answers: list[str] = Field(default_factory=list, description="Answer RRs as presentation text.")
    response_size: Count | None = Field(None, description="DNS response message size in bytes.")
    wire_basis: Literal["tcp_info", "udp_count", "quic_count", "netdev_count", "unavailable"] = Field(
        description="How bytes/packets were obtained (docs/dns.md)."
    )
    handshake_bytes_sent: BigCount | None = None
    handshake_bytes_received: BigCount | None = None
    handshake_packets_sent: Count | None = None
    handshake_packets_received: Count | None = None
    query_bytes_sent: BigCount | None = None
    query_bytes_received: BigCount | None = None
    query_packets_sent: Count | None = None
    query_packets_received: Count | None = None
    access_rtt_ms: float | None = Field(
        # >= 1 us: v_dns_query divides by it (a smaller one would overflow the RTT multiples)
        None, ge=0.001, description="Configured access-link RTT of the client (testbed), for RTT multiples."
    )
    cache_warmed: bool | None = Field(
        None,
        description="The unit first resolved each of its names once, untimed, at the same resolver "
        "(warm_cache); null when not asked (warm_cache = false; `dnscamp dns --no-warm-cache`).",
    )

    # Which engine made the query (docs/dns-engines.md). Null only in records written before
    # the field existed or for a unit whose parameters were invalid.
    engine: Literal["dnscamp", "getdns"] | None = Field(
        None, description="Query engine: dnscamp (our sockets) or getdns (libgetdns via its Python binding)."
    )
    engine_version: str | None = Field(
        None, description="dnscamp: the package version; getdns: binding and library versions."
    )
    engine_run_time_ms: Count | None = Field(
        None, description="getdns's own timing of the call (call_reporting 'run_time/ms', whole ms); "
        "null for the dnscamp engine and when getdns reported none.",
    )

    @model_validator(mode="after")
    def _phases(self) -> "DnsQueryBody":
        t0, sent, resp = self.t_start, self.t_query_sent, self.t_response  # runs for every record at ingest
        for name, v in (("t_connected", self.t_connected), ("t_tls_done", self.t_tls_done), ("t_query_sent", sent),
                        ("t_response", resp)):  # fmt: skip
            if v is not None and (t0 is None or v < t0):
                raise ValueError(f"{name} is before t_start")
        if resp is not None and sent is not None and resp < sent:
            raise ValueError("t_response is before t_query_sent")
        if self.connection_reused and (self.t_connected is not None or self.t_tls_done is not None):
            raise ValueError("a reused connection has no connect/handshake timestamps")
        if self.max_attempts is not None and self.attempts > self.max_attempts:
            raise ValueError("attempts exceeds max_attempts")
        return self
