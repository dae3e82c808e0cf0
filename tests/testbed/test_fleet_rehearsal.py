"""`dnscamp fleet rehearse` on the testbed: two regions of an ec2 vantage, two
firings each of the installed cron line under real cron daemons, shipped to the island's S3
server, collected on the host: every record of every unit in Postgres exactly once, the
regions' RTT difference visible in the views, nothing of the rehearsal left behind."""

from __future__ import annotations

import json
import os
from pathlib import Path

import psycopg
import pytest

from dnscamp.fleet.rehearse import Rehearsal
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


def test_two_regions_two_firings_every_record_once(testbed, db_url, tmp_path):
    before, names_before = netns.root_snapshot(), set(os.listdir("/run/netns"))
    r = Rehearsal(SPEC, out_dir=tmp_path, firings=2, vantages=["ec2-default"], regions=["us-east-2", "ap-northeast-2"])
    try:
        rep = r.run()
    finally:
        r.stop()
        left, procs = _ours(r.tag), _pids_of(str(r.out_dir), r.endpoint)
    assert left == [] and procs == [], (left, procs)
    assert netns.root_snapshot() == before, "the root namespace changed"
    assert set(os.listdir("/run/netns")) == names_before, "namespace names left in /run/netns"
    assert rep.ok, rep.problems

    # every unit of every firing: the spec's plan for the vantage, once per run, all in Postgres
    units_per_run = sum(1 for u in make_plan(load(SPEC), "x", max_units=None).units() if u.vantage.id == "ec2-default")
    runs = {i["region"]: i["runs"] for i in rep.instances}
    assert all(len(v) >= 2 for v in runs.values()), runs
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
