"""A real campaign's steps after phase 1, on loopback: ingest phase-1 results, discover from
our authoritative server's query log (ASN filter from the spec's pyasn file), price phase 2,
ping the resolvers from "the server" (loopback addresses), analyse."""

from __future__ import annotations

import json

import psycopg
import pytest
from typer.testing import CliRunner

from collectors import atlas_store
from collectors.atlas_ingest import ingest_results
from testbed.atlas_probes.asndb import write_asn_db
from vantage_agent import atlas_json

pytestmark = pytest.mark.local


def test_discover_phase2_server_ping_quicsocks(empty_db, tmp_path, monkeypatch):
    import dns.message

    from dnscamp.cli import app

    monkeypatch.setenv("DNSCAMP_DATABASE_NAME", empty_db.split("/")[3].split("?")[0])
    asn = write_asn_db(tmp_path / "ipasn.dat", {"127.0.0.0/24": 64500, "127.0.1.0/24": 64501, "192.0.2.0/24": 64500,
                                                "198.51.100.0/24": 64501})
    log = tmp_path / "queries.log"
    spec = tmp_path / "c.toml"
    spec.write_text(f'''name = "loop"
server = "127.0.0.1"
asn_db = "{asn}"
[[sources]]
probes = [1, 2]
[zone]
name = "dnstest.example.com"
query_log = "{log}"
''')
    # phase 1 results: probe 1 (192.0.2.1, AS 64500) uses resolver 127.0.0.2 (same AS);
    # probe 2 (198.51.100.1, AS 64501) uses 127.0.0.3, which is in AS 64500 (a "public" one)
    rows = []
    with psycopg.connect(empty_db) as c:
        atlas_store.register_measurement(c, 11, campaign="loop", role="resolver_dns")
        atlas_store.register_measurement(c, 12, campaign="loop", role="probe_server")
        atlas_store.register_measurement(c, 13, campaign="loop", role="probe_resolver")
    lines = []
    for prb, frm, res, direct, dnsrtt in ((1, "192.0.2.1", "127.0.0.2", 40.0, 5.0), (2, "198.51.100.1", "127.0.0.3", 30.0, 3.0)):
        q = dns.message.make_query(f"{prb}-1700000000.rab.dnstest.example.com.", "A")
        rows.append(atlas_json.dns_result(msm_id=11, prb_id=prb, timestamp=1700000000, from_addr=frm, responses=[
            atlas_json.dns_response(dst_addr="10.0.0.1", src_addr="10.0.0.2", abuf=dns.message.make_response(q).to_wire(),
                              rt_ms=12.0, timestamp=1700000000)]))
        rows.append(atlas_json.ping_result(msm_id=12, prb_id=prb, timestamp=1700000000, src_addr=frm, dst_addr="127.0.0.1",
                                     rtts=[direct] * 5))
        rows.append(atlas_json.ping_result(msm_id=13, prb_id=prb, timestamp=1700000100, src_addr=frm, dst_addr=res,
                                     rtts=[dnsrtt] * 5))
        lines.append(json.dumps({"src": res, "qname": f"{prb}-1700000000.rab.dnstest.example.com."}))
    log.write_text("\n".join(lines) + "\n")
    ingest_results(rows, empty_db, source="test")
    r = CliRunner().invoke(app, ["atlas", "discover", str(spec), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == {"campaign": "loop", "discovered": 2, "isp_resolver": 1, "methods": {"query_log": 2}}
    r = CliRunner().invoke(app, ["atlas", "plan", str(spec), "--phase", "2", "--dry-run"])
    assert r.exit_code == 0, r.output
    p = json.loads(r.stdout)
    assert [q["body"]["definitions"][0]["target"] for q in p["requests"]] == ["127.0.0.2", "127.0.0.3"]
    assert p["credits"]["total"] == 2 * 10
    out = tmp_path / "server.jsonl"
    r = CliRunner().invoke(app, ["atlas", "server-ping", str(spec), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert len(out.read_text().splitlines()) == 2
    r = CliRunner().invoke(app, ["atlas", "quicsocks", "--campaign", "loop", "--json", "--all-resolvers"])
    s = json.loads(r.stdout)
    assert s["probes_complete"] == 2 and s["probes_analysed"] == 2
    # RTT_Server comes from this host's loopback pings (not the probes' 30-40 ms or 3-5 ms): its
    # median lies within what server-ping measured, whatever the machine's load made of it
    pinged = [x["rtt"] for line in out.read_text().splitlines() for x in json.loads(line)["result"] if "rtt" in x]
    assert pinged and min(pinged) <= s["median_ms"]["rtt_server"] <= max(pinged)
    r = CliRunner().invoke(app, ["atlas", "quicsocks", "--campaign", "loop", "--json"])
    assert json.loads(r.stdout)["probes_analysed"] == 1  # the ISP filter drops probe 2
