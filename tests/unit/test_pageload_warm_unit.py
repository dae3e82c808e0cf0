"""``warm_origin`` without a browser: the parameter (an axis, Chromium only), the load order it
leaves alone by default, and the netlog summary that says whether a measured load used 0-RTT."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from vantage_agent.pageload.chromium import zero_rtt_summary
from vantage_agent.pageload.kind import PageLoadParams, combinations, load_plan

pytestmark = pytest.mark.unit

URLS = {"urls": ["https://www.single.test/"], "dns": ["do53:isp", "doq:isp", "doh:isp"], "http": ["h2", "h3"]}


def test_default_plan_is_the_old_order_with_cold_loads():
    p = PageLoadParams.model_validate({**URLS, "browsers": ["chromium", "firefox"]})
    assert p.warm_origin == [False]
    assert load_plan(p, 7) == [(*c, False) for c in combinations(p, 7)]


def test_warm_origin_is_an_axis_and_a_bool_is_its_one_value():
    assert PageLoadParams.model_validate({**URLS, "browsers": ["chromium"], "warm_origin": True}).warm_origin == [True]
    p = PageLoadParams.model_validate({**URLS, "browsers": ["chromium"], "warm_origin": [False, True]})
    plan = load_plan(p, 3)
    assert len(plan) == 12 and sorted(plan) == sorted((b, d, h, w) for b in ["chromium"] for d in URLS["dns"]
                                                      for h in URLS["http"] for w in (False, True))
    assert plan == load_plan(p, 3) != load_plan(p, 4)


@pytest.mark.parametrize("extra, msg", [
    ({"warm_origin": True}, "only Chromium"),  # default browsers include firefox
    ({"browsers": ["chromium"], "warm_origin": [True, True]}, "a value twice"),
    ({"browsers": ["chromium"], "warm_origin": []}, "at least 1 item"),
    ({"browsers": ["chromium"], "warm_origin": "yes"}, "valid list"),
])
def test_bad_warm_origin(extra, msg):
    with pytest.raises(ValidationError) as exc:
        PageLoadParams.model_validate({**URLS, **extra})
    assert msg in str(exc.value)


TYPES = {"QUIC_SESSION": 1, "QUIC_SESSION_ZERO_RTT_STATE": 2, "QUIC_SESSION_TRANSPORT_PARAMETERS_RESUMED": 3,
         "QUIC_SESSION_PACKET_SENT": 4, "QUIC_SESSION_CRYPTO_HANDSHAKE_COMPLETE": 5, "HTTP3_HEADERS_SENT": 6}


def _netlog(*sessions):
    """A netlog (Chromium's JSON shape) with QUIC sessions given as (id, host, tick, events)."""
    ev = []
    for sid, host, tick, events in sessions:
        src = {"id": sid, "type": 13}
        ev.append({"type": 1, "source": src, "time": str(tick), "phase": 1, "params": {"host": host, "port": 443}})
        ev += [{"type": TYPES[k], "source": src, "time": str(tick + 1), "phase": 0, "params": p} for k, p in events]
    ev.append({"type": 6, "source": {"id": 99, "type": 1}, "time": "0", "phase": 0})  # not a QUIC session
    return {"constants": {"logEventTypes": TYPES, "logSourceType": {"QUIC_SESSION": 13}, "timeTickOffset": "1000"},
            "events": ev}


ZERO_RTT = [("QUIC_SESSION_TRANSPORT_PARAMETERS_RESUMED", {}),
            ("QUIC_SESSION_PACKET_SENT", {"encryption_level": "ENCRYPTION_INITIAL"}),
            ("QUIC_SESSION_PACKET_SENT", {"encryption_level": "ENCRYPTION_ZERO_RTT"}),
            ("HTTP3_HEADERS_SENT", {"stream_id": 0}),
            ("QUIC_SESSION_CRYPTO_HANDSHAKE_COMPLETE", {}),
            ("QUIC_SESSION_ZERO_RTT_STATE", {"state": "AttemptedAndSucceeded"})]
ONE_RTT = [("QUIC_SESSION_PACKET_SENT", {"encryption_level": "ENCRYPTION_INITIAL"}),
           ("QUIC_SESSION_CRYPTO_HANDSHAKE_COMPLETE", {}),
           ("HTTP3_HEADERS_SENT", {"stream_id": 0}),
           ("QUIC_SESSION_ZERO_RTT_STATE", {"state": "NotAttempted"})]


def test_zero_rtt_summary_reads_the_measured_loads_session_to_the_origin():
    nl = _netlog((5, "www.single.test", 100, ONE_RTT),  # the warm-up's session (before the boundary)
                 (7, "other.test", 300, ONE_RTT),  # another origin
                 (9, "www.single.test", 400, ZERO_RTT))
    z = zero_rtt_summary(nl, "https://www.single.test/", after_epoch_ms=1000 + 200)
    assert z == {"sessions": 1, "state": "AttemptedAndSucceeded", "resumed": True, "zero_rtt_packets": 1,
                 "request_in_0rtt": True}


def test_zero_rtt_summary_of_a_1rtt_load_no_session_and_no_netlog():
    z = zero_rtt_summary(_netlog((9, "www.single.test", 400, ONE_RTT)), "https://www.single.test/", 1200)
    assert z["state"] == "NotAttempted" and not z["resumed"] and not z["request_in_0rtt"] and z["zero_rtt_packets"] == 0
    assert zero_rtt_summary(_netlog((9, "www.single.test", 100, ZERO_RTT)), "https://www.single.test/", 1200) == {"sessions": 0}
    assert zero_rtt_summary(None, "https://www.single.test/", 0) == {"sessions": None, "error": "no netlog"}
