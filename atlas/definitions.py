"""Atlas measurement definitions (ripe.atlas.cousteau objects) and their credit prices.

Pricing — RIPE Atlas "Measurement Cost Model" (RIPE Atlas documentation, section Credits;
quoted in Communication-Systems-Group/chkroute Ripe_readme.md): the unit cost is charged per
delivered result; "One-off measurement result is twice as expensive".

- ping: ``N * (int(S / 1500) + 1)`` with N packets of S octets (default 3 × 48 → 3);
- DNS: 10 credits per result over UDP, 20 over TCP;
- traceroute: ``10 * N * (int(S / 1500) + 1)``.

A DNS measurement with ``use_probe_resolver`` yields one result per probe holding a
``resultset`` (one entry per local resolver); we price one result per probe, so probes with
several resolvers may cost more than planned (``max_credits`` leaves headroom).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ripe.atlas.cousteau import AtlasSource, Dns, Ping
from ripe.atlas.cousteau.measurement import MalFormattedMeasurement
from ripe.atlas.cousteau.source import MalFormattedSource

ONEOFF_FACTOR = 2
DNS_UDP_COST = 10
DNS_TCP_COST = 20


class DefinitionError(ValueError):
    """A definition Atlas would reject (checked before anything is sent)."""


def ping_unit_cost(packets: int, size: int, *, oneoff: bool) -> int:
    if packets < 1 or size < 1:
        raise DefinitionError(f"ping needs packets >= 1 and size >= 1 (got {packets}, {size})")
    return packets * (size // 1500 + 1) * (ONEOFF_FACTOR if oneoff else 1)


def dns_unit_cost(protocol: str, *, oneoff: bool) -> int:
    base = {"UDP": DNS_UDP_COST, "TCP": DNS_TCP_COST}.get(protocol.upper())
    if base is None:
        raise DefinitionError(f"dns protocol must be UDP or TCP (got {protocol!r})")
    return base * (ONEOFF_FACTOR if oneoff else 1)


@dataclass(frozen=True)
class Definition:
    """One measurement to create: the cousteau object, its role, and its price."""

    role: str  # resolver_dns | probe_server | probe_resolver
    measurement: Any  # cousteau Ping / Dns
    unit_cost: int
    target: str | None

    def api_struct(self) -> dict[str, Any]:
        try:
            return self.measurement.build_api_struct()
        except MalFormattedMeasurement as exc:
            raise DefinitionError(f"{self.role}: {exc}") from None


def ping(*, role: str, target: str, af: int, packets: int, size: int, description: str, oneoff: bool,
         is_public: bool = True) -> Definition:
    m = Ping(af=af, target=target, description=description, packets=packets, size=size,
             is_oneoff=oneoff, is_public=is_public, resolve_on_probe=False)
    d = Definition(role=role, measurement=m, unit_cost=ping_unit_cost(packets, size, oneoff=oneoff), target=target)
    d.api_struct()  # validate now
    return d


def dns_via_probe_resolver(*, query_argument: str, query_type: str, af: int, protocol: str, description: str,
                           oneoff: bool, prepend_probe_id: bool, timeout_ms: int, is_public: bool = True) -> Definition:
    """The probes ask their own resolver(s) (``use_probe_resolver``) with the RD bit set."""
    m = Dns(
        af=af,
        description=description,
        query_class="IN",
        query_type=query_type,
        query_argument=query_argument,
        use_probe_resolver=True,
        set_rd_bit=True,
        prepend_probe_id=prepend_probe_id,
        protocol=protocol,
        timeout=timeout_ms,
        retry=0,
        udp_payload_size=1232,
        is_oneoff=oneoff,
        is_public=is_public,
    )
    d = Definition(role="resolver_dns", measurement=m, unit_cost=dns_unit_cost(protocol, oneoff=oneoff),
                   target=query_argument)
    d.api_struct()
    return d


def source(*, type: str, value: str, requested: int, include: list[str] | None = None,
           exclude: list[str] | None = None) -> AtlasSource:
    kw: dict[str, Any] = {"type": type, "value": value, "requested": requested}
    if include or exclude:
        kw["tags"] = {"include": list(include or []), "exclude": list(exclude or [])}
    try:
        s = AtlasSource(**kw)
        s.build_api_struct()
    except MalFormattedSource as exc:
        raise DefinitionError(f"source {type}={value}: {exc}") from None
    return s
