"""Body of ``atlas`` records: one offline RIPE Atlas pipeline run on the testbed.

The Atlas results themselves live in the atlas_* tables (raw + parsed, migration 0005_atlas),
stored from the run's files by the campaign's ingest step; this record says what the run found: the discovery check, the RTT errors against the
configured link delays (ground truth), and the QuicSocks summary (001_3c494309ab66be23.txt
§IV-B) of the probes with an ISP resolver.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .envelope import Frozen
from .types import Count, Int64, NonNeg


class AtlasRunBody(Frozen):
    atlas_campaign: str = Field(description="Campaign name of the Atlas results (atlas_* tables, v_quicsocks_savings).")
    probes: Count = Field(description="Atlas-like probes on the testbed.")
    seed: Int64
    link_backend: str | None = Field(None, description="Link emulator backend of the probes' links.")
    discovery_correct: Count = Field(description="Probes whose discovered resolver is the true one.")
    discovery_wrong: list[Int64] = Field(default_factory=list, description="Probe ids with a wrong or no resolver.")
    isp_filter_correct: bool = Field(description="Same-AS filter kept exactly the probes with an ISP resolver.")
    errors_ms: dict[str, dict[str, Int64 | float | None]] = Field(
        description="Per RTT (rtt_dns, rtt_server, rtt_direct): median / max absolute error, mean signed error, n."
    )
    summary: dict[str, Any] = Field(description="QuicSocks summary (atlas.quicsocks.summarize, without CDF data).")
    ingest: dict[str, Any] = Field(
        default_factory=dict,
        description="Atlas results the run wrote for the campaign's ingest step to store: written (results), "
                    "by_type (ping, dns). The unit does not store them: the store's own counts are the ingest's.",
    )
    passed: bool = Field(description="Discovery right for every probe and every median error <= 0.5 ms.")
    duration_s: NonNeg
