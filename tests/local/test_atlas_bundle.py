"""Storing Atlas bundles (collectors/atlas_bundle.py): the roles, the discovery, the probes'
places and the results land in the store; v_quicsocks_savings then gives exactly the RTTs that
atlas.quicsocks.rtts_of_pings computes from the files (what the atlas kind's unit checks
against the ground truth); storing again changes nothing; the campaign's ingest step stores the
bundles a run's atlas units left in its artifacts, oldest first."""

from __future__ import annotations

import json

import psycopg
import pytest

from atlas import bundle
from collectors import atlas_bundle, atlas_store
from collectors.errors import IngestError
from tests.unit.test_atlas_bundle import DISCOVERY, MSM, PROBE_SERVER_AGAIN, PROBES, SERVER, WANT, write_bundle

pytestmark = pytest.mark.local


def _tables(url: str, campaign: str) -> dict[str, list]:
    with psycopg.connect(url) as conn:
        q = lambda sql: conn.execute(sql, (campaign,)).fetchall()  # noqa: E731
        return {
            "measurements": q("SELECT msm_id, role, target, definition FROM atlas_measurements WHERE campaign = %s "
                              "ORDER BY msm_id"),
            "discovery": q("SELECT prb_id, probe_addr, resolver, configured_resolver, probe_asn, resolver_asn, method, "
                           "qname FROM atlas_discovery WHERE campaign = %s ORDER BY prb_id"),
            "probes": q("SELECT prb_id, country_code, asn_v4, lat, lon, status, source FROM atlas_probes "
                        "WHERE campaign = %s ORDER BY prb_id"),
            "results": q("SELECT type, count(*) FROM atlas_results_raw WHERE campaign = %s GROUP BY 1 ORDER BY 1"),
        }


def test_a_stored_bundle_gives_the_rtts_of_its_files(empty_db, tmp_path):
    path = write_bundle(tmp_path / "a")
    st = atlas_bundle.store(path, empty_db)
    assert st.as_json() == {"ingested": 16, "duplicates": 1, "quarantined": 0, "by_type": {"ping": 13, "dns": 3}}
    assert atlas_store.probe_rtts(empty_db, campaign="c/r1") == WANT
    t = _tables(empty_db, "c/r1")
    assert t["measurements"] == [(mid, role, SERVER if role == "probe_server" else None, {"offline": True, "packets": 5})
                                 for role, mid in sorted([*MSM.items(), ("probe_server", PROBE_SERVER_AGAIN)],
                                                         key=lambda x: x[1])]
    assert t["discovery"] == [tuple(d.__dict__.values()) for d in DISCOVERY]
    assert t["probes"] == [tuple(p.__dict__.values()) for p in PROBES]
    assert t["results"] == [("dns", 3), ("ping", 13)]
    again = atlas_bundle.store(path, empty_db)
    assert (again.ingested, again.duplicates) == (0, 17) and _tables(empty_db, "c/r1") == t


def test_the_campaign_ingest_stores_the_runs_bundles_oldest_first(empty_db, tmp_path, monkeypatch):
    from dnscamp import campaign

    monkeypatch.setenv("DNSCAMP_DATABASE_NAME", empty_db.split("/")[3].split("?")[0])
    run_dir = tmp_path / "spool" / "c" / "r1"
    # the later unit ("atlas-a") found probe 3 elsewhere and did not find probe 2: its discovery is the campaign's
    later = (DISCOVERY[0], DISCOVERY[2].__class__(**{**DISCOVERY[2].__dict__, "method": "query_log"}))
    write_bundle(run_dir / "artifacts" / "atlas-a", created="2026-01-01T00:10:00.000000+00:00", discovery=later)
    write_bundle(run_dir / "artifacts" / "atlas-b", created="2026-01-01T00:00:00.000000+00:00")
    assert [p.parent.name for p in atlas_bundle.find([run_dir])] == ["atlas-b", "atlas-a"]
    stats = campaign.ingest([run_dir])
    assert (stats.ingested, stats.quarantined) == (0, 0)  # the records' counts: the Atlas results are no records
    t = _tables(empty_db, "c/r1")
    assert [d[0] for d in t["discovery"]] == [1, 3] and t["discovery"][1][6] == "query_log"
    assert t["results"] == [("dns", 3), ("ping", 13)]  # the same results twice: stored once
    assert atlas_store.probe_rtts(empty_db, campaign="c/r1") == [WANT[0], WANT[2]]


def test_a_sidecar_that_cannot_be_read_ends_the_ingest_with_its_name(empty_db, tmp_path):
    path = write_bundle(tmp_path / "run" / "artifacts" / "atlas-u1")
    d = json.loads(path.read_text())
    d["schema"] = "dnscamp.atlas_bundle/9"
    path.write_text(json.dumps(d))
    with pytest.raises(IngestError, match=f"Atlas bundle {path}: schema 'dnscamp.atlas_bundle/9'"):
        atlas_bundle.store_all([tmp_path / "run"], empty_db)
    assert bundle.NAME == path.name
