"""Resolver discovery (query log / whoami), the ASN filter, and sagan round-trips of what the
offline probes emit."""

from __future__ import annotations

import pytest
from ripe.atlas.sagan import Result

from atlas import dns as atlas_dns
from atlas import ping as atlas_ping
from atlas.discovery import AsnDb, discover, from_query_log, from_whoami, parse_query_log_line, probe_qname
from testbed.atlas_probes.asndb import write_asn_db
from vantage_agent import atlas_json

pytestmark = pytest.mark.unit
ZONE = "dnstest.example.com"


@pytest.mark.parametrize(
    "line,src",
    [
        ('{"src": "198.51.100.7", "qname": "12-1700000000.rab.dnstest.example.com."}', "198.51.100.7"),
        ('[INFO] 198.51.100.7:41235 - 4242 "A IN 12-1700000000.rab.dnstest.example.com. udp 60 false 1232" '
         'NOERROR qr,aa,rd 100 0.0001s', "198.51.100.7"),
        ("13-Jun-2019 10:00:00.000 client @0x7f 198.51.100.7#41235 (12-1700000000.rab.dnstest.example.com): "
         "query: 12-1700000000.rab.dnstest.example.com IN A -E(0)", "198.51.100.7"),
        ("[2001:db8::53]:5353 12-1700000000.rab.dnstest.example.com", "2001:db8::53"),
        ("198.51.100.7 12-1700000000.rab.dnstest.example.com", "198.51.100.7"),
    ],
)
def test_query_log_formats(line, src):
    e = parse_query_log_line(line, ZONE)
    assert e is not None and e.src == src and e.qname == "12-1700000000.rab.dnstest.example.com."


def test_query_log_maps_probes_and_ignores_other_names():
    lines = [
        '{"src": "198.51.100.7", "qname": "12-1700000000.rab.dnstest.example.com."}',
        '{"src": "203.0.113.9", "qname": "' + probe_qname(13, 1700000001, "rab." + ZONE) + '"}',
        '{"src": "203.0.113.66", "qname": "www.example.org."}',
        '{"src": "203.0.113.67", "qname": "noprobeid.dnstest.example.com."}',
        "garbage",
    ]
    m = from_query_log(lines, ZONE)
    assert {k: v.src for k, v in m.items()} == {12: "198.51.100.7", 13: "203.0.113.9"}


def test_whoami_and_asn_filter(tmp_path):
    import dns.message
    import dns.rrset

    q = dns.message.make_query("whoami.akamai.net.", "A")
    r = dns.message.make_response(q)
    r.answer.append(dns.rrset.from_text("whoami.akamai.net.", 0, "IN", "A", "192.0.2.53"))
    raw = atlas_json.dns_result(msm_id=5, prb_id=7, timestamp=1700000000, from_addr="192.0.2.2", responses=[
        atlas_json.dns_response(dst_addr="192.0.2.1", src_addr="192.0.2.2", abuf=r.to_wire(), rt_ms=4.2, timestamp=1700000000)])
    who = from_whoami(atlas_dns.parse(raw))
    assert who == {7: "192.0.2.53"}
    db = AsnDb(write_asn_db(tmp_path / "ipasn.dat", {"192.0.2.0/24": 64501, "198.51.100.0/24": 15169}))
    assert db.asn("192.0.2.99") == 64501 and db.asn("203.0.113.1") is None
    found = discover({7: "192.0.2.2", 8: "192.0.2.3", 9: "192.0.2.4"}, whoami={**who, 8: "198.51.100.8"}, asn_db=db)
    assert [(d.prb_id, d.resolver, d.method, d.isp_resolver) for d in found] == [
        (7, "192.0.2.53", "whoami", True), (8, "198.51.100.8", "whoami", False)]  # probe 9: no evidence


def test_offline_ping_and_dns_results_round_trip_through_sagan():
    import dns.message
    import dns.rrset

    p = atlas_json.ping_result(msm_id=9, prb_id=3, timestamp=1700000000, src_addr="10.90.3.2", dst_addr="10.90.0.10",
                         rtts=[10.5, None, 11.5, 10.0, 12.0])
    r = Result.get(p)
    assert r.firmware == atlas_json.OFFLINE_FW and r.packets_sent == 5 and r.packets_received == 4
    assert [x.rtt for x in r.packets] == [10.5, None, 11.5, 10.0, 12.0]
    row = atlas_ping.parse(p)
    assert row.status == "ok" and row.avg == pytest.approx(11.0)
    lost = atlas_ping.parse(atlas_json.ping_result(msm_id=9, prb_id=4, timestamp=1700000000, src_addr="a", dst_addr="10.0.0.1",
                                             rtts=[None] * 5))
    assert lost.status == "timeout" and lost.avg is None
    q = dns.message.make_query("3-1700000000.rx.qs.whoami.test.", "A")
    resp = dns.message.make_response(q)
    resp.answer.append(dns.rrset.from_text(q.question[0].name, 0, "IN", "A", "10.90.3.54"))
    d = atlas_json.dns_result(msm_id=8, prb_id=3, timestamp=1700000000, from_addr="10.90.3.2", responses=[
        atlas_json.dns_response(dst_addr="10.90.3.53", src_addr="10.90.3.2", abuf=resp.to_wire(), rt_ms=7.25,
                          timestamp=1700000000),
        atlas_json.dns_response(dst_addr="10.90.3.99", src_addr="10.90.3.2", abuf=None, rt_ms=None, subid=2,
                          timestamp=1700000000)])
    sr = Result.get(d)
    assert sr.responses[0].abuf.answers[0].address == "10.90.3.54" and sr.responses[0].response_time == 7.25
    rows = atlas_dns.parse(d)
    assert [(x.resolver, x.status) for x in rows] == [("10.90.3.53", "ok"), ("10.90.3.99", "timeout")]
