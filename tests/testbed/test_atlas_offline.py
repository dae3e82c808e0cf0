"""The offline Atlas pipeline on the testbed against its ground truth (issue 7 §6):
discovery finds each probe's resolver, the ISP filter drops the other-AS resolvers, and the
RTTs read back from v_quicsocks_savings match the configured link delays (median error
<= 0.5 ms). Also: every emitted file is valid Atlas JSON for sagan, nothing is left behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ripe.atlas.sagan import Result

from atlas import testbed as tb
from testbed import netns

pytestmark = pytest.mark.testbed


def _mine() -> list[str]:
    return [ns for ns in netns.list_ns("dc-ap-") if ns.startswith(f"dc-ap-{__import__('os').getpid()}-")]


def test_offline_pipeline_recovers_the_ground_truth(fresh_db, tmp_path):
    before = netns.root_snapshot()
    try:
        r = tb.run_offline(n_probes=6, campaign="atlas-offline-test", seed=7, db_url=fresh_db, run_dir=tmp_path)
    finally:
        left = _mine()
        for ns in left:
            netns.del_ns(ns)
    assert left == [], "namespaces left behind"
    assert netns.root_snapshot() == before, "the root namespace changed"
    assert r["discovery"]["correct"] == 6 and r["discovery"]["wrong"] == []
    assert r["discovery"]["whoami_agrees"] == 6  # both discovery methods agree
    assert r["isp_filter_correct"]
    assert r["ingest"] == {"ingested": 24, "duplicates": 0, "quarantined": 0, "by_type": {"ping": 18, "dns": 6}}
    for k in ("rtt_dns", "rtt_server", "rtt_direct"):
        assert r["errors_ms"][k]["n"] == 6
        assert r["errors_ms"][k]["median"] <= 0.5, (k, r["errors_ms"][k])
    assert r["summary"]["probes_isp_resolver"] == 5  # probe 5's resolver is in another AS
    assert r["summary"]["probes_analysed"] == 5
    assert r["ok"]
    for f in ("results-dns.jsonl", "results-ping.jsonl"):
        for line in (Path(tmp_path) / f).read_text().splitlines():
            res = Result.get(json.loads(line))
            assert not res.is_error and not res.is_malformed
    log = (Path(tmp_path) / "auth-queries.jsonl").read_text().splitlines()
    assert {json.loads(x)["src"] for x in log} == {p.egress for p in tb.plan_probes(6, 7)}
