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


def eager_plan(spec, run):
    """The planner as it was before it became lazy (every Unit in a list, then shuffled): the
    reference the lazy one must reproduce, ids and order."""
    import hashlib
    import random

    from dnscamp import kinds as registry
    from vantage_agent.kind import Unit
    from vantage_agent.records import Vantage

    seed, units = spec.campaign.seed, []
    for v in spec.vantages:
        for i, profile in enumerate(v.network_profiles):
            vantage = Vantage(id=v.id, provider=v.provider, region=v.region, network_profile=profile)
            for kind_name in sorted(spec.kinds):
                if not getattr(registry.get(kind_name), "per_profile", True):
                    if i > 0:
                        continue
                    vantage_k = vantage.model_copy(update={"network_profile": None})
                else:
                    vantage_k = vantage
                params = spec.params[kind_name]
                for target in registry.get(kind_name).targets(params):
                    for rep in range(spec.campaign.repetitions):
                        uid = planner.unit_id(v.id, vantage_k.network_profile, kind_name, target, rep)
                        units.append(
                            Unit(
                                id=uid, campaign=spec.campaign.name, run=run, kind=kind_name,
                                vantage=vantage_k, target=target, repetition=rep,
                                params=params.model_dump(mode="json"),
                                seed=int(hashlib.sha256(f"{seed}|{uid}".encode()).hexdigest()[:8], 16),
                            )  # fmt: skip
                        )
    random.Random(seed).shuffle(units)
    return [Unit(**{**u.__dict__, "order": i}) for i, u in enumerate(units)]


MIXED = SPEC + """
[[vantages]]
id = "far"
provider = "testbed"
network_profiles = ["dsl", "fiber", "4g"]
[kinds.atlas]
probes = 3
[kinds.dns_query]
resolvers = ["testbed-isp", "testbed-public"]
transports = ["do53", "doh"]
names = ["www.single.test"]
"""


@pytest.mark.parametrize("text", [SPEC, MIXED, SPEC.replace("repetitions = 3", "repetitions = 1")])
@pytest.mark.parametrize("seed", [0, 7, 2**40])
def test_lazy_plan_is_the_eager_plan(text, seed):
    s = loads(text.format(seed=seed))
    lazy, eager = planner.plan(s, "r"), eager_plan(s, "r")
    assert len(lazy) == len(eager) == sum(lazy.counts().values())
    assert list(lazy) == eager  # every field of every unit, in the same order
    assert list(lazy.ids()) == [u.id for u in eager]


def test_matrix_size_and_determinism():
    s = loads(SPEC.format(seed=7))
    p1 = list(planner.plan(s, "r"))
    p2 = list(planner.plan(s, "r"))
    assert len(p1) == planner.plan(s, "r").size == (2 + 1) * 2 * 3  # (profiles of tb + here) x targets x repetitions
    assert [u.id for u in p1] == [u.id for u in p2]
    assert len({u.id for u in p1}) == len(p1)
    assert [u.order for u in p1] == list(range(len(p1)))


def test_per_profile_false_kind_runs_once_per_vantage():
    p = planner.plan(loads(MIXED.format(seed=1)), "r")
    # ping: 6 vantage/profile pairs x 2 targets; atlas: 3 vantages x 1 target; dns_query: 6 pairs x 4 targets; x 3 reps
    assert p.counts() == {"atlas": 3 * 3, "dns_query": 6 * 4 * 3, "ping": 6 * 2 * 3}
    assert {u.vantage.network_profile for u in p if u.kind == "atlas"} == {None}


BIG = """
[campaign]
name = "big"
repetitions = 100000
[[vantages]]
id = "a"
[[vantages]]
id = "b"
[kinds.ping]
targets = [%s]
""" % ", ".join(f'"10.0.0.{i}"' for i in range(50))


def test_size_is_arithmetic_and_units_are_lazy():
    # 10^7 units: sized and refused without building any (the eager planner needed ~18 GB).
    s = loads(BIG, "campaigns/x.toml")
    with pytest.raises(SpecError) as exc:
        planner.plan(s, "r")
    assert exc.value.lines == [
        "campaigns/x.toml: the plan has 10,000,000 units (2 vantages x 1 profile x 1 kind x 50 targets x "
        "100,000 repetitions), above the maximum 1,000,000: raise it with --max-units"
    ]
    p = planner.plan(s, "r", max_units=10_000_000)
    assert p.size == 10_000_000 and p.counts() == {"ping": 10_000_000}
    assert "order" not in p.__dict__  # nothing shuffled, nothing built
    u = p.unit(p.size - 1)
    assert (u.vantage.id, u.target, u.repetition) == ("b", "10.0.0.49", 99_999)
    assert u.id == planner.unit_id("b", None, "ping", "10.0.0.49", 99_999)


@pytest.mark.parametrize(
    "text,factors",
    [
        (SPEC, "3 vantage/profile pairs x 1 kind x 2 targets x 3 repetitions"),
        (MIXED, "[atlas: 3 vantages x 1 target + dns_query: 6 vantage/profile pairs x 4 targets + "
                "ping: 6 vantage/profile pairs x 2 targets] x 3 repetitions"),
    ],
)
def test_max_units_bound_and_factors(text, factors):
    s = loads(text.format(seed=1), "s.toml")
    n = planner.plan(s, "r").size
    assert planner.plan(s, "r", max_units=n).size == n
    with pytest.raises(SpecError) as exc:
        planner.plan(s, "r", max_units=n - 1)
    assert exc.value.lines == [f"s.toml: the plan has {n} units ({factors}), above the maximum {n - 1}: raise it with --max-units"]


def test_seed_changes_order_not_ids():
    a = list(planner.plan(loads(SPEC.format(seed=1)), "r"))
    b = list(planner.plan(loads(SPEC.format(seed=2)), "r"))
    assert [u.id for u in a] != [u.id for u in b]
    assert {u.id for u in a} == {u.id for u in b}


def test_shuffle_mixes_kinds_and_profiles():
    p = list(planner.plan(loads(SPEC.format(seed=3)), "r"))
    profiles = [u.vantage.network_profile for u in p[:6]]
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


@pytest.mark.parametrize("text", [SPEC, MIXED])
def test_campaign_run_reaches_the_store_only_after_its_units(monkeypatch, tmp_path, text):
    """Units never reach the store, the atlas kind's neither (it leaves its Atlas results as
    files for the ingest step): `campaign run` migrates no store before the units, so an
    unreachable store stops nothing until the ingest step, which then fails."""
    from collections import Counter

    import sqlalchemy.exc

    from collectors.errors import StoreUnavailable
    from db import engine, migrate
    from dnscamp import campaign, kinds
    from dnscamp.runner import RunSummary

    assert not any(hasattr(kinds.get(k), "needs_store") for k in kinds.names())
    spec = loads(text.format(seed=1))
    order = []

    def run_units(spec, *, spool_dir, run_id, show_progress, testbed_info, max_units):
        order.append("run_units")
        return RunSummary(spec.campaign.name, "r1", 0, spool_dir / spec.campaign.name / "r1", 1, units_run=1,
                          records=1, statuses=Counter(ok=1))

    def unreachable(url):
        order.append("migrate")
        raise sqlalchemy.exc.OperationalError("connect", {}, OSError("connection refused"))

    monkeypatch.setattr(migrate, "upgrade", unreachable)
    monkeypatch.setattr(engine, "sqlalchemy_url", lambda role: f"url-{role}")
    steps = campaign.Steps(testbed_up=lambda spec, log: None, run_units=run_units, testbed_down=lambda log: 0,
                           report=lambda name, run: [])
    with pytest.raises(StoreUnavailable):
        campaign.run(spec, campaign.RunOptions(spool_dir=tmp_path, run_id="r1"), steps=steps)
    assert order == ["run_units", "migrate"]  # the ingest step's migration, after the units
