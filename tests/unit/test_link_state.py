"""env.link: every record says what `dnscamp link` shapes in its network namespace; one definition
of where that state lives (the agent's), read by the agent and written by testbed/linkem/host.py."""

import json

import pytest

from vantage_agent import link_state
from vantage_agent.kind import base_env

pytestmark = pytest.mark.unit


def test_absent_present_and_corrupt_state(tmp_path, monkeypatch):
    monkeypatch.setenv("DNSCAMP_LINK_STATE_DIR", str(tmp_path))
    assert base_env()["link"] is None
    st = {"profile": {"name": "lossy-4g", "rtt_ms": 91.9, "source": "paper"}, "backend": "netem", "dev": "ens5",
          "applied_at": "2026-11-23T21:00:00+00:00", "excludes": ["169.254.169.254/32"], "commands": []}
    link_state.state_path().write_text(json.dumps(st))
    assert base_env()["link"] == {"profile": "lossy-4g", "backend": "netem", "dev": "ens5",
                                  "applied_at": "2026-11-23T21:00:00+00:00"}
    for bad in ("{not json", "[1, 2]", "\x00\xff"):
        link_state.state_path().write_text(bad)
        got = base_env()["link"]
        assert set(got) == {"error"} and str(link_state.state_path()) in got["error"] and "\n" not in got["error"]


def test_one_definition_of_the_state_path(tmp_path, monkeypatch):
    from testbed.linkem import host

    monkeypatch.setenv("DNSCAMP_LINK_STATE_DIR", str(tmp_path))
    assert host.state_path() == link_state.state_path() and host.state_dir() == tmp_path
    assert host.state_path is link_state.state_path
