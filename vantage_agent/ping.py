"""The ``ping`` kind: round-trip times to a target over ICMP echo or UDP.

ICMP uses a raw socket (root) or an unprivileged ICMP datagram socket where the kernel allows
it. UDP sends numbered datagrams on a connected socket: an echo service answers with a
datagram, a closed port answers with ICMP port-unreachable (seen as ECONNREFUSED on the
socket); both are timed and recorded with their ``reply_kind``. Timestamps are
``time.monotonic_ns`` taken right around send and receive. Every failure is a record.
"""

from __future__ import annotations

import errno
import os
import select
import socket
import struct
import time
from typing import Iterable, Literal

from pydantic import BaseModel, ConfigDict, Field

from vantage_agent import errors
from vantage_agent.kind import RunContext, Unit, make_record, utcnow
from vantage_agent.records import Envelope
from vantage_agent.records.ping import PingBody


class PingParams(BaseModel):
    """``[kinds.ping]`` in a campaign spec."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    targets: list[str] = Field(min_length=1, description="Host names or addresses to ping.")
    protocol: Literal["icmp", "udp"] = "icmp"
    port: int = Field(33434, ge=1, le=65535, description="UDP destination port (closed port: ICMP unreachable).")
    count: int = Field(5, ge=1, le=10_000)
    interval_ms: float = Field(200.0, ge=0)
    timeout_ms: float = Field(1000.0, gt=0)
    payload_bytes: int = Field(32, ge=8, le=1400)


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


class _Prober:
    """One socket, one target; ``probe(seq)`` returns (rtt_ms or None, reply_kind or None)."""

    def __init__(self, params: PingParams, address: str):
        self.p = params
        self.address = address
        self.ident = os.getpid() & 0xFFFF
        if params.protocol == "icmp":
            try:
                self.sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
                self.raw = True
            except PermissionError:
                try:
                    self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)
                except PermissionError as exc:
                    raise errors.SetupError(f"no ICMP socket allowed (need root or ping_group_range): {exc}")
                self.raw = False
        else:
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self.sock.connect((address, params.port))
            self.raw = False
        self.sock.setblocking(False)

    def close(self) -> None:
        self.sock.close()

    def _send(self, seq: int) -> None:
        payload = struct.pack("!Q", seq) + b"\0" * (self.p.payload_bytes - 8)
        if self.p.protocol == "udp":
            self.sock.send(payload)
            return
        header = struct.pack("!BBHHH", 8, 0, 0, self.ident, seq & 0xFFFF)
        packet = header + payload
        packet = struct.pack("!BBHHH", 8, 0, _checksum(packet), self.ident, seq & 0xFFFF) + payload
        self.sock.sendto(packet, (self.address, 0))

    def _match(self, data: bytes, seq: int) -> bool:
        if self.p.protocol == "udp":
            return len(data) >= 8 and struct.unpack("!Q", data[:8])[0] == seq
        if self.raw:
            data = data[(data[0] & 0x0F) * 4 :]
        if len(data) < 8:
            return False
        typ, _code, _ck, ident, rseq = struct.unpack("!BBHHH", data[:8])
        # Unprivileged ICMP sockets rewrite the identifier: match on the sequence only there.
        return typ == 0 and rseq == (seq & 0xFFFF) and (ident == self.ident or not self.raw)

    def probe(self, seq: int) -> tuple[float | None, str | None]:
        t0 = time.monotonic_ns()
        try:
            self._send(seq)
        except OSError as exc:
            if exc.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH):
                raise errors.Unreachable(f"{self.address}: {exc.strerror}") from None
            if exc.errno == errno.ECONNREFUSED and self.p.protocol == "udp":
                # The refusal of the previous probe surfaced on this send; resend.
                self._send(seq)
            else:
                raise errors.Other(f"send to {self.address}: {exc}") from None
        deadline = t0 + int(self.p.timeout_ms * 1e6)
        while True:
            left = (deadline - time.monotonic_ns()) / 1e9
            if left <= 0:
                return None, None
            ready, _, _ = select.select([self.sock], [], [], left)
            if not ready:
                return None, None
            try:
                data = self.sock.recv(2048)
            except ConnectionRefusedError:
                return (time.monotonic_ns() - t0) / 1e6, "port_unreachable"
            except OSError as exc:
                if exc.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH):
                    raise errors.Unreachable(f"{self.address}: {exc.strerror}") from None
                raise errors.Other(f"receive from {self.address}: {exc}") from None
            t1 = time.monotonic_ns()
            if self._match(data, seq):
                return (t1 - t0) / 1e6, "echo"


def ping(params: PingParams, target: str) -> PingBody:
    """Ping ``target``; raises a MeasurementError when nothing could be measured at all."""
    try:
        address = socket.gethostbyname(target)
    except (socket.gaierror, UnicodeError) as exc:
        raise errors.DnsError(f"cannot resolve {target!r}: {exc}") from None
    prober = _Prober(params, address)
    rtts: list[float | None] = []
    kinds: list[str | None] = []
    try:
        for seq in range(params.count):
            t_next = time.monotonic() + params.interval_ms / 1000
            rtt, kind = prober.probe(seq)
            rtts.append(rtt)
            kinds.append(kind)
            if seq + 1 < params.count:
                time.sleep(max(0.0, t_next - time.monotonic()))
    finally:
        prober.close()
    return PingBody(
        target=target,
        address=address,
        protocol=params.protocol,
        port=params.port if params.protocol == "udp" else None,
        count=params.count,
        interval_ms=params.interval_ms,
        timeout_ms=params.timeout_ms,
        sent=len(rtts),
        received=sum(r is not None for r in rtts),
        rtts_ms=rtts,
        reply_kinds=kinds,
    )


class _PingKind:
    name = "ping"
    params_model = PingParams
    where = "client"

    def targets(self, params: PingParams) -> list[str]:
        return list(params.targets)

    def run(self, unit: Unit, ctx: RunContext) -> Iterable[Envelope]:
        params = PingParams.model_validate({**unit.params, "targets": [unit.target]})
        started = utcnow()
        empty = dict(
            target=unit.target, protocol=params.protocol, count=params.count,
            port=params.port if params.protocol == "udp" else None,
            interval_ms=params.interval_ms, timeout_ms=params.timeout_ms, sent=0, received=0, rtts_ms=[],
        )  # fmt: skip
        try:
            body = ping(params, unit.target)
        except errors.MeasurementError as exc:
            yield make_record(unit, started_at=started, body=empty, status=exc.status, error=exc.message)
            return
        except Exception as exc:  # noqa: BLE001 - translated into the taxonomy, never swallowed
            yield make_record(unit, started_at=started, body=empty, status="other", error=f"{type(exc).__name__}: {exc}")
            return
        if body.received == 0:
            yield make_record(
                unit, started_at=started, body=body, status="timeout",
                error=f"no reply from {body.address} to {body.sent} probes within {params.timeout_ms:g} ms",
            )  # fmt: skip
        else:
            yield make_record(unit, started_at=started, body=body)


KIND = _PingKind()
