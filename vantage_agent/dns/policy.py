"""Connection policy: ``fresh`` | ``reuse`` | ``resume`` (pure; time is passed in).

- ``fresh``: a new connection (TCP+TLS, or QUIC) for every query, no TLS session cache.
- ``reuse``: one persistent connection, closed after ``idle_timeout_s`` without a query
  (default 10 s: the Stubby default the WWW'20 tool used, 002_6fa4cf280535d36b.txt §3.1.2).
- ``resume``: a new connection for every query, but resuming the previous TLS session
  (TLS 1.3 PSK ticket) and, for QUIC (DoQ, DoH3), sending the query as 0-RTT early data when
  a ticket allows it. Whether resumption really happened is recorded per query
  (``DnsTiming.resumed`` / ``early_data``), never assumed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Mode = Literal["fresh", "reuse", "resume"]
MODES: tuple[str, ...] = ("fresh", "reuse", "resume")
DEFAULT_IDLE_TIMEOUT_S = 10.0  # Stubby's default; 002_6fa4cf280535d36b.txt §3.1.2


@dataclass(frozen=True)
class Policy:
    mode: Mode = "reuse"
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown connection policy {self.mode!r} (known: {', '.join(MODES)})")
        if self.idle_timeout_s <= 0:
            raise ValueError("idle_timeout_s must be > 0")

    @property
    def keeps_connection(self) -> bool:
        return self.mode == "reuse"

    @property
    def resumes(self) -> bool:
        return self.mode == "resume"

    def may_reuse(self, last_used_ns: int | None, now_ns: int) -> bool:
        """True if an open connection last used at ``last_used_ns`` may carry a query at ``now_ns``."""
        if self.mode != "reuse" or last_used_ns is None:
            return False
        return (now_ns - last_used_ns) < self.idle_timeout_s * 1e9


def parse(mode: str, idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S) -> Policy:
    return Policy(mode=mode, idle_timeout_s=idle_timeout_s)  # type: ignore[arg-type]
