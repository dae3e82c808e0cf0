"""Driver for DNS over a byte stream (RFC 1035 §4.2.2 two-byte length prefix): Do53/TCP and
DoT (RFC 7858). Our own socket, so every phase is stamped by us, TCP_NODELAY is set and the
kernel's per-socket counters (TCP_INFO) give the bytes and segments on the wire."""

from __future__ import annotations

import select
import socket
import ssl
import struct
from typing import Any

from vantage_agent import errors

from . import _common as c
from . import load
from .policy import Policy
from .timing import DnsTiming, PhaseClock, WireCount, failed


class StreamClient(c.Capabilities):
    transport = "do53-tcp"
    alpn: str | None = None

    def __init__(self, endpoint: c.Endpoint, policy: Policy | None = None, options: c.QueryOptions | None = None):
        self.endpoint = endpoint
        self.policy = policy or Policy()
        self.options = options or c.QueryOptions()
        self._sock: socket.socket | None = None
        self._last_used: int | None = None
        self._session: ssl.SSLSession | None = None
        self._ctx: ssl.SSLContext | None = None
        self.connections_opened = 0

    # -- TLS ------------------------------------------------------------------------------------
    def _context(self) -> ssl.SSLContext:
        if self._ctx is None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.minimum_version = ssl.TLSVersion.TLSv1_2
            if self.endpoint.ca_file:
                ctx.load_verify_locations(cafile=self.endpoint.ca_file)
            else:
                ctx.load_default_certs()
            if self.alpn:
                ctx.set_alpn_protocols([self.alpn])
            if not self.endpoint.tls_name:
                ctx.check_hostname = False  # IP-only endpoint: verify the chain, not a name
            self._ctx = ctx
        return self._ctx

    # -- connection -----------------------------------------------------------------------------
    def _alive(self) -> bool:
        s = self._sock
        if s is None:
            return False
        try:
            r, _, _ = select.select([s], [], [], 0)
            if r:
                if isinstance(s, ssl.SSLSocket):
                    # readable with no query in flight: a late TLS 1.3 session ticket (alive),
                    # close_notify / EOF (dead), or stray data (treated as dead)
                    s.setblocking(False)
                    try:
                        s.recv(1)  # returned: EOF or stray data
                        return False
                    except ssl.SSLWantReadError:
                        return True
                    except (ssl.SSLError, OSError):
                        return False
                    finally:
                        s.setblocking(True)
                return bool(s.recv(1, socket.MSG_PEEK))
        except (OSError, ValueError):
            return False
        return True

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
        self._sock = None
        self._last_used = None

    def __enter__(self) -> "StreamClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _connect(self, clock: PhaseClock, deadline: int) -> WireCount | None:
        ep = self.endpoint
        raw = c.tcp_socket(c.family_of(ep.address))
        self._sock = raw
        raw.settimeout(c.remaining(deadline))
        clock.extra["phase"] = "connect"
        raw.connect((ep.address, ep.port))
        clock.t_connected = c.now()
        self.connections_opened += 1
        if not self.encrypted:
            return c.tcp_counts(raw)
        clock.extra["phase"] = "tls_handshake"
        session = self._session if self.policy.resumes else None
        tls = self._context().wrap_socket(
            raw, server_hostname=ep.tls_name or None, do_handshake_on_connect=False, session=session
        )
        self._sock = tls
        tls.settimeout(c.remaining(deadline))
        tls.do_handshake()
        clock.t_tls_done = c.now()
        return c.tcp_counts(tls)

    def open_loop(self, qnames: list[str], at: list[int], qtype: str, txid: Any) -> list[DnsTiming]:
        """Queries pipelined on one connection, id-matched (RFC 7766 §6.2.1.1; load.py)."""
        return open_loop_stream(self, qnames, at, qtype, txid)

    # -- one query ------------------------------------------------------------------------------
    def query(self, qname: str, qtype: str = "A") -> DnsTiming:
        ep = self.endpoint
        t0 = c.now()
        clock = PhaseClock(t_start=t0)
        base = DnsTiming(
            transport=self.transport, address=ep.address, port=ep.port, qname=qname, qtype=qtype,
            policy=self.policy.mode, t_start=t0, timeout_s=self.options.timeout_s,
            wire_basis="tcp_info",
        )
        deadline = t0 + int(self.options.timeout_s * 1e9)
        try:
            q = c.make_query(qname, qtype, edns_payload=self.options.edns_payload)
        except errors.BadInput as exc:
            return failed(base, exc, attempts=0)  # before any I/O: a reused connection stays open
        wire = q.to_wire()
        reused = False
        hs: WireCount | None = None
        before: WireCount | None = None
        try:
            if self._sock is not None and self.policy.may_reuse(self._last_used, t0) and self._alive():
                reused = True
            else:
                self.close()
                before = WireCount()
                hs = self._connect(clock, deadline)
            sock = self._sock
            assert sock is not None
            if reused:
                before = c.tcp_counts(sock)
            start_q = hs if hs is not None else before
            clock.extra["phase"] = "query"
            sock.settimeout(c.remaining(deadline))
            sock.sendall(struct.pack("!H", len(wire)) + wire)
            clock.t_query_sent = c.now()
            (n,) = struct.unpack("!H", c.recv_exact(sock, 2))
            resp = c.recv_exact(sock, n)
            clock.t_response = c.now()
            after = c.tcp_counts(sock)
            self._last_used = clock.t_response
            tls_version = sock.version() if isinstance(sock, ssl.SSLSocket) else None
            alpn = sock.selected_alpn_protocol() if isinstance(sock, ssl.SSLSocket) else None
            resumed = None
            if isinstance(sock, ssl.SSLSocket):
                resumed = bool(sock.session_reused) if not reused else None
                if self.policy.resumes and sock.session is not None:
                    self._session = sock.session  # TLS 1.3 tickets arrive after the handshake
            result = base.replace(
                t_connected=clock.t_connected, t_tls_done=clock.t_tls_done,
                t_query_sent=clock.t_query_sent, t_response=clock.t_response,
                connection_reused=reused, resumed=resumed, tls_version=tls_version, alpn=alpn,
                handshake=None if reused else hs,
                query=(after - start_q) if (after is not None and start_q is not None) else None,
            )
            parsed = c.parse_response(resp, q)
            result = result.replace(rcode=parsed.rcode, answers=parsed.answers, response_size=parsed.size)
            err = c.rcode_error(parsed)
            if err is not None:
                result = result.replace(status=err.status, error=err.message)
            if not self.policy.keeps_connection:
                self.close()
            return result
        except BaseException as exc:  # noqa: BLE001 - translated into the taxonomy right here
            if isinstance(exc, KeyboardInterrupt):
                raise
            err = c.classify(exc, str(clock.extra.get("phase", "query")))
            self.close()
            return base.replace(
                status=err.status, error=err.message, t_connected=clock.t_connected,
                t_tls_done=clock.t_tls_done, t_query_sent=clock.t_query_sent,
                t_response=clock.t_response, connection_reused=reused,
            )


# -- open-loop load over this transport's one connection (load.py: schedule and matching) ----------
def open_loop_stream(client: StreamClient, qnames: list[str], at: list[int], qtype: str,
                     txid: load.Txids) -> list[DnsTiming]:
    opt = client.options
    out: list[DnsTiming | None] = [None] * len(qnames)
    fl = load.Inflight()
    buf = bytearray()
    sock: Any = None

    def lost(err: errors.MeasurementError) -> None:
        nonlocal sock
        for f in fl.drain():
            out[f.index] = load.fail(f.base, err)
        client.close()
        sock = None
        buf.clear()

    i = 0
    while i < len(qnames) or fl:
        now = c.now()
        while i < len(qnames) and at[i] <= now:
            q, base = load.new_query(client, qnames[i], qtype, at[i], txid())
            i += 1
            if q is None:
                out[i - 1] = base
                continue
            clock = PhaseClock(t_start=base.t_start)
            try:
                if sock is None:  # the connection's first query carries its phases
                    client._connect(clock, base.t_start + int(opt.timeout_s * 1e9))
                    sock = client._sock
                    base = base.replace(connection_reused=False, t_connected=clock.t_connected,
                                        t_tls_done=clock.t_tls_done)
                    if isinstance(sock, ssl.SSLSocket):
                        base = base.replace(tls_version=sock.version(), alpn=sock.selected_alpn_protocol(),
                                            resumed=bool(sock.session_reused))
                sock.settimeout(opt.timeout_s)
                sock.sendall(struct.pack("!H", len(q.wire)) + q.wire)
                fl.add(q.id, load.Flight(i - 1, q, base.replace(t_query_sent=c.now()), base.t_start + int(opt.timeout_s * 1e9)))
            except Exception as exc:  # noqa: BLE001 - translated into the taxonomy right here
                out[i - 1] = load.fail(base.replace(t_connected=clock.t_connected, t_tls_done=clock.t_tls_done),
                                   c.classify(exc, str(clock.extra.get("phase", "query"))))
                lost(c.classify(exc, "query"))
        for key, f in fl.expired(c.now()):
            fl.take(key)
            out[f.index] = load.timed_out(f, opt)
        if sock is None or not (load.wait_readable([sock], at[i] if i < len(qnames) else None, fl.next_deadline())
                                or (isinstance(sock, ssl.SSLSocket) and sock.pending())):
            if sock is None and i < len(qnames) and not fl:
                load.wait_readable([], at[i])
            continue
        sock.settimeout(0.0)
        try:
            while True:
                try:
                    data = sock.recv(65536)
                except (ssl.SSLWantReadError, BlockingIOError):
                    break
                if not data:
                    raise ConnectionResetError("connection closed by the server")
                buf += data
                t = c.now()
                for msg in load.split_frames(buf):
                    f = fl.take(load.message_id(msg))
                    if f is not None:
                        out[f.index] = load.answered(f.base.replace(t_response=t), msg, f.query)
        except Exception as exc:  # noqa: BLE001 - as above
            lost(c.classify(exc, "query"))
    return out  # type: ignore[return-value]
