"""The Atlas measurement types this package parses: a result's ``type`` → its module.

Results of other types (traceroute, http, ...) are Atlas results too: they are kept raw and not
parsed further. Adding a type is a module with ``TYPE`` and ``parse(raw, header)`` and a line here.
"""

from __future__ import annotations

from types import ModuleType

from atlas import dns, ping
from atlas.result import Header, header

MODULES: dict[str, ModuleType] = {m.TYPE: m for m in (ping, dns)}


def parse(raw: dict, h: Header | None = None) -> list:
    """The typed rows of one loaded result (``atlas.result.load``); [] for a type not parsed here.
    A ping result gives one row, a DNS result one per response."""
    h = h or header(raw)
    module = MODULES.get(h.type)
    if module is None:
        return []
    rows = module.parse(raw, h)
    return rows if isinstance(rows, list) else [rows]
