"""The agent's clock offset to S3 from PUT responses' Date headers (one-second resolution)."""

from __future__ import annotations

from email.utils import formatdate

from hypothesis import given
from hypothesis import strategies as st

from vantage_agent.ship import ClockProbe

T0 = 1_800_000_000.0  # a wall-clock time (2027)


@given(offset=st.floats(-600, 600), requests=st.lists(st.tuples(st.floats(0, 3600), st.floats(0.001, 2.0),
                                                                 st.floats(0, 1)), min_size=1, max_size=8))
def test_the_true_offset_is_always_inside_the_estimate_and_within_half_its_width(offset, requests):
    """Each request: sent at local t0, answered rtt later; S3 stamps its Date at a point of that
    interval (truncated to the second) while the agent's clock is ``offset`` ahead of S3's."""
    probe = ClockProbe()
    for start, rtt, where in sorted(requests):
        t0 = T0 + start
        stamp = t0 + where * rtt - offset  # S3's clock when it answered
        probe.sample(t0, t0 + rtt, formatdate(int(stamp), usegmt=True))
    assert probe.lo - 1e-6 <= offset <= probe.hi + 1e-6
    assert abs(probe.offset_s - offset) <= (probe.hi - probe.lo) / 2 + 0.001
    assert probe.hi - probe.lo <= 1 + max(r for _, r, _ in requests) + 1e-6


def test_several_responses_narrow_the_offset_below_the_headers_second():
    probe = ClockProbe()
    for k in range(10):  # ten quick PUTs spread over a few seconds, true offset 0.3 s
        t0 = T0 + k * 0.37
        probe.sample(t0, t0 + 0.02, formatdate(int(t0 + 0.01 - 0.3), usegmt=True))
    assert probe.hi - probe.lo < 0.5 and abs(probe.offset_s - 0.3) < 0.25


@given(header=st.one_of(st.none(), st.text(max_size=40)))
def test_a_missing_or_hostile_date_header_is_no_sample(header):
    probe = ClockProbe()
    probe.sample(T0, T0 + 0.1, header)
    assert probe.offset_s is None or isinstance(probe.offset_s, float)


def test_a_stepped_clock_keeps_the_last_response():
    probe = ClockProbe()
    probe.sample(T0, T0 + 0.1, formatdate(int(T0), usegmt=True))
    probe.sample(T0 + 500, T0 + 500.1, formatdate(int(T0 + 400), usegmt=True))  # stepped 100 s ahead
    assert abs(probe.offset_s - 99.55) < 0.6
