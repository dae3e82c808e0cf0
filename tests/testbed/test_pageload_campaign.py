"""The page_load kind in the campaign runner on the testbed: units run by the vantage agent
inside dc-client-fiber, (browser, DNS mode) shuffled per site with the unit seed, every load
a record with its HAR beside it, all ingested and readable from v_page_load."""

import json

import psycopg
import pytest

from tests.testbed.conftest import dnscamp

pytestmark = pytest.mark.testbed


def test_campaign_runs_page_loads_into_the_view(testbed, tmp_path, db_url):
    from testbed.services import info as sinfo

    url = sinfo.describe(testbed.run_dir)["sites"]["js"]["url"]
    spec = tmp_path / "pl.toml"
    spec.write_text(
        '[campaign]\nname = "pltest"\nseed = 7\nrepetitions = 1\n\n'
        '[[vantages]]\nid = "tb"\nprovider = "testbed"\nnetwork_profiles = ["fiber"]\n\n'
        f'[kinds.page_load]\nurls = ["{url}"]\nbrowsers = ["firefox", "chromium"]\n'
        'dns = ["doq:isp", "doh:isp"]\nhttp = ["h2"]\nrtt_count = 2\n'
    )
    p = dnscamp("campaign", "run", str(spec), "--json", "--no-report", "--keep-testbed",
                env={"DNSCAMP_SPOOL": str(tmp_path / "spool")}, timeout=600)  # fmt: skip
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["records"] == 4 and out["statuses"] == {"ok": 4}, out
    (f,) = [x for x in (tmp_path / "spool").rglob("*.jsonl")]
    recs = [json.loads(line) for line in f.read_text().splitlines()]
    assert [r["body"]["order"]["combination"] for r in recs] == [0, 1, 2, 3]
    assert {(r["body"]["browser"], r["body"]["dns_mode"]) for r in recs} == {
        (b, m) for b in ("firefox", "chromium") for m in ("doq:isp", "doh:isp")
    }
    for r in recs:
        b = r["body"]
        assert r["vantage"]["network_profile"] == "fiber" and r["env"]["netns"] == "dc-client-fiber"
        assert b["dns_transport_verified"] is True, b["dns_verification"]
        assert (f.parent / "artifacts" / b["har_path"]).is_file() and b["har_valid"]
        assert b["resolver_rtt_ms"]["10.53.1.1"] and b["resolver_rtt_ms"]["10.53.1.1"] > 10  # fiber: 14.8 ms RTT + backbone
    with psycopg.connect(db_url) as c:
        rows = c.execute(
            "SELECT browser, dns_transport, status, plt_ms, dns_transport_verified FROM v_page_load WHERE campaign = 'pltest'"
        ).fetchall()
    assert len(rows) == 4 and all(r[2] == "ok" and r[3] > 0 and r[4] for r in rows)
