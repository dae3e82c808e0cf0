"""Opt-in (RIPE_ATLAS_KEY and DNSCAMP_ATLAS_LIVE=1): atlas/client.py and atlas/ping.py against
the real RIPE Atlas API, as `dnscamp atlas` uses them. Read-only: nothing is scheduled, no
credits are spent. Measurement 1001 is Atlas's built-in IPv4 ping to k.root-servers.net, which
every connected probe runs every 240 s."""

from __future__ import annotations

import os
import time

import pytest

pytestmark = pytest.mark.atlas

BUILTIN_PING_K_ROOT = 1001


@pytest.fixture(scope="module")
def key():
    from atlas.key import ApiKey

    return ApiKey(os.environ["RIPE_ATLAS_KEY"])


def test_the_key_is_accepted(key):
    from ripe.atlas.cousteau.request import AtlasRequest

    ok, body = AtlasRequest(url_path="/api/v2/credits/", key=key.reveal()).get()
    assert ok, f"the API refused RIPE_ATLAS_KEY for /api/v2/credits/: {body}"
    assert isinstance(body.get("current_balance"), int)


def test_fetch_and_parse_recent_builtin_ping_results(key):
    from atlas.client import fetch_results
    from atlas.ping import parse as parse_ping

    now = int(time.time())
    raw = fetch_results(BUILTIN_PING_K_ROOT, key=key, start=now - 1200, stop=now - 300)
    assert len(raw) >= 100, f"only {len(raw)} results of msm {BUILTIN_PING_K_ROOT} in a 15-minute window"
    rows = [parse_ping(r) for r in raw[:500]]
    assert all(r.msm_id == BUILTIN_PING_K_ROOT for r in rows)
    answered = [r for r in rows if r.received]
    assert len(answered) >= 0.8 * len(rows), "most probes reach k.root"
    assert all(0 < r.min <= r.avg <= r.max < 5000 for r in answered if r.min is not None)
    assert all(now - 1200 - 300 <= r.timestamp.timestamp() <= now for r in rows)
