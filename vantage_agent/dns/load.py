"""Open-loop load over ONE connection (experiment 1: head-of-line blocking,
003_b61199a6a5b37f70.txt §3): queries arrive on a Poisson schedule (``rate_per_s``, seeded)
and each is sent when it arrives, without waiting for the answers of earlier ones; answers are
matched back to their queries (DNS id for Do53 and DoT, QUIC stream for DoQ, the libcurl
transfer for DoH / DoH3). The connection setup, TLS and CA handling, response parsing and the
error taxonomy are the transport drivers' own (do53.UdpClient, _stream.StreamClient, doh.Client,
doq.Client): this module holds the schedule and the matching, and each of those drivers runs
its own open loop with them (its ``open_loop`` method, beside its ``query``); ``run`` calls it.
This module imports no driver, so the drivers import it.

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
import string
import struct
from dataclasses import dataclass
from typing import Any

from vantage_agent import errors

from . import _common as c
from .timing import DnsTiming

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
class Flight:
    index: int
    query: c.Query
    base: DnsTiming
    deadline: int  # ns: t_start + timeout
    attempt: int = 1


class Inflight:
    """Queries awaiting an answer, by key (DNS id or stream id)."""

    def __init__(self) -> None:
        self.by_key: dict[int, Flight] = {}

    def add(self, key: int, f: Flight) -> None:
        if key in self.by_key:  # only after 65,536 unanswered queries: refuse rather than mismatch
            raise errors.Other(f"key {key} is still in flight")
        self.by_key[key] = f

    def take(self, key: int | None) -> Flight | None:
        return self.by_key.pop(key, None) if key is not None else None

    def expired(self, now: int) -> list[tuple[int, Flight]]:
        return [(k, f) for k, f in self.by_key.items() if f.deadline <= now]

    def next_deadline(self) -> int | None:
        return min((f.deadline for f in self.by_key.values()), default=None)

    def drain(self) -> list[Flight]:
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
        return fail(res, errors.Truncated("TC bit set in the UDP response (no TCP fallback on this transport)"))
    err = c.rcode_error(parsed)
    return res.replace(status=err.status, error=err.message) if err is not None else res


def fail(res: DnsTiming, err: errors.MeasurementError) -> DnsTiming:
    return res.replace(status=err.status, error=err.message)


def timed_out(f: Flight, opt: c.QueryOptions) -> DnsTiming:
    return fail(f.base, errors.Timeout(f"no answer within {opt.timeout_s:g} s of the query's arrival "
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
    open_loop = getattr(client, "open_loop", None)  # each driver of ours runs its own
    if open_loop is None:
        raise errors.SetupError(f"open-loop load needs a dnscamp engine driver, not {type(client).__name__}")
    try:
        return open_loop(qnames, at, qtype, Txids(seed))
    finally:
        client.close()


def new_query(client: Any, qname: str, qtype: str, t: int, txid: int, **kw: Any) -> tuple[c.Query | None, DnsTiming]:
    ep, opt = client.endpoint, client.options
    base = DnsTiming(transport=client.transport, address=ep.address, port=kw.pop("port", ep.port), qname=qname,
                     qtype=qtype, policy=client.policy.mode, t_start=t, timeout_s=opt.timeout_s,
                     wire_basis="unavailable", **{"connection_reused": True, **kw})
    try:
        return c.make_query(qname, qtype, txid=txid, edns_payload=opt.edns_payload), base
    except errors.BadInput as exc:
        return None, fail(base.replace(attempts=0, connection_reused=False), exc)


def wait_readable(fds: list[Any], *deadlines: int | None) -> list[Any]:
    """select() on ``fds`` until one is readable or the earliest deadline (ns); no deadline:
    nothing is scheduled or in flight, so nothing to wait for."""
    ds = [d for d in deadlines if d is not None]
    if not ds:
        return []
    r, _, _ = select.select(fds, [], [], max(0.0, (min(ds) - c.now()) / 1e9))
    return r


