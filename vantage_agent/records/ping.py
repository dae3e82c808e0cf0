"""Body of ``ping`` records: round-trip times to one target over ICMP echo or UDP."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .envelope import Frozen
from .types import Count, NonNeg, Positive


class PingBody(Frozen):
    target: str = Field(description="Host name or address that was pinged.")
    address: str | None = Field(None, description="Address actually used (after resolution).")
    protocol: Literal["icmp", "udp"]
    port: int | None = Field(None, ge=1, le=65535, description="UDP destination port.")
    count: Positive
    interval_ms: float = Field(ge=0)
    timeout_ms: float = Field(gt=0)
    sent: Count
    received: Count
    rtts_ms: list[NonNeg | None] = Field(
        description="One entry per probe sent, in order: RTT in ms, or null when it was lost."
    )
    reply_kinds: list[str | None] = Field(
        default_factory=list,
        description="Per probe: 'echo' (ICMP echo reply / UDP datagram back), "
        "'port_unreachable' (UDP to a closed port: ICMP port unreachable), or null.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> "PingBody":
        if len(self.rtts_ms) != self.sent:
            raise ValueError(f"rtts_ms has {len(self.rtts_ms)} entries for {self.sent} probes sent")
        if self.received != sum(r is not None for r in self.rtts_ms):
            raise ValueError("received does not match the non-null rtts_ms")
        if self.protocol == "udp" and self.port is None:
            raise ValueError("udp ping needs a port")
        return self
