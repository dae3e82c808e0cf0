"""``[testbed] backbone_rtt_ms``: validated as a number >= 0 with one line naming the
field, handed by `dnscamp campaign run` to the testbed's ensure_up, which builds the island with
it or rebuilds an island that is up with another backbone (and says so)."""

from __future__ import annotations

import contextlib

import pytest

from dnscamp.spec import SpecError, loads

pytestmark = pytest.mark.unit

SPEC = """
[campaign]
name = "t"
[[vantages]]
id = "tb"
provider = "testbed"
network_profiles = ["fiber"]
[kinds.ping]
targets = ["10.53.1.1"]
"""


def _error(text: str) -> str:
    with pytest.raises(SpecError) as exc:
        loads(text, "s.toml")
    assert len(exc.value.lines) == 1, exc.value.lines
    return exc.value.lines[0]


def test_backbone_key_is_optional_and_takes_integers_and_floats():
    assert loads(SPEC).testbed.backbone_rtt_ms is None
    assert loads(SPEC + "[testbed]\nbackbone_rtt_ms = 0\n").testbed.backbone_rtt_ms == 0.0
    assert loads(SPEC + "[testbed]\nbackbone_rtt_ms = 2.5\n").testbed.backbone_rtt_ms == 2.5


@pytest.mark.parametrize("value, reason", [
    ("-1", "greater than or equal to 0"),
    ('"10"', "valid number"),  # strict: a string is not a number
    ("true", "valid number"),
    ("1e6", "less than or equal to 10000"),
])
def test_bad_backbone_is_one_line_naming_the_field(value, reason):
    line = _error(SPEC + f"[testbed]\nbackbone_rtt_ms = {value}\n")
    assert line.startswith("s.toml: testbed.backbone_rtt_ms: ") and reason in line, line


def test_unknown_testbed_key_and_testbed_section_without_a_testbed_vantage():
    assert _error(SPEC + "[testbed]\nbackbone = 0\n").startswith("s.toml: testbed.backbone: Extra inputs")
    local = SPEC.replace('provider = "testbed"\nnetwork_profiles = ["fiber"]', 'provider = "local"')
    line = _error(local + "[testbed]\nbackbone_rtt_ms = 0\n")
    assert line == "s.toml: testbed: only for a campaign with a testbed vantage (provider = 'testbed')"


class _Topology:
    """testbed.topology as ensure_up sees it: an island up (or not) with some backbone."""

    DEFAULT_BACKBONE_RTT_MS = 10.0

    class TopologyError(Exception):
        pass

    def __init__(self, up: bool, backbone: float = 10.0, profiles=("fiber", "4g")):
        self.up, self.built = up, []
        self.state = {"island": {"profiles": list(profiles), "profile_defs": {}, "backbone_rtt_ms": backbone}}

    def check_not_leased(self):
        pass

    def ops_lock(self):
        return contextlib.nullcontext()

    def read_state(self, run_dir):
        return self.state if self.up else None

    def is_up(self, run_dir):
        return self.up

    def status(self, run_dir):
        return {"healthy": True}

    def teardown(self, run_dir, log=None):
        self.up = False
        return {"left": [], "removed": [], "problems": []}

    def build(self, chosen, run_dir, backbone_rtt_ms, log=None):
        self.built.append(([p.name for p in chosen], backbone_rtt_ms))
        self.up = True


@pytest.mark.parametrize("up, island, asked, built, said", [
    (True, 10.0, None, [], "already up"),  # no key: any island is reused (the documented workaround still works)
    (True, 0.0, 0, [], "backbone 0 ms"),
    (True, 10.0, 0, [(["fiber"], 0)], "up with a 10 ms backbone, the campaign's [testbed] backbone_rtt_ms is 0 ms: rebuilding"),
    (False, 10.0, None, [(["fiber"], 10.0)], None),  # a new island: the testbed's default
    (False, 10.0, 2.5, [(["fiber"], 2.5)], None),
])
def test_ensure_up_reuses_or_rebuilds_by_backbone(monkeypatch, up, island, asked, built, said):
    from testbed import lifecycle

    topo = _Topology(up, island)
    monkeypatch.setattr(lifecycle, "topology", topo)
    monkeypatch.setattr(lifecycle, "describe", lambda: {"up": True})
    logs: list[str] = []
    d = lifecycle.ensure_up(["fiber"], log=logs.append, backbone_rtt_ms=asked)
    assert topo.built == built and d["started_now"] == bool(built)
    assert (said is None and not logs) or any(said in m for m in logs), logs


def test_campaign_run_hands_the_key_to_the_testbed(monkeypatch):
    from dnscamp import campaign
    from testbed import lifecycle

    seen = {}
    monkeypatch.setattr("os.geteuid", lambda: 0)
    monkeypatch.setattr(lifecycle, "ensure_up", lambda profiles, **kw: seen.update(kw, profiles=profiles) or {"up": True})
    campaign.testbed_up(loads(SPEC + "[testbed]\nbackbone_rtt_ms = 0\n"))
    assert seen["profiles"] == ["fiber"] and seen["backbone_rtt_ms"] == 0.0
    campaign.testbed_up(loads(SPEC))
    assert seen["backbone_rtt_ms"] is None
