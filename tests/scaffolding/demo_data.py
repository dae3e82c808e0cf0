"""Load the demo campaign's records (tests/fixtures/demo, see its README) into a store, by
the same paths a campaign uses: collectors.ingest for the result records, the Atlas store and
collectors.atlas_ingest for the probes' results."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg

DEMO = Path(__file__).resolve().parents[1] / "fixtures" / "demo"
CAMPAIGN = "default"
RUN = "demo-20261123T215352Z"
ATLAS_CAMPAIGN = f"{CAMPAIGN}/{RUN}"  # the Atlas tables' campaign label (atlas_campaign in the atlas record)
RECORDS = 113


def load_demo(owner_url: str) -> None:
    """Ingest every demo record into the database at owner_url (an owner-role libpq URL)."""
    from atlas.discovery import Discovered
    from atlas.probes import ProbeMeta
    from collectors import atlas_store
    from collectors.atlas_ingest import ingest_files
    from collectors.ingest import ingest

    stats = ingest(sorted((DEMO / "records").glob("*.jsonl")), owner_url, workers=1)
    assert stats.ingested + stats.duplicates == RECORDS, stats
    reg = json.loads((DEMO / "atlas" / "registry.json").read_text())
    with psycopg.connect(owner_url) as conn:
        for m in reg["measurements"]:
            atlas_store.register_measurement(conn, m["msm_id"], campaign=reg["campaign"], role=m["role"],
                                             target=m["target"], definition=m["definition"])
        atlas_store.save_discovery(conn, reg["campaign"], [Discovered(**d) for d in reg["discovery"]])
        atlas_store.save_probes(conn, reg["campaign"], [ProbeMeta(**p) for p in reg.get("probes", [])])
    ingest_files([DEMO / "atlas" / "results-dns.jsonl", DEMO / "atlas" / "results-ping.jsonl"],
                 owner_url, campaign=reg["campaign"])
