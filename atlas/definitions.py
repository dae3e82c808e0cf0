"""What every Atlas measurement definition shares: the ``Definition`` (a ripe.atlas.cousteau
object, its role and its price), the probe source, and the credit rule common to all types.

Pricing — RIPE Atlas "Measurement Cost Model" (RIPE Atlas documentation, section Credits;
quoted in Communication-Systems-Group/chkroute Ripe_readme.md): the unit cost is charged per
delivered result; "One-off measurement result is twice as expensive". Each type's unit cost is
in its module (``atlas.ping.unit_cost``, ``atlas.dns.unit_cost``); traceroute, not used here,
would be ``10 * N * (int(S / 1500) + 1)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ripe.atlas.cousteau import AtlasSource
from ripe.atlas.cousteau.measurement import MalFormattedMeasurement
from ripe.atlas.cousteau.source import MalFormattedSource

ONEOFF_FACTOR = 2


class DefinitionError(ValueError):
    """A definition Atlas would reject (checked before anything is sent)."""


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
