"""Body of ``page_load`` records: one browser load of one URL under one DNS mode.

Timestamps are the browser's own (ms since navigation start, W3C Navigation / Resource Timing);
durations are derived in SQL (db/views/v_page_load.sql). The raw HAR is a file beside the
record (``har_path``, relative to the run's artifacts directory), validated against HAR 1.2.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from .envelope import Frozen
from .types import Count, NonNeg


class ResourceTiming(Frozen):
    """One Resource Timing entry (phase timestamps, ms since navigation start)."""

    name: str | None = None
    host: str | None = None
    initiator_type: str | None = None
    next_hop_protocol: str | None = None
    response_status: Count | None = None
    startTime: NonNeg | None = None
    redirectStart: NonNeg | None = None
    redirectEnd: NonNeg | None = None
    fetchStart: NonNeg | None = None
    domainLookupStart: NonNeg | None = None
    domainLookupEnd: NonNeg | None = None
    connectStart: NonNeg | None = None
    secureConnectionStart: NonNeg | None = None
    connectEnd: NonNeg | None = None
    requestStart: NonNeg | None = None
    responseStart: NonNeg | None = None
    responseEnd: NonNeg | None = None
    duration: NonNeg | None = None
    transferSize: NonNeg | None = None
    encodedBodySize: NonNeg | None = None
    decodedBodySize: NonNeg | None = None


class PageLoadBody(Frozen):
    url: str = Field(description="URL asked for.")
    final_url: str | None = Field(None, description="location.href after the load (error pages included).")
    browser: Literal["firefox", "chromium"]
    browser_version: str | None = None
    driver_version: str | None = None
    dns_mode: str = Field(description="The DNS mode as given: system, do53:R, dot:R, doh:R, doq:R, doh3:R.")
    dns_transport: Literal["system", "do53", "dot", "doh", "doq", "doh3"]
    resolver: str | None = Field(None, description="Resolver (tls-name@address) for non-system modes.")
    http: Literal["h2", "h3"] = Field(description="h2: QUIC disabled; h3: HTTP/3 forced for the testbed origins.")
    timeout_s: float = Field(gt=0)
    viewport: tuple[Count, Count]
    plt_ms: NonNeg | None = Field(None, description="onLoad: loadEventStart of the navigation entry (ms).")
    navigation: dict[str, Any] | None = Field(None, description="The full Navigation Timing entry (toJSON).")
    first_paint_ms: NonNeg | None = None
    first_contentful_paint_ms: NonNeg | None = None
    lcp_ms: NonNeg | None = Field(None, description="Largest Contentful Paint (last candidate), when supported.")
    next_hop_protocol: str | None = Field(None, description="nextHopProtocol of the document (h2, h3, http/1.1).")
    protocols: dict[str, Count] = Field(default_factory=dict, description="nextHopProtocol -> entries.")
    resources: list[ResourceTiming] = Field(default_factory=list)
    hostnames: list[str] = Field(default_factory=list, description="Unique hostnames the page used.")
    unique_hostnames: Count = 0
    dns_lookups: Count = Field(0, description="Hostnames with a DNS phase in the browser's timings (lower bound).")
    stub: dict[str, Any] | None = Field(
        None, description="dnscamp stub (doq/doh3): queries, failures, overhead_us_p50/p90, names."
    )
    dns_transport_verified: bool | None = Field(
        None, description="True/False when resolver-side evidence (frontend log, stub) was checked; null when none."
    )
    dns_verification: str | None = Field(None, description="How the transport was verified, or why not.")
    har_path: str | None = Field(None, description="HAR 1.2 file, relative to the run's artifacts dir.")
    har_valid: bool | None = None
    har_source: str | None = Field(None, description="cdp | bidi | resource-timing")
    har_entries: Count | None = None
    resolver_rtt_ms: dict[str, NonNeg | None] | None = Field(
        None, description="RTT to each resolver used, measured right after the load (WWW'20 §4)."
    )
    wall_ms: dict[str, NonNeg] = Field(default_factory=dict, description="Harness wall clock: start/load/collect/quit/total.")
    order: dict[str, Any] | None = Field(None, description="Seeded order: seed, site index, combination index.")
    warm_origin: dict[str, Any] | None = Field(
        None, description="warm_origin loads (this record is the measured, second load): warm_up (the first load's "
                          "status, error, plt_ms, wall_ms) and zero_rtt (Chromium netlog: sessions, state, resumed, "
                          "zero_rtt_packets, request_in_0rtt); null for a cold load.")
