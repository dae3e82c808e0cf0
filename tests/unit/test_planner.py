"""The planner is pure: same spec + seed -> same order; unit ids do not depend on order."""

import pytest

from dnscamp import planner
from dnscamp.spec import SpecError, loads

pytestmark = pytest.mark.unit

SPEC = """
[campaign]
name = "t"
seed = {seed}
repetitions = 3
[[vantages]]
id = "tb"
provider = "testbed"
network_profiles = ["fiber", "4g"]
[[vantages]]
id = "here"
[kinds.ping]
targets = ["10.53.1.1", "10.53.2.1"]
count = 2
"""


def test_matrix_size_and_determinism():
    s = loads(SPEC.format(seed=7))
    p1 = planner.plan(s, "r")
    p2 = planner.plan(s, "r")
    assert len(p1.units) == (2 + 1) * 2 * 3  # (profiles of tb + here) x targets x repetitions
    assert [u.id for u in p1.units] == [u.id for u in p2.units]
    assert len({u.id for u in p1.units}) == len(p1.units)
    assert [u.order for u in p1.units] == list(range(len(p1.units)))


def test_seed_changes_order_not_ids():
    a = planner.plan(loads(SPEC.format(seed=1)), "r")
    b = planner.plan(loads(SPEC.format(seed=2)), "r")
    assert [u.id for u in a.units] != [u.id for u in b.units]
    assert {u.id for u in a.units} == {u.id for u in b.units}


def test_shuffle_mixes_kinds_and_profiles():
    p = planner.plan(loads(SPEC.format(seed=3)), "r")
    profiles = [u.vantage.network_profile for u in p.units[:6]]
    assert len(set(profiles)) > 1


def test_testbed_profiles():
    assert loads(SPEC.format(seed=1)).testbed_profiles() == ["fiber", "4g"]


@pytest.mark.parametrize(
    "text,needle",
    [
        (SPEC.format(seed=1).replace("count = 2", "count = 0"), "kinds.ping.count: Input should be greater than or equal to 1"),
        (SPEC.format(seed=1).replace("[kinds.ping]", "[kinds.teleport]"), "kinds.teleport: unknown measurement kind 'teleport'"),
        (SPEC.format(seed=1).replace('name = "t"', 'name = ""'), "campaign.name:"),
        (SPEC.format(seed=1).replace("repetitions = 3", "repetitions = 3\ncolour = 1"), "campaign.colour: Extra inputs are not permitted"),
        (SPEC.format(seed=1) + "\n[kinds.ping.oops", "TOML syntax"),
        (SPEC.format(seed=1).replace('id = "here"', 'id = "here"\nnetwork_profiles = ["a", "a"]'), "vantages.1.network_profiles"),
    ],
)
def test_validation_names_field_and_reason(text, needle):
    with pytest.raises(SpecError) as exc:
        loads(text, "spec.toml")
    assert any(needle in line and line.startswith("spec.toml: ") for line in exc.value.lines), exc.value.lines


def test_all_errors_reported_at_once():
    text = SPEC.format(seed=1).replace("count = 2", "count = 0\nprotocol = \"carrier-pigeon\"")
    with pytest.raises(SpecError) as exc:
        loads(text, "s.toml")
    assert len(exc.value.lines) == 2


def test_unknown_testbed_profile_is_named():
    text = SPEC.format(seed=1).replace('["fiber", "4g"]', '["fiber", "carrier-pigeon"]')
    with pytest.raises(SpecError) as exc:
        loads(text, "s.toml")
    assert any("vantages.0.network_profiles.1: unknown profile 'carrier-pigeon'" in l for l in exc.value.lines), exc.value.lines


def test_custom_profile_in_spec_is_validated_and_usable():
    ok = SPEC.format(seed=1).replace('["fiber", "4g"]', '["fiber", "sat"]') + '\n[profiles.sat]\nsource = "a GEO satellite link, for the test"\nrtt_ms = 600\ndown_mbps = 50\nup_mbps = 5\n'
    assert loads(ok).testbed_profiles() == ["fiber", "sat"]
    bad = ok.replace("rtt_ms = 600", "rtt_ms = -1")
    with pytest.raises(SpecError) as exc:
        loads(bad, "s.toml")
    assert any(l.startswith("s.toml: profiles.sat:") and "rtt_ms" in l for l in exc.value.lines), exc.value.lines
