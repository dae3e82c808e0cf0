"""Load the demo campaign's records (tests/fixtures/demo, see its README) into a store, by
the same paths a campaign uses: collectors.ingest for the result records, collectors.atlas_bundle
for the atlas unit's bundle (the probes' results and what the store needs beside them)."""

from __future__ import annotations

from pathlib import Path

DEMO = Path(__file__).resolve().parents[1] / "fixtures" / "demo"
CAMPAIGN = "default"
RUN = "demo-20261123T215352Z"
ATLAS_CAMPAIGN = f"{CAMPAIGN}/{RUN}"  # the Atlas tables' campaign label (atlas_campaign in the atlas record)
RECORDS = 113


def load_demo(owner_url: str) -> None:
    """Ingest every demo record into the database at owner_url (an owner-role libpq URL)."""
    from atlas import bundle
    from collectors import atlas_bundle
    from collectors.ingest import ingest

    stats = ingest(sorted((DEMO / "records").glob("*.jsonl")), owner_url, workers=1)
    assert stats.ingested + stats.duplicates == RECORDS, stats
    atlas_bundle.store(DEMO / "atlas" / bundle.NAME, owner_url)
