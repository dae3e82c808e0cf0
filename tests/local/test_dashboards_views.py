"""Migration 0011's reader views: what the campaign-health panels read, checked
against independently computed expectations, as the role the dashboards read them with
(dnscamp_grafana, migration 0029) where it may, else as the reader."""

from __future__ import annotations

import json

import psycopg
import pytest

from atlas import bundle
from atlas.dns import unit_cost as dns_unit_cost
from atlas.ping import unit_cost as ping_unit_cost
from db import engine
from tests.store_util import grafana_url
from tests.scaffolding.demo_data import ATLAS_CAMPAIGN, DEMO, load_demo

pytestmark = pytest.mark.local


def _reader(owner_url: str) -> str:
    return owner_url.replace("postgres@", f"{engine.READER}@", 1)


def test_v_atlas_credits_prices_the_demo_results_by_the_atlas_cost_model(empty_db):
    load_demo(empty_db)
    roles = {m.msm_id: m.role for m in bundle.read(DEMO / "atlas" / bundle.NAME).measurements}
    want: dict[int, int] = {}
    for typ in ("ping", "dns"):
        for line in (DEMO / "atlas" / f"results-{typ}.jsonl").read_text().splitlines():
            r = json.loads(line)
            cost = (ping_unit_cost(r["sent"], r["size"], oneoff=True) if typ == "ping"
                    else dns_unit_cost(r.get("proto", "UDP"), oneoff=True))
            want[r["msm_id"]] = want.get(r["msm_id"], 0) + cost
    with psycopg.connect(grafana_url(empty_db)) as c:
        got = {m: (role, credits, charged) for m, role, credits, charged in c.execute(
            "SELECT msm_id, role, credits, charged FROM v_atlas_credits WHERE campaign = %s", (ATLAS_CAMPAIGN,))}
    assert {m: v[1] for m, v in got.items()} == want and sum(want.values()) > 0
    assert {m: v[0] for m, v in got.items()} == {m: roles[m] for m in want}
    assert not any(v[2] for v in got.values())  # the testbed's probes are offline: nothing charged


def test_v_atlas_credits_charges_real_measurements_but_not_our_own_pings(empty_db):
    with psycopg.connect(empty_db) as c:
        for msm, role, definition in ((11, "probe_server", None), (12, "resolver_dns", {"is_oneoff": False}),
                                      (-5, "server_resolver", {"local": True})):
            c.execute("INSERT INTO atlas_measurements (msm_id, campaign, role, definition) VALUES (%s, 'c', %s, %s)",
                      (msm, role, json.dumps(definition) if definition else None))
        rows = [(11, "ping", {"sent": 3, "size": 1600}), (12, "dns", {"proto": "TCP"}), (12, "dns", {}),
                (-5, "ping", {"sent": 5, "size": 48})]
        for i, (msm, typ, raw) in enumerate(rows):
            c.execute("INSERT INTO atlas_results_raw (campaign, msm_id, prb_id, timestamp, type, status, raw)"
                      " VALUES ('c', %s, %s, now(), %s, 'ok', %s)", (msm, i, typ, json.dumps(raw)))
    with psycopg.connect(grafana_url(empty_db)) as c:
        got = {m: (n, cr, ch) for m, n, cr, ch in c.execute("SELECT msm_id, results, credits, charged FROM v_atlas_credits")}
    assert got == {11: (1, ping_unit_cost(3, 1600, oneoff=True), True),
                   12: (2, dns_unit_cost("TCP", oneoff=False) + dns_unit_cost("UDP", oneoff=False), True),
                   -5: (1, ping_unit_cost(5, 48, oneoff=True), False)}


def test_v_collected_objects_and_v_quarantine_read_campaign_and_vantage_from_the_key(empty_db):
    key = "results/www20/aws-us-east-2-fiber/r-1/u-7.jsonl.gz"
    with psycopg.connect(empty_db) as c:
        for k in (key, "elsewhere/x.jsonl"):
            c.execute("INSERT INTO collected_objects (bucket, key, etag, size, ingested, duplicates, quarantined)"
                      " VALUES ('b', %s, 'e', 10, 3, 0, 1)", (k,))
        for src in (f"s3://b/{key}", "/var/spool/www20/r-1/u-7.jsonl"):
            c.execute("INSERT INTO quarantine (source_file, line, reason, raw) VALUES (%s, 4, 'invalid JSON: x', 'zz')",
                      (src,))
    with psycopg.connect(_reader(empty_db)) as c:
        objs = c.execute("SELECT key, campaign, vantage_id, run, unit, quarantined FROM v_collected_objects ORDER BY key")
        assert objs.fetchall() == [("elsewhere/x.jsonl", None, None, None, None, 1),
                                   (key, "www20", "aws-us-east-2-fiber", "r-1", "u-7", 1)]
        q = c.execute("SELECT source_file, campaign, vantage_id, run, reason_class, raw_bytes FROM v_quarantine ORDER BY 1")
        assert q.fetchall() == [("/var/spool/www20/r-1/u-7.jsonl", None, None, None, "invalid JSON", 2),
                                (f"s3://b/{key}", "www20", "aws-us-east-2-fiber", "r-1", "invalid JSON", 2)]
        assert "raw" not in [d.name for d in c.execute("SELECT * FROM v_quarantine LIMIT 0").description]
    with psycopg.connect(grafana_url(empty_db)) as c:  # the dashboards' role: the ledger without object names
        assert c.execute("SELECT campaign, vantage_id, quarantined FROM v_collected_objects ORDER BY 1").fetchall() == [
            ("www20", "aws-us-east-2-fiber", 1), (None, None, 1)]
        assert c.execute("SELECT reason_class, sum(lines) FROM v_quarantine_counts GROUP BY 1").fetchall() == [
            ("invalid JSON", 2)]
