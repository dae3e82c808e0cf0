"""The resolver a page load's DNS mode names: its address, port, TLS name and DoH path. The DNS
modes (dnsmode.py) parse it, and the stub (stub.py) forwards to it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Resolver:
    address: str
    port: int
    tls_name: str | None = None
    doh_path: str = "/dns-query"

    @property
    def doh_url(self) -> str:
        host = self.tls_name or (f"[{self.address}]" if ":" in self.address else self.address)
        port = "" if self.port == 443 else f":{self.port}"
        return f"https://{host}{port}{self.doh_path}"

    def label(self) -> str:
        return f"{self.tls_name}@{self.address}" if self.tls_name else self.address
