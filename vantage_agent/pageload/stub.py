"""dnscamp's local stub for the doq / doh3 page-load modes.

Neither browser speaks DoQ or DoH3 to a resolver, so the browser's plain Do53 goes to this
stub on a private loopback address (``/etc/resolv.conf`` in the browser's mount namespace)
and the stub forwards each query, unchanged, to the upstream over DoQ (RFC 9250) or DoH over
HTTP/3 (RFC 8484 + RFC 9114), over one reused QUIC connection per upstream, and hands the
upstream's answer back (transaction id restored). No cache: every browser lookup reaches the
resolver, as with Stubby in the dot mode.

The transports are dnspython + aioquic, the libraries the DNS engine (vantage_agent/dns/)
uses for DoQ / DoH3 (TOOLCHAIN.md); the engine's clients return parsed timings rather than
the answer's wire format, which a forwarder must pass back verbatim.

Every query's own overhead is measured: (time from the client's datagram in to the answer
out) minus (the upstream exchange). ``stats()`` gives count, failures and the overhead
percentiles; the target is <= 0.5 ms per query (docs/pageload.md).
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

import dns.exception
import dns.flags
import dns.message
import dns.query
import dns.quic
import dns.rcode
from dns.quic._common import UnexpectedEOF  # dnspython 2.9 does not re-export it from dns.quic

from vantage_agent.dns import registry as dns_registry
from vantage_agent.pageload.resolver import Resolver
from vantage_agent.stats import percentile


# dnspython's synchronous QUIC stream (2.9.2) loses wake-ups: a reader checks its buffer under
# the stream's lock, releases it, and only then waits on the condition, while the connection's
# worker thread adds the answer and notifies without that lock. An answer that lands between
# the check and the wait is never seen, and the query ends in dns.exception.Timeout after the
# whole timeout although its answer arrived. On a loaded machine this is a stub failure
# (CI saw one: a doh3 page load with stub failures 1). The two waits below are dnspython's
# own, with the check made while holding the condition: the worker's notify then comes either
# before the check (which sees the data) or during the wait. Lock order is condition, then
# lock; nothing in dnspython takes them the other way round.
# tests/local/test_pageload_stub.py::test_quic_stream_wakeup_between_check_and_wait.
def _wait_for(self: Any, amount: int, expiration: float | None) -> None:
    while True:
        timeout = self._timeout_from_expiration(expiration)
        with self._wake_up:
            with self._lock:
                if self._buffer.have(amount):
                    return
                self._expecting = amount
            if not self._wake_up.wait(timeout):
                raise dns.exception.Timeout
        self._expecting = 0


def _wait_for_end(self: Any, expiration: float | None) -> None:
    while True:
        timeout = self._timeout_from_expiration(expiration)
        with self._wake_up:
            with self._lock:
                if self._buffer.seen_end():
                    return
            if not self._wake_up.wait(timeout):
                raise dns.exception.Timeout


if dns.quic.have_quic:  # without aioquic dnspython has no QUIC stream (and the stub no transport)
    import dns.quic._sync

    dns.quic._sync.SyncQuicStream.wait_for = _wait_for  # type: ignore[method-assign]
    dns.quic._sync.SyncQuicStream.wait_for_end = _wait_for_end  # type: ignore[method-assign]


@dataclass
class _Stats:
    queries: int = 0
    failures: int = 0
    overhead_us: list[float] = field(default_factory=list)
    upstream_us: list[float] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    answered: set[str] = field(default_factory=set)  # names the upstream answered over the transport
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class Forwarder:
    """One upstream, one transport, one reused QUIC connection (reconnects when it dies)."""

    def __init__(self, transport: str, r: Resolver, ca_file: str | None, timeout_s: float = 5.0):
        quic = [t for t in dns_registry.names() if dns_registry.transport(t).quic]
        if transport not in quic:
            raise ValueError(f"stub transport must be one over QUIC ({' or '.join(quic)}), not {transport!r}")
        self.transport = transport
        # DNS over HTTP/3 (RFC 8484 over RFC 9114), else DNS over QUIC (RFC 9250)
        self.http = dns_registry.transport(transport).http
        self.r = r
        self.timeout_s = timeout_s
        self.verify: Any = ca_file if ca_file else True
        self.manager = self._manager()
        self.lock = threading.Lock()
        self.conn: Any = None
        self.connects = 0

    def _manager(self) -> Any:
        return dns.quic.SyncQuicManager(
            verify_mode=self.verify, server_name=self.r.tls_name or self.r.address, h3=self.http
        )

    def reconnect(self) -> None:
        """The next query opens a new connection with a new manager (no session ticket, no
        token): what a cold load's first query does. Used between a warm_origin load's warm-up
        and its measured load (docs/pageload.md)."""
        with self.lock:
            old, self.conn, self.manager = self.conn, None, self._manager()
        if old is not None:
            try:
                old.close()
            except Exception:  # noqa: BLE001 - closing a dead connection
                pass

    def _connection(self) -> Any:
        with self.lock:
            c = self.conn
            if c is None or getattr(c, "_done", False):
                c = self.manager.connect(self.r.address, self.r.port)
                self.conn = c
                self.connects += 1
            return c

    def exchange(self, q: dns.message.Message) -> dns.message.Message:
        for attempt in (0, 1):
            conn = self._connection()
            try:
                if not self.http:
                    return dns.query.quic(q, self.r.address, timeout=self.timeout_s, port=self.r.port, connection=conn)
                return dns.query.https(
                    q,
                    self.r.doh_url,
                    timeout=self.timeout_s,
                    session=conn,
                    bootstrap_address=self.r.address,
                    http_version=dns.query.HTTPVersion.H3,
                )
            except (UnexpectedEOF, ConnectionError, OSError):
                with self.lock:  # the connection died (idle timeout, reset): one fresh try
                    if self.conn is conn:
                        self.conn = None
                if attempt:
                    raise
        raise RuntimeError("unreachable")

    def close(self) -> None:
        with self.lock:
            try:
                self.manager.close()
            except Exception:  # noqa: BLE001 - closing a dead connection
                pass
            self.conn = None


class Stub:
    """UDP + TCP listener on ``listen:port`` forwarding to one upstream."""

    def __init__(self, listen: str, port: int, fwd: Forwarder, workers: int = 16):
        self.listen, self.port, self.fwd = listen, port, fwd
        self.s = _Stats()
        self.pool = ThreadPoolExecutor(workers, thread_name_prefix="dnscamp-stub")
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind((listen, port))
        self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.tcp.bind((listen, port))
        self.tcp.listen(64)
        self.closed = False
        self.threads = [
            threading.Thread(target=self._udp_loop, daemon=True, name="dnscamp-stub-udp"),
            threading.Thread(target=self._tcp_loop, daemon=True, name="dnscamp-stub-tcp"),
        ]
        for t in self.threads:
            t.start()

    @classmethod
    def start(cls, listen: str, port: int, transport: str, r: Resolver, *, ca_file: str | None = None) -> "Stub":
        return cls(listen, port, Forwarder(transport, r, ca_file))

    # -- serving
    def handle(self, wire: bytes, t_in: int) -> bytes | None:
        """Forward one query; returns the answer wire (SERVFAIL when the upstream failed)."""
        try:
            q = dns.message.from_wire(wire)
        except Exception:  # noqa: BLE001 - not a DNS query: dropped, as a resolver would
            return None
        qid = q.id
        t_up0 = t_up1 = time.perf_counter_ns()
        try:
            t_up0 = time.perf_counter_ns()
            r = self.fwd.exchange(q)
            t_up1 = time.perf_counter_ns()
            r.id = qid
            out = r.to_wire(max_size=65535)
            ok, err = True, None
        except Exception as exc:  # noqa: BLE001 - the browser gets SERVFAIL, the stats the reason
            t_up1 = time.perf_counter_ns()
            resp = dns.message.make_response(q)
            resp.set_rcode(dns.rcode.SERVFAIL)
            resp.id = qid
            out = resp.to_wire()
            ok, err = False, f"{type(exc).__name__}: {exc}"
        t_out = time.perf_counter_ns()
        with self.s.lock:
            self.s.queries += 1
            qname = q.question[0].name.to_text().rstrip(".").lower() if q.question else None
            if qname:
                self.s.names.append(qname)
            if ok:
                if qname:
                    self.s.answered.add(qname)
                self.s.overhead_us.append(((t_out - t_in) - (t_up1 - t_up0)) / 1000)
                self.s.upstream_us.append((t_up1 - t_up0) / 1000)
            else:
                self.s.failures += 1
                self.s.errors.append(str(err)[:200])
        return out

    def _udp_loop(self) -> None:
        while not self.closed:
            try:
                data, addr = self.udp.recvfrom(65535)
            except OSError:
                return
            t_in = time.perf_counter_ns()
            try:
                self.pool.submit(self._udp_one, data, addr, t_in)
            except RuntimeError:  # closing: the pool is shut down
                return

    def _udp_one(self, data: bytes, addr: Any, t_in: int) -> None:
        out = self.handle(data, t_in)
        if out is None:
            return
        if len(out) > 1232:  # EDNS payload the stub advertises to its clients: truncate, client retries on TCP
            try:
                q = dns.message.from_wire(data)
                tr = dns.message.make_response(q)
                tr.flags |= dns.flags.TC
                out = tr.to_wire()
            except Exception:  # noqa: BLE001
                return
        try:
            self.udp.sendto(out, addr)
        except OSError:
            pass

    def _tcp_loop(self) -> None:
        while not self.closed:
            try:
                c, _ = self.tcp.accept()
            except OSError:
                return
            try:
                self.pool.submit(self._tcp_conn, c)
            except RuntimeError:  # closing
                c.close()
                return

    def _tcp_conn(self, c: socket.socket) -> None:
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        c.settimeout(10)
        try:
            while True:
                hdr = _recv(c, 2)
                if not hdr:
                    return
                data = _recv(c, struct.unpack("!H", hdr)[0])
                if not data:
                    return
                out = self.handle(data, time.perf_counter_ns())
                if out is None:
                    return
                c.sendall(struct.pack("!H", len(out)) + out)
        except OSError:
            return
        finally:
            c.close()

    # -- results
    def stats(self) -> dict[str, Any]:
        with self.s.lock:
            ov = list(self.s.overhead_us)
            up = list(self.s.upstream_us)
            return {
                "transport": self.fwd.transport,
                "upstream": self.fwd.r.label(),
                "queries": self.s.queries,
                "failures": self.s.failures,
                "connects": self.fwd.connects,
                "overhead_us_p50": percentile(ov, 50),
                "overhead_us_p90": percentile(ov, 90),
                "overhead_us_max": max(ov) if ov else None,
                "upstream_us_p50": percentile(up, 50),
                "names": sorted(set(self.s.names)),
                "answered": sorted(self.s.answered),
                "errors": self.s.errors[:5],
            }

    def reset(self) -> None:
        with self.s.lock:
            self.s = _Stats()

    def close(self) -> None:
        self.closed = True
        for s in (self.udp, self.tcp):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.fwd.close()


def _recv(c: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = c.recv(n - len(buf))
        if not chunk:
            return b""
        buf += chunk
    return buf


StubFactory = Callable[..., Stub]
