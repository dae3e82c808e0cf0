"""The pure parts of `dnscamp fleet rehearse`: the region RTT table, the instances a spec
gives, and that an instance is set up from the vantage module's own user data (its
vantage.env lines and its install commands), so the rehearsal cannot drift from EC2."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dnscamp.fleet import rehearse as rh
from dnscamp.spec import load, loads

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]


def test_the_table_has_a_source_and_every_pair_the_shipped_specs_need():
    t = rh.load_rtt_table()
    assert "cloudping" in t.source
    for spec in ("campaigns/www20-ec2.toml", "campaigns/rehearsal.toml"):
        s = load(ROOT / spec)
        for v in s.vantages:
            for r in v.all_regions:
                ms = t.rtt(r, s.fleet.home_region)
                assert ms == t.rtt(s.fleet.home_region, r)  # symmetric
                assert (ms == t.same_region_ms) == (r == s.fleet.home_region)
                assert 0 < ms < 400


def test_a_pair_missing_from_the_table_is_one_line_naming_it():
    with pytest.raises(rh.RehearsalError, match=r"sa-east-1 <-> us-east-2.*--rtt"):
        rh.load_rtt_table().rtt("sa-east-1", "us-east-2")


def test_instances_are_the_chosen_vantage_region_pairs_in_spec_order():
    s, t = load(ROOT / "campaigns/rehearsal.toml"), rh.load_rtt_table()
    all_ = rh.plan_instances(s, t)
    assert [(i.vantage, i.region) for i in all_][:3] == [("ec2-default", r) for r in ("us-east-2", "eu-central-1", "ap-northeast-2")]
    assert len(all_) == 6 and [i.k for i in all_] == list(range(1, 7))
    assert {i.profile for i in all_} == {None, "4g-www"}
    two = rh.plan_instances(s, t, vantages=["ec2-4g"], regions=["ap-northeast-2"], rtt_override={"ap-northeast-2": 42})
    assert [(i.vantage, i.region, i.profile, i.rtt_ms) for i in two] == [("ec2-4g", "ap-northeast-2", "4g-www", 42)]
    with pytest.raises(rh.RehearsalError, match=r"--regions: sa-east-1 not among"):
        rh.plan_instances(s, t, regions=["sa-east-1"])
    with pytest.raises(rh.RehearsalError, match=r"--vantages: nope not among"):
        rh.plan_instances(s, t, vantages=["nope"])


def test_a_spec_without_a_schedule_cannot_be_rehearsed():
    text = (ROOT / "campaigns/www20-ec2.toml").read_text()
    s = loads(re.sub(r"\[campaign\.schedule\]\n(?:[^\[\n][^\n]*\n)*", "", text), "www20-ec2.toml")
    with pytest.raises(rh.RehearsalError, match=r"www20-ec2.toml: campaign.schedule: missing"):
        rh.plan_instances(s, rh.load_rtt_table())


def test_vantage_env_is_the_user_data_templates_own_lines():
    tpl = rh.TEMPLATE.read_text()
    keys = re.findall(r"^\s+(DNSCAMP_[A-Z_]+)=\$\{(\w+)\}$", tpl, flags=re.M)
    values = {var: f"<{var}>" for _, var in keys}
    lines = rh.vantage_env(tpl, values)
    assert lines == [f"{k}=<{var}>" for k, var in keys] and len(lines) >= 5
    with pytest.raises(rh.RehearsalError, match=r"uses \$\{region\}"):
        rh.vantage_env(tpl, {k: v for k, v in values.items() if k != "region"})


def test_the_install_commands_are_the_ones_the_user_data_runs():
    tpl = rh.TEMPLATE.read_text()
    spec = "/etc/dnscamp/campaign.toml"
    assert "dnscamp " + " ".join(rh._fill(rh.LINK_APPLY, profile='"$profile"', spec=spec)) in tpl
    assert "dnscamp " + " ".join(rh._fill(rh.SCHEDULE_INSTALL, profile="", spec=spec)) in tpl


def test_the_cron_daemon_sees_only_the_instances_entries():
    sh = rh.cron_script(Path("/x/home"))
    assert "mount --bind /x/home/cron.d /etc/cron.d" in sh
    assert "mount --bind /x/home/crontab /etc/crontab" in sh  # not the machine's own jobs
    assert "/var/spool/cron/crontabs" in sh and "tmpfs" in sh and sh.endswith("exec cron -f")
