"""Browser name -> module. The only place that knows which browsers exist (STYLE.md §1):
every browser module has ``NAME``, ``versions() -> dict`` and
``load(url, LoadOptions, DnsSetup) -> LoadResult``, and states what it can do as module
attributes, asked of ``get(name)`` rather than decided by comparing names:

- ``WARM_ORIGIN``: it can load a page, close its connections keeping its session tickets,
  and load it again (``warm_origin``, docs/pageload.md)."""

from __future__ import annotations

import importlib
from types import ModuleType

BROWSERS: dict[str, str] = {
    "firefox": "vantage_agent.pageload.firefox",
    "chromium": "vantage_agent.pageload.chromium",
}


def get(name: str) -> ModuleType:
    try:
        return importlib.import_module(BROWSERS[name])
    except KeyError:
        raise ValueError(f"unknown browser {name!r} (known: {', '.join(sorted(BROWSERS))})") from None


def names() -> list[str]:
    return sorted(BROWSERS)
