"""DoH: DNS over HTTPS (RFC 8484) with libcurl (pycurl), HTTP/2, POST (default, as
002_6fa4cf280535d36b.txt §3.1.2) or GET (``QueryOptions.doh_method``),
``application/dns-message``, transaction id 0 (RFC 8484 §4.1, as browsers do). ``doh3``
reuses this driver with HTTP/3 only (and GET by default: see doh3.py).

Timestamps: ``t_start`` is stamped by us right before ``perform()``, ``t_response`` by us in the
write callback when the last byte of the DNS message arrives. libcurl does not expose its
socket events to Python, so ``t_connected`` / ``t_tls_done`` / ``t_query_sent`` are ``t_start``
plus libcurl's own microsecond offsets ``CONNECT_TIME_T`` / ``APPCONNECT_TIME_T`` /
``POSTTRANSFER_TIME_T`` (taken by libcurl on the same CLOCK_MONOTONIC at the event itself;
the anchor error is the few µs between our stamp and libcurl's transfer start).

Connections: ``fresh`` = a new easy handle (no connection, no TLS session cache) per query;
``reuse`` = one handle kept open (``MAXAGE_CONN`` plus our own idle check), HTTP/2 stream per
query; ``resume`` = one handle, ``FRESH_CONNECT`` + ``FORBID_REUSE`` per query, so each query
opens a new connection that resumes the TLS session from a ``CurlShare`` session cache (the
easy handle alone did not resume here), with ``CURLSSLOPT_EARLYDATA`` so that DoH3 sends the
request as QUIC 0-RTT when the ticket allows it (``EARLYDATA_SENT_T`` > 0 → ``early_data``).
``NUM_CONNECTS`` says whether a connection was made. The TLS version, ALPN, resumption and
0-RTT acceptance are read from the connection's OpenSSL ``SSL*`` (``CURLINFO_TLS_SSL_PTR``;
see ``_TlsInfo``) while the response arrives, once per new connection; a reused connection
carries the values read when it was opened. ``quic_version`` is null: libcurl exposes no
getter for the QUIC version its ngtcp2 connection runs (docs/dns.md). pycurl bundles its own
OpenSSL: ``CAINFO`` is always set.

Bytes/packets: we open the TCP socket ourselves (``OPENSOCKETFUNCTION``, TCP_NODELAY) and read
the kernel's TCP_INFO counters when the request is about to go out (``PREREQFUNCTION``:
end of handshake) and after the response. For HTTP/3 (UDP) no per-socket kernel counter
exists and libcurl owns the datagrams: in a testbed client namespace the namespace's interface
counters are read at the same three points (``wire_basis`` ``netdev_count``, converted to UDP
payload bytes); elsewhere ``wire_basis`` is ``unavailable``.
"""

from __future__ import annotations

import base64
import ctypes
import functools
import socket
from typing import Any
from urllib.parse import urlsplit

import pycurl

from vantage_agent import errors

from . import _common as c
from . import load
from .policy import Policy
from .timing import DnsTiming, WireCount

TRANSPORT = "doh"
ENDPOINT = "doh"
SYSTEM_CA = "/etc/ssl/certs/ca-certificates.crt"
_CURLSSLOPT_EARLYDATA = 1 << 6  # curl.h CURLSSLOPT_EARLYDATA (libcurl >= 8.11; not named by pycurl)


def _curl_version() -> str:
    return pycurl.version


class _TlsSessionInfo(ctypes.Structure):  # curl.h struct curl_tlssessioninfo
    _fields_ = [("backend", ctypes.c_int), ("internals", ctypes.c_void_p)]


class _TlsInfo:
    """What libcurl's connection negotiated, asked of OpenSSL: ``SSL_get_version``,
    ``SSL_get0_alpn_selected``, ``SSL_session_reused``, ``SSL_get_early_data_status``.

    pycurl 7.49's ``getinfo`` refuses ``CURLINFO_TLS_SSL_PTR`` ("invalid argument"), so
    ``curl_easy_getinfo`` and the ``SSL_*`` getters are called through ctypes, resolved in
    pycurl's extension module, i.e. in the libcurl and OpenSSL it is linked with (the wheel
    bundles both; the ``SSL*`` belongs to that OpenSSL, not to the one of ``ssl``). The
    ``CURL*`` is the field after ``dict`` and ``weakreflist`` of pycurl's ``CurlObject``
    (src/pycurl.h); it is checked against ``CURLINFO_PRIVATE``, which pycurl sets to the
    object itself, before it is used. libcurl gives the ``SSL*`` only while the transfer owns
    the connection (afterwards ``internals`` is NULL), so it is read from the write callback.
    If any of this is unavailable (another pycurl layout, another TLS backend) the fields are
    null, never guessed."""

    PRIVATE = 0x100000 + 21  # CURLINFO_PRIVATE
    SSL_PTR = 0x400000 + 45  # CURLINFO_TLS_SSL_PTR
    OPENSSL = 1  # CURLSSLBACKEND_OPENSSL
    EARLY_DATA_ACCEPTED = 2  # SSL_EARLY_DATA_ACCEPTED
    _HANDLE_AT = object.__basicsize__ + 2 * ctypes.sizeof(ctypes.c_void_p)

    def __init__(self) -> None:
        vp = ctypes.c_void_p
        try:
            # the compiled module (pycurl >= 7.46 is a package around ``_pycurl``)
            lib = ctypes.CDLL(getattr(pycurl, "_pycurl", pycurl).__file__)
            self._getinfo = lib.curl_easy_getinfo
            self._version, self._alpn = lib.SSL_get_version, lib.SSL_get0_alpn_selected
            self._reused, self._early = lib.SSL_session_reused, lib.SSL_get_early_data_status
        except (OSError, AttributeError):
            self.ok = False
            return
        self._getinfo.argtypes, self._getinfo.restype = [vp, ctypes.c_int, vp], ctypes.c_int
        self._version.argtypes, self._version.restype = [vp], ctypes.c_char_p
        self._alpn.argtypes, self._alpn.restype = [vp, ctypes.POINTER(vp), ctypes.POINTER(ctypes.c_uint)], None
        self._reused.argtypes = self._early.argtypes = [vp]
        self._reused.restype = self._early.restype = ctypes.c_int
        self.ok = True

    def handle(self, h: pycurl.Curl) -> int | None:
        """The ``CURL*`` of a pycurl handle, or None if it cannot be found safely."""
        if not self.ok or type(h).__basicsize__ < self._HANDLE_AT + ctypes.sizeof(ctypes.c_void_p):
            return None
        ptr = ctypes.c_void_p.from_address(id(h) + self._HANDLE_AT).value
        private = ctypes.c_void_p()
        if not ptr or self._getinfo(ptr, self.PRIVATE, ctypes.byref(private)) != 0 or private.value != id(h):
            return None
        return ptr

    def read(self, curl: int) -> tuple[str | None, str | None, bool | None, bool | None]:
        """(tls_version, alpn, session reused, early data accepted) of the connection the
        transfer on ``curl`` is using; Nones if libcurl gives no OpenSSL ``SSL*``."""
        tsi = ctypes.POINTER(_TlsSessionInfo)()
        if self._getinfo(curl, self.SSL_PTR, ctypes.byref(tsi)) != 0 or not tsi:
            return None, None, None, None
        info = tsi.contents
        ssl = info.internals
        if info.backend != self.OPENSSL or not ssl:
            return None, None, None, None
        data, n = ctypes.c_void_p(), ctypes.c_uint()
        self._alpn(ssl, ctypes.byref(data), ctypes.byref(n))
        alpn = ctypes.string_at(data.value, n.value).decode("ascii", "replace") if data.value and n.value else None
        version = self._version(ssl)
        return (version.decode() if version else None, alpn, bool(self._reused(ssl)),
                self._early(ssl) == self.EARLY_DATA_ACCEPTED)


_tls = functools.cache(_TlsInfo)  # one per process, built at the first handle


class Client(c.Capabilities):
    transport = "doh"
    http_version = pycurl.CURL_HTTP_VERSION_2TLS
    default_port = 443
    encrypted = True
    uses_url = True
    http = True
    chooses_http_version = True
    default_method = "POST"  # when QueryOptions.doh_method is None (002_6fa4cf280535d36b.txt §3.1.2)

    def __init__(self, endpoint: c.Endpoint, policy: Policy | None = None, options: c.QueryOptions | None = None):
        if not endpoint.url:
            raise ValueError(f"{self.transport} endpoint of {endpoint.resolver or endpoint.address} has no URL")
        self.endpoint = endpoint
        self.policy = policy or Policy()
        self.options = options or c.QueryOptions()
        self._curl: pycurl.Curl | None = None
        self._last_used: int | None = None
        self._last_fd: int | None = None
        self._new_socks: list[socket.socket] = []
        self._handle_ptr: int | None = None
        # what a connection negotiated (tls_version, alpn, resumed, early data accepted): read
        # once when it is opened (_new_tls), then carried by the queries that reuse it
        self._new_tls: tuple[str | None, str | None, bool | None, bool | None] | None = None
        self._conn_tls: tuple[str | None, str | None, bool | None, bool | None] | None = None
        self._body = bytearray()
        self._t_last: int | None = None
        self._hs_counts: WireCount | None = None
        self._after_counts: WireCount | None = None
        self._share: pycurl.CurlShare | None = None
        # DoH3: libcurl owns the UDP socket and Linux keeps no per-socket UDP counters; in a
        # testbed client namespace (one query at a time) the interface counters stand in.
        self._netdev = self.quic and c.owns_testbed_namespace()
        if self.policy.resumes:
            # libcurl keeps TLS sessions (and QUIC 0-RTT tickets) in a share's session cache.
            self._share = pycurl.CurlShare()
            self._share.setopt(pycurl.SH_SHARE, pycurl.LOCK_DATA_SSL_SESSION)
        u = urlsplit(endpoint.url)
        self._host = u.hostname or endpoint.address
        self._port = u.port or 443

    # -- handle --------------------------------------------------------------------------------
    def _new_handle(self) -> pycurl.Curl:
        ep = self.endpoint
        h = pycurl.Curl()
        # QueryOptions.http_version "1.1": DoH over HTTP/1.1 (the open-loop load's h1.1 case, load.py)
        h.setopt(pycurl.HTTP_VERSION, pycurl.CURL_HTTP_VERSION_1_1 if self.options.http_version == "1.1"
                 else self.http_version)
        h.setopt(pycurl.CAINFO, ep.ca_file or SYSTEM_CA)
        h.setopt(pycurl.SSL_VERIFYPEER, 1)
        h.setopt(pycurl.SSL_VERIFYHOST, 2)
        if ep.address and self._host != ep.address:
            h.setopt(pycurl.RESOLVE, [f"{self._host}:{self._port}:{ep.address}"])
        h.setopt(pycurl.HTTPHEADER, ["Accept: application/dns-message", "Content-Type: application/dns-message"])
        h.setopt(pycurl.WRITEFUNCTION, self._write)
        h.setopt(pycurl.OPENSOCKETFUNCTION, self._opensocket)
        h.setopt(pycurl.PREREQFUNCTION, self._prereq)
        h.setopt(pycurl.NOSIGNAL, 1)
        h.setopt(pycurl.PIPEWAIT, 0)
        h.setopt(pycurl.MAXAGE_CONN, max(1, int(self.policy.idle_timeout_s + 0.999)))
        if self._share is not None:
            h.setopt(pycurl.SHARE, self._share)
            h.setopt(pycurl.SSL_OPTIONS, _CURLSSLOPT_EARLYDATA)
        else:
            h.setopt(pycurl.SSL_SESSIONID_CACHE, 0)
        self._handle_ptr = _tls().handle(h)
        return h

    def _opensocket(self, purpose: int, addr: tuple) -> socket.socket:
        family, socktype, protocol, sockaddr = addr
        s = socket.socket(family, socktype, protocol)
        if socktype == socket.SOCK_STREAM:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._new_socks.append(s)
        return s

    def _prereq(self, conn_primary_ip: str, conn_local_ip: str, conn_primary_port: int, conn_local_port: int) -> int:
        if self._netdev and self._new_socks:  # a new connection: end of its handshake (a reused
            self._hs_counts = c.netdev_counts()  # one needs no read inside the timed window)
        elif self._new_socks and not self.quic:
            self._hs_counts = c.tcp_counts(self._new_socks[-1])
        return pycurl.PREREQFUNC_OK

    def _write(self, data: bytes) -> None:
        self._t_last = c.now()
        if self._new_socks and self._new_tls is None and self._handle_ptr is not None:
            self._new_tls = _tls().read(self._handle_ptr)  # first bytes on a new connection
        self._body += data
        if self._netdev:
            self._after_counts = c.netdev_counts()
        elif not self.quic:
            sock = self._new_socks[-1] if self._new_socks else self._last_fd
            if sock is not None:
                self._after_counts = c.tcp_counts(sock)

    def close(self) -> None:
        if self._curl is not None:
            self._curl.close()
            self._curl = None
        self._handle_ptr = None
        self._conn_tls = None
        for s in self._new_socks:
            s.close()
        self._new_socks.clear()
        self._last_fd = None
        self._last_used = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open_loop(self, qnames: list[str], at: list[int], qtype: str, txid: Any) -> list[DnsTiming]:
        """One libcurl multi, at most one connection to the host (load.py)."""
        return open_loop_curl(self, qnames, at, qtype, txid)

    def get_url(self, wire: bytes) -> str:
        """The GET URL of a DNS message (RFC 8484 §4.1: base64url without padding)."""
        b64 = base64.urlsafe_b64encode(wire).rstrip(b"=").decode()
        return f"{self.endpoint.url}{'&' if '?' in self.endpoint.url else '?'}dns={b64}"

    # -- one query -----------------------------------------------------------------------------
    def query(self, qname: str, qtype: str = "A") -> DnsTiming:
        ep, opt = self.endpoint, self.options
        try:
            q = c.make_query(qname, qtype, txid=0, edns_payload=opt.edns_payload)  # RFC 8484 §4.1
        except errors.BadInput as exc:  # before libcurl is touched
            return DnsTiming(transport=self.transport, address=ep.address, port=self._port, qname=qname, qtype=qtype,
                             policy=self.policy.mode, t_start=c.now(), timeout_s=opt.timeout_s,
                             status=exc.status, error=exc.message, attempts=0)
        wire = q.to_wire()
        fresh = self.policy.mode == "fresh"
        if fresh or self._curl is None:
            self.close()
            self._curl = self._new_handle()
        h = self._curl
        for s in self._new_socks:  # libcurl holds its own dup of every socket it kept
            s.close()
        self._new_socks.clear()
        self._new_tls = None
        self._body = bytearray()
        self._t_last = None
        self._hs_counts = None
        self._after_counts = None
        method = opt.doh_method or self.default_method
        if method == "GET":
            h.setopt(pycurl.HTTPGET, 1)
            h.setopt(pycurl.URL, self.get_url(wire))
        else:
            h.setopt(pycurl.URL, ep.url)
            h.setopt(pycurl.POSTFIELDS, wire)
        h.setopt(pycurl.TIMEOUT_MS, int(opt.timeout_s * 1000))
        h.setopt(pycurl.CONNECTTIMEOUT_MS, int(opt.timeout_s * 1000))
        t0 = c.now()
        may_reuse = self.policy.may_reuse(self._last_used, t0)
        h.setopt(pycurl.FRESH_CONNECT, 0 if may_reuse else 1)
        h.setopt(pycurl.FORBID_REUSE, 0 if self.policy.keeps_connection else 1)
        before = c.tcp_counts(self._last_fd) if (may_reuse and self._last_fd is not None and not self.quic) else None
        base = DnsTiming(
            transport=self.transport, address=ep.address, port=self._port, qname=qname, qtype=qtype,
            policy=self.policy.mode, t_start=t0, timeout_s=opt.timeout_s, http_method=method,
            wire_basis=("netdev_count" if self._netdev else "unavailable") if self.quic else "tcp_info",
        )
        if self._netdev:
            before = c.netdev_counts()
        t0 = c.now()
        base = base.replace(t_start=t0)
        try:
            h.perform()
        except pycurl.error as exc:
            code = exc.args[0]
            err = self._classify(code, str(exc.args[1]) if len(exc.args) > 1 else "")
            res = self._phases(base, h, t0)
            self.close()
            return res.replace(status=err.status, error=err.message)
        t_resp = self._t_last
        new_conn = h.getinfo(pycurl.NUM_CONNECTS) > 0
        res = self._phases(base, h, t0).replace(t_response=t_resp, connection_reused=not new_conn)
        fd = h.getinfo(pycurl.ACTIVESOCKET)
        if self._netdev and None not in (before, self._after_counts) and (self._hs_counts is not None or not new_conn):
            fam = c.family_of(ep.address)
            res = res.replace(
                handshake=c.udp_payload(self._hs_counts - before, fam) if new_conn else None,
                query=c.udp_payload(self._after_counts - (self._hs_counts if new_conn else before), fam),
            )
        elif not self.quic:
            after = self._after_counts
            start = self._hs_counts if new_conn else before
            res = res.replace(
                handshake=self._hs_counts if new_conn else None,
                query=(after - start) if (after is not None and start is not None) else None,
            )
        self._last_fd = fd if (fd is not None and fd >= 0) else None
        self._last_used = t_resp or c.now()
        status = h.getinfo(pycurl.RESPONSE_CODE)
        res = res.replace(http_status=status)
        if self.policy.mode == "fresh":
            self.close()
        if status // 100 != 2:
            return res.replace(status=errors.HttpError.status, error=f"HTTP status {status}")
        try:
            parsed = c.parse_response(bytes(self._body), q)
        except errors.MeasurementError as exc:
            return res.replace(status=exc.status, error=exc.message)
        res = res.replace(rcode=parsed.rcode, answers=parsed.answers, response_size=parsed.size)
        err = c.rcode_error(parsed)
        if err is not None:
            res = res.replace(status=err.status, error=err.message)
        return res

    def _phases(self, base: DnsTiming, h: pycurl.Curl, t0: int) -> DnsTiming:
        def at(info: int) -> int | None:
            us = h.getinfo(info)
            return t0 + us * 1000 if us and us > 0 else None

        hv = h.getinfo(pycurl.INFO_HTTP_VERSION)
        new_conn = h.getinfo(pycurl.NUM_CONNECTS) > 0
        if new_conn:
            self._conn_tls = self._new_tls
        tls_version, alpn, resumed, early_accepted = self._conn_tls or (None, None, None, None)
        early = None
        if not new_conn:
            resumed = None  # resumption describes how a connection was opened
        elif self.policy.resumes and resumed is not None:
            # the request went out as 0-RTT (libcurl's stamp) and the server accepted it (OpenSSL)
            early = bool(early_accepted) and (h.getinfo(pycurl.EARLYDATA_SENT_T) or 0) > 0
        return base.replace(
            t_connected=at(pycurl.CONNECT_TIME_T),
            t_tls_done=at(pycurl.APPCONNECT_TIME_T),
            t_query_sent=at(pycurl.POSTTRANSFER_TIME_T) or at(pycurl.PRETRANSFER_TIME_T),
            http_version={3: "2", 30: "3", 2: "1.1", 1: "1.0"}.get(hv, str(hv) if hv else None),
            tls_version=tls_version,
            alpn=alpn,
            quic_version=None,  # libcurl has no getter for it (module docstring, docs/dns.md)
            resumed=resumed,
            early_data=early,
        )

    def _classify(self, code: int, msg: str) -> errors.MeasurementError:
        if code == pycurl.E_OPERATION_TIMEDOUT:
            return errors.Timeout(f"timed out: {msg}")
        if code in (pycurl.E_COULDNT_CONNECT,):
            return errors.ConnectError(msg)
        if code in (pycurl.E_PEER_FAILED_VERIFICATION, pycurl.E_SSL_CACERT_BADFILE) or code == 60:
            return errors.TlsError(f"certificate verification failed: {msg}")
        if code in (pycurl.E_SSL_CONNECT_ERROR,):
            return errors.TlsError(msg)
        if code == getattr(pycurl, "E_QUIC_CONNECT_ERROR", 96):
            return errors.QuicError(msg)
        if code in (pycurl.E_HTTP2, getattr(pycurl, "E_HTTP3", 95), getattr(pycurl, "E_HTTP2_STREAM", 92)):
            return errors.QuicError(msg) if self.quic else errors.HttpError(f"HTTP/2 error: {msg}")
        if code in (pycurl.E_RECV_ERROR, pycurl.E_SEND_ERROR, pycurl.E_GOT_NOTHING):
            return errors.ConnectError(msg)
        return errors.Other(f"curl error {code}: {msg}")


def curl_version() -> str:
    return _curl_version()


# -- open-loop load over this transport's one connection (load.py: schedule and matching) ----------
def open_loop_curl(client: Client, qnames: list[str], at: list[int], qtype: str, txid: load.Txids) -> list[DnsTiming]:
    opt = client.options
    out: list[DnsTiming | None] = [None] * len(qnames)
    multi = pycurl.CurlMulti()
    multi.setopt(pycurl.M_MAX_HOST_CONNECTIONS, 1)  # one connection: queue (h1.1) or multiplex (h2, h3)
    multi.setopt(pycurl.M_MAX_TOTAL_CONNECTIONS, 1)
    multi.setopt(pycurl.M_PIPELINING, pycurl.PIPE_MULTIPLEX)
    live: dict[Any, dict[str, Any]] = {}
    method = opt.doh_method or client.default_method

    def start(idx: int) -> None:
        q, base = load.new_query(client, qnames[idx], qtype, at[idx], 0, port=client._port, http_method=method)
        if q is None:
            out[idx] = base
            return
        h = client._new_handle()
        st: dict[str, Any] = {"i": idx, "q": q, "base": base, "body": bytearray(), "t_last": None, "tls": None,
                              "ptr": client._handle_ptr}

        def write(data: bytes, st: dict = st) -> None:
            st["t_last"] = c.now()
            if st["tls"] is None and st["ptr"] is not None:
                st["tls"] = _tls().read(st["ptr"])
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
            res = load.fail(res, client._classify(code, msg))
        else:
            status = h.getinfo(pycurl.RESPONSE_CODE)
            res = res.replace(t_response=st["t_last"], http_status=status)
            res = (load.fail(res, errors.HttpError(f"HTTP status {status}")) if status // 100 != 2
                   else load.answered(res, bytes(st["body"]), st["q"]))
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
