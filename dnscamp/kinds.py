"""Registry of measurement kinds: kind name -> "module:attribute" of its KIND object.

The only place that knows which kinds exist (STYLE.md §1: no string comparisons on kind
names elsewhere). Modules are imported lazily so a vantage agent loads only what it runs.
"""

from __future__ import annotations

import importlib
from typing import Any

KINDS: dict[str, str] = {
    "ping": "vantage_agent.ping:KIND",
    "dns_query": "vantage_agent.dns.kind:KIND",
    "page_load": "vantage_agent.pageload.kind:KIND",
    "link_check": "testbed.check:KIND",
    "atlas": "dnscamp.atlas_offline:KIND",
}


class UnknownKind(KeyError):
    pass


def get(name: str) -> Any:
    try:
        target = KINDS[name]
    except KeyError:
        raise UnknownKind(f"unknown measurement kind {name!r} (known: {', '.join(sorted(KINDS))})") from None
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def names() -> list[str]:
    return sorted(KINDS)
