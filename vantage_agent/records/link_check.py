"""Body of ``link_check`` records: the fidelity self-test of one emulated access link.

Measured across exactly the access link (client namespace <-> an endpoint in dc-isp):
UDP round trips, loss per direction, TCP goodput per direction, a QUIC handshake, and the
link emulator's own lateness statistics. Configured values sit next to measured ones;
``passed`` / ``failures`` say whether the link-fidelity targets were met.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .envelope import Frozen
from .types import Count, Fraction, NonNeg


class LossResult(Frozen):
    """One direction's loss over ``sent`` packets versus the configured probability."""

    configured: Fraction = Field(description="Configured long-run loss probability.")
    sent: Count
    lost: Count
    measured: Fraction | None = None
    interval99: list[Fraction] | None = Field(
        None, description="[low, high] loss rates: the binomial 99 % acceptance interval of the configured rate."
    )
    passed: bool | None = Field(None, description="measured within interval99 (None: not assessable, e.g. bursty loss).")


class LinkCheckBody(Frozen):
    profile: str
    link: str = Field(description="Link name (testbed state), e.g. 'la-fiber'.")
    backend: str = Field(description="Link emulator backend: nfqueue, netem or none.")
    client_ns: str
    client_address: str
    server_address: str = Field(description="Endpoint address in dc-isp, on the access link.")
    link_config: dict[str, Any] = Field(description="Configured directions: {'up': ..., 'down': ...} (linkem keys).")

    probes_sent: Count
    probes_received: Count
    probe_wire_bytes: Count = Field(description="Frame bytes of one RTT probe as the emulator counts them.")
    rtt_ms_configured: NonNeg = Field(description="Sum of the configured one-way delays.")
    rtt_ms_expected: NonNeg = Field(description="Configured RTT + the probe's serialisation time at the configured rates.")
    rtt_ms_p5: NonNeg | None = None
    rtt_ms_p50: NonNeg | None = None
    rtt_ms_p95: NonNeg | None = None
    rtt_error_ms: float | None = Field(None, description="rtt_ms_p50 - rtt_ms_expected.")
    rtt_tolerance_ms: NonNeg | None = Field(
        None, description="0.2 ms, plus the 99 % sampling error of the median when the profile has jitter.")
    rtt_pass: bool | None = None

    loss_configured: Fraction = Field(description="Round-trip-equivalent configured loss 1-(1-up)(1-down).")
    loss_measured: Fraction | None = None
    loss_up: LossResult | None = None
    loss_down: LossResult | None = None
    loss_pass: bool | None = None

    up_mbps_configured: NonNeg | None = Field(None, description="Configured uplink rate (frame bytes), None = unlimited.")
    up_mbps_expected: NonNeg | None = Field(None, description="Expected TCP goodput: rate * MSS / (IP packet + framing).")
    up_mbps_measured: NonNeg | None = None
    up_pass: bool | None = None
    down_mbps_configured: NonNeg | None = None
    down_mbps_expected: NonNeg | None = None
    down_mbps_measured: NonNeg | None = None
    down_pass: bool | None = None

    quic_handshake_ok: bool | None = None
    quic_handshake_ms: NonNeg | None = None
    quic_error: str | None = None

    emulator_cpu_pct_up: NonNeg | None = Field(None, description="linkem CPU (% of one core) during the uplink TCP run.")
    emulator_cpu_pct_down: NonNeg | None = Field(None, description="linkem CPU (% of one core) during the downlink TCP run.")
    lateness_p50_ms: float | None = Field(None, description="Emulator lateness (departure - schedule), worst direction.")
    lateness_p99_ms: float | None = None
    lateness_max_ms: float | None = None

    passed: bool = Field(description="Every assessable target met.")
    failures: list[str] = Field(default_factory=list, description="One line per target missed or phase failed.")
    duration_s: NonNeg
