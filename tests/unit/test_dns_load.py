"""The open-loop load mode's pure parts (vantage_agent/dns/load.py): the Poisson schedule, the
unique names, the DNS ids, the framing and the matching of answers to queries; the kind's
parameters for it; and experiment 1's analysis (dnscamp/experiments/hol.py) on hand-made rows."""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from dnscamp.experiments import hol
from vantage_agent.dns import load
from vantage_agent.dns.kind import DnsQueryParams

pytestmark = pytest.mark.unit


# -- schedule ---------------------------------------------------------------------------------------
@given(n=st.integers(0, 300), rate=st.floats(0.1, 1000), seed=st.integers(0, 2**32))
def test_schedule_starts_at_zero_increases_and_is_seeded(n, rate, seed):
    s = load.schedule(n, rate, seed)
    assert len(s) == n and (n == 0 or s[0] == 0.0)
    assert all(b >= a for a, b in zip(s, s[1:]))
    assert s == load.schedule(n, rate, seed)


def test_schedule_is_a_poisson_process_of_the_rate():
    s = load.schedule(20001, 10.0, 1)
    gaps = [b - a for a, b in zip(s, s[1:])]
    mean = sum(gaps) / len(gaps)
    assert mean == pytest.approx(0.1, rel=0.03)  # exponential gaps of mean 1/rate
    var = sum((g - mean) ** 2 for g in gaps) / len(gaps)
    assert var ** 0.5 == pytest.approx(mean, rel=0.05)  # exponential: sd = mean (not a fixed interval)
    per_s = [0] * 2000
    for t in s:
        if t < 2000:
            per_s[int(t)] += 1
    m = sum(per_s) / len(per_s)
    assert sum((k - m) ** 2 for k in per_s) / len(per_s) == pytest.approx(m, rel=0.1)  # Poisson counts
    assert load.schedule(100, 10.0, 1) != load.schedule(100, 10.0, 2)
    with pytest.raises(ValueError):
        load.schedule(3, 0.0, 1)


@given(st.lists(st.sampled_from(["a.hol.test.", "slow.hol.test.", "x.example."]), max_size=200))
def test_unique_names_are_unique_and_keep_their_base(names):
    out = load.unique_names(names, random.Random(1))
    assert len(set(out)) == len(out) == len(names)
    for u, n in zip(out, names):
        label, _, rest = u.partition(".")
        assert rest == n and len(label) == load.LABEL_LEN and set(label) <= set(load.LABEL_CHARS)


# -- ids, framing, matching -----------------------------------------------------------------------
def test_txids_do_not_repeat_within_65536_queries():
    ids = load.Txids(5)
    got = [ids() for _ in range(65536)]
    assert len(set(got)) == 65536 and ids() == got[0]


@settings(max_examples=200)
@given(msgs=st.lists(st.binary(min_size=0, max_size=300), max_size=20), cuts=st.lists(st.integers(0, 7000), max_size=10))
def test_split_frames_reassembles_messages_cut_anywhere(msgs, cuts):
    stream = b"".join(struct.pack("!H", len(m)) + m for m in msgs)
    buf, out, last = bytearray(), [], 0
    for cut in sorted({min(c, len(stream)) for c in cuts} | {len(stream)}):
        buf += stream[last:cut]
        last = cut
        out += load.split_frames(buf)
    assert out == msgs and not buf


@given(st.permutations(list(range(12))), st.integers(0, 65535))
def test_answers_in_any_order_go_to_their_queries(order, start):
    from vantage_agent.dns._common import make_query
    from vantage_agent.dns.timing import DnsTiming

    fl = load.Inflight()
    queries = []
    for i in range(12):
        q = make_query(f"n{i}.hol.test.", "A", txid=(start + i) & 0xFFFF)
        base = DnsTiming("dot", "127.0.0.1", 853, q.qname, "A", "reuse", t_start=i)
        fl.add(q.id, load.Flight(i, q, base, deadline=10**12))
        queries.append(q)
    for i in order:  # the server answers out of order: each answer carries its query's id
        f = fl.take(load.message_id(queries[i].wire))
        assert f is not None and f.index == i and f.query is queries[i]
    assert len(fl) == 0 and fl.take(load.message_id(queries[0].wire)) is None  # a duplicate matches nothing


def test_inflight_refuses_a_key_in_use_and_expires_by_deadline():
    fl = load.Inflight()
    fl.add(7, load.Flight(0, None, None, deadline=100))
    fl.add(8, load.Flight(1, None, None, deadline=200))
    with pytest.raises(Exception, match="still in flight"):
        fl.add(7, load.Flight(2, None, None, deadline=300))
    assert [k for k, _ in fl.expired(150)] == [7] and fl.next_deadline() == 100


# -- the kind's parameters ------------------------------------------------------------------------------
def test_poisson_parameters_are_checked():
    ok = DnsQueryParams(names=["a.test"], arrival="poisson", rate_per_s=10, unique_names=True)
    assert ok.rate_per_s == 10 and ok.policy == "reuse"
    for bad, msg in (({"arrival": "poisson"}, "needs rate_per_s"),
                     ({"arrival": "poisson", "rate_per_s": 10, "policy": "fresh"}, "policy 'reuse'"),
                     ({"rate_per_s": 10}, "for arrival 'poisson'"),
                     ({"http_version": "1.1"}, "doh only")):
        with pytest.raises(ValidationError, match=msg):
            DnsQueryParams(names=["a.test"], **bad)
    assert DnsQueryParams(names=["a.test"], transports=["doh"], http_version="1.1").http_version == "1.1"


# -- experiment 1's analysis ----------------------------------------------------------------------------
def _row(transport, ms, slow=False, status="ok", hv=None, campaign="exp-hol"):
    return {"campaign": campaign, "transport": transport, "http_version": hv, "status": status,
            "qname": f"abcde.{'slow.hol.test.' if slow else 'f01.hol.test.'}", "total_ms": ms}


def test_hol_summary_keeps_the_delayed_queries_out_and_gives_verdicts():
    rows = ([_row("do53", 20.0 + i) for i in range(40)] + [_row("do53", 1020.0, slow=True)]
            + [_row("dot", 20.0) for _ in range(30)] + [_row("dot", 900.0) for _ in range(10)]
            + [_row("dot", 1100.0, slow=True), _row("dot", None, status="timeout")]
            + [_row("doh", 30.0, hv="1.1", campaign="exp-hol-h1") for _ in range(38)]
            + [_row("doh", None, status="timeout", campaign="exp-hol-h1-reduced")]
            + [_row("doh", 30.0, hv="2") for _ in range(10)] + [_row("doq", 25.0) for _ in range(5)])
    s = hol.summarize(rows)
    assert set(s) == {"do53", "dot", "doh-h1.1", "doh-h2", "doq"}
    assert s["do53"]["n"] == 40 and s["do53"]["max"] == 59.0 and s["do53"]["delayed_n"] == 1  # the 1,020 ms is out
    assert s["do53"]["p50"] == 39.5 and s["do53"]["blocked_share"] == 0
    assert s["dot"]["blocked_share"] == 0.25 and s["dot"]["failures"] == {"timeout": 1}
    assert s["doh-h1.1"]["n"] == 38 and s["doh-h1.1"]["failures"] == {"timeout": 1}  # the campaign names it h1.1
    assert [hol.verdict(k, s[k]) for k in ("do53", "dot", "doh-h1.1", "doh-h2", "doq")] == [
        "reproduced", "reproduced", "not reproduced", "reproduced", "beyond the paper"]
    text = hol.render(s)
    assert "003_b61199a6a5b37f70.txt §3" in text
    assert "- dot: reproduced: the paper saw it blocked behind the slow query; ours is blocked" in text
    assert "- doh-h1.1: not reproduced: the paper saw it blocked behind the slow query; ours is unaffected" in text
    assert "- doq: unaffected" in text and "the paper did not measure it" in text
    lines = [x for x in text.splitlines() if x.startswith(("do53 ", "dot ", "doh-h1.1", "doh-h2", "doq "))]
    assert [x.split()[0] for x in lines] == ["do53", "dot", "doh-h1.1", "doh-h2", "doq"]


def test_delayed_names_are_those_under_the_slow_zone():
    assert hol.delayed("x1y2z.slow.hol.test.") and hol.delayed("x1y2z.slow.hol.test")
    assert not hol.delayed("x1y2z.f01.hol.test.") and not hol.delayed("slowhol.test.") and not hol.delayed(None)
