"""The resolver catalog: public resolvers (catalog.toml, with sources), the local resolver
from /etc/resolv.conf (``local``), and the testbed resolvers from ``dnscamp testbed info
--json`` (``testbed-isp``, ``testbed-public``, ...). ``Catalog.endpoint(name, transport)``
gives the ``Endpoint`` a driver needs; an unknown name or an unoffered transport is a
``CatalogError`` whose message lists what is known."""

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
    if key in ("doh", "doh3") and not d.get("url"):
        raise CatalogError(f"resolver {name!r}: endpoint {key!r} needs a url")
    port = int(d.get("port") or {"do53": 53, "dot": 853, "doh": 443, "doh3": 443, "doq": 853}[key])
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


def _resolver_entries(info: dict[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
    """The resolver list and CA file of a testbed description: ``resolvers`` (a list, or a
    mapping key -> entry) at the top level or under ``services``; if the description has none
    but the island is up, the servers' own plan (testbed.services: frontends.endpoints)."""
    for src in (info, info.get("services"), info.get("description")):
        if isinstance(src, dict) and src.get("resolvers"):
            r = src["resolvers"]
            entries = list(r.values()) if isinstance(r, dict) else list(r)
            return entries, src.get("ca_file") or info.get("ca_file")
    if info.get("up"):
        try:
            from testbed.services import ca, frontends, resolvers

            return [frontends.endpoints(r) for r in resolvers.RESOLVERS], str(ca.ca_file())
        except Exception:  # noqa: BLE001 - no servers module: no testbed resolvers
            return [], None
    return [], None


def testbed_resolvers(info: dict[str, Any]) -> dict[str, Resolver]:
    """Resolvers of ``dnscamp testbed info --json``: {"resolvers": [{"name", "endpoints": {...}}], "ca_file"}."""
    entries, ca = _resolver_entries(info)
    out: dict[str, Resolver] = {}
    for r in entries:
        name = r.get("name")
        if not name:
            raise CatalogError("testbed info: a resolver without a name")
        eps = {k: _endpoint(name, k, v, ca) for k, v in (r.get("endpoints") or {}).items() if k in TRANSPORT_KEYS}
        out[name] = Resolver(name, r.get("description", "testbed resolver"), "testbed", eps, ("dnscamp testbed info --json",))
    return out


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
