"""What `fleet apply` shows and refuses before Terraform applies a saved plan (dnscamp/fleet/plan.py),
what `fleet destroy` reads from the state (state.py) and waits for (drain.py), and the state bucket
`fleet init` makes (statebucket.py, boto3 against moto in server mode). The plan documents follow
Terraform's JSON output format (`terraform show -json tfplan`); test_fleet_terraform.py runs the
real Terraform against moto for the same paths."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dnscamp.fleet import drain, plan, state
from dnscamp.fleet.cost import Bill, Line

pytestmark = pytest.mark.local

CONFIG = {
    "provider": {"aws": [{"alias": "us_east_2", "region": "us-east-2"}, {"alias": "eu_central_1", "region": "eu-central-1"}]},
    "module": {
        "results_bucket": {"providers": {"aws": "aws.us_east_2"}},
        "vantage_alpha_us_east_2": {"providers": {"aws": "aws.us_east_2"}},
        "vantage_beta_eu_central_1": {"providers": {"aws": "aws.eu_central_1"}},
    },
}


def rc(address: str, actions: list[str], *, mode: str = "managed", before: dict | None = None) -> dict:
    module, _, rest = address.rpartition(".aws_") if ".aws_" in address else ("", "", address)
    rtype = ("aws_" + rest).split(".")[0] if module else address.split(".")[0]
    return {"address": address, "module_address": module or None, "mode": mode, "type": rtype,
            "change": {"actions": actions, "before": before, "after": {}}}


def doc(*changes: dict) -> dict:
    return {"format_version": "1.2", "terraform_version": "1.11.4", "resource_changes": list(changes)}


def test_summary_per_region_by_address_with_the_bill():
    p = doc(rc("module.vantage_alpha_us_east_2.aws_instance.agent[0]", ["create"]),
            rc("module.vantage_alpha_us_east_2.aws_iam_role.agent", ["update"]),
            rc("module.vantage_beta_eu_central_1.aws_security_group.agent", ["no-op"]),
            rc("module.vantage_beta_eu_central_1.data.aws_ami.debian12[0]", ["read"], mode="data"),
            rc("module.results_bucket.aws_s3_bucket_lifecycle_configuration.results", ["delete", "create"]))
    bill = Bill(campaign="c", days=2.0, lines=[Line("x", 48, "hours", 0.5, "us-east-2"), Line("y", 48, "hours", 0.25, "eu-central-1")])
    s = plan.summarize(p, CONFIG, bill)
    assert s.counts() == {"create": 1, "update": 1, "replace": 1, "delete": 0, "forget": 0}
    assert s.counts("eu-central-1") == dict.fromkeys(plan.ACTIONS, 0)
    assert s.per_day_usd == {"us-east-2": 12.0, "eu-central-1": 6.0}
    text = s.describe()
    assert text.splitlines()[0] == "Plan: 1 to add, 1 to change, 1 to replace, 0 to destroy"
    assert "  us-east-2: 1 to add, 1 to change, 1 to replace, 0 to destroy; bill $12.00 per day" in text
    assert "    +   module.vantage_alpha_us_east_2.aws_instance.agent[0]" in text
    assert "-/+ module.results_bucket.aws_s3_bucket_lifecycle_configuration.results" in text
    assert "bill of the fleet as planned: $18.00 per day" in text
    assert not s.guarded()
    s.check(allow_replace=False)  # a lifecycle rule replaced is no agent lost


@pytest.mark.parametrize("address,actions", [
    ("module.vantage_alpha_us_east_2.aws_instance.agent[0]", ["delete", "create"]),
    ("module.vantage_alpha_us_east_2.aws_instance.agent[1]", ["create", "delete"]),
    ("module.vantage_beta_eu_central_1.aws_instance.agent[1]", ["delete"]),
    ("module.vantage_beta_eu_central_1.aws_instance.agent[0]", ["forget"]),
    ("module.results_bucket.aws_s3_bucket.results", ["delete", "create"]),
])
def test_replacing_or_destroying_an_agent_or_the_bucket_is_refused_by_address(address, actions):
    s = plan.summarize(doc(rc(address, actions), rc("module.vantage_alpha_us_east_2.aws_iam_role.agent", ["delete"])),
                       CONFIG)
    with pytest.raises(plan.PlanRefused) as exc:
        s.check(allow_replace=False)
    msg = str(exc.value)
    assert "\n" not in msg and address in msg and "--allow-replace" in msg
    assert "aws_iam_role" not in msg  # only what loses an agent or the results is named
    s.check(allow_replace=True)


def test_a_resource_whose_vantage_left_the_spec_keeps_its_region():
    gone = "module.vantage_gamma_ap_northeast_2"
    s = plan.summarize(doc(
        rc(f"{gone}.aws_instance.agent[0]", ["delete"], before={"tags_all": {"region": "ap-northeast-2"}}),
        rc(f"{gone}.aws_iam_role.agent", ["delete"], before={"arn": "arn:aws:iam::123456789012:role/x"}),
        rc(f"{gone}.aws_security_group.agent", ["delete"], before={"arn": "arn:aws:ec2:ap-northeast-2:1:security-group/sg-1"}),
        rc(f"{gone}.aws_iam_instance_profile.agent", ["delete"], before={}),
    ), CONFIG)
    assert [c.region for c in s.changes] == ["ap-northeast-2", "?", "ap-northeast-2", "?"]
    assert s.destroy


def test_unknown_actions_and_non_plans_are_one_line_errors():
    with pytest.raises(plan.PlanError, match="unknown action list"):
        plan.summarize(doc(rc("module.results_bucket.aws_s3_bucket.results", ["explode"])), CONFIG)
    with pytest.raises(plan.PlanError, match="not the JSON of a saved plan"):
        plan.summarize({"values": {}}, CONFIG)


ACTION_LISTS = [["no-op"], ["read"], ["create"], ["update"], ["delete"], ["delete", "create"], ["create", "delete"], ["forget"]]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["aws_instance", "aws_iam_role", "aws_s3_bucket", "aws_security_group"]),
                          st.sampled_from(list(CONFIG["module"]) + ["vantage_gone_sa_east_1"]),
                          st.sampled_from(ACTION_LISTS), st.integers(0, 3)), max_size=25))
def test_property_the_guard_names_exactly_the_lost_agents_and_bucket(items):
    """Over any mix of changes: the counts add up, and the refusal names every instance or results
    bucket that would be replaced, destroyed or forgotten, and nothing else."""
    changes, seen = [], set()
    for rtype, module, actions, i in items:
        name = "results" if rtype == "aws_s3_bucket" else "agent"
        address = f"module.{module}.{rtype}.{name}" + (f"[{i}]" if rtype == "aws_instance" else "")
        if address in seen:
            continue
        seen.add(address)
        changes.append(rc(address, actions))
    s = plan.summarize(doc(*changes), CONFIG)
    acted = [c for c in changes if c["change"]["actions"] not in (["no-op"], ["read"])]
    assert sum(s.counts().values()) == len(acted)
    lost = {c["address"] for c in acted
            if c["change"]["actions"] != ["create"] and c["change"]["actions"] != ["update"]
            and (c["type"] == "aws_instance" or c["address"] == plan.RESULTS_BUCKET)}
    assert {c.address for c in s.guarded()} == lost
    if lost:
        with pytest.raises(plan.PlanRefused) as exc:
            s.check(allow_replace=False)
        assert all(a in str(exc.value) for a in lost)
    else:
        s.check(allow_replace=False)


def test_state_modules_and_regions():
    raw = {"version": 4, "resources": [
        {"module": "module.results_bucket", "mode": "managed", "type": "aws_s3_bucket", "name": "results",
         "provider": 'provider["registry.terraform.io/hashicorp/aws"].us_east_2', "instances": [{}]},
        {"module": "module.vantage_gone_ap_northeast_2", "mode": "data", "type": "aws_ami", "name": "debian12",
         "provider": 'provider["registry.terraform.io/hashicorp/aws"].ap_northeast_2', "instances": [{}]},
        {"module": "module.vantage_gone_ap_northeast_2", "mode": "managed", "type": "aws_instance", "name": "agent",
         "provider": 'provider["registry.terraform.io/hashicorp/aws"].ap_northeast_2', "instances": [{}, {}]},
        {"module": "module.vantage_empty_eu_west_1", "mode": "managed", "type": "aws_instance", "name": "agent",
         "provider": 'provider["registry.terraform.io/hashicorp/aws"].eu_west_1', "instances": []},
    ]}
    s = state.parse(json.dumps(raw))
    assert s.modules == ["results_bucket", "vantage_gone_ap_northeast_2"]
    assert s.regions == ["us-east-2", "ap-northeast-2"] and s.resources == 3 and not s.empty
    assert state.parse("").empty and state.parse("  \n").modules == []
    with pytest.raises(state.StateError, match="not JSON"):
        state.parse("{")


@dataclass(frozen=True)
class Inst:
    id: str
    state: str = "running"
    vantage: str = "alpha"
    region: str = "us-east-2"


def status(iid: str, pending: int | None) -> dict:
    return {"instance_id": iid, "pending_units": pending, "at": "2026-11-27T10:00:00+00:00",
            "last_modified": datetime(2026, 11, 27, tzinfo=timezone.utc)}


def test_drain_blocks_on_pending_unknown_or_unreadable_and_ignores_the_gone():
    insts = [Inst("i-1"), Inst("i-2"), Inst("i-3"), Inst("i-4", state="terminated"), Inst("i-5", state="stopped"),
             Inst("i-6")]
    sts = [status("i-1", 0), status("i-2", 3), status("i-4", 9), status("i-5", None),
           {"instance_id": "i-6", "corrupt": "status/c/alpha/us-east-2/i-6.json: not JSON"}]
    lines = drain.blocking(sts, insts)
    assert [ln.split(" ")[3] for ln in lines] == ["i-2", "i-3", "i-5", "i-6"]
    assert "3 unit(s) pending" in lines[0] and "no status object yet" in lines[1] and "unreadable" in lines[3]


def test_drain_waits_then_passes_or_times_out():
    t = [0.0]
    pending = {"n": 2}
    seen: list[str] = []

    def sleep(s):
        t[0] += s
        pending["n"] -= 1

    left = drain.drain(lambda: [status("i-1", pending["n"])], lambda: [Inst("i-1")], timeout_s=100, poll_s=10,
                       log=seen.append, sleep=sleep, clock=lambda: t[0])
    assert left == [] and t[0] == 20 and len(seen) == 2 and "i-1" in seen[0]
    t[0] = 0.0
    left = drain.drain(lambda: [status("i-1", 5)], lambda: [Inst("i-1")], timeout_s=25, poll_s=10,
                       sleep=sleep, clock=lambda: t[0])
    assert len(left) == 1 and "5 unit(s) pending" in left[0] and t[0] == 30
