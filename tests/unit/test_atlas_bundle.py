"""Atlas bundles (atlas/bundle.py): a run's result files and the sidecar with what the store
needs beside them, written and read back unchanged, refused when they are not what this version
writes; and the probes' RTTs from parsed pings (atlas.quicsocks.rtts_of_pings), the rows
v_quicsocks_savings gives once the bundle is stored (tests/local/test_atlas_bundle.py compares
the two on a store)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from atlas import bundle
from atlas.discovery import Discovered
from atlas.ping import PingRow
from atlas.probes import ProbeMeta
from atlas.quicsocks import ProbeRtts, rtts_of_pings
from vantage_agent import atlas_json

pytestmark = pytest.mark.unit

MSM = {"resolver_dns": 11, "probe_server": 12, "probe_resolver": 13, "server_resolver": 14}
PROBE_SERVER_AGAIN = 15  # a second probe_server measurement
SERVER = "10.0.0.1"
T = 1_700_000_000
DISCOVERY = (
    Discovered(1, "10.0.1.2", "10.1.1.53", "10.1.1.1", 65001, 65001, "query_log", "1-x.r.qs.whoami.test."),
    Discovered(2, "10.0.2.2", "10.2.1.53", "10.2.1.53", 65002, 65002, "query_log", None),
    Discovered(3, "10.0.3.2", "10.9.9.9", "10.3.1.1", 65003, 64999, "whoami", None),
)
PROBES = (ProbeMeta(1, "DE", 65001, 52.52, 13.41, "Connected", "testbed"),
          ProbeMeta(2, "DE", 65002, None, None, "Connected", "testbed"),
          ProbeMeta(3, "AT", 65003, 48.2, 16.37, None, "testbed"))


def _ping(role: str, prb: int, dst: str, rtts: list, ts: int = T, msm: int | None = None) -> dict:
    src = SERVER if role == "server_resolver" else f"10.0.{prb}.2"
    return atlas_json.ping_result(msm_id=msm or MSM[role], prb_id=prb, timestamp=ts, src_addr=src, dst_addr=dst, rtts=rtts)


def results() -> tuple[list[dict], list[dict]]:
    """(DNS results, ping results) of three probes, with what the RTTs must see through: an older
    ping, a ping to an address discovery did not find, a ping with no reply, one result twice
    (the first counts, as in the store), two measurements' pings of one second (the later wins)."""
    dns = [atlas_json.dns_result(msm_id=MSM["resolver_dns"], prb_id=d.prb_id, timestamp=T - 60, from_addr=d.probe_addr,
                                 responses=[atlas_json.dns_response(dst_addr=d.configured_resolver, src_addr=d.probe_addr,
                                                                    abuf=None, rt_ms=None, timestamp=T - 60)])
           for d in DISCOVERY]
    pings = [
        _ping("probe_server", 1, SERVER, [50.0], ts=T - 100),  # older: not the RTT
        _ping("probe_server", 1, SERVER, [10.0, 11.0, 12.0]),
        _ping("probe_resolver", 1, "10.1.1.53", [2.0, None, 3.0]),
        _ping("probe_resolver", 1, "10.1.1.1", [99.0]),  # the configured address, not the discovered one
        _ping("probe_server", 2, SERVER, [20.0]),
        _ping("probe_resolver", 2, "10.2.1.53", [None, None]),  # no reply: no RTT_DNS
        _ping("probe_server", 3, SERVER, [30.0]),
        _ping("probe_resolver", 3, "10.9.9.9", [4.0]),
        _ping("server_resolver", 0, "10.1.1.53", [5.0]),
        _ping("server_resolver", 0, "10.1.1.53", [None], ts=T + 10),  # newer but failed: not the RTT
        _ping("server_resolver", 0, "10.2.1.53", [6.0]),
        _ping("server_resolver", 0, "10.9.9.9", [7.0, None]),
        _ping("server_resolver", 0, "10.9.9.9", [8.0]),  # the same result again (a duplicate): not the RTT
        _ping("probe_server", 3, SERVER, [35.0], msm=PROBE_SERVER_AGAIN),  # the same second, read later: the RTT
    ]
    return dns, pings


WANT = [ProbeRtts(1, 2.5, 5.0, 11.0, "10.1.1.53", 65001, 65001),
        ProbeRtts(2, None, 6.0, 20.0, "10.2.1.53", 65002, 65002),
        ProbeRtts(3, 4.0, 7.0, 35.0, "10.9.9.9", 65003, 64999)]


def write_bundle(directory: Path, campaign: str = "c/r1", created: str = "2026-01-01T00:00:00.000000+00:00",
                 discovery: tuple[Discovered, ...] = DISCOVERY) -> Path:
    """The three probes' results and their sidecar in ``directory``; the sidecar's path."""
    directory.mkdir(parents=True, exist_ok=True)
    dns, pings = results()
    for name, rs in (("results-dns.jsonl", dns), ("results-ping.jsonl", pings)):
        (directory / name).write_text("".join(json.dumps(r) + "\n" for r in rs))
    return bundle.write(directory, bundle.Bundle(
        campaign=campaign, created=created,
        measurements=tuple(bundle.Measurement(mid, role, SERVER if role == "probe_server" else None,
                                              {"offline": True, "packets": 5})
                           for role, mid in [*MSM.items(), ("probe_server", PROBE_SERVER_AGAIN)]),
        discovery=discovery, probes=PROBES, result_files=("results-dns.jsonl", "results-ping.jsonl")))


def test_a_bundle_reads_back_as_written(tmp_path):
    path = write_bundle(tmp_path)
    assert path == tmp_path / bundle.NAME and not list(tmp_path.glob(".*.tmp"))
    b = bundle.read(path)
    assert b.campaign == "c/r1" and b.discovery == DISCOVERY and b.probes == PROBES
    assert b.measurements[0] == bundle.Measurement(11, "resolver_dns", None, {"offline": True, "packets": 5})
    assert bundle.Bundle.from_json(json.loads(json.dumps(b.to_json()))) == b
    assert bundle.result_paths(path, b) == [tmp_path / "results-dns.jsonl", tmp_path / "results-ping.jsonl"]
    rows = bundle.rows(bundle.result_paths(path, b))
    assert sum(isinstance(r, PingRow) for r in rows) == 14 and len(rows) == 17


@pytest.mark.parametrize("change, reason", [
    (lambda d: d.update(schema="dnscamp.atlas_bundle/2"), "schema 'dnscamp.atlas_bundle/2'"),
    (lambda d: d.pop("discovery"), "missing or malformed field"),
    (lambda d: d["probes"][0].update(altitude=3), "ProbeMeta: fields"),
    (lambda d: d["measurements"][0].pop("role"), "missing or malformed field"),
    (lambda d: d.update(result_files=["../elsewhere.jsonl"]), "not a file name"),
    (lambda d: d.update(result_files=["/etc/passwd"]), "not a file name"),
])  # fmt: skip
def test_a_sidecar_this_version_did_not_write_is_refused(tmp_path, change, reason):
    path = write_bundle(tmp_path)
    d = json.loads(path.read_text())
    change(d)
    path.write_text(json.dumps(d))
    with pytest.raises(bundle.BundleError, match="atlas-bundle.json: .*" + reason.replace("(", r"\(")):
        bundle.read(path)


def test_a_sidecar_that_is_no_json_object_is_refused(tmp_path):
    (tmp_path / bundle.NAME).write_text("[1, 2]")
    with pytest.raises(bundle.BundleError, match="not a JSON object"):
        bundle.read(tmp_path / bundle.NAME)
    (tmp_path / bundle.NAME).write_text("{")
    with pytest.raises(bundle.BundleError):
        bundle.read(tmp_path / bundle.NAME)


def test_rtts_of_pings_are_the_latest_successful_ping_of_each_role(tmp_path):
    path = write_bundle(tmp_path)
    b = bundle.read(path)
    pings = [r for r in bundle.rows(bundle.result_paths(path, b)) if isinstance(r, PingRow)]
    roles = {m.msm_id: m.role for m in b.measurements}
    assert rtts_of_pings(pings, roles, b.discovery) == WANT
    assert rtts_of_pings(pings, roles, reversed(b.discovery)) == WANT  # by prb_id
    assert rtts_of_pings(pings, roles, b.discovery[1:2]) == WANT[1:2]  # one row per discovered probe only
    assert rtts_of_pings(pings, {}, b.discovery) == [  # a ping of no known measurement is no RTT
        ProbeRtts(w.prb_id, None, None, None, w.resolver, w.probe_asn, w.resolver_asn) for w in WANT]
    assert [p.isp_resolver for p in WANT] == [True, True, False] and [p.complete for p in WANT] == [True, False, True]
