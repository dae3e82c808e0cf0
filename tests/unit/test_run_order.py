"""The runner executes units strictly in plan order, one live agent per network namespace.

Without root there are no namespaces, so the agents are fakes (``runner._Agent`` replaced)
and host kinds do not run (``runner.run_unit`` replaced): what is tested is the runner's
scheduling, through its real ``run()``.
"""

import json
from collections import Counter

import pytest

from dnscamp import planner, runner
from dnscamp.spec import loads

pytestmark = pytest.mark.unit

SPEC = """
[campaign]
name = "order"
seed = 7
repetitions = 3
[[vantages]]
id = "tb"
provider = "testbed"
network_profiles = ["fiber", "4g"]
[[vantages]]
id = "here"
provider = "local"
[kinds.ping]
targets = ["10.53.1.1", "10.53.2.1"]
[kinds.link_check]
"""


@pytest.fixture
def fakes(monkeypatch):
    """Every unit the runner hands over, in order, with where it went; agents started per namespace."""
    seen: list[tuple[str, str]] = []
    started: Counter = Counter()
    crash_once = {"dc-client-fiber"}  # this namespace's first agent dies on its first unit

    class FakeAgent:
        def __init__(self, spool_dir, run_dir, namespace):
            self.ns, self.run_dir, self.alive = namespace, run_dir, True
            started[namespace] += 1

        def run(self, request):
            assert self.alive, "a unit was sent to a closed agent"
            uid = request["unit"]["id"]
            seen.append((uid, str(self.ns)))
            if self.ns in crash_once:
                crash_once.discard(self.ns)
                return None
            (self.run_dir / f"{uid}.jsonl").write_text("{}\n")  # done, for resume
            return {"unit": uid, "file": "", "n": 1, "statuses": {"ok": 1}}

        def failure_text(self):
            return "vantage agent exited with code -9: fake"

        def close(self):
            self.alive = False

    def fake_run_unit(kind, unit, ctx, spool):
        seen.append((unit.id, "host"))
        (ctx.artifacts_dir.parent / f"{unit.id}.jsonl").write_text("{}\n")
        return {"unit": unit.id, "file": "", "n": 1, "statuses": {"setup_error": 1}}

    monkeypatch.setattr(runner, "_Agent", FakeAgent)
    monkeypatch.setattr(runner, "run_unit", fake_run_unit)
    return seen, started


def executed(run_dir):
    return [json.loads(line) for line in (run_dir / runner.EXECUTED).read_text().splitlines()]


def test_units_run_in_plan_order_with_one_agent_per_namespace(tmp_path, fakes):
    seen, started = fakes
    s = loads(SPEC)
    summary = runner.run(s, spool_dir=tmp_path, run_id="r1", show_progress=False, testbed_info=lambda: None)
    units = list(planner.plan(s, "r1").units())
    plan_ids = [u.id for u in units]
    # The plan interleaves the conditions (else the test would prove nothing): where a unit
    # runs changes far more often than across the 4 groups a grouping runner makes (fiber's
    # agent, 4g's, this host's agent, in-process). 3 vantage/profile pairs x (ping: 2
    # targets, link_check: 1) x 3 repetitions.
    conds = [(u.kind, u.vantage.provider, u.vantage.network_profile) for u in units]
    assert len(units) == 3 * 3 * 3 and sum(a != b for a, b in zip(conds, conds[1:])) > 8
    assert [uid for uid, _ in seen] == plan_ids
    where = {w for _, w in seen}
    assert where == {"dc-client-fiber", "dc-client-4g", "None", "host"}
    # One agent per namespace; fiber's first one crashed, so it got exactly one more.
    assert started == {"dc-client-fiber": 2, "dc-client-4g": 1, None: 1}
    assert summary.units_run == len(plan_ids) and summary.statuses["other"] == 1
    log = executed(summary.run_dir)
    assert [e["unit"] for e in log] == plan_ids and [e["order"] for e in log] == list(range(len(plan_ids)))
    assert [e["started"] for e in log] == sorted(e["started"] for e in log)


def test_resume_runs_the_rest_in_plan_order(tmp_path, fakes):
    seen, started = fakes
    s = loads(SPEC)
    plan_ids = list(planner.plan(s, "r2").ids())
    run_dir = tmp_path / "order" / "r2"
    run_dir.mkdir(parents=True)
    done = set(plan_ids[::3])
    for uid in done:
        (run_dir / f"{uid}.jsonl").write_text("{}\n")
    summary = runner.run(s, spool_dir=tmp_path, run_id="r2", show_progress=False, testbed_info=lambda: None)
    rest = [uid for uid in plan_ids if uid not in done]
    assert [uid for uid, _ in seen] == rest
    assert summary.units_skipped == len(done) and summary.units_run == len(rest)
    assert [e["unit"] for e in executed(run_dir)] == rest
