"""Store Atlas bundles (atlas/bundle.py): a run's Atlas result files and what the store needs
beside them, as the ``atlas`` campaign kind leaves them in its unit's artifacts directory.

Per bundle, in one pass: the measurements' roles (atlas_measurements), the campaign's discovery
(its rows replaced by the bundle's: the latest run of a campaign says where its probes' resolvers
are), the probes' places (atlas_probes), then the result files ingested like any Atlas results
(collectors/atlas_ingest.py). Every step is an upsert or idempotent: storing a bundle again
changes no row but the times the discovery and the places were stored (discovered_at,
fetched_at). The store is migrated by the caller.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Iterable

import psycopg

from atlas import bundle as atlas_bundle
from collectors.errors import IngestError, StoreUnavailable
from vantage_agent import errors

if TYPE_CHECKING:  # the Atlas parsers (sagan, cousteau) load when there is a bundle to store
    from collectors.atlas_ingest import AtlasIngestStats


def store(path: Path, url: str) -> AtlasIngestStats:
    """Store the bundle whose sidecar is ``path``; the ingest counts of its result files.
    BundleError for a sidecar that cannot be read."""
    from collectors import atlas_store
    from collectors.atlas_ingest import ingest_files

    b = atlas_bundle.read(path)
    with psycopg.connect(url) as conn:
        for m in b.measurements:
            atlas_store.register_measurement(conn, m.msm_id, campaign=b.campaign, role=m.role, target=m.target,
                                             definition=m.definition)
        conn.execute("DELETE FROM atlas_discovery WHERE campaign = %s", (b.campaign,))
        atlas_store.save_discovery(conn, b.campaign, b.discovery)
        atlas_store.save_probes(conn, b.campaign, b.probes)
    return ingest_files(atlas_bundle.result_paths(path, b), url, campaign=b.campaign)


def find(paths: Iterable[Path]) -> list[Path]:
    """The bundles' sidecars under the directories among ``paths`` (a run directory keeps them in
    artifacts/), each once, in the order they were written (their ``created``)."""
    found = {p.resolve(): p for d in paths if Path(d).is_dir() for p in Path(d).rglob(atlas_bundle.NAME)}
    return sorted(found.values(), key=lambda p: (atlas_bundle.read(p).created, str(p)))


def store_all(paths: Iterable[Path], url: str) -> list[tuple[Path, AtlasIngestStats]]:
    """Store every bundle under ``paths`` (find), oldest first; each sidecar with its ingest
    counts. IngestError for a sidecar that cannot be read; StoreUnavailable when the store
    cannot be reached."""
    try:
        return [(p, store(p, url)) for p in find(paths)]
    except atlas_bundle.BundleError as exc:
        raise IngestError(f"Atlas bundle {exc}") from None
    except psycopg.OperationalError as exc:
        raise StoreUnavailable(f"the database stopped or cannot be reached ({errors.first_line(exc)}) while "
                               "storing Atlas bundles: run `dnscamp db up` (or check DNSCAMP_DATABASE_URL), "
                               "then the same ingest again") from None
