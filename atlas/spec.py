"""The Atlas campaign spec (TOML), validated with pydantic before anything is spent.

Example: campaigns/atlas-quicsocks-de.toml (the setup of 001_3c494309ab66be23.txt §IV-B:
probes in Germany, a test server in a German data centre, a zone we are authoritative for).
"""

from __future__ import annotations

import ipaddress
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator


class SpecError(ValueError):
    """A bad spec: one line naming the file and the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Tags(_Strict):
    include: list[str] = Field(default_factory=list, description="Probe tags every selected probe must have.")
    exclude: list[str] = Field(default_factory=list, description="Probe tags no selected probe may have.")


class Source(_Strict):
    """One probe selection (an Atlas "source"): exactly one of country / asn / area / prefix / probes."""

    country: str | None = Field(None, description="ISO 3166 two-letter country code, e.g. 'DE'.")
    asn: int | None = Field(None, ge=1, le=4294967295)
    area: Literal["WW", "West", "North-Central", "South-Central", "North-East", "South-East"] | None = None
    prefix: str | None = None
    probes: list[int] | None = Field(None, description="Explicit probe ids.")
    requested: int | None = Field(None, ge=1, le=1000, description="How many probes (default: len(probes) or 10).")
    tags: Tags = Field(default_factory=Tags)

    @model_validator(mode="after")
    def _one_kind(self) -> "Source":
        given = [k for k in ("country", "asn", "area", "prefix", "probes") if getattr(self, k) not in (None, [])]
        if len(given) != 1:
            raise ValueError(f"a source needs exactly one of country, asn, area, prefix, probes (got {given or 'none'})")
        if self.country is not None and (len(self.country) != 2 or not self.country.isalpha()):
            raise ValueError(f"country: {self.country!r} is not a two-letter code")
        if self.prefix is not None:
            ipaddress.ip_network(self.prefix, strict=False)
        return self

    @property
    def type(self) -> str:
        for k in ("country", "asn", "area", "prefix", "probes"):
            if getattr(self, k) not in (None, []):
                return k
        raise AssertionError("validated")

    @property
    def value(self) -> str:
        v = getattr(self, self.type)
        if self.type == "probes":
            return ",".join(str(p) for p in v)
        return str(v).upper() if self.type == "country" else str(v)

    @property
    def count(self) -> int:
        if self.requested is not None:
            return self.requested
        return len(self.probes) if self.probes else 10


class Zone(_Strict):
    """How probes reveal their resolver: a zone we are authoritative for, or a whoami name."""

    name: str | None = Field(None, description="Zone served by our authoritative server, e.g. 'dnstest.example.com'.")
    query_log: str | None = Field(None, description="Query log of our authoritative server (discovery input).")
    whoami: str | None = Field(None, description="Alternative: a name whose answer is the resolver's address.")

    @model_validator(mode="after")
    def _one(self) -> "Zone":
        if bool(self.name) == bool(self.whoami):
            raise ValueError("give exactly one of zone.name (our authoritative zone) or zone.whoami")
        for n in (self.name, self.whoami):
            if n and (" " in n or not all(lbl for lbl in n.rstrip(".").split("."))):
                raise ValueError(f"{n!r} is not a domain name")
        return self


class PingSpec(_Strict):
    packets: int = Field(5, ge=1, le=16, description="Packets per ping (the paper averages 5).")
    size: int = Field(48, ge=1, le=2048)


class DnsSpec(_Strict):
    protocol: Literal["UDP", "TCP"] = "UDP"
    query_type: Literal["A", "AAAA", "TXT"] = "A"
    timeout_ms: int = Field(5000, ge=1000, le=30000)


class Resolvers(_Strict):
    """Resolvers run by our own agents (pinged from the server like the discovered ones)."""

    addresses: list[str] = Field(default_factory=list)

    @field_validator("addresses")
    @classmethod
    def _ips(cls, v: list[str]) -> list[str]:
        return [str(ipaddress.ip_address(a)) for a in v]


class AtlasSpec(_Strict):
    name: str = Field(min_length=1, description="Campaign name (stored with every result).")
    description: str = "dnscamp QuicSocks campaign"
    server: str = Field(description="Our test server: ping target of the probes (an IP address).")
    af: Literal[4, 6] = 4
    api_server: str = Field("atlas.ripe.net", description="Atlas API host.")
    is_oneoff: bool = True
    is_public: bool = True
    bill_to: str | None = None
    max_credits: int = Field(200_000, ge=0, description="Refuse to submit a plan costing more.")
    asn_db: str | None = Field(None, description="pyasn IPASN file for the ISP-resolver filter.")
    sources: list[Source] = Field(min_length=1)
    zone: Zone
    ping: PingSpec = Field(default_factory=PingSpec)
    dns: DnsSpec = Field(default_factory=DnsSpec)
    resolvers: Resolvers = Field(default_factory=Resolvers)

    @field_validator("server")
    @classmethod
    def _server_ip(cls, v: str) -> str:
        return str(ipaddress.ip_address(v))

    @model_validator(mode="after")
    def _af_matches(self) -> "AtlasSpec":
        if ipaddress.ip_address(self.server).version != self.af:
            raise ValueError(f"server: {self.server} is not an IPv{self.af} address (af = {self.af})")
        return self

    @property
    def probes_requested(self) -> int:
        return sum(s.count for s in self.sources)


def _first_error(exc: ValidationError) -> str:
    e = exc.errors()[0]
    loc = ".".join(str(p) for p in e.get("loc", ())) or "(top)"
    msg = str(e.get("msg", "")).removeprefix("Value error, ")
    return f"{loc}: {msg}"


def parse_spec(data: dict, *, where: str = "spec") -> AtlasSpec:
    try:
        return AtlasSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(f"{where}: {_first_error(exc)}") from None


def load_spec(path: str | Path) -> AtlasSpec:
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise SpecError(f"{path}: no such file") from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path}: not valid TOML: {exc}") from None
    return parse_spec(data, where=str(path))
