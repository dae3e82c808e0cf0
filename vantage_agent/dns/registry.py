"""(engine, transport) -> driver class (STYLE.md §1): the only place that knows which engines
and transports exist. Every driver has the same constructor ``(endpoint, policy, options)`` and
the same ``query(qname, qtype) -> DnsTiming`` / ``close()``; nothing else branches on transport
or engine names. Engines: ``dnscamp`` (our sockets, every transport) and ``getdns`` (libgetdns,
Do53 and DoT only; docs/dns-engines.md).

What a transport can do is asked of its driver class, ``transport(name)`` (our engine's), never
decided by comparing names:

=======================  =========================================================================
``default_port``         the endpoint port when the catalog or a page-load mode names none
``encrypted``            TLS or QUIC: the endpoint has a TLS name (recorded as ``tls_name``)
``uses_url``             the endpoint is an ``https://`` URL (catalog entries must give one)
``http``                 the query is an HTTP request (``http_method`` recorded)
``chooses_http_version`` ``QueryOptions.http_version`` applies (HTTP/1.1 or HTTP/2 over TCP)
``quic``                 runs over QUIC (the page-load stub forwards over these)
``retransmits``          resolv.conf retransmission after ``timeout_s``, up to ``attempts``
``counts_wire``          bytes and packets counted wherever it runs (DoH3: in a testbed namespace only)
``open_loop(...)``       the open-loop run over the driver's one connection (load.py)
=======================  ========================================================================="""

from __future__ import annotations

import importlib
from typing import Any

# transport -> ("module:Class", catalog endpoint key)
TRANSPORTS: dict[str, tuple[str, str]] = {
    "do53": ("vantage_agent.dns.do53:UdpClient", "do53"),
    "do53-tcp": ("vantage_agent.dns.do53:TcpClient", "do53"),
    "dot": ("vantage_agent.dns.dot:Client", "dot"),
    "doh": ("vantage_agent.dns.doh:Client", "doh"),
    "doh3": ("vantage_agent.dns.doh3:Client", "doh3"),
    "doq": ("vantage_agent.dns.doq:Client", "doq"),
}


# engine -> {transport: "module:Class"} for the engines other than ours (which is TRANSPORTS)
OTHER_ENGINES: dict[str, dict[str, str]] = {
    "getdns": {
        "do53": "vantage_agent.dns.getdns_engine:Do53Client",
        "dot": "vantage_agent.dns.getdns_engine:DotClient",
    },
}
DEFAULT_ENGINE = "dnscamp"
ENGINES: tuple[str, ...] = (DEFAULT_ENGINE, *OTHER_ENGINES)


class UnknownTransport(ValueError):
    pass


class UnsupportedEngine(ValueError):
    pass


def engine_transports(engine: str) -> list[str]:
    """The transports ``engine`` can query over; ValueError naming the known engines otherwise."""
    if engine == DEFAULT_ENGINE:
        return list(TRANSPORTS)
    if engine not in OTHER_ENGINES:
        raise UnsupportedEngine(f"unknown engine {engine!r} (known: {', '.join(ENGINES)})")
    return list(OTHER_ENGINES[engine])


def check_engine(engine: str, transports: list[str]) -> None:
    """UnsupportedEngine (one line) if ``engine`` cannot query over one of ``transports``."""
    ok = engine_transports(engine)
    bad = [t for t in transports if t not in ok]
    if bad:
        raise UnsupportedEngine(
            f"engine {engine!r} does not support transport(s) {', '.join(bad)} (it supports: {', '.join(ok)})"
        )


def names() -> list[str]:
    return list(TRANSPORTS)


def endpoint_key(transport: str) -> str:
    return _entry(transport)[1]


def _entry(transport: str) -> tuple[str, str]:
    try:
        return TRANSPORTS[transport]
    except KeyError:
        raise UnknownTransport(f"unknown transport {transport!r} (known: {', '.join(TRANSPORTS)})") from None


def client_class(transport: str, engine: str = DEFAULT_ENGINE) -> Any:
    ref = _entry(transport)[0]
    if engine != DEFAULT_ENGINE:
        check_engine(engine, [transport])
        ref = OTHER_ENGINES[engine][transport]
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


def transport(name: str) -> Any:
    """The driver class of transport ``name`` in our engine, whose class attributes are the
    transport's capabilities (module docstring); UnknownTransport naming the known ones."""
    return client_class(name)


def client(transport: str, endpoint: Any, policy: Any = None, options: Any = None, engine: str = DEFAULT_ENGINE) -> Any:
    """A ready driver for ``transport`` talking to ``endpoint`` through ``engine``."""
    return client_class(transport, engine)(endpoint, policy, options)


def dnscamp_version() -> str:
    """Our engine's version: the installed dnscamp package (the agent never imports dnscamp/)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"dnscamp {version('dnscamp')}"
    except PackageNotFoundError:
        return "dnscamp (not installed)"
