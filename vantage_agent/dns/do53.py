"""Do53: classic DNS over UDP (``UdpClient``, transport ``do53``) and TCP (``TcpClient``,
transport ``do53-tcp``).

Choice: the WWW'20 tool used getdns for Do53 (002_6fa4cf280535d36b.txt §3.1.2). We
use our own sockets with dnspython only for building and parsing messages, because getdns'
API returns after the whole lookup (no send timestamp, its own scheduler between our clock and
the socket) and hides the retry schedule. Here ``t_query_sent`` is stamped right after the
first ``send()`` and ``t_response`` right after the matching ``recv()``.

Timeout and retry follow the stub resolver semantics of resolv.conf(5) — ``timeout:5``,
``attempts:2`` by default — because that timeout, not the network, decides Do53's result on
lossy links (004_9d5842b322ef90bc.txt §2). Both values are recorded in every result. Over UDP
``t_query_sent`` is the first transmission, so the exchange time includes the wait before a
retransmission (what a browser would experience); ``attempts`` says how many were sent.
"""

from __future__ import annotations

import select
import socket
from typing import Any

from vantage_agent import errors

from . import _common as c
from . import load
from ._stream import StreamClient
from .policy import Policy
from .timing import DnsTiming, WireCount, failed

TRANSPORT = "do53"
ENDPOINT = "do53"


class UdpClient(c.Capabilities):
    transport = "do53"
    retransmits = True

    def __init__(self, endpoint: c.Endpoint, policy: Policy | None = None, options: c.QueryOptions | None = None):
        self.endpoint = endpoint
        self.policy = policy or Policy()
        self.options = options or c.QueryOptions()
        self._sock: socket.socket | None = None

    def _socket(self) -> socket.socket:
        if self._sock is None or not self.policy.keeps_connection:
            self.close()
            s = socket.socket(c.family_of(self.endpoint.address), socket.SOCK_DGRAM)
            s.connect((self.endpoint.address, self.endpoint.port))  # only this peer's datagrams
            self._sock = s
        return self._sock

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> "UdpClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open_loop(self, qnames: list[str], at: list[int], qtype: str, txid: Any) -> list[DnsTiming]:
        """Every query its own datagram on one connected socket, id-matched (load.py)."""
        return open_loop_udp(self, qnames, at, qtype, txid)

    def query(self, qname: str, qtype: str = "A") -> DnsTiming:
        ep, opt = self.endpoint, self.options
        t0 = c.now()
        base = DnsTiming(
            transport=self.transport, address=ep.address, port=ep.port, qname=qname, qtype=qtype,
            policy=self.policy.mode, t_start=t0, timeout_s=opt.timeout_s, wire_basis="udp_count",
            handshake=None,
        )
        try:
            q = c.make_query(qname, qtype, edns_payload=opt.edns_payload)
        except errors.BadInput as exc:
            return failed(base, exc, attempts=0)
        wire = q.to_wire()
        sent = rcvd = sent_b = rcvd_b = 0
        t_first: int | None = None
        attempt = 0
        try:
            s = self._socket()
            for attempt in range(1, opt.attempts + 1):
                s.send(wire)
                ts = c.now()
                if t_first is None:
                    t_first = ts
                sent += 1
                sent_b += len(wire)
                deadline = ts + int(opt.timeout_s * 1e9)
                while True:
                    left = (deadline - c.now()) / 1e9
                    if left <= 0:
                        break
                    r, _, _ = select.select([s], [], [], left)
                    if not r:
                        break
                    try:
                        data = s.recv(65535)
                    except ConnectionRefusedError:
                        # ICMP port unreachable: nobody listens there
                        raise errors.ConnectError("ICMP port unreachable (nothing listens on the resolver port)") from None
                    t_resp = c.now()
                    rcvd += 1
                    rcvd_b += len(data)
                    if len(data) >= 2 and int.from_bytes(data[:2], "big") != q.id:
                        continue  # a late answer to an earlier query: keep waiting
                    count = WireCount(sent_b, rcvd_b, sent, rcvd)
                    res = base.replace(t_query_sent=t_first, t_response=t_resp, attempts=attempt, query=count)
                    try:
                        parsed = c.parse_response(data, q)
                    except errors.MeasurementError as exc:
                        return res.replace(status=exc.status, error=exc.message)
                    res = res.replace(rcode=parsed.rcode, answers=parsed.answers, response_size=parsed.size)
                    if parsed.truncated:
                        return res.replace(status=errors.Truncated.status,
                                           error="TC bit set in the UDP response (no TCP fallback on this transport)")
                    err = c.rcode_error(parsed)
                    if err is not None:
                        res = res.replace(status=err.status, error=err.message)
                    return res
            return base.replace(
                status=errors.Timeout.status,
                error=f"no response after {opt.attempts} attempt(s) of {opt.timeout_s:g} s",
                t_query_sent=t_first, attempts=attempt, query=WireCount(sent_b, rcvd_b, sent, rcvd),
            )
        except BaseException as exc:  # noqa: BLE001 - translated into the taxonomy right here
            if isinstance(exc, KeyboardInterrupt):
                raise
            err = c.classify(exc, "query")
            self.close()
            return base.replace(status=err.status, error=err.message, t_query_sent=t_first,
                                attempts=max(attempt, 1), query=WireCount(sent_b, rcvd_b, sent, rcvd))
        finally:
            if not self.policy.keeps_connection:
                self.close()


class TcpClient(StreamClient):
    """Do53 over TCP (RFC 7766); ``reuse`` keeps the connection open between queries."""

    transport = "do53-tcp"


Client = UdpClient


# -- open-loop load over this transport's one connection (load.py: schedule and matching) ----------
def open_loop_udp(client: UdpClient, qnames: list[str], at: list[int], qtype: str, txid: load.Txids) -> list[DnsTiming]:
    opt = client.options
    out: list[DnsTiming | None] = [None] * len(qnames)
    fl = load.Inflight()
    sock = client._socket()
    sock.setblocking(False)
    i = 0
    while i < len(qnames) or fl:
        now = c.now()
        while i < len(qnames) and at[i] <= now:
            q, base = load.new_query(client, qnames[i], qtype, at[i], txid(), connection_reused=False)
            if q is None:
                out[i] = base
            else:
                try:
                    sock.send(q.to_wire())
                    f = load.Flight(i, q, base.replace(t_query_sent=c.now()), c.now() + int(opt.timeout_s * 1e9))
                    fl.add(q.id, f)
                except OSError as exc:
                    out[i] = load.fail(base, c.classify(exc, "query"))
            i += 1
        for key, f in fl.expired(c.now()):  # resolv.conf: retransmit after timeout_s, then give up
            if f.attempt < opt.attempts:
                f.attempt += 1
                f.deadline = c.now() + int(opt.timeout_s * 1e9)
                try:
                    sock.send(f.query.to_wire())
                except OSError:
                    pass  # the next recv reports it; the deadline stands
            else:
                fl.take(key)
                out[f.index] = load.fail(f.base.replace(attempts=f.attempt),
                                     errors.Timeout(f"no response after {opt.attempts} attempt(s) of {opt.timeout_s:g} s"))
        if not load.wait_readable([sock], at[i] if i < len(qnames) else None, fl.next_deadline()):
            continue
        while True:
            try:
                data = sock.recv(65535)
            except (BlockingIOError, InterruptedError):
                break
            except ConnectionRefusedError:  # ICMP port unreachable: nothing listens; fails what is in flight
                for f in fl.drain():
                    out[f.index] = load.fail(f.base.replace(attempts=f.attempt), errors.ConnectError(
                        "ICMP port unreachable (nothing listens on the resolver port)"))
                break
            f = fl.take(load.message_id(data))
            if f is None:
                continue  # a late duplicate after a retransmission
            res = f.base.replace(t_response=c.now(), attempts=f.attempt)
            out[f.index] = load.answered(res, data, f.query, udp=True)
    return out  # type: ignore[return-value]
