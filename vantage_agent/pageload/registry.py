"""Browser name -> module. The only place that knows which browsers exist (STYLE.md §1):
every browser module has ``NAME``, ``versions() -> dict`` and
``load(url, LoadOptions, DnsSetup) -> LoadResult``."""

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
