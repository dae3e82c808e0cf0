"""`dnscamp fleet rehearse --faults` on the testbed: two regions of an ec2 vantage, the
installed cron line fired under real cron daemons, shipped to the island's S3 server, collected
on the host, while the first instance's first firing is killed mid-run and its clock runs two
minutes ahead, the second one's disk fills below the floor and S3 is cut for 40 s: every record
of every shipped unit in Postgres exactly once, every run complete by its manifest, each fault
shown by the flags `fleet status` raises, the regions' RTT difference visible in the views, and
nothing of the rehearsal left behind."""

from __future__ import annotations

import json
import os
from pathlib import Path

import psycopg
import pytest

from dnscamp.fleet.rehearse import Faults, Rehearsal
from dnscamp.planner import plan as make_plan
from dnscamp.spec import load
from testbed import netns

pytestmark = pytest.mark.testbed
SPEC = Path(__file__).resolve().parents[2] / "campaigns" / "rehearsal.toml"


def _ours(tag: str) -> list[str]:
    return [ns for ns in netns.list_ns("dc-") if ns.startswith((f"dc-fleet-{tag}", f"dc-lq-{tag}"))]


def _pids_of(*marks: str) -> list[int]:
    """Processes whose command line names the rehearsal's directory or S3 relay (host side:
    the relay, the collector; the namespaces' processes went with the namespaces)."""
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                cmd = (p / "cmdline").read_bytes()
            except OSError:
                continue
            if any(m.encode() in cmd for m in marks if m):
                out.append(int(p.name))
    return out


def test_two_regions_under_faults_every_record_once_every_run_complete(testbed, db_url, tmp_path):
    before, names_before = netns.root_snapshot(), set(os.listdir("/run/netns"))
    mounts_before = Path("/proc/self/mounts").read_text().count("dnscamp-rehearsal-spool")
    r = Rehearsal(SPEC, out_dir=tmp_path, firings=2, vantages=["ec2-default"], regions=["us-east-2", "ap-northeast-2"],
                  faults=Faults(s3_outage_s=40))
    try:
        rep = r.run()
    finally:
        r.stop()
        left, procs = _ours(r.tag), _pids_of(str(r.out_dir), r.endpoint)
    assert left == [] and procs == [], (left, procs)
    assert netns.root_snapshot() == before, "the root namespace changed"
    assert set(os.listdir("/run/netns")) == names_before, "namespace names left in /run/netns"
    assert Path("/proc/self/mounts").read_text().count("dnscamp-rehearsal-spool") == mounts_before  # its tmpfs unmounted
    assert rep.ok, rep.problems

    # the faults happened and each showed where an operator looks
    first, last = r.instance_id(r.instances[0]), r.instance_id(r.instances[-1])
    f = rep.faults
    assert f["kill"]["units_done_at_kill"] >= 1 and f["kill"]["resumed_and_shipped"], f["kill"]
    assert abs(f["clock_offset_seen_s"] - 120) < 5, f["clock_offset_seen_s"]
    assert f["disk_fill"]["free_after"] < f["disk_fill"]["floor_bytes"] and f["disk_fill"]["disk_floor_status_at"]
    assert "ended" in f["s3_outage"], f["s3_outage"]
    raised = {(x.split(" ")[0], x.split(" ")[1].rstrip(":")) for x in f["flags"]}
    assert {(first, "clock_skew"), (last, "disk_floor"), (last, "low_disk")} <= raised, f["flags"]
    assert any(what == "ship_errors" for _, what in raised), f["flags"]  # uploads into the outage were reported
    assert not any(what == "clock_skew" for iid, what in raised if iid == last)  # the true clock is not flagged
    # completeness: every shipped run has its manifest and every planned unit collected
    assert rep.completeness and all(c["manifest"] and c["units_missing"] == 0 and c["units_collected"] == c["units_planned"]
                                    for c in rep.completeness), rep.completeness

    # every unit of every firing: the spec's plan for the vantage, once per run, all in Postgres
    units_per_run = sum(1 for u in make_plan(load(SPEC), "x", max_units=None).units() if u.vantage.id == "ec2-default")
    runs = {i["region"]: i["runs"] for i in rep.instances}
    assert len(runs["us-east-2"]) >= 2 and len(runs["ap-northeast-2"]) >= 1, runs  # the full disk's stops measuring
    assert {c["run"] for c in rep.completeness} == {x for v in runs.values() for x in v}
    all_runs = [x for v in runs.values() for x in v]
    assert len(set(all_runs)) == len(all_runs)  # a run id per firing, never shared across instances
    with psycopg.connect(db_url) as c:
        per_run = dict(c.execute("SELECT run, count(*) FROM results WHERE campaign = 'rehearsal' AND run = ANY(%s) "
                                 "GROUP BY run", (all_runs,)).fetchall())  # fmt: skip
        assert per_run == {x: per_run[x] for x in all_runs}
        units = dict(c.execute("SELECT run, count(DISTINCT unit) FROM results WHERE run = ANY(%s) GROUP BY run",
                               (all_runs,)).fetchall())  # fmt: skip
        assert set(units.values()) == {units_per_run}, units
        regions = dict(c.execute("SELECT run, min(region) FROM results WHERE run = ANY(%s) GROUP BY run",
                                 (all_runs,)).fetchall())  # fmt: skip
        assert all(regions[x] == reg for reg, xs in runs.items() for x in xs)
        keys = c.execute("SELECT count(*) FROM collected_objects WHERE key LIKE 'results/rehearsal/ec2-default/%%' "
                         "AND split_part(key, '/', 4) = ANY(%s)", (all_runs,)).fetchone()[0]  # fmt: skip
        assert keys == units_per_run * len(all_runs)  # one object per unit, each collected once
    assert rep.collected["records_made"] == rep.collected["records_stored"] == sum(per_run.values())

    # fired by cron: the firing log of each instance names each run it started
    for inst in rep.instances:
        log = (Path(inst["home"]) / "logs" / "rehearsal.log").read_text()
        assert all(f"run {x} (new)" in log for x in inst["runs"]), log[-2000:]

    # the regions' RTTs to the home region (175 ms apart in the table) show in v_ping and v_dns_query
    by = {g["region"]: g for g in rep.regions}
    gap = by["ap-northeast-2"]["configured_rtt_ms"] - by["us-east-2"]["configured_rtt_ms"]
    for col in ("ping_rtt_median_ms", "do53_total_median_ms"):
        seen = by["ap-northeast-2"][col] - by["us-east-2"][col]
        assert abs(seen - gap) <= 0.1 * gap, (col, seen, gap, rep.regions)
    print(json.dumps(rep.regions, indent=1))
