"""atlas/probes.py without a network or a store: the probe API's objects (GeoJSON [lon, lat]),
bad input named by probe and field; and the testbed's Atlas-like probes' documented sites
(testbed/atlas_probes/sites.py), described as the API describes a probe."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from atlas import probes

pytestmark = pytest.mark.unit
API = Path(__file__).resolve().parents[1] / "fixtures" / "atlas" / "api"


def test_the_api_gives_longitude_first_and_status_as_an_object():
    obj = json.loads((API / "probes_page1.json").read_text())["results"][0]
    assert obj["geometry"]["coordinates"] == [13.4115, 52.5235]
    assert probes.parse_probe(obj) == probes.ProbeMeta(165, "DE", 3320, 52.5235, 13.4115, "Connected", "atlas_api")


def test_a_probe_without_a_location_has_none_and_an_old_bare_status_is_read():
    p = probes.parse_probe({"id": 677, "geometry": None, "status": "Abandoned", "asn_v4": None})
    assert (p.lat, p.lon, p.status, p.asn_v4, p.country_code) == (None, None, "Abandoned", None, None)


@pytest.mark.parametrize("obj,message", [
    ({"id": 9, "geometry": {"type": "Polygon", "coordinates": [[0, 0]]}}, "probe 9: geometry: not a GeoJSON Point"),
    ({"id": 9, "geometry": {"type": "Point", "coordinates": [52.5, 13.4, 7]}}, "probe 9: geometry: not a GeoJSON Point"),
    ({"id": 9, "geometry": {"type": "Point", "coordinates": [13.4, 152.5]}}, "probe 9: geometry: [lon, lat] = [13.4, 152.5] is off"),
    ({"id": 9, "geometry": {"type": "Point", "coordinates": ["x", 1]}}, "probe 9: geometry: not a GeoJSON Point"),
    ({"id": 9, "asn_v4": "AS3320"}, "probe 9: asn_v4: 'AS3320' is not an integer"),
    ({"id": "9"}, "probe API: an object without an integer id"),
    ([1, 2], "probe API: an object without an integer id"),
])
def test_bad_objects_are_one_line_naming_probe_and_field(obj, message):
    with pytest.raises(ValueError) as ei:
        probes.parse_probe(obj)
    assert str(ei.value).startswith(message) and "\n" not in str(ei.value)


def test_testbed_probes_stand_at_the_documented_german_sites_round_robin():
    from dnscamp.atlas_offline import atlas_like_probe_meta
    from testbed.atlas_probes import sites as tb_sites

    sites = tb_sites.sites()
    assert len(sites) == 20 and len({(s["lat"], s["lon"]) for s in sites}) == 20
    assert all(s["country_code"] == "DE" and 47.2 < s["lat"] < 55.1 and 5.8 < s["lon"] < 15.1 for s in sites)  # Germany
    got = atlas_like_probe_meta([21, 1, 2])
    assert [p.prb_id for p in got] == [1, 2, 21]
    assert (got[0].lat, got[0].lon) == (got[2].lat, got[2].lon) == (sites[0]["lat"], sites[0]["lon"])
    assert [p.asn_v4 for p in got] == [64501, 64502, 64521]  # the island's pyasn database
    assert {p.source for p in got} == {"testbed"} and {p.status for p in got} == {"Connected"}


def test_the_testbed_probes_describe_themselves_as_the_probe_api_does():
    """The objects have the API's shape: parse_probe reads them like the API's, [lon, lat] first."""
    from testbed.atlas_probes import sites as tb_sites

    (obj,) = tb_sites.probe_objects([3])
    site = tb_sites.sites()[2]
    assert obj["geometry"] == {"type": "Point", "coordinates": [site["lon"], site["lat"]]}
    assert probes.parse_probe(obj, source="testbed") == probes.ProbeMeta(
        3, "DE", 64503, site["lat"], site["lon"], "Connected", "testbed")


def test_the_testbed_asn_matches_the_islands_prefixes():
    """Each probe's asn_v4 is the AS that announces its /24 in the island's pyasn database."""
    from testbed.atlas_probes.island import asn_prefixes, plan_probes
    from testbed.atlas_probes.sites import probe_objects

    prefixes = asn_prefixes(plan_probes(25, 1))
    for obj in probe_objects(range(1, 26)):
        assert prefixes[f"10.90.{obj['id']}.0/24"] == obj["asn_v4"]
