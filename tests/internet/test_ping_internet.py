"""Opt-in (DNSCAMP_INTERNET=1): the ping kind against public resolvers, as on a real vantage."""

import pytest

from vantage_agent.ping import PingParams, ping

pytestmark = pytest.mark.internet


@pytest.mark.parametrize("target", ["1.1.1.1", "8.8.8.8", "9.9.9.9"])
def test_icmp_ping_public_resolver(target):
    body = ping(PingParams(targets=[target], count=3, interval_ms=100), target)
    assert body.received >= 1 and all(r is None or 0 < r < 1000 for r in body.rtts_ms)
