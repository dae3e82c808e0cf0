"""Atlas ingest into the store: raw + parsed, statuses, idempotence, quarantine, views, and
the QuicSocks analysis read back from v_quicsocks_savings."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

from atlas.discovery import Discovered
from collectors import atlas_store
from collectors.atlas_ingest import ingest_files, ingest_results
from vantage_agent import atlas_json

pytestmark = pytest.mark.local
FIX = Path(__file__).resolve().parents[1] / "fixtures" / "atlas"


def q(url, sql, *args):
    with psycopg.connect(url) as c:
        return c.execute(sql, args).fetchall()


def test_fixtures_of_every_firmware_are_stored_twice_is_a_noop(empty_db):
    files = [FIX / "sagan_ping.jsonl", FIX / "sagan_dns.jsonl"]
    s = ingest_files(files, empty_db)
    assert s.as_json() == {"ingested": 14, "duplicates": 0, "quarantined": 0, "by_type": {"ping": 8, "dns": 6}}
    again = ingest_files(files, empty_db)
    assert again.as_json()["ingested"] == 0 and again.duplicates == 14
    assert q(empty_db, "SELECT count(*) FROM atlas_results_raw")[0][0] == 14
    # per-packet RTTs with lost packets as NULL, the buggy fw-4600 result as a timeout
    rows = dict(q(empty_db, "SELECT fw, status FROM v_atlas_ping WHERE prb_id = 202 ORDER BY fw"))
    assert rows == {4550: "ok", 4570: "ok", 4600: "timeout"}
    (rtts,) = q(empty_db, "SELECT rtts_ms FROM v_atlas_ping WHERE fw = 4550")[0]
    assert rtts == [None, None, 27.301]
    dns = q(empty_db, "SELECT resolver, status, rcode FROM v_atlas_dns WHERE prb_id = 2793 ORDER BY subid")
    assert dns == [("208.70.244.7", "ok", "NOERROR"), ("208.70.245.7", "ok", "NOERROR"),
                   ("2001:4860:4860::8888", "timeout", None)]
    (answers,) = q(empty_db, "SELECT answers FROM v_atlas_dns WHERE fw = 4460")[0]
    assert answers[0]["data"]["Address"] == "194.150.168.100"
    (raw,) = q(empty_db, "SELECT raw FROM atlas_results_raw WHERE fw = 4460 AND type = 'ping'")[0]
    assert raw["result"][0]["rtt"] == pytest.approx(43.87)


def test_only_non_atlas_values_are_quarantined(empty_db, tmp_path):
    good = json.loads((FIX / "sagan_ping.jsonl").read_text().splitlines()[2])
    traceroute = {"type": "traceroute", "msm_id": 5001, "prb_id": 9, "timestamp": 1700000000, "fw": 5080,
                  "dst_addr": "192.0.2.1", "result": []}
    arr = tmp_path / "arr.json"
    arr.write_text(json.dumps([good, {"schema": "dnscamp.result/1"}, traceroute, "hello"]))
    s = ingest_files([arr], empty_db)
    assert s.as_json() == {"ingested": 2, "duplicates": 0, "quarantined": 2, "by_type": {"ping": 1, "dns": 0, "traceroute": 1}}
    rows = q(empty_db, "SELECT line, reason FROM quarantine ORDER BY line")
    assert [r[0] for r in rows] == [2, 4]
    assert "type" in rows[0][1] and "not a JSON object" in rows[1][1]


def test_cli_ingest_json_and_exit_codes(empty_db, tmp_path, monkeypatch):
    from dnscamp.cli import app

    monkeypatch.setenv("DNSCAMP_DATABASE_NAME", empty_db.split("/")[3].split("?")[0])
    r = CliRunner().invoke(app, ["atlas", "ingest", str(FIX / "sagan_dns.jsonl"), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == {"ingested": 6, "duplicates": 0, "quarantined": 0, "by_type": {"ping": 0, "dns": 6}}
    bad = tmp_path / "bad.jsonl"
    bad.write_text((FIX / "sagan_ping.jsonl").read_text().splitlines()[3] + "\n{not json\n")
    r = CliRunner().invoke(app, ["atlas", "ingest", str(bad), "--json"])
    assert r.exit_code == 3
    assert json.loads(r.stdout)["quarantined"] == 1
    assert "bad.jsonl:2" in r.stderr


def _campaign(url, campaign, truth):
    """Synthetic campaign: truth = {prb_id: (rtt_dns, rtt_server, rtt_direct, same_as)}."""
    base = 7_000_000 + hash(campaign) % 1000 * 10
    with psycopg.connect(url) as c:
        for role, off in (("probe_server", 1), ("probe_resolver", 2), ("server_resolver", 3)):
            atlas_store.register_measurement(c, base + off, campaign=campaign, role=role)
        rows = []
        for prb, (d, s, r, same) in truth.items():
            res, addr = f"10.90.{prb}.53", f"10.90.{prb}.2"
            atlas_store.save_discovery(c, campaign, [Discovered(prb, addr, res, res, 64500 + prb,
                                                          64500 + prb if same else 15169, "query_log", None)])
            rows.append(atlas_json.ping_result(msm_id=base + 1, prb_id=prb, timestamp=1_700_000_000, src_addr=addr,
                                         dst_addr="10.90.0.10", rtts=[r - 0.2, r + 0.2, r, None, r]))
            rows.append(atlas_json.ping_result(msm_id=base + 2, prb_id=prb, timestamp=1_700_000_000, src_addr=addr,
                                         dst_addr=res, rtts=[d] * 5))
            rows.append(atlas_json.ping_result(msm_id=base + 3, prb_id=0, timestamp=1_700_000_000, src_addr="10.90.0.10",
                                         dst_addr=res, rtts=[s] * 5))
    ingest_results(rows, url, source=f"test:{campaign}")


def test_quicsocks_from_the_view_and_cli(empty_db, monkeypatch):
    truth = {1: (5, 20, 30, True), 2: (12, 20, 61, True), 3: (4, 30, 30, True), 4: (2, 1, 90, False)}
    _campaign(empty_db, "qs", truth)
    rows = q(empty_db, "SELECT prb_id, rtt_dns_ms, rtt_server_ms, rtt_direct_ms, isp_resolver, saving_ms, "
                       "status_quo_retry_ms FROM v_quicsocks_savings WHERE campaign = 'qs' ORDER BY prb_id")
    assert [r[0] for r in rows] == [1, 2, 3, 4]
    assert rows[0][1:6] == pytest.approx((5, 20, 30, True, 10)) and rows[0][6] == pytest.approx(65)
    assert rows[3][4] is False
    from dnscamp.cli import app

    monkeypatch.setenv("DNSCAMP_DATABASE_NAME", empty_db.split("/")[3].split("?")[0])
    r = CliRunner().invoke(app, ["atlas", "quicsocks", "--campaign", "qs", "--json"])
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    assert s["probes_total"] == 4 and s["probes_analysed"] == 3  # probe 4 uses a public resolver
    assert s["share_saving_at_least"]["10"]["without_retry"] == pytest.approx(2 / 3)
    assert s["share_saving_at_least"]["40"]["without_retry"] == pytest.approx(1 / 3)
    assert s["share_rtt_dns_below_10ms"] == pytest.approx(2 / 3)
    r = CliRunner().invoke(app, ["atlas", "quicsocks", "--campaign", "qs"])
    assert r.exit_code == 0 and "saving at least" in r.stdout
