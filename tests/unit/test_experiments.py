"""The experiments' analyses on hand-made rows: the layer arithmetic of experiment 2,
the PLT pairing and claim verdicts of experiment 3, Table II and the configured shares of
experiment 5, the command's list/errors, and every experiment spec validating at both sizes."""

from __future__ import annotations

import json
from types import SimpleNamespace

import dns.message
import pytest
from typer.testing import CliRunner

from dnscamp.experiments import EXPERIMENTS, bytes as xb, common, quicsocks as xq, www20 as xw

pytestmark = pytest.mark.unit


# -- experiment 2 ---------------------------------------------------------------------------------
def _dnsrow(transport, policy, total_bytes, packets, response_size=60, qname="www.single.test.", hs=None):
    return {"transport": transport, "policy": policy, "qname": qname, "qtype": "A", "response_size": response_size,
            "total_bytes": total_bytes, "total_packets": packets,
            "total_ip_bytes": None if total_bytes is None else total_bytes + xb.HDR[transport] * packets,
            "handshake_bytes_sent": hs, "handshake_bytes_received": hs}


def test_query_size_is_the_engines_wire_size():
    assert xb.query_size("www.multi-5.test.") == len(dns.message.make_query("www.multi-5.test.", "A", use_edns=0).to_wire())


def test_bytes_layers_add_up_per_row_and_unavailable_rows_are_left_out():
    q = xb.query_size("www.single.test.")
    rows = [_dnsrow("doh", "fresh", 5000, 20, hs=1500), _dnsrow("doh", "fresh", 5200, 22, hs=1600),
            _dnsrow("doh", "fresh", 5100, 21, hs=1550), _dnsrow("doh3", "fresh", None, 0)]
    s = xb.summarize(rows)
    assert set(s) == {("doh", "fresh")}  # the DoH3 row had no wire counts
    d = s[("doh", "fresh")]
    assert d["n"] == 3 and d["dns_bytes"] == q + 60
    assert d["transport_overhead"] == 5100 - (q + 60)
    assert d["headers"] == 52 * 21 and d["ip_bytes"] == 5100 + 52 * 21 and d["packets"] == 21
    assert d["handshake_sent"] == 1550


def test_bytes_render_puts_the_paper_beside_ours():
    rows = [_dnsrow("do53", "fresh", 130, 2), _dnsrow("doh", "reuse", 500, 6)]
    text = xb.render(xb.summarize(rows))
    line = next(x for x in text.splitlines() if x.startswith("do53/fresh"))
    assert "182 B / 2" in line and f"{(130 + 56) / 182:.2f} / 1.00" in line
    assert "864 B / 8" in next(x for x in text.splitlines() if x.startswith("doh/reuse"))
    assert "003_b61199a6a5b37f70.txt §4" in text and "- Do53: 186 B / 2 packets against 182 B / 2" in text


def test_wire_totals_counts_handshake_and_query():
    wc = lambda b1, b2, p1, p2: SimpleNamespace(bytes_sent=b1, bytes_received=b2, packets_sent=p1, packets_received=p2)  # noqa: E731
    r = SimpleNamespace(ok=True, query=wc(100, 200, 2, 3), handshake=wc(500, 1500, 3, 4))
    assert xb.wire_totals(r, "dot") == (2300 + 52 * 12, 12)
    assert xb.wire_totals(SimpleNamespace(ok=True, query=wc(40, 60, 1, 1), handshake=None), "do53") == (156, 2)
    assert xb.wire_totals(SimpleNamespace(ok=False, query=None, handshake=None), "doh") is None


# -- experiment 3 ---------------------------------------------------------------------------------
def _load(cond, browser, mode, url, plt, status="ok"):
    return {"network_profile": cond, "browser": browser, "dns_transport": mode, "url": url, "plt_ms": plt,
            "status": status}


def test_www20_pairs_pages_and_marks_claims():
    a, b = "https://www.multi-5.test/", "https://www.multi-10.test/"
    rows = [
        _load("lossy-4g", "firefox", "do53", a, 2000), _load("lossy-4g", "firefox", "do53", a, 2200),
        _load("lossy-4g", "firefox", "dot", a, 1800), _load("lossy-4g", "firefox", "dot", a, None, "page_load_timeout"),
        _load("lossy-4g", "firefox", "do53", b, 3000), _load("lossy-4g", "firefox", "dot", b, 2500),
        _load("lossy-4g", "firefox", "doh", b, 2900),  # no Do53 load of a for doh: only page b pairs
        _load("3g", "firefox", "do53", a, 4000), _load("3g", "firefox", "doh", a, 3500),
    ]
    med, counts = xw.plt_per_page(rows)
    assert med[("lossy-4g", "firefox", "do53", a)] == 2100
    assert counts[("lossy-4g", "firefox", "dot", a)] == (1, 2)  # the timeout counts as a load, not as a PLT
    diffs = xw.differences(med)
    assert diffs[("lossy-4g", "firefox", "dot")] == {a: -300, b: -500}
    assert diffs[("lossy-4g", "firefox", "doh")] == {b: -100}
    verdicts = {(c["claim"].split(":")[0], c["claim"].split(":")[1].split()[0], c["browser"]): (c["verdict"], c["ours_ms"])
                for c in xw.claims(med)}
    assert verdicts[("lossy 4G", "DoT", "firefox")] == ("reproduced", -400)
    assert verdicts[("lossy 4G", "DoH", "firefox")] == ("reproduced", -100)
    assert verdicts[("3G", "DoH", "firefox")] == ("not reproduced", -500)  # the paper saw DoH slower on 3G
    assert verdicts[("4G", "DoT", "firefox")] == ("no data", None)
    summary = {tuple(r[:3]): r for r in xw.summary_rows(med, counts)}
    assert summary[("lossy-4g", "firefox", "dot")][5:] == [-400, "2/2", "2/3"]
    text = xw.render(rows)
    assert "not reproduced" in text and "002_6fa4cf280535d36b.txt" in text


# -- experiment 5 ---------------------------------------------------------------------------------
def test_table2_model_and_measured_match_the_paper_when_the_rtts_do():
    from atlas.quicsocks import ProbeRtts

    text = xq.table2([ProbeRtts(i, 30.0, 30.0, 60.0) for i in (1, 2, 3)])
    for label, paper in (("status quo ", 90.0), ("QuicSocks ", 60.0), ("status quo, stateless retry", 150.0),
                         ("QuicSocks, stateless retry", 90.0)):
        line = next(x for x in text.splitlines() if x.startswith(label))
        assert line.split()[-4:] == [f"{paper:.1f}"] * 3 + ["0.0"], line
    assert "reduction 33.3 % / 40.0 %" in text
    assert "—" in xq.table2([]).splitlines()[-1]  # nothing measured: the measured column is empty


def test_configured_shares_follow_the_planned_delays():
    from testbed.atlas_probes.island import plan_probes

    isp = [p for p in plan_probes(40, 3) if not p.public_as]
    s = xq.configured_shares(40, 3)
    assert s["probes_analysed"] == len(isp) == 32
    for t in (5, 10, 15):  # on-path resolver: the saving is RTT_DNS
        assert s["share_saving_at_least"][str(t)]["without_retry"] == pytest.approx(
            sum(p.rtt_dns >= t for p in isp) / len(isp))


def test_table2_probes_have_the_papers_rtts_and_the_planners_addresses():
    from testbed.atlas_probes.island import plan_probes

    ps = xq._probes_at(3, 30.0, 30.0)
    assert [(p.rtt_dns, p.rtt_server, p.rtt_direct) for p in ps] == [(30.0, 30.0, 60.0)] * 3
    assert [(p.prb_id, p.resolver) for p in ps] == [(p.prb_id, p.resolver) for p in plan_probes(3, 1)]


# -- command and specs -----------------------------------------------------------------------------
def test_list_and_unknown_experiments():
    from dnscamp.commands.experiment import app

    r = CliRunner().invoke(app, ["list"])
    assert r.exit_code == 0
    for e in EXPERIMENTS.values():
        assert e.name in r.output and e.paper in r.output
    r = CliRunner().invoke(app, ["run", "nosuch"])
    assert r.exit_code == 2 and "unknown experiment 'nosuch'" in r.output


@pytest.mark.parametrize("name", list(EXPERIMENTS))
def test_experiment_specs_validate_and_the_reduced_one_is_smaller(name):
    from dnscamp import planner
    from dnscamp.spec import load

    for stem in EXPERIMENTS[name].load().SPECS:
        full, small = load(common.spec_path(stem, False)), load(common.spec_path(stem, True))
        assert small.campaign.name == full.campaign.name + "-reduced"
        size = lambda s: sum(len(u.params.get("names", [1])) * u.params.get("count", 1) * len(u.params.get("browsers", [1]))  # noqa: E731
                                 * len(u.params.get("dns", [1])) * u.params.get("probes", 1) for u in planner.plan(s, "x").units())
        assert size(small) < size(full)


# -- experiment 4 ---------------------------------------------------------------------------------
def test_coalescing_rtt_table_and_relative_increase():
    from dnscamp.experiments import coalescing as xc

    rows = [{"network_profile": p, "transport": t, "total_rtt_multiple": m}
            for p, t, m in (("fiber", "do53", 1.0), ("4g", "do53", 1.1), ("fiber", "doh", 3.5), ("4g", "doh", 3.3))]
    text = xc.rtt_table(rows)
    do53 = next(x for x in text.splitlines() if x.startswith("do53"))
    assert do53.split()[:9] == ["do53", "1", "1.03", "—", "1.16", "2", "1.05", "1.00", "1.10"]
    load = lambda m, p, plt, status="ok": {"network_profile": p, "url": "https://www.single.test/", "dns_transport": m,  # noqa: E731
                                           "status": status, "plt_ms": plt}
    inc = xc.relative_increase([load("do53", "4g", 400), load("do53", "4g", 600), load("doh", "4g", 750),
                                load("doq", "4g", 550), load("doq", "4g", None, "page_load_timeout"),
                                load("doq", "fiber", 100)])  # no fiber baseline: no cell
    assert inc == {("doh", "4g", "example"): 50.0, ("doq", "4g", "example"): 10.0}
    hm = xc.heat_map(inc)
    assert "DoH above DoQ in 1/1" in hm and "(reproduced)" in hm


def test_coalescing_0rtt_rows_claim_and_netlog_evidence(tmp_path, monkeypatch):
    from dnscamp.experiments import coalescing as xc

    load = lambda m, p, plt, warm=False: {"network_profile": p, "url": "https://www.js.test/", "dns_transport": m,  # noqa: E731
                                          "status": "ok", "plt_ms": plt, "warm": warm}
    inc = xc.relative_increase([load("do53", "4g", 500), load("do53", "4g", 500, warm=True), load("doq", "4g", 600),
                                load("doq", "4g", 540, warm=True), load("doh", "4g", 700)])
    assert inc == {("do53+0rtt", "4g", "wikipedia"): 0.0, ("doq", "4g", "wikipedia"): 20.0,
                   ("doq+0rtt", "4g", "wikipedia"): 8.0, ("doh", "4g", "wikipedia"): 40.0}  # cold DoUDP is the baseline
    hm = xc.heat_map(inc)
    rows = [line.split()[0] for line in hm.splitlines()[3:7]]
    assert rows == ["doq+0rtt", "doq", "doh", "do53+0rtt"]  # the paper's three rows first
    summary = next(line for line in hm.splitlines() if line.startswith("doq+0rtt") and "wikipedia /" in line)
    assert summary.split()[1:5] == ["7.3", "8.0", "26.0", "8.0"]
    assert "DoQ + 1-RTT above DoQ + 0-RTT in 1/1 cells, but not conclusive: a +0rtt load is a second visit" in hm
    rec = lambda t, profile, z: {"kind": "page_load", "status": "ok", "vantage": {"network_profile": profile},  # noqa: E731
                                 "body": {"dns_transport": t, "warm_origin": {"warm_up": {"status": "ok"}, "zero_rtt": z}}}
    ok = {"sessions": 1, "state": "AttemptedAndSucceeded", "resumed": True, "request_in_0rtt": True}
    late = {"sessions": 1, "state": "AttemptedAndSucceeded", "resumed": True, "request_in_0rtt": False}
    monkeypatch.setenv("DNSCAMP_SPOOL", str(tmp_path))
    run = tmp_path / "exp-coalescing-pages" / "r1"
    run.mkdir(parents=True)
    cold = {**rec("do53", "4g", None), "body": {"dns_transport": "do53", "warm_origin": None}}
    hostile = {**rec("doq", "4g", ok), "error": "a\u2028line\u0085separator"}  # raw in the JSON: one record
    (run / "u1.jsonl").write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in
                                             (rec("doq", "4g", ok), rec("doq", "4g", late), cold, hostile)))
    text = xc.early_data(xc.spool_records({"exp-coalescing-pages": "r1"}))
    assert text.splitlines()[3].split() == ["doq+0rtt", "4g", "3", "3", "3", "2"], text
    assert xc.early_data(xc.spool_records({"exp-coalescing-pages": "missing"})) == ""
