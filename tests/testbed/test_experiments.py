"""The seed papers' experiments at their reduced size, end to end on the testbed:
`dnscamp experiment run NAME --reduced` runs the campaigns through the campaign service
(dnscamp.campaign, as `dnscamp campaign run` does), ingests into a fresh store, prints the
table with the paper's figures, and `report` prints the same analysis again from the stored
records. Each test stays under 3 minutes."""

from __future__ import annotations

import re
import time

import pytest
from typer.testing import CliRunner

from dnscamp.commands.experiment import app

pytestmark = pytest.mark.testbed


@pytest.fixture()
def store(empty_db, monkeypatch):
    """The experiment's ingest and analysis both use this test's empty store."""
    monkeypatch.setenv("DNSCAMP_DATABASE_NAME", empty_db.split("/")[3].split("?")[0])
    return empty_db


def _run(*args: str) -> str:
    t0 = time.monotonic()
    r = CliRunner().invoke(app, list(args))
    assert r.exit_code == 0, (r.output, r.exception)
    assert time.monotonic() - t0 < 180, "a reduced experiment must finish within 3 minutes"
    return r.stdout  # the analysis; progress lines go to stderr


def _rows(text: str, first: str, key: int = 1) -> dict[str, list[str]]:
    """Table lines matching ``first`` (regex), split on runs of 2+ spaces, keyed by their first ``key`` cells."""
    return {" ".join(c[:key]): c for line in text.splitlines() if re.match(first, line)
            for c in [re.split(r"\s{2,}", line.strip())]}


def test_bytes_reduced(testbed, store):
    out = _run("run", "bytes", "--reduced")
    rows = _rows(out, r"(do53|do53-tcp|dot|doh|doh3|doq)/(fresh|reuse|resume)\s")
    assert len(rows) == 18, out  # every transport under every policy has wire counts (DoH3 too, in a testbed client)
    ip = {k: float(v[5].replace(",", "")) for k, v in rows.items()}
    pk = {k: float(v[6]) for k, v in rows.items()}
    assert all(int(v[1]) == 6 for v in rows.values())  # 6 names, one round, every query ok
    assert pk["do53/fresh"] == 2 and rows["do53/fresh"][3] == "0.0"  # UDP: nothing above layer 4 but DNS
    assert rows["do53-tcp/reuse"][3] == "4.0"  # two 2-byte length prefixes
    for t in ("dot", "doh", "doh3", "doq"):  # a handshake per query costs more than a reused connection
        assert ip[f"{t}/fresh"] > 3 * ip[f"{t}/reuse"], t
    assert ip["doh/resume"] < ip["doh/fresh"]  # resumption saves the certificate
    assert "182 B / 2" in rows["do53/fresh"] and "5,737 B / 27" in rows["doh/fresh"] and "864 B / 8" in rows["doh/reuse"]
    assert "- DoH fresh:" in out
    again = _run("report", "bytes", "--reduced")
    assert again.strip() == out.strip()[out.strip().index("Bytes and packets"):]


def test_quicsocks_reduced(testbed_lease, store):
    out = _run("run", "quicsocks", "--reduced")
    t2 = _rows(out, r"(status quo|QuicSocks)")
    assert len(t2) == 4, out
    for label, cells in t2.items():
        paper, model, measured = (float(c) for c in cells[1:4])
        assert model == paper and abs(measured - paper) <= 5.0, (label, cells)  # 3 pings' lateness at most
    shares = _rows(out, r"saving >= \d+ ms")
    assert len(shares) == 6
    assert "5 analysed of 6" in out  # probe 5's resolver is in another AS
    for cells in shares.values():  # configured and measured agree within one probe of five
        assert abs(float(cells[2].rstrip(" %")) - float(cells[3].rstrip(" %"))) <= 20.0, cells
    assert "36.7 %" in shares["saving >= 10 ms"][1]
    again = _run("report", "quicsocks", "--reduced")
    assert _rows(again, r"saving >= \d+ ms") == shares


def test_www20_reduced(testbed, store):
    try:
        out = _run("run", "www20", "--reduced")
    finally:
        testbed.ensure_up()  # the experiment rebuilt the island with its own profiles
    cells = _rows(out, r"(none|lossy-4g)\s+(firefox|chromium)\s+(do53|dot|doh)\s+1\s", key=3)
    assert len(cells) == 12, out  # 2 conditions x 2 browsers x 3 modes, one page
    ok = sum(int(c[-1].split("/")[0]) for c in cells.values())
    assert ok >= 10, out  # lossy 4G may time a load out; most must load
    claims = [line for line in out.splitlines() if line.startswith("lossy 4G: ")]
    assert len(claims) == 4 and all(re.search(r"\s(reproduced|not reproduced)$", c) for c in claims), claims
    again = _run("report", "www20", "--reduced")
    assert again.strip() == out.strip()[out.strip().index("PLT difference to Do53"):]


def test_coalescing_reduced(testbed, store):
    # The specs' [testbed] backbone_rtt_ms = 0 rebuilds the fixture's island (10 ms backbone) once
    # for both campaigns; the fixture's island is restored afterwards for the other tests.
    try:
        out = _run("run", "coalescing", "--reduced")
        assert testbed.info["backbone_rtt_ms"] == 0, "the spec's backbone_rtt_ms was not honoured"
    finally:
        if testbed.info.get("backbone_rtt_ms") != 10.0:
            testbed.down()
            testbed.ensure_up()
    rtt = _rows(out, r"(do53|doq|doh|doh3)\s+\d\s")
    assert set(rtt) == {"do53", "doq", "doh", "doh3"}, out
    p50 = {t: float(c[6]) for t, c in rtt.items()}
    assert 0.9 <= p50["do53"] <= 1.3  # one round trip, as the paper's 1.03
    assert p50["do53"] < p50["doq"] < p50["doh"]  # one handshake round trip fewer for QUIC than TCP + TLS
    heat_text, _, evidence = out.partition("Warm loads: did the measured load use 0-RTT?")
    heat = _rows(heat_text, r"(doq|doh|doh3)\s+(fiber|4g)\s", key=2)
    assert len(heat) == 6, out  # 3 modes x 2 profiles, the example page
    warm = _rows(heat_text, r"(do53|doq|doh|doh3)\+0rtt\s+(fiber|4g)\s", key=2)
    assert len(warm) == 8, out  # the 0-RTT rows: every DNS mode with a warm origin, both profiles
    assert all(re.fullmatch(r"-?[\d,]+\.\d", c[2]) for c in (heat | warm).values()), heat | warm
    assert "worst on the example page over 4G medium (+53.7 %)" in out
    assert re.search(r"^doq\+0rtt\s+7\.3\s+-?[\d,]+\.\d\s+26\.0\s", heat_text, re.M), heat_text  # paper beside ours
    zr = {k: [int(x) for x in c[2:]] for k, c in _rows(evidence, r"(do53|doq|doh|doh3)\+0rtt\s+(fiber|4g)\s+\d", key=2).items()}
    assert len(zr) == 8, evidence
    for k, (n, resumed, accepted, early) in zr.items():  # every warm load resumed its ticket and Caddy took 0-RTT
        assert n == resumed == accepted == 1, (k, zr)
        if k.endswith("4g"):  # 92 ms: the page's request leaves long before the handshake ends
            assert early == 1, (k, zr)
    again = _run("report", "coalescing", "--reduced")
    assert again.strip() == out.strip()[out.strip().index("DNS exchange time"):]

def test_hol_reduced(testbed, store):
    out = _run("run", "hol", "--reduced")
    print(out)  # the table in the test log (pytest -s)
    rows = _rows(out, r"(do53|dot|doh-h1\.1|doh-h2|doh3|doq)\s+\d")
    assert set(rows) == {"do53", "dot", "doh-h1.1", "doh-h2", "doh3", "doq"}, out
    num = lambda c: float(c.replace(",", ""))  # noqa: E731
    for t, c in rows.items():
        assert int(c[1]) >= 90, (t, c)  # 96 undelayed queries per transport, (almost) all answered
        assert int(c[7]) >= 3 and num(c[8]) >= 1000, (t, c)  # the delayed ones took the authoritative delay
    for t in ("do53", "doh-h2", "doh3", "doq"):  # multiplexed: the others are not held
        assert num(rows[t][3]) < hol_blocked_ms(), (t, rows[t])
    for t in ("dot", "doh-h1.1"):  # in order on one connection: some wait for the delayed answer
        assert num(rows[t][5]) > 600 and float(rows[t][6].rstrip(" %")) > 0, (t, rows[t])
    assert rows["do53"][-1] == "reproduced" and rows["doh-h2"][-1] == "reproduced"
    again = _run("report", "hol", "--reduced")
    assert again.strip() == out.strip()[out.strip().index("Head-of-line blocking"):]


def hol_blocked_ms() -> float:
    from dnscamp.experiments import hol

    return hol.BLOCKED_MS
