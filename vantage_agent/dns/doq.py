"""DoQ: DNS over dedicated QUIC connections (RFC 9250), ALPN ``doq``, UDP port 853.

aioquic's ``QuicConnection`` is sans-I/O ("performs no I/O on its own"), so this driver owns
the UDP socket: every datagram is sent and received by us, stamped with our monotonic clock
and counted (``wire_basis`` = ``quic_count``: UDP payload bytes and datagrams per direction).

Phases: ``t_connected`` = first Initial datagram sent; ``t_tls_done`` = aioquic reports
``HandshakeCompleted``; ``t_query_sent`` = the datagram carrying the query's stream left;
``t_response`` = the stream carrying the answer ended (FIN).

Per RFC 9250 §4.2 each query uses a new client-initiated bidirectional stream, message id 0,
two-byte length prefix. Policies: ``fresh`` = new connection per query; ``reuse`` = one
connection, closed after the idle timeout; ``resume`` = new connection per query that
presents the last session ticket and sends the query as 0-RTT early data
(``early_data``) — whether the server accepted it is ``resumed`` (HandshakeCompleted's
``session_resumed``) and ``early_data`` (``early_data_accepted``).

Negotiated parameters, read from aioquic, not assumed: ``alpn`` is HandshakeCompleted's
``alpn_protocol``; ``quic_version`` is the version the connection's packets use once the
answer is in (``QuicConnection._version``: aioquic 1.7 has no public getter; it is changed by
a Version Negotiation packet or by compatible version negotiation, RFC 9368), written by
``timing.quic_version_name``; ``tls_version`` is "TLSv1.3" once the handshake completed,
because aioquic's TLS offers only 1.3 and aborts a ServerHello with any other version
(aioquic/tls.py, "ServerHello has a version we did not advertise"; RFC 9001 §4.2), and null
before.
"""

from __future__ import annotations

import dataclasses
import select
import socket
import struct
from typing import Any

from aioquic import tls as aioquic_tls
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
from aioquic.quic.events import (
    ConnectionTerminated,
    HandshakeCompleted,
    StreamDataReceived,
    StreamReset,
)

from vantage_agent import errors

from . import _common as c
from . import load
from .policy import Policy
from .timing import DnsTiming, WireCount, failed, quic_version_name

TRANSPORT = "doq"
ENDPOINT = "doq"
ALPN = "doq"


class _Conn:
    def __init__(self, sock: socket.socket, quic: QuicConnection):
        self.sock = sock
        self.quic = quic
        self.handshake_done = False
        self.resumed = False
        self.early_accepted = False
        self.alpn: str | None = None
        self.closed_reason: str | None = None
        self.streams: dict[int, bytearray] = {}
        self.ended: set[int] = set()
        self.reset: set[int] = set()
        self.t_handshake: int | None = None
        self.count = WireCount()
        self.last_used: int | None = None


class _OneKeyShareConnection(QuicConnection):
    """A QUIC client that offers one TLS key share (X25519), as browsers, quic-go and
    ngtcp2 do. aioquic's default offers four (P-256, P-384, X25519, X448): three more key
    generations per handshake (client CPU per fresh query 5.15 -> 3.85 ms with one, in
    dc-client-fiber; docs/benchmarks.md) and a ClientHello no real DoQ client sends. Every
    TLS 1.3 server supports X25519 (CoreDNS / quic-go, the public resolvers of the catalog).
    aioquic 1.7.2 has no option for it: its Context's group list is set right after the
    Context is created, before the ClientHello is built."""

    def _initialize(self, peer_cid: bytes) -> None:
        super()._initialize(peer_cid)
        if self._is_client:
            self.tls._supported_groups = [aioquic_tls.Group.X25519]


class Client(c.Capabilities):
    transport = "doq"
    default_port = 853
    encrypted = True
    quic = True

    def __init__(self, endpoint: c.Endpoint, policy: Policy | None = None, options: c.QueryOptions | None = None):
        self.endpoint = endpoint
        self.policy = policy or Policy()
        self.options = options or c.QueryOptions()
        self._conn: _Conn | None = None
        self._ticket = None
        self._cfg: QuicConfiguration | None = None
        self._ticket_new = False
        self.connections_opened = 0

    # -- I/O ------------------------------------------------------------------------------------
    def _flush(self, conn: _Conn) -> tuple[int | None, int]:
        """Send what aioquic wants to send; returns (time of the last send, datagrams)."""
        t_last = None
        n = 0
        sent_b = 0
        for data, _addr in conn.quic.datagrams_to_send(now=c.now() / 1e9):
            conn.sock.send(data)
            t_last = c.now()
            n += 1
            sent_b += len(data)
        if n:
            conn.count = conn.count + WireCount(sent_b, 0, n, 0)
        return t_last, n

    def _pump(self, conn: _Conn, deadline: int, until) -> None:
        """Receive and process datagrams and timers until ``until()`` or the deadline."""
        while not until():
            if conn.closed_reason is not None:
                raise errors.QuicError(f"QUIC connection closed: {conn.closed_reason}")
            now = c.now()
            if now >= deadline:
                raise errors.Timeout("timed out")
            wait = (deadline - now) / 1e9
            timer = conn.quic.get_timer()
            if timer is not None:
                wait = max(0.0, min(wait, timer - now / 1e9))
            r, _, _ = select.select([conn.sock], [], [], wait)
            if r:
                try:
                    data = conn.sock.recv(65535)
                except ConnectionRefusedError:
                    raise errors.ConnectError("ICMP port unreachable (nothing listens on the DoQ port)") from None
                t = c.now()
                conn.count = conn.count + WireCount(0, len(data), 0, 1)
                conn.quic.receive_datagram(data, (self.endpoint.address, self.endpoint.port), now=t / 1e9)
                # drain whatever else is already queued, without waiting
                while True:
                    r2, _, _ = select.select([conn.sock], [], [], 0)
                    if not r2:
                        break
                    data = conn.sock.recv(65535)
                    conn.count = conn.count + WireCount(0, len(data), 0, 1)
                    conn.quic.receive_datagram(data, (self.endpoint.address, self.endpoint.port), now=c.now() / 1e9)
            else:
                timer = conn.quic.get_timer()
                if timer is not None and c.now() / 1e9 >= timer:
                    conn.quic.handle_timer(now=c.now() / 1e9)
            self._events(conn)
            self._flush(conn)

    def _events(self, conn: _Conn) -> None:
        while True:
            ev = conn.quic.next_event()
            if ev is None:
                return
            if isinstance(ev, HandshakeCompleted):
                conn.handshake_done = True
                conn.t_handshake = c.now()
                conn.resumed = ev.session_resumed
                conn.early_accepted = ev.early_data_accepted
                conn.alpn = ev.alpn_protocol
            elif isinstance(ev, StreamDataReceived):
                conn.streams.setdefault(ev.stream_id, bytearray()).extend(ev.data)
                if ev.end_stream:
                    conn.ended.add(ev.stream_id)
            elif isinstance(ev, StreamReset):
                conn.reset.add(ev.stream_id)
            elif isinstance(ev, ConnectionTerminated):
                conn.closed_reason = f"error 0x{ev.error_code:x} {ev.reason_phrase}".strip()

    def _save_ticket(self, ticket) -> None:
        self._ticket = ticket
        self._ticket_new = True

    def _config(self) -> QuicConfiguration:
        """The client configuration, built once per client: loading (and parsing) the CA file
        is not part of a query's cost."""
        if self._cfg is None:
            ep = self.endpoint
            cfg = QuicConfiguration(is_client=True, alpn_protocols=[ALPN], server_name=ep.tls_name or None)
            cfg.idle_timeout = max(self.policy.idle_timeout_s, 1.0) + 5.0
            if ep.ca_file:  # a private CA: parsed once, not per handshake
                with open(ep.ca_file, "rb") as f:
                    cfg.cadata = f.read()
            else:
                cfg.cafile = "/etc/ssl/certs/ca-certificates.crt"
            self._cfg = cfg
        return self._cfg

    def _connect(self, t_deadline: int, use_ticket: bool) -> _Conn:
        ep = self.endpoint
        cfg = dataclasses.replace(self._config(), session_ticket=None)
        if use_ticket and self._ticket is not None:
            cfg.session_ticket = self._ticket
        quic = _OneKeyShareConnection(configuration=cfg, session_ticket_handler=self._save_ticket)
        sock = socket.socket(c.family_of(ep.address), socket.SOCK_DGRAM)
        sock.connect((ep.address, ep.port))
        conn = _Conn(sock, quic)
        quic.connect((ep.address, ep.port), now=c.now() / 1e9)
        self.connections_opened += 1
        return conn

    def close(self) -> None:
        conn = self._conn
        self._conn = None
        if conn is not None:
            try:
                conn.quic.close(error_code=0)  # DOQ_NO_ERROR (RFC 9250 §4.3)
                self._flush(conn)
            except Exception:  # noqa: BLE001 - best effort on teardown
                pass
            conn.sock.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- one query ------------------------------------------------------------------------------
    def open_loop(self, qnames: list[str], at: list[int], qtype: str, txid: Any) -> list[DnsTiming]:
        """One QUIC connection, a new stream per query (RFC 9250 §4.2; load.py)."""
        return open_loop_quic(self, qnames, at, qtype, txid)

    def query(self, qname: str, qtype: str = "A") -> DnsTiming:
        ep, opt = self.endpoint, self.options
        t0 = c.now()
        base = DnsTiming(
            transport=self.transport, address=ep.address, port=ep.port, qname=qname, qtype=qtype,
            policy=self.policy.mode, t_start=t0, timeout_s=opt.timeout_s, wire_basis="quic_count",
        )
        deadline = t0 + int(opt.timeout_s * 1e9)
        try:
            q = c.make_query(qname, qtype, txid=0, edns_payload=opt.edns_payload)  # RFC 9250 §4.2.1
        except errors.BadInput as exc:
            return failed(base, exc, attempts=0)
        wire = q.to_wire()
        reused = False
        conn: _Conn | None = None
        t_connected = t_tls = t_sent = None
        hs_count: WireCount | None = None
        q_start = WireCount()
        phase = "connect"
        try:
            if self._conn is not None and self.policy.may_reuse(self._conn.last_used, t0) and self._conn.closed_reason is None:
                conn = self._conn
                reused = True
                q_start = conn.count
            else:
                self.close()
                conn = self._conn = self._connect(deadline, use_ticket=self.policy.resumes)
                t_connected, _ = self._flush(conn)
                early = self.policy.resumes and self._ticket is not None
                self._ticket_new = False
                if not early:
                    phase = "quic_handshake"
                    self._pump(conn, deadline, lambda: conn.handshake_done)
                    t_tls = conn.t_handshake
                    hs_count = conn.count
                    q_start = conn.count
            phase = "query"
            sid = conn.quic.get_next_available_stream_id()
            conn.quic.send_stream_data(sid, struct.pack("!H", len(wire)) + wire, end_stream=True)
            t_sent, _ = self._flush(conn)
            self._pump(conn, deadline, lambda: sid in conn.ended or sid in conn.reset)
            t_resp = c.now()
            if t_tls is None and not reused:
                t_tls = conn.t_handshake
                hs_count = None  # 0-RTT: handshake and query share the datagrams
            conn.last_used = t_resp
            if sid in conn.reset:
                raise errors.QuicError(f"stream {sid} reset by the server")
            buf = bytes(conn.streams.pop(sid, b""))
            conn.ended.discard(sid)
            res = base.replace(
                t_connected=t_connected, t_tls_done=t_tls, t_query_sent=t_sent, t_response=t_resp,
                connection_reused=reused,
                resumed=None if reused else conn.resumed,
                early_data=None if reused else (conn.early_accepted if self.policy.resumes else False),
                alpn=conn.alpn, tls_version="TLSv1.3" if conn.handshake_done else None,
                quic_version=quic_version_name(getattr(conn.quic, "_version", None)),
                handshake=hs_count,
                query=(conn.count - q_start) if hs_count is not None or reused else conn.count,
            )
            if len(buf) < 2 or struct.unpack("!H", buf[:2])[0] != len(buf) - 2:
                raise errors.MalformedResponse(f"DoQ stream carried {len(buf)} B, not one length-prefixed message")
            parsed = c.parse_response(buf[2:], q)
            res = res.replace(rcode=parsed.rcode, answers=parsed.answers, response_size=parsed.size)
            err = c.rcode_error(parsed)
            if err is not None:
                res = res.replace(status=err.status, error=err.message)
            if not self.policy.keeps_connection:
                # let the session ticket (sent after the handshake) arrive before closing
                if self.policy.resumes and not self._ticket_new:
                    try:
                        self._pump(conn, min(deadline, c.now() + 200_000_000), lambda: self._ticket_new)
                    except errors.MeasurementError:
                        pass
                self.close()
            return res
        except BaseException as exc:  # noqa: BLE001 - translated into the taxonomy right here
            if isinstance(exc, KeyboardInterrupt):
                raise
            err = c.classify(exc, phase)
            if isinstance(err, errors.Timeout) and phase == "quic_handshake":
                err = errors.Timeout("timed out during the QUIC handshake")
            if conn is not None and conn.closed_reason and not isinstance(exc, errors.MeasurementError):
                err = errors.QuicError(conn.closed_reason)
            tls_reason = None
            if conn is not None and conn.closed_reason and "certificate" in conn.closed_reason.lower():
                tls_reason = conn.closed_reason
            self.close()
            if tls_reason:
                err = errors.TlsError(f"certificate verification failed: {tls_reason}")
            return base.replace(status=err.status, error=err.message, t_connected=t_connected,
                                t_tls_done=t_tls, t_query_sent=t_sent, connection_reused=reused)


# -- open-loop load over this transport's one connection (load.py: schedule and matching) ----------
def open_loop_quic(client: Client, qnames: list[str], at: list[int], qtype: str, txid: load.Txids) -> list[DnsTiming]:
    opt = client.options
    out: list[DnsTiming | None] = [None] * len(qnames)
    fl = load.Inflight()
    conn: Any = None
    addr = (client.endpoint.address, client.endpoint.port)

    def lost(err: errors.MeasurementError) -> None:
        nonlocal conn
        for f in fl.drain():
            out[f.index] = load.fail(f.base, err)
        client.close()
        conn = None

    i = 0
    while i < len(qnames) or fl:
        now = c.now()
        while i < len(qnames) and at[i] <= now:
            q, base = load.new_query(client, qnames[i], qtype, at[i], 0)  # message id 0 (RFC 9250 §4.2.1)
            i += 1
            if q is None:
                out[i - 1] = base
                continue
            phase = "connect"
            try:
                if conn is None:
                    deadline = base.t_start + int(opt.timeout_s * 1e9)
                    conn = client._conn = client._connect(deadline, use_ticket=False)
                    t_conn, _ = client._flush(conn)
                    phase = "quic_handshake"
                    client._pump(conn, deadline, lambda: conn.handshake_done)
                    base = base.replace(connection_reused=False, t_connected=t_conn, t_tls_done=conn.t_handshake,
                                        resumed=conn.resumed, early_data=False)
                base = base.replace(alpn=conn.alpn, tls_version="TLSv1.3",
                                    quic_version=quic_version_name(getattr(conn.quic, "_version", None)))
                phase = "query"
                sid = conn.quic.get_next_available_stream_id()
                conn.quic.send_stream_data(sid, struct.pack("!H", len(q.wire)) + q.wire, end_stream=True)
                t_sent, _ = client._flush(conn)
                fl.add(sid, load.Flight(i - 1, q, base.replace(t_query_sent=t_sent or c.now()),
                                    base.t_start + int(opt.timeout_s * 1e9)))
            except Exception as exc:  # noqa: BLE001 - translated into the taxonomy right here
                err = c.classify(exc, phase)
                if conn is not None and conn.closed_reason and not isinstance(exc, errors.MeasurementError):
                    err = errors.QuicError(conn.closed_reason)
                out[i - 1] = load.fail(base, err)
                lost(err)
        for key, f in fl.expired(c.now()):
            fl.take(key)
            out[f.index] = load.timed_out(f, opt)
        if i >= len(qnames) and not fl:
            break  # not on the QUIC timers: they run for the connection's life
        if conn is None:
            if i < len(qnames):
                load.wait_readable([], at[i])
            continue
        timer = conn.quic.get_timer()
        try:
            r = load.wait_readable([conn.sock], at[i] if i < len(qnames) else None, fl.next_deadline(),
                      int(timer * 1e9) if timer is not None else None)
            while r:
                try:
                    data = conn.sock.recv(65535)
                except ConnectionRefusedError:
                    raise errors.ConnectError("ICMP port unreachable (nothing listens on the DoQ port)") from None
                conn.count = conn.count + WireCount(0, len(data), 0, 1)
                conn.quic.receive_datagram(data, addr, now=c.now() / 1e9)
                r, _, _ = select.select([conn.sock], [], [], 0)
            timer = conn.quic.get_timer()
            if timer is not None and c.now() / 1e9 >= timer:
                conn.quic.handle_timer(now=c.now() / 1e9)
            client._events(conn)
            client._flush(conn)
            t = c.now()
            for sid in list(conn.ended | conn.reset):
                f = fl.take(sid)
                conn.ended.discard(sid)
                buf = bytes(conn.streams.pop(sid, b""))
                if f is None:
                    continue
                res = f.base.replace(t_response=t)
                if sid in conn.reset:
                    conn.reset.discard(sid)
                    out[f.index] = load.fail(res, errors.QuicError(f"stream {sid} reset by the server"))
                elif len(buf) < 2 or struct.unpack("!H", buf[:2])[0] != len(buf) - 2:
                    out[f.index] = load.fail(res, errors.MalformedResponse(
                        f"DoQ stream carried {len(buf)} B, not one length-prefixed message"))
                else:
                    out[f.index] = load.answered(res, buf[2:], f.query)
            if conn.closed_reason is not None:
                raise errors.QuicError(f"QUIC connection closed: {conn.closed_reason}")
        except Exception as exc:  # noqa: BLE001 - as above
            lost(c.classify(exc, "query"))
    return out  # type: ignore[return-value]
