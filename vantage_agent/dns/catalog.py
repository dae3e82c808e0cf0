"""The resolver catalog: public resolvers (catalog.toml, with sources), the local resolver
from /etc/resolv.conf (``local``), and the testbed resolvers from the testbed description
(``dnscamp testbed info --json``, $DNSCAMP_TESTBED_INFO, or the runner's ``ctx.testbed``:
``testbed-isp``, ``testbed-public``, ...). ``Catalog.endpoint(name, transport)`` gives the
``Endpoint`` a driver needs; an unknown name or an unoffered transport is a ``CatalogError``
whose message lists what is known.

The agent runs on cloud machines without the ``testbed`` package: it learns the testbed's
resolvers, CA and query logs from the description only, like any other world's (never by
importing ``testbed``; tests/unit/test_layout.py enforces it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import registry
from ._common import Endpoint

CATALOG_FILE = Path(__file__).with_name("catalog.toml")
TRANSPORT_KEYS = ("do53", "dot", "doh", "doh3", "doq")


class CatalogError(ValueError):
    """Unknown resolver, or a transport the resolver does not offer."""


@dataclass(frozen=True)
class Resolver:
    name: str
    description: str
    origin: str  # "catalog" | "resolv.conf" | "testbed"
    endpoints: dict[str, Endpoint] = field(default_factory=dict)
    sources: tuple[str, ...] = ()
    query_log: str | None = None  # testbed frontends: the server's own log of the queries it got

    def endpoint(self, transport: str) -> Endpoint:
        key = registry.endpoint_key(transport)
        try:
            return self.endpoints[key]
        except KeyError:
            offered = ", ".join(sorted(self.endpoints)) or "none"
            raise CatalogError(f"resolver {self.name!r} offers no {transport} endpoint (offered: {offered})") from None


def _endpoint(name: str, key: str, d: dict[str, Any], ca_file: str | None) -> Endpoint:
    if not isinstance(d, dict):
        raise CatalogError(f"resolver {name!r}: endpoint {key!r} must be a table")
    address = d.get("address")
    if not address:
        raise CatalogError(f"resolver {name!r}: endpoint {key!r} needs an address")
    can = registry.transport(key)
    if can.uses_url and not d.get("url"):
        raise CatalogError(f"resolver {name!r}: endpoint {key!r} needs a url")
    port = int(d.get("port") or can.default_port)
    return Endpoint(key, str(address), port, tls_name=d.get("tls_name"), url=d.get("url"),
                    ca_file=d.get("ca_file") or ca_file, resolver=name)


def _from_tables(tables: dict[str, Any], origin: str, ca_file: str | None = None) -> dict[str, Resolver]:
    out: dict[str, Resolver] = {}
    for name, t in tables.items():
        eps = {k: _endpoint(name, k, t[k], ca_file) for k in TRANSPORT_KEYS if k in t}
        out[name] = Resolver(name, t.get("description", ""), origin, eps, tuple(t.get("sources", ())))
    return out


def public_resolvers(path: Path = CATALOG_FILE) -> dict[str, Resolver]:
    with open(path, "rb") as f:
        data = tomllib.load(f)
    return _from_tables(data.get("resolvers", {}), "catalog")


def resolv_conf_resolver(path: Path = Path("/etc/resolv.conf")) -> Resolver | None:
    """The first ``nameserver`` of resolv.conf as resolver ``local`` (Do53 only)."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split("#", 1)[0].split()
        if len(parts) >= 2 and parts[0] == "nameserver":
            addr = parts[1].split("%", 1)[0]
            return Resolver("local", f"local resolver from {path}", "resolv.conf",
                            {"do53": Endpoint("do53", addr, 53, resolver="local")}, (str(path),))
    return None


def _servers_part(info: dict[str, Any]) -> dict[str, Any]:
    """The part of a testbed description that lists the resolvers: the top level (a bare
    description, as tests and $DNSCAMP_TESTBED_INFO files give it), ``services`` (what
    ``dnscamp testbed info --json`` and the runner's ``ctx.testbed`` hold) or ``description``."""
    for src in (info, info.get("services"), info.get("description")):
        if isinstance(src, dict) and src.get("resolvers"):
            return src
    return {}


def testbed_ca_file(info: dict[str, Any] | None) -> str | None:
    """The testbed CA (PEM file) named by the description, None if it names none."""
    if not info:
        return None
    v = _servers_part(info).get("ca_file") or info.get("ca_file") or (info.get("services") or {}).get("ca_file")
    return str(v) if v else None


def _resolver_entries(info: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """key -> entry of the description's ``resolvers`` (a mapping key -> entry, e.g. ``isp``,
    or a list, keyed by name). Nothing is guessed: a description without resolvers (servers
    not running) has no testbed resolvers; the agent never imports ``testbed`` to find them."""
    r = _servers_part(info).get("resolvers") or {}
    if isinstance(r, dict):
        return dict(r)
    return {str(e.get("name") or f"#{i + 1}"): e for i, e in enumerate(r)}


def _testbed_resolver(key: str, r: dict[str, Any], ca: str | None) -> Resolver:
    name = r.get("name")
    if not name:
        raise CatalogError(f"testbed info: resolver {key!r} without a name")
    eps = {k: _endpoint(name, k, v, ca) for k, v in (r.get("endpoints") or {}).items() if k in TRANSPORT_KEYS}
    return Resolver(name, r.get("description", "testbed resolver"), "testbed", eps, ("dnscamp testbed info --json",),
                    query_log=r.get("query_log"))


def testbed_resolvers(info: dict[str, Any]) -> dict[str, Resolver]:
    """Resolvers of ``dnscamp testbed info --json``: {"resolvers": [{"name", "endpoints": {...}}], "ca_file"}
    (or the same under ``services``, with ``resolvers`` a mapping key -> entry)."""
    ca = testbed_ca_file(info)
    out = [_testbed_resolver(k, r, ca) for k, r in _resolver_entries(info).items()]
    return {r.name: r for r in out}


def testbed_resolver(info: dict[str, Any] | None, key: str) -> Resolver | None:
    """The description's resolver with key (``isp``, ``public``) or name (``testbed-isp``)."""
    entries = _resolver_entries(info or {})
    ca = testbed_ca_file(info)
    for k, r in entries.items():
        if key in (k, r.get("name")):
            return _testbed_resolver(k, r, ca)
    return None


def testbed_info() -> dict[str, Any] | None:
    """``dnscamp testbed info --json`` (or the JSON file named by $DNSCAMP_TESTBED_INFO); None if no testbed."""
    path = os.environ.get("DNSCAMP_TESTBED_INFO")
    if path:
        return json.loads(Path(path).read_text())
    try:
        p = subprocess.run([sys.executable, "-m", "dnscamp.cli", "testbed", "info", "--json"],
                           capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if p.returncode != 0 or not p.stdout.strip():
        return None
    try:
        return json.loads(p.stdout)
    except json.JSONDecodeError:
        return None


class Catalog:
    def __init__(self, resolvers: dict[str, Resolver]):
        self.resolvers = resolvers

    @classmethod
    def load(cls, *, testbed: dict[str, Any] | None | bool = None, resolv_conf: Path = Path("/etc/resolv.conf")) -> "Catalog":
        """Public + local + testbed. ``testbed``: an info dict, False (skip), or None (ask lazily)."""
        res = dict(public_resolvers())
        local = resolv_conf_resolver(resolv_conf)
        if local is not None:
            res["local"] = local
        if isinstance(testbed, dict):
            res.update(testbed_resolvers(testbed))
        cat = cls(res)
        cat._testbed_pending = testbed is None
        return cat

    _testbed_pending = False

    def names(self) -> list[str]:
        return sorted(self.resolvers)

    def resolver(self, name: str) -> Resolver:
        if name not in self.resolvers and self._testbed_pending:
            self._testbed_pending = False
            info = testbed_info()
            if info:
                self.resolvers.update(testbed_resolvers(info))
        try:
            return self.resolvers[name]
        except KeyError:
            raise CatalogError(f"unknown resolver {name!r} (known: {', '.join(self.names())})") from None

    def endpoint(self, name: str, transport: str) -> Endpoint:
        return self.resolver(name).endpoint(transport)
