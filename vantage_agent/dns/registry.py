"""Transport name -> driver class (STYLE.md §1): the only place that knows which transports
exist. Every driver has the same constructor ``(endpoint, policy, options)`` and the same
``query(qname, qtype) -> DnsTiming`` / ``close()``; nothing else branches on transport names."""

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


class UnknownTransport(ValueError):
    pass


def names() -> list[str]:
    return list(TRANSPORTS)


def endpoint_key(transport: str) -> str:
    return _entry(transport)[1]


def _entry(transport: str) -> tuple[str, str]:
    try:
        return TRANSPORTS[transport]
    except KeyError:
        raise UnknownTransport(f"unknown transport {transport!r} (known: {', '.join(TRANSPORTS)})") from None


def client_class(transport: str) -> Any:
    module, _, attr = _entry(transport)[0].partition(":")
    return getattr(importlib.import_module(module), attr)


def client(transport: str, endpoint: Any, policy: Any = None, options: Any = None) -> Any:
    """A ready driver for ``transport`` talking to ``endpoint``."""
    return client_class(transport)(endpoint, policy, options)
