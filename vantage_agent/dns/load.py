"""Open-loop load over ONE connection (experiment 1: head-of-line blocking,
003_b61199a6a5b37f70.txt §3): queries arrive on a Poisson schedule (``rate_per_s``, seeded)
and each is sent when it arrives, without waiting for the answers of earlier ones; answers are
matched back to their queries (DNS id for Do53 and DoT, QUIC stream for DoQ, the libcurl
transfer for DoH / DoH3). The connection setup, TLS and CA handling, response parsing and the
error taxonomy are the transport drivers' own (do53.UdpClient, _stream.StreamClient, doh.Client,
doq.Client): this module only adds the schedule and the matching. Each of those drivers has an
``open_loop`` method that hands itself to its ``open_loop_*`` function here; ``run`` calls it.

Per transport:

- ``do53``: one connected UDP socket; every query its own datagram (id-matched); resolv.conf
  retransmission after ``timeout_s`` up to ``attempts``, as the sequential driver.
- ``do53-tcp`` / ``dot``: one TCP (TLS) connection, queries pipelined (RFC 7766 §6.2.1.1); the
  server may answer out of order, the id says which query an answer is for.
- ``doh``: libcurl multi, at most one connection to the host (``MAX_HOST_CONNECTIONS`` 1).
  HTTP/2 multiplexes one stream per query; HTTP/1.1 (``QueryOptions.http_version`` "1.1")
  cannot, and libcurl no longer pipelines, so a query waits in libcurl's queue until the
  previous exchange is over: the blocking this mode measures.
- ``doh3``: as ``doh`` over HTTP/3 (one QUIC connection, a stream per query).
- ``doq``: one QUIC connection, a new stream per query (RFC 9250 §4.2).

Times: ``t_start`` is the query's scheduled arrival (monotonic ns), so ``t_response - t_start``
is the resolution time an application issuing the query at that moment would see, time spent
queued behind other queries included; ``t_query_sent`` is when it really left (libcurl: its
own offset from the moment the transfer was handed to it). The query that opens the
connection carries ``t_connected`` / ``t_tls_done``; the others ``connection_reused`` true.
Bytes and packets cannot be attributed to one query on a shared connection:
``wire_basis`` ``unavailable``. A query never answered within ``timeout_s`` of its arrival is a
``timeout`` record; a connection that fails fails the queries in flight on it (taxonomy status
from ``_common.classify``) and the next query opens a new one.
"""

from __future__ import annotations

import random
import select
import ssl
import string
import struct
from dataclasses import dataclass
from typing import Any

import pycurl

from vantage_agent import errors

from . import _common as c
from . import do53, doh, doq
from ._stream import StreamClient
from .timing import DnsTiming, PhaseClock

LABEL_CHARS = string.ascii_lowercase + string.digits
LABEL_LEN = 5  # the paper's "random prefix of constant length five" (003 §3)


# -- the schedule ---------------------------------------------------------------------------------
def schedule(n: int, rate_per_s: float, seed: int | None) -> list[float]:
    """Arrival offsets (seconds from the start, increasing) of ``n`` queries of a Poisson
    process of rate ``rate_per_s``: exponential gaps, the first arrival at 0."""
    if rate_per_s <= 0:
        raise ValueError("rate_per_s must be > 0")
    rng = random.Random(seed)
    out, t = [], 0.0
    for i in range(n):
        if i:
            t += rng.expovariate(rate_per_s)
        out.append(t)
    return out


def unique_names(names: list[str], rng: random.Random | None = None) -> list[str]:
    """Each name under a fresh random label of ``LABEL_LEN`` characters (a resolver cannot
    answer it from its cache). Unseeded by default: a second run must not find the first run's
    names cached."""
    rng = rng or random.SystemRandom()
    seen: set[str] = set()
    out = []
    for n in names:
        while True:
            label = "".join(rng.choice(LABEL_CHARS) for _ in range(LABEL_LEN))
            name = f"{label}.{n}"
            if name not in seen:
                break
        seen.add(name)
        out.append(name)
    return out


# -- matching -------------------------------------------------------------------------------------
def message_id(wire: bytes) -> int | None:
    return struct.unpack_from("!H", wire)[0] if len(wire) >= 2 else None


def split_frames(buf: bytearray) -> list[bytes]:
    """Take every complete two-byte-length-prefixed message (RFC 1035 §4.2.2) off the front of
    ``buf``; an incomplete one stays for the next read."""
    out = []
    while len(buf) >= 2:
        (n,) = struct.unpack_from("!H", buf)
        if len(buf) < 2 + n:
            break
        out.append(bytes(buf[2 : 2 + n]))
        del buf[: 2 + n]
    return out


class Txids:
    """DNS ids for queries in flight on one connection: a seeded random start, then +1 modulo
    2^16, so no two of any 65,536 consecutive queries share an id."""

    def __init__(self, seed: int | None):
        self._next = random.Random(seed).randrange(65536)

    def __call__(self) -> int:
        v = self._next
        self._next = (v + 1) & 0xFFFF
        return v


@dataclass
class _Flight:
    index: int
    query: c.Query
    base: DnsTiming
    deadline: int  # ns: t_start + timeout
    attempt: int = 1


class Inflight:
    """Queries awaiting an answer, by key (DNS id or stream id)."""

    def __init__(self) -> None:
        self.by_key: dict[int, _Flight] = {}

    def add(self, key: int, f: _Flight) -> None:
        if key in self.by_key:  # only after 65,536 unanswered queries: refuse rather than mismatch
            raise errors.Other(f"key {key} is still in flight")
        self.by_key[key] = f

    def take(self, key: int | None) -> _Flight | None:
        return self.by_key.pop(key, None) if key is not None else None

    def expired(self, now: int) -> list[tuple[int, _Flight]]:
        return [(k, f) for k, f in self.by_key.items() if f.deadline <= now]

    def next_deadline(self) -> int | None:
        return min((f.deadline for f in self.by_key.values()), default=None)

    def drain(self) -> list[_Flight]:
        out = list(self.by_key.values())
        self.by_key.clear()
        return out

    def __len__(self) -> int:
        return len(self.by_key)


def answered(res: DnsTiming, wire: bytes, q: c.Query, *, udp: bool = False) -> DnsTiming:
    """``res`` with the parsed answer (rcode, answers, size) or the taxonomy status of a bad one."""
    try:
        parsed = c.parse_response(wire, q)
    except errors.MeasurementError as exc:
        return res.replace(status=exc.status, error=exc.message)
    res = res.replace(rcode=parsed.rcode, answers=parsed.answers, response_size=parsed.size)
    if udp and parsed.truncated:
        return _fail(res, errors.Truncated("TC bit set in the UDP response (no TCP fallback on this transport)"))
    err = c.rcode_error(parsed)
    return res.replace(status=err.status, error=err.message) if err is not None else res


def _fail(res: DnsTiming, err: errors.MeasurementError) -> DnsTiming:
    return res.replace(status=err.status, error=err.message)


def _timeout(f: _Flight, opt: c.QueryOptions) -> DnsTiming:
    return _fail(f.base, errors.Timeout(f"no answer within {opt.timeout_s:g} s of the query's arrival "
                                        f"(open-loop load on one connection)"))


# -- the run --------------------------------------------------------------------------------------
def run(client: Any, qnames: list[str], offsets_s: list[float], *, qtype: str = "A", seed: int | None = None,
        start_ns: int | None = None) -> list[DnsTiming]:
    """Send ``qnames[i]`` at ``start_ns + offsets_s[i]`` over ``client``'s one connection and
    return one DnsTiming per query, in query order. ``client`` is a driver of the dnscamp engine
    (registry.client) with policy ``reuse``; it is closed on return."""
    if len(qnames) != len(offsets_s):
        raise ValueError("one offset per name")
    start = (start_ns if start_ns is not None else c.now())
    at = [start + int(o * 1e9) for o in offsets_s]
    open_loop = getattr(client, "open_loop", None)  # each driver of ours runs its own (below)
    if open_loop is None:
        raise errors.SetupError(f"open-loop load needs a dnscamp engine driver, not {type(client).__name__}")
    try:
        return open_loop(qnames, at, qtype, Txids(seed))
    finally:
        client.close()


def _make(client: Any, qname: str, qtype: str, t: int, txid: int, **kw: Any) -> tuple[c.Query | None, DnsTiming]:
    ep, opt = client.endpoint, client.options
    base = DnsTiming(transport=client.transport, address=ep.address, port=kw.pop("port", ep.port), qname=qname,
                     qtype=qtype, policy=client.policy.mode, t_start=t, timeout_s=opt.timeout_s,
                     wire_basis="unavailable", **{"connection_reused": True, **kw})
    try:
        return c.make_query(qname, qtype, txid=txid, edns_payload=opt.edns_payload), base
    except errors.BadInput as exc:
        return None, _fail(base.replace(attempts=0, connection_reused=False), exc)


def _wait(fds: list[Any], *deadlines: int | None) -> list[Any]:
    """select() on ``fds`` until one is readable or the earliest deadline (ns); no deadline:
    nothing is scheduled or in flight, so nothing to wait for."""
    ds = [d for d in deadlines if d is not None]
    if not ds:
        return []
    r, _, _ = select.select(fds, [], [], max(0.0, (min(ds) - c.now()) / 1e9))
    return r


def open_loop_udp(client: do53.UdpClient, qnames: list[str], at: list[int], qtype: str, txid: Txids) -> list[DnsTiming]:
    opt = client.options
    out: list[DnsTiming | None] = [None] * len(qnames)
    fl = Inflight()
    sock = client._socket()
    sock.setblocking(False)
    i = 0
    while i < len(qnames) or fl:
        now = c.now()
        while i < len(qnames) and at[i] <= now:
            q, base = _make(client, qnames[i], qtype, at[i], txid(), connection_reused=False)
            if q is None:
                out[i] = base
            else:
                try:
                    sock.send(q.to_wire())
                    f = _Flight(i, q, base.replace(t_query_sent=c.now()), c.now() + int(opt.timeout_s * 1e9))
                    fl.add(q.id, f)
                except OSError as exc:
                    out[i] = _fail(base, c.classify(exc, "query"))
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
                out[f.index] = _fail(f.base.replace(attempts=f.attempt),
                                     errors.Timeout(f"no response after {opt.attempts} attempt(s) of {opt.timeout_s:g} s"))
        if not _wait([sock], at[i] if i < len(qnames) else None, fl.next_deadline()):
            continue
        while True:
            try:
                data = sock.recv(65535)
            except (BlockingIOError, InterruptedError):
                break
            except ConnectionRefusedError:  # ICMP port unreachable: nothing listens; fails what is in flight
                for f in fl.drain():
                    out[f.index] = _fail(f.base.replace(attempts=f.attempt), errors.ConnectError(
                        "ICMP port unreachable (nothing listens on the resolver port)"))
                break
            f = fl.take(message_id(data))
            if f is None:
                continue  # a late duplicate after a retransmission
            res = f.base.replace(t_response=c.now(), attempts=f.attempt)
            out[f.index] = answered(res, data, f.query, udp=True)
    return out  # type: ignore[return-value]


def open_loop_stream(client: StreamClient, qnames: list[str], at: list[int], qtype: str,
                     txid: Txids) -> list[DnsTiming]:
    opt = client.options
    out: list[DnsTiming | None] = [None] * len(qnames)
    fl = Inflight()
    buf = bytearray()
    sock: Any = None

    def lost(err: errors.MeasurementError) -> None:
        nonlocal sock
        for f in fl.drain():
            out[f.index] = _fail(f.base, err)
        client.close()
        sock = None
        buf.clear()

    i = 0
    while i < len(qnames) or fl:
        now = c.now()
        while i < len(qnames) and at[i] <= now:
            q, base = _make(client, qnames[i], qtype, at[i], txid())
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
                fl.add(q.id, _Flight(i - 1, q, base.replace(t_query_sent=c.now()), base.t_start + int(opt.timeout_s * 1e9)))
            except Exception as exc:  # noqa: BLE001 - translated into the taxonomy right here
                out[i - 1] = _fail(base.replace(t_connected=clock.t_connected, t_tls_done=clock.t_tls_done),
                                   c.classify(exc, str(clock.extra.get("phase", "query"))))
                lost(c.classify(exc, "query"))
        for key, f in fl.expired(c.now()):
            fl.take(key)
            out[f.index] = _timeout(f, opt)
        if sock is None or not (_wait([sock], at[i] if i < len(qnames) else None, fl.next_deadline())
                                or (isinstance(sock, ssl.SSLSocket) and sock.pending())):
            if sock is None and i < len(qnames) and not fl:
                _wait([], at[i])
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
                for msg in split_frames(buf):
                    f = fl.take(message_id(msg))
                    if f is not None:
                        out[f.index] = answered(f.base.replace(t_response=t), msg, f.query)
        except Exception as exc:  # noqa: BLE001 - as above
            lost(c.classify(exc, "query"))
    return out  # type: ignore[return-value]


def open_loop_quic(client: doq.Client, qnames: list[str], at: list[int], qtype: str, txid: Txids) -> list[DnsTiming]:
    opt = client.options
    out: list[DnsTiming | None] = [None] * len(qnames)
    fl = Inflight()
    conn: Any = None
    addr = (client.endpoint.address, client.endpoint.port)

    def lost(err: errors.MeasurementError) -> None:
        nonlocal conn
        for f in fl.drain():
            out[f.index] = _fail(f.base, err)
        client.close()
        conn = None

    i = 0
    while i < len(qnames) or fl:
        now = c.now()
        while i < len(qnames) and at[i] <= now:
            q, base = _make(client, qnames[i], qtype, at[i], 0)  # message id 0 (RFC 9250 §4.2.1)
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
                                    quic_version=doq.quic_version_name(getattr(conn.quic, "_version", None)))
                phase = "query"
                sid = conn.quic.get_next_available_stream_id()
                conn.quic.send_stream_data(sid, struct.pack("!H", len(q.wire)) + q.wire, end_stream=True)
                t_sent, _ = client._flush(conn)
                fl.add(sid, _Flight(i - 1, q, base.replace(t_query_sent=t_sent or c.now()),
                                    base.t_start + int(opt.timeout_s * 1e9)))
            except Exception as exc:  # noqa: BLE001 - translated into the taxonomy right here
                err = c.classify(exc, phase)
                if conn is not None and conn.closed_reason and not isinstance(exc, errors.MeasurementError):
                    err = errors.QuicError(conn.closed_reason)
                out[i - 1] = _fail(base, err)
                lost(err)
        for key, f in fl.expired(c.now()):
            fl.take(key)
            out[f.index] = _timeout(f, opt)
        if i >= len(qnames) and not fl:
            break  # not on the QUIC timers: they run for the connection's life
        if conn is None:
            if i < len(qnames):
                _wait([], at[i])
            continue
        timer = conn.quic.get_timer()
        try:
            r = _wait([conn.sock], at[i] if i < len(qnames) else None, fl.next_deadline(),
                      int(timer * 1e9) if timer is not None else None)
            while r:
                try:
                    data = conn.sock.recv(65535)
                except ConnectionRefusedError:
                    raise errors.ConnectError("ICMP port unreachable (nothing listens on the DoQ port)") from None
                conn.count = conn.count + doq.WireCount(0, len(data), 0, 1)
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
                    out[f.index] = _fail(res, errors.QuicError(f"stream {sid} reset by the server"))
                elif len(buf) < 2 or struct.unpack("!H", buf[:2])[0] != len(buf) - 2:
                    out[f.index] = _fail(res, errors.MalformedResponse(
                        f"DoQ stream carried {len(buf)} B, not one length-prefixed message"))
                else:
                    out[f.index] = answered(res, buf[2:], f.query)
            if conn.closed_reason is not None:
                raise errors.QuicError(f"QUIC connection closed: {conn.closed_reason}")
        except Exception as exc:  # noqa: BLE001 - as above
            lost(c.classify(exc, "query"))
    return out  # type: ignore[return-value]


def open_loop_curl(client: doh.Client, qnames: list[str], at: list[int], qtype: str, txid: Txids) -> list[DnsTiming]:
    opt = client.options
    out: list[DnsTiming | None] = [None] * len(qnames)
    multi = pycurl.CurlMulti()
    multi.setopt(pycurl.M_MAX_HOST_CONNECTIONS, 1)  # one connection: queue (h1.1) or multiplex (h2, h3)
    multi.setopt(pycurl.M_MAX_TOTAL_CONNECTIONS, 1)
    multi.setopt(pycurl.M_PIPELINING, pycurl.PIPE_MULTIPLEX)
    live: dict[Any, dict[str, Any]] = {}
    method = opt.doh_method or client.default_method

    def start(idx: int) -> None:
        q, base = _make(client, qnames[idx], qtype, at[idx], 0, port=client._port, http_method=method)
        if q is None:
            out[idx] = base
            return
        h = client._new_handle()
        st: dict[str, Any] = {"i": idx, "q": q, "base": base, "body": bytearray(), "t_last": None, "tls": None,
                              "ptr": client._handle_ptr}

        def write(data: bytes, st: dict = st) -> None:
            st["t_last"] = c.now()
            if st["tls"] is None and st["ptr"] is not None:
                st["tls"] = doh._tls().read(st["ptr"])
            st["body"] += data

        h.setopt(pycurl.WRITEFUNCTION, write)
        h.setopt(pycurl.PREREQFUNCTION, lambda *a: pycurl.PREREQFUNC_OK)
        h.setopt(pycurl.PIPEWAIT, 1)  # wait for the one connection rather than open another
        h.setopt(pycurl.FRESH_CONNECT, 0)
        h.setopt(pycurl.FORBID_REUSE, 0)
        h.setopt(pycurl.TIMEOUT_MS, int(opt.timeout_s * 1000))
        h.setopt(pycurl.CONNECTTIMEOUT_MS, int(opt.timeout_s * 1000))
        if method == "GET":
            h.setopt(pycurl.HTTPGET, 1)
            h.setopt(pycurl.URL, client.get_url(q.wire))
        else:
            h.setopt(pycurl.URL, client.endpoint.url)
            h.setopt(pycurl.POSTFIELDS, q.wire)
        st["t_add"] = c.now()
        multi.add_handle(h)
        live[h] = st

    def finish(h: Any, code: int | None, msg: str) -> None:
        st = live.pop(h)
        client._new_tls = st["tls"]
        res = client._phases(st["base"], h, st["t_add"])
        new_conn = h.getinfo(pycurl.NUM_CONNECTS) > 0
        if not new_conn:
            res = res.replace(t_connected=None, t_tls_done=None)
        res = res.replace(connection_reused=not new_conn)
        if res.t_query_sent is not None and (res.t_query_sent < res.t_start or
                                             (st["t_last"] is not None and res.t_query_sent > st["t_last"])):
            res = res.replace(t_query_sent=None)  # an offset we cannot place: null, not a guess
        if code is not None:
            res = _fail(res, client._classify(code, msg))
        else:
            status = h.getinfo(pycurl.RESPONSE_CODE)
            res = res.replace(t_response=st["t_last"], http_status=status)
            res = (_fail(res, errors.HttpError(f"HTTP status {status}")) if status // 100 != 2
                   else answered(res, bytes(st["body"]), st["q"]))
        out[st["i"]] = res
        multi.remove_handle(h)
        h.close()

    i = 0
    try:
        while i < len(qnames) or live:
            while i < len(qnames) and at[i] <= c.now():
                start(i)
                i += 1
            while multi.perform()[0] == pycurl.E_CALL_MULTI_PERFORM:
                pass
            while True:
                n, ok, failed = multi.info_read()
                for h in ok:
                    finish(h, None, "")
                for h, code, msg in failed:
                    finish(h, code, msg)
                if not n:
                    break
            waits = [at[i]] if i < len(qnames) else []
            t_curl = multi.timeout()
            if t_curl >= 0:
                waits.append(c.now() + t_curl * 1_000_000)
            wait = max(0.0, (min(waits) - c.now()) / 1e9) if waits else 0.05
            multi.select(min(wait, 0.05) if live else wait)
    finally:
        for h in list(live):
            multi.remove_handle(h)
            h.close()
        multi.close()
        for s in client._new_socks:  # libcurl kept its own dup of each
            s.close()
        client._new_socks.clear()
    return out  # type: ignore[return-value]
