"""Running a batch of queries and turning ``DnsTiming`` results into records and summaries.
Shared by the ``dns_query`` kind and the ``dnscamp dns`` command."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from vantage_agent.records.dns_query import DnsQueryBody
from vantage_agent.stats import percentile

from . import registry
from ._common import Endpoint, QueryOptions
from .policy import Policy
from .timing import DnsTiming


def tool_versions() -> dict[str, str]:
    import ssl

    import aioquic
    import dns.version
    import pycurl

    return {
        "dnspython": dns.version.version,
        "aioquic": aioquic.__version__,
        "pycurl": pycurl.version,
        "python_ssl": ssl.OPENSSL_VERSION,
    }


def body(t: DnsTiming, *, endpoint: Endpoint, policy: Policy, options: QueryOptions, sequence: int = 0,
         access_rtt_ms: float | None = None, cache_warmed: bool | None = None,
         engine: str = registry.DEFAULT_ENGINE, engine_version: str | None = None) -> DnsQueryBody:
    hs, q = t.handshake, t.query
    ours = engine == registry.DEFAULT_ENGINE
    can = registry.transport(t.transport)
    return DnsQueryBody(
        resolver=endpoint.resolver, transport=t.transport, address=t.address, port=t.port,
        tls_name=endpoint.tls_name if can.encrypted else None,
        url=endpoint.url if can.uses_url else None,
        qname=t.qname, qtype=t.qtype, sequence=sequence, policy=policy.mode,
        idle_timeout_s=policy.idle_timeout_s, timeout_s=options.timeout_s,
        max_attempts=max_attempts(t.transport, engine, options.attempts),
        attempts=t.attempts, t_start=t.t_start, t_connected=t.t_connected, t_tls_done=t.t_tls_done,
        t_query_sent=t.t_query_sent, t_response=t.t_response, connection_reused=t.connection_reused,
        resumed=t.resumed, early_data=t.early_data, tls_version=t.tls_version, alpn=t.alpn,
        quic_version=t.quic_version, http_version=t.http_version,
        http_method=t.http_method if can.http else None,
        http_status=t.http_status, rcode=t.rcode, answers=list(t.answers), response_size=t.response_size,
        wire_basis=t.wire_basis,
        handshake_bytes_sent=hs.bytes_sent if hs else None, handshake_bytes_received=hs.bytes_received if hs else None,
        handshake_packets_sent=hs.packets_sent if hs else None, handshake_packets_received=hs.packets_received if hs else None,
        query_bytes_sent=q.bytes_sent if q else None, query_bytes_received=q.bytes_received if q else None,
        query_packets_sent=q.packets_sent if q else None, query_packets_received=q.packets_received if q else None,
        access_rtt_ms=access_rtt_ms, cache_warmed=cache_warmed,
        engine=engine, engine_version=engine_version or (registry.dnscamp_version() if ours else None),
        engine_run_time_ms=dict(t.details).get("engine_run_time_ms"),
    )


def max_attempts(transport: str | None, engine: str, attempts: int) -> int:
    """The queries one lookup may send, as recorded: ``attempts`` where our driver retransmits
    (resolv.conf over UDP), else one; getdns makes one call whose retransmissions are neither
    configurable nor reported (dns-engines.md). An unknown transport (a unit that could not
    start) sends at most one."""
    if transport is None or engine != registry.DEFAULT_ENGINE:
        return 1
    return attempts if registry.transport(transport).retransmits else 1


def plan(names: list[str], count: int, seed: int | None = None) -> list[str]:
    """``count`` rounds over ``names``; each round in a shuffled order when ``seed`` is given."""
    out: list[str] = []
    rng = random.Random(seed)
    for _ in range(count):
        r = list(names)
        if seed is not None:
            rng.shuffle(r)
        out += r
    return out


def run(transport: str, endpoint: Endpoint, names: Iterable[str], *, policy: Policy, options: QueryOptions,
        qtype: str = "A", on_result: Callable[[DnsTiming], None] | None = None) -> list[DnsTiming]:
    out = []
    client = registry.client(transport, endpoint, policy, options)
    try:
        for n in names:
            t = client.query(n, qtype)
            out.append(t)
            if on_result:
                on_result(t)
    finally:
        client.close()
    return out


@dataclass(frozen=True)
class Summary:
    n: int
    ok: int
    p50_ms: float | None
    p90_ms: float | None
    p99_ms: float | None
    rtt_multiple_p50: float | None
    exchange_p50_ms: float | None
    errors: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        r = lambda x: None if x is None else round(x, 3)  # noqa: E731
        return {"n": self.n, "ok": self.ok, "p50_ms": r(self.p50_ms), "p90_ms": r(self.p90_ms),
                "p99_ms": r(self.p99_ms), "rtt_multiple_p50": r(self.rtt_multiple_p50),
                "exchange_p50_ms": r(self.exchange_p50_ms), "errors": dict(sorted(self.errors.items()))}


def summarize(timings: list[DnsTiming], access_rtt_ms: float | None = None) -> Summary:
    """Percentiles of the resolution time ``total = t_response - t_start`` of successful
    queries (handshakes included: the "exchange time" of 000_6647a8606a2226e0.txt §V-B), and
    its median in multiples of the access RTT when that is known."""
    return _summary([(t.status, t.t_start, t.t_query_sent, t.t_response) for t in timings], access_rtt_ms)


def summarize_records(records: list[Any]) -> Summary:
    """``summarize`` over dns_query records (envelopes): what ``dnscamp dns`` prints, from the
    records it wrote; the access RTT is the one the records carry."""
    bodies = [r.body if isinstance(r.body, dict) else r.body.model_dump() for r in records]
    rows = [(r.status, b.get("t_start"), b.get("t_query_sent"), b.get("t_response")) for r, b in zip(records, bodies)]
    rtt = next((b["access_rtt_ms"] for b in bodies if b.get("access_rtt_ms")), None)
    return _summary(rows, rtt)


def _summary(rows: list[tuple[str, int | None, int | None, int | None]], access_rtt_ms: float | None) -> Summary:
    ok = [(s, q, r) for st, s, q, r in rows if st == "ok" and r is not None and s is not None]
    totals = [(r - s) / 1e6 for s, _, r in ok]
    exch = [(r - q) / 1e6 for _, q, r in ok if q is not None]
    errs: dict[str, int] = {}
    for st, *_ in rows:
        if st != "ok":
            errs[st] = errs.get(st, 0) + 1
    mult = None
    if access_rtt_ms and totals:
        mult = percentile([x / access_rtt_ms for x in totals], 50)
    return Summary(len(rows), len(ok), percentile(totals, 50), percentile(totals, 90), percentile(totals, 99),
                   mult, percentile(exch, 50), errs)


def _rtt_of(d: dict[str, Any]) -> float | None:
    if d.get("rtt_ms"):
        return float(d["rtt_ms"])
    up, down = d.get("up"), d.get("down")
    if isinstance(up, dict) and isinstance(down, dict):
        rtt = float(up.get("delay_ms") or 0) + float(down.get("delay_ms") or 0)
        return rtt or None
    return None


def access_rtt_ms(info: dict[str, Any] | None, profile: str | None) -> float | None:
    """The configured access RTT of ``profile`` (sum of the mean one-way delays) from
    ``dnscamp testbed info --json`` (``clients.<profile>.profile`` = the profile definition:
    ``rtt_ms`` or ``up.delay_ms`` + ``down.delay_ms``). None when unknown or zero."""
    if not info or not profile:
        return None
    clients = info.get("clients")
    if isinstance(clients, dict) and isinstance(clients.get(profile), dict):
        c = clients[profile]
        for cand in (c.get("profile"), c):
            if isinstance(cand, dict):
                r = _rtt_of(cand)
                if r:
                    return r
    return None
