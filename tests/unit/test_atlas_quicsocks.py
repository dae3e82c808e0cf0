"""The QuicSocks model: Table I and Table II of 001_3c494309ab66be23.txt, and the §IV-B shares."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from atlas import quicsocks as q

pytestmark = pytest.mark.unit


# The oracle is the paper's text (tests/fixtures/papers/, verbatim): Table I's formulas are parsed
# and evaluated, Table II's figures and the example's RTTs are read, nothing is re-typed here.
PAPER = (Path(__file__).resolve().parents[1] / "fixtures" / "papers" / "quicsocks_tables_1_2.txt").read_text()
_VAR = {"RTT_{DNS}": "dns", "RTT_{Server}": "server", "RTT_{direct}": "direct"}


def _table(title: str) -> dict[str, tuple[str, str]]:
    """{"w/o" | "with": (status quo cell, proposal cell)} of the table headed ``title``."""
    block = PAPER.split(f"{title}\n", 1)[1]
    rows = {}
    for line in block.splitlines():
        cells = line.split("\t")
        if cells[0] in ("w/o", "with") and cells[0] not in rows:
            rows[cells[0]] = (cells[1], cells[2])
    assert set(rows) == {"w/o", "with"}, block[:300]
    return rows


def _evaluate(formula: str, rtts: dict[str, float]) -> float:
    """A Table I cell such as ``$RTT_{DNS} + 2 * RTT_{direct}$``: sums of [n *] RTT terms."""
    total = 0.0
    for term in formula.strip("$ ").split("+"):
        factor, _, var = term.strip().rpartition("*")
        total += float(factor or 1) * rtts[_VAR[var.strip()]]
    return total


def test_table_i_formulas_as_printed():
    cells = _table("TABLE I")
    assert cells["w/o"] == ("$RTT_{DNS} + RTT_{direct}$", "$RTT_{DNS} + RTT_{Server}$")  # what was parsed
    rng = random.Random(1)
    cases = [(30, 30, 60), (0, 0, 0), (5, 80, 40)] + [tuple(round(rng.uniform(0, 300), 3) for _ in range(3))
                                                      for _ in range(200)]
    for dns, server, direct in cases:
        rtts = {"dns": dns, "server": server, "direct": direct}
        m = q.model(dns, server, direct)
        for retry, (sq, pr) in cells.items():
            got = (m.status_quo, m.proposal) if retry == "w/o" else (m.status_quo_retry, m.proposal_retry)
            assert got == pytest.approx((_evaluate(sq, rtts), _evaluate(pr, rtts))), (retry, rtts)


def test_table_ii_lte_example_as_printed():
    ex = re.search(r"assume\s+\$RTT_\{DNS\}\$\s+and\s+\$RTT_\{Server\}\$\s+to be each (\d+) ms, while\s+"
                   r"\$RTT_\{direct\}\$\s+is (\d+) ms", PAPER)
    dns = server = float(ex.group(1))
    direct = float(ex.group(2))
    m = q.model(dns, server, direct)
    ms = {k: tuple(float(c.removesuffix(" ms")) for c in v) for k, v in _table("TABLE II").items()}
    assert (m.status_quo, m.proposal) == ms["w/o"]
    assert (m.status_quo_retry, m.proposal_retry) == ms["with"]
    saved = re.search(r"accelerates the connection establishment by (\d+) ms and (\d+) ms", PAPER)
    assert (m.saving, m.saving_retry) == (float(saved.group(1)), float(saved.group(2)))
    most, least = re.search(r"reduced by up to (\d+(?:\.\d+)?)% and at least (\d+(?:\.\d+)?)%", PAPER).groups()
    assert m.reduction_retry_pct == pytest.approx(float(most))
    assert m.reduction_pct == pytest.approx(float(least), abs=0.05)  # the paper rounds 33.33 to 33.3


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
