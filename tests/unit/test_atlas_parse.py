"""sagan parsing of real Atlas results of several firmware versions (tests/fixtures/atlas/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from atlas import dns as atlas_dns
from atlas import ping as atlas_ping
from atlas import result as atlas_result
from vantage_agent import atlas_json

pytestmark = pytest.mark.unit
FIX = Path(__file__).resolve().parent.parent / "fixtures" / "atlas"


def _lines(name):
    return [json.loads(x) for x in (FIX / name).read_text().splitlines() if x.strip()]


def test_ping_every_firmware_parses_with_a_status():
    rows = [atlas_ping.parse(r) for r in _lines("sagan_ping.jsonl")]
    assert [r.fw for r in rows] == [0, 1, 4460, 4550, 4570, 4610, 4610, 4600]
    by_fw = {(r.fw, r.prb_id): r for r in rows}
    r4460 = by_fw[(4460, 270)]
    assert r4460.status == "ok" and r4460.rtts == [43.87, 56.949, 44.346]
    assert r4460.avg == pytest.approx((43.87 + 56.949 + 44.346) / 3)
    r4550 = by_fw[(4550, 202)]  # two "x": "*" packets
    assert r4550.rtts == [None, None, 27.301] and r4550.received == 1 and r4550.avg == pytest.approx(27.301)
    r0 = by_fw[(0, 677)]  # firmware 0: summary only, strings for numbers
    assert r0.status == "ok" and r0.avg == pytest.approx(58.042) and r0.rtts == []
    buggy = by_fw[(4600, 202)]  # avg -1, no reply but duplicates
    assert buggy.status == "timeout" and buggy.avg is None and buggy.error
    dup = [r for r in rows if r.prb_id == 1216][0]
    assert dup.rtts == [None, 27.768] and dup.duplicates == 2


def test_dns_rows_resolver_rcode_answers_and_timeout():
    results = _lines("sagan_dns.jsonl")
    rows = [row for r in results for row in atlas_dns.parse(r)]
    first = rows[0]
    assert first.fw == 4460 and first.resolver == "193.227.234.53" and first.rcode == "NOERROR"
    assert first.answers[0]["type"] == "A" and first.answers[0]["data"]["Address"] == "194.150.168.100"
    assert first.response_time == 45.305 and first.qname == "as250.net." and first.qtype == "A"
    mx = [r for r in rows if r.prb_id == 2793]
    assert [r.resolver for r in mx] == ["208.70.244.7", "208.70.245.7", "2001:4860:4860::8888"]
    assert [r.status for r in mx] == ["ok", "ok", "timeout"]
    assert "5000" in mx[2].error
    assert atlas_result.result_status(mx) == "ok"
    ns = [r for r in rows if r.prb_id == 17868]
    assert {r.resolver for r in ns} == {"10.0.0.34", "10.0.0.35"}


def test_servfail_and_undecodable_abuf_are_statuses():
    import dns.message
    import dns.rcode

    q = dns.message.make_query("x.example.", "A")
    resp = dns.message.make_response(q)
    resp.set_rcode(dns.rcode.SERVFAIL)
    raw = {"type": "dns", "prb_id": 1, "msm_id": 2, "timestamp": 1700000000, "fw": 5080, "dst_addr": "10.0.0.1",
           "af": 4, "proto": "UDP", "result": {"abuf": atlas_json.abuf_for(resp.to_wire()), "rt": 3.2, "size": 30}}
    (row,) = atlas_dns.parse(raw)
    assert row.status == "servfail" and row.rcode == "SERVFAIL"
    raw["result"]["abuf"] = "AAAA"
    (row,) = atlas_dns.parse(raw)
    assert row.status in ("malformed_response", "other") and row.error


@pytest.mark.parametrize(
    "value,reason",
    [
        ("not json", "malformed JSON"),
        ([1, 2], "not a JSON object"),
        ({"type": "ping", "timestamp": 1}, "prb_id"),
        ({"schema": "dnscamp.result/1", "kind": "ping"}, "type"),
        ({"type": "ping", "prb_id": 1, "timestamp": 5}, "msm_id"),
    ],
)
def test_not_an_atlas_result(value, reason):
    with pytest.raises(atlas_result.NotAnAtlasResult, match=reason):
        atlas_result.load(value)


def test_each_type_is_parsed_by_its_module_and_other_types_are_kept_raw():
    from atlas import measurement_types

    ping, dns = _lines("sagan_ping.jsonl")[2], _lines("sagan_dns.jsonl")[0]
    assert measurement_types.parse(ping) == [atlas_ping.parse(ping)]
    assert measurement_types.parse(dns) == atlas_dns.parse(dns)
    traceroute = {"type": "traceroute", "prb_id": 1, "timestamp": 1700000000, "msm_id": 5001, "result": []}
    assert measurement_types.parse(atlas_result.load(traceroute)) == []
    assert set(measurement_types.MODULES) == {"ping", "dns"}
