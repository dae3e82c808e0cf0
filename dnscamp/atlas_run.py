"""The offline Atlas run end to end, as `dnscamp atlas run --testbed`, bench/atlas_offline.py and
the QuicSocks experiment run it: the measurement (dnscamp.atlas_offline.measure: probes → RIPE
Atlas JSON files and their bundle), the store (collectors.atlas_bundle.store: roles, discovery,
probe places, the results ingested like any Atlas results), and the ground-truth check of the
RTTs read back from v_quicsocks_savings. The store must be migrated by the caller.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from testbed.atlas_probes.island import ProbeTruth


def run_offline(*, n_probes: int, campaign: str, seed: int, db_url: str, keep: bool = False,
                run_dir: Path | None = None, probes: list[ProbeTruth] | None = None) -> dict[str, Any]:
    """Measure, store and check; the report (dnscamp.atlas_offline.report) of the stored run:
    its RTTs are the store's, its ``ingest`` the store's ingest counts. ``probes``: the probe
    population to build (default plan_probes(n_probes, seed))."""
    from collectors import atlas_bundle, atlas_store
    from dnscamp.atlas_offline import measure, report

    run = measure(n_probes=n_probes, campaign=campaign, seed=seed, keep=keep, run_dir=run_dir, probes=probes)
    stats = atlas_bundle.store(run.bundle, db_url)
    return report(run, atlas_store.probe_rtts(db_url, campaign=campaign), stats.as_json())
