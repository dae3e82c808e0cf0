"""The QuicSocks model: Table I and Table II of 001_3c494309ab66be23.txt, and the §IV-B shares."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from atlas import quicsocks as q

pytestmark = pytest.mark.unit


def test_table_ii_lte_example():
    # Table II: RTT_DNS = RTT_Server = 30 ms, RTT_direct = 60 ms.
    m = q.model(30, 30, 60)
    assert (m.status_quo, m.proposal) == (90, 60)
    assert (m.status_quo_retry, m.proposal_retry) == (150, 90)
    assert (m.saving, m.saving_retry) == (30, 60)
    # "reduced by up to 40% and at least 33.3%"
    assert m.reduction_pct == pytest.approx(33.333, abs=0.01)
    assert m.reduction_retry_pct == pytest.approx(40.0)


@pytest.mark.parametrize("dns,server,direct", [(0, 0, 0), (5, 12, 40), (10, 50, 20), (1.5, 2.25, 3.75)])
def test_table_i_formulas(dns, server, direct):
    m = q.model(dns, server, direct)
    assert m.status_quo == dns + direct
    assert m.proposal == dns + server
    assert m.status_quo_retry == dns + 2 * direct
    assert m.proposal_retry == dns + 2 * server
    # "the benefit of our proposal is doubled if the connection establishment requires a stateless retry"
    assert m.saving_retry == pytest.approx(2 * m.saving)
    assert m.saving == pytest.approx(direct - server)


@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf")])
def test_model_rejects_bad_input(bad):
    with pytest.raises(ValueError, match="rtt_server"):
        q.model(1, bad, 1)


def test_average_of_five_pings_skips_losses():
    assert q.average_rtt([10, 12, None, 14, None]) == pytest.approx(12)
    assert q.average_rtt([None] * 5) is None


def test_summary_shares_and_isp_filter():
    probes = [
        # savings (direct - server): 0, 6, 12, 20, 35, 45, 55
        q.ProbeRtts(1, 5, 20, 20, "10.0.0.1", 64500, 64500),
        q.ProbeRtts(2, 5, 20, 26, "10.0.0.2", 64501, 64501),
        q.ProbeRtts(3, 12, 20, 32, "10.0.0.3", 64502, 64502),
        q.ProbeRtts(4, 8, 20, 40, "10.0.0.4", 64503, 64503),
        q.ProbeRtts(5, 9, 20, 55, "10.0.0.5", 64504, 64504),
        q.ProbeRtts(6, 30, 20, 65, "10.0.0.6", 64505, 64505),
        q.ProbeRtts(7, 2, 20, 75, "10.0.0.7", 64506, 64506),
        # public resolver (other AS): excluded by the ISP filter
        q.ProbeRtts(8, 3, 1, 200, "8.8.8.8", 64507, 15169),
        # missing RTT_Server (resolver did not answer pings): a failure
        q.ProbeRtts(9, 3, None, 20, "10.0.0.9", 64508, 64508),
    ]
    s = q.summarize(probes)
    assert s["probes_total"] == 9 and s["probes_complete"] == 8
    assert s["probes_isp_resolver"] == 7 and s["probes_analysed"] == 7
    sh = s["share_saving_at_least"]
    assert sh["5"]["without_retry"] == pytest.approx(6 / 7)
    assert sh["10"]["without_retry"] == pytest.approx(5 / 7)
    assert sh["15"]["without_retry"] == pytest.approx(4 / 7)
    assert sh["30"]["without_retry"] == pytest.approx(3 / 7)
    assert sh["40"]["without_retry"] == pytest.approx(2 / 7)
    assert sh["50"]["without_retry"] == pytest.approx(1 / 7)
    # with retry the saving doubles: 0, 12, 24, 40, 70, 90, 110
    assert sh["15"]["with_retry"] == pytest.approx(5 / 7)
    assert sh["50"]["with_retry"] == pytest.approx(3 / 7)
    assert s["share_rtt_dns_below_10ms"] == pytest.approx(5 / 7)
    assert [p[0] for p in s["cdf"]["rtt_direct"]] == [20, 26, 32, 40, 55, 65, 75]
    assert s["cdf"]["rtt_direct"][-1][1] == 1.0
    all_probes = q.summarize(probes, isp_only=False)
    assert all_probes["probes_analysed"] == 8


def test_cli_model_json_table_ii():
    from dnscamp.cli import app

    r = CliRunner().invoke(
        app, ["atlas", "quicsocks", "--model", "--rtt-dns", "30", "--rtt-server", "30", "--rtt-direct", "60", "--json"]
    )
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["status_quo"] == 90 and d["proposal"] == 60
    assert d["status_quo_retry"] == 150 and d["proposal_retry"] == 90


def test_cli_model_needs_all_three():
    from dnscamp.cli import app

    r = CliRunner().invoke(app, ["atlas", "quicsocks", "--model", "--rtt-dns", "30"])
    assert r.exit_code == 2
    assert "--rtt-server" in r.stderr
