"""env.link: every record says what `dnscamp link` shapes in its network namespace; one definition
of where that state lives (the agent's), read by the agent and written by testbed/linkem/host.py."""

import json
import uuid

import pytest

from datetime import datetime, timezone

from vantage_agent import link_state
from vantage_agent.kind import Unit, make_record
from vantage_agent.records import Vantage

pytestmark = pytest.mark.unit
RUN = uuid.uuid4().hex  # units of this module only: the per-unit reading is cached in-process


def record_link(unit_id: str | None = None):
    """env.link of a record of a (by default new) unit."""
    u = Unit(id=unit_id or uuid.uuid4().hex, campaign="c", run=RUN, kind="ping", vantage=Vantage(id="v", provider="ec2"),
             target="t", repetition=0, params={}, seed=1)
    return make_record(u, started_at=datetime.now(timezone.utc), body={}).env["link"]


def test_absent_present_and_corrupt_state(tmp_path, monkeypatch):
    monkeypatch.setenv("DNSCAMP_LINK_STATE_DIR", str(tmp_path))
    assert record_link("first") is None
    st = {"profile": {"name": "lossy-4g", "rtt_ms": 91.9, "source": "paper"}, "backend": "netem", "dev": "ens5",
          "applied_at": "2026-11-23T21:00:00+00:00", "excludes": ["169.254.169.254/32"], "commands": []}
    link_state.state_path().write_text(json.dumps(st))
    want = {"profile": "lossy-4g", "backend": "netem", "dev": "ens5", "applied_at": "2026-11-23T21:00:00+00:00"}
    assert record_link() == want
    assert record_link("first") is None  # read once per unit: what was in place at its first record
    a, b = record_link("second"), record_link("second")
    assert a == b == want and a is not b  # no record shares a mutable dict with another
    for bad in ("{not json", "[1, 2]", "\x00\xff"):
        link_state.state_path().write_text(bad)
        got = record_link()
        assert set(got) == {"error"} and str(link_state.state_path()) in got["error"] and "\n" not in got["error"]


def test_one_definition_of_the_state_path(tmp_path, monkeypatch):
    from testbed.linkem import host

    monkeypatch.setenv("DNSCAMP_LINK_STATE_DIR", str(tmp_path))
    assert host.state_path() == link_state.state_path() and host.state_dir() == tmp_path
    assert host.state_path is link_state.state_path
