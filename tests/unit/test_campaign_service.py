"""The campaign service (dnscamp.campaign) with fake steps: the order of its steps (testbed up
when the runner asks, run, testbed down, ingest, report), what each is handed, what a failure
leaves, and how its callers (`dnscamp campaign run`, the scheduled firing's child, the
experiments) use it."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collectors.ingest import IngestStats, StoreUnavailable
from dnscamp import campaign
from dnscamp.runner import RunSummary
from dnscamp.spec import SpecError, loads

pytestmark = pytest.mark.unit

LOCAL = """
[campaign]
name = "svc"
repetitions = 2
[[vantages]]
id = "here"
provider = "local"
[kinds.ping]
targets = ["127.0.0.1", "127.0.0.2"]
"""
TESTBED = """
[campaign]
name = "tb"
[[vantages]]
id = "lab"
provider = "testbed"
network_profiles = ["fiber"]
[kinds.ping]
targets = ["127.0.0.1"]
"""


class Fake:
    """Steps that record what they were called with, in order."""

    def __init__(self, *, started_now=True, quarantined=0, fail_run=False, ask_testbed=True):
        self.calls: list[tuple] = []
        self.started_now, self.quarantined, self.fail_run, self.ask_testbed = started_now, quarantined, fail_run, ask_testbed

    def steps(self) -> campaign.Steps:
        return campaign.Steps(testbed_up=self.testbed_up, run_units=self.run_units, testbed_down=self.testbed_down,
                              ingest=self.ingest, report=self.report)  # fmt: skip

    def testbed_up(self, spec, log):
        self.calls.append(("testbed_up", spec.campaign.name))
        log("testbed: up")
        return {"up": True, "started_now": self.started_now}

    def run_units(self, spec, *, spool_dir, run_id, show_progress, testbed_info, max_units):
        tb = testbed_info() if self.ask_testbed else None
        self.calls.append(("run_units", spool_dir, run_id, show_progress, max_units, tb is not None))
        if self.fail_run:
            raise KeyboardInterrupt
        return RunSummary(spec.campaign.name, run_id or "r1", 0, spool_dir / spec.campaign.name / "r1", 4,
                          units_run=4, records=4, statuses=Counter(ok=4))  # fmt: skip

    def testbed_down(self, log):
        self.calls.append(("testbed_down",))
        log("testbed: down (3 namespaces removed)")
        return 3

    def ingest(self, paths):
        self.calls.append(("ingest", paths))
        return IngestStats(ingested=4 - self.quarantined, quarantined=self.quarantined,
                           reasons=["f.jsonl:1: bad"] * self.quarantined)  # fmt: skip

    def report(self, name, run):
        self.calls.append(("report", name, run))
        return [{"title": "t", "columns": ["n"], "rows": [[4]]}]

    @property
    def order(self) -> list[str]:
        return [c[0] for c in self.calls]


def test_run_ingest_report_in_order_with_what_each_needs(tmp_path):
    fake, logs = Fake(), []
    res = campaign.run(loads(TESTBED), campaign.RunOptions(spool_dir=tmp_path, run_id="r1"), log=logs.append,
                       steps=fake.steps())  # fmt: skip
    assert fake.order == ["testbed_up", "run_units", "testbed_down", "ingest", "report"]
    assert fake.calls[1] == ("run_units", tmp_path, "r1", False, campaign.default_max_units(), True)
    assert fake.calls[3] == ("ingest", [tmp_path / "tb" / "r1"]) and fake.calls[4] == ("report", "tb", "r1")
    assert res.testbed_removed == 3
    assert res.report == [{"title": "t", "columns": ["n"], "rows": [[4]]}]
    assert res.as_json()["ingest"] == {"ingested": 4, "duplicates": 0, "quarantined": 0} and res.quarantined == 0
    assert logs == ["testbed: up", "testbed: down (3 namespaces removed)"]


@pytest.mark.parametrize("options, order", [
    (dict(keep_testbed=True), ["testbed_up", "run_units", "ingest", "report"]),
    (dict(report=False), ["testbed_up", "run_units", "testbed_down", "ingest"]),
    (dict(ingest=False), ["testbed_up", "run_units", "testbed_down"]),  # the report reads the store: none
])
def test_options_leave_out_their_steps(tmp_path, options, order):
    fake = Fake()
    res = campaign.run(loads(TESTBED), campaign.RunOptions(spool_dir=tmp_path, **options), steps=fake.steps())
    assert fake.order == order
    assert ("ingest" in res.as_json()) == ("ingest" in order) and (res.report is not None) == ("report" in order)


def test_a_testbed_that_was_up_already_stays_up(tmp_path):
    fake = Fake(started_now=False)
    campaign.run(loads(TESTBED), campaign.RunOptions(spool_dir=tmp_path), steps=fake.steps())
    assert fake.order == ["testbed_up", "run_units", "ingest", "report"]


def test_a_failed_run_takes_its_testbed_down_and_ingests_nothing(tmp_path):
    fake = Fake(fail_run=True)
    with pytest.raises(KeyboardInterrupt):
        campaign.run(loads(TESTBED), campaign.RunOptions(spool_dir=tmp_path), steps=fake.steps())
    assert fake.order == ["testbed_up", "run_units", "testbed_down"]


def test_an_oversized_plan_is_refused_before_any_step(tmp_path):
    fake = Fake()
    with pytest.raises(SpecError, match="above the maximum 3"):
        campaign.run(loads(LOCAL), campaign.RunOptions(spool_dir=tmp_path, max_units=3), steps=fake.steps())
    assert fake.calls == []


def test_the_testbed_needs_root_only_for_testbed_vantages(monkeypatch):
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    assert campaign.testbed_up(loads(LOCAL)) is None
    with pytest.raises(campaign.CampaignError, match="needs root"):
        campaign.testbed_up(loads(TESTBED))


def test_the_service_defaults_the_spool_to_dnscamp_home(tmp_path, monkeypatch):
    monkeypatch.setenv("DNSCAMP_HOME", str(tmp_path))
    monkeypatch.delenv("DNSCAMP_SPOOL", raising=False)
    fake = Fake(ask_testbed=False)
    campaign.run(loads(LOCAL), campaign.RunOptions(ingest=False), steps=fake.steps())
    assert fake.calls[0][1] == tmp_path / "spool"


# --- the callers ---------------------------------------------------------------------------------


def _with_fake(monkeypatch, fake: Fake) -> list[campaign.RunOptions]:
    """campaign.run with ``fake``'s steps; returns the options it is called with."""
    seen: list[campaign.RunOptions] = []
    real = campaign.run

    def run(spec, options=None, *, log=campaign._quiet, steps=None):
        seen.append(options)
        return real(spec, options, log=log, steps=fake.steps())

    monkeypatch.setattr(campaign, "run", run)
    return seen


def test_campaign_run_command_prints_the_summary_and_exits_3_on_a_quarantined_line(tmp_path, monkeypatch):
    from dnscamp.cli import app

    fake = Fake(quarantined=1, ask_testbed=False)
    seen = _with_fake(monkeypatch, fake)
    spec = tmp_path / "svc.toml"
    spec.write_text(LOCAL)
    r = CliRunner().invoke(app, ["campaign", "run", str(spec), "--json", "--spool", str(tmp_path), "--max-units", "9"])
    assert r.exit_code == 3, r.output
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["ingest"] == {"ingested": 3, "duplicates": 0, "quarantined": 1} and out["units_run"] == 4
    assert "quarantined: f.jsonl:1: bad" in r.stderr
    assert fake.order == ["run_units", "ingest"]  # --json: no report
    (o,) = seen
    assert (o.spool_dir, o.max_units, o.show_progress, o.report, o.keep_testbed) == (tmp_path, 9, False, False, False)


def test_campaign_run_command_says_a_store_it_cannot_reach_in_one_line(tmp_path, monkeypatch):
    from dnscamp.cli import app

    fake = Fake(ask_testbed=False)

    def unreachable(paths):
        raise StoreUnavailable("cannot reach the store (refused): run `dnscamp db up`")

    fake.ingest = unreachable
    _with_fake(monkeypatch, fake)
    spec = tmp_path / "svc.toml"
    spec.write_text(LOCAL)
    r = CliRunner().invoke(app, ["campaign", "run", str(spec), "--spool", str(tmp_path)])
    assert r.exit_code == 1 and "dnscamp: cannot reach the store (refused)" in r.stderr


def test_the_firing_child_runs_the_service_without_ingest_or_report(tmp_path, monkeypatch, capsys):
    from dnscamp import schedule

    fake = Fake(ask_testbed=False)
    seen = _with_fake(monkeypatch, fake)
    spec = tmp_path / "svc.toml"
    spec.write_text(LOCAL)
    assert schedule.run_child(str(spec), "r7", str(tmp_path)) == 0
    (o,) = seen
    assert (o.run_id, o.spool_dir, o.ingest, o.report) == ("r7", tmp_path, False, False)
    assert json.loads(capsys.readouterr().out)["run"] == "r7" and fake.order == ["run_units"]
    assert schedule.run_child(str(tmp_path / "absent.toml"), "r8", str(tmp_path)) == 2
    assert "absent.toml: cannot read" in capsys.readouterr().err


def test_an_experiment_runs_each_spec_through_the_service_and_takes_its_testbed_down(monkeypatch):
    from dnscamp.experiments import common, get
    from testbed import topology

    fake = Fake()
    seen = _with_fake(monkeypatch, fake)
    monkeypatch.setattr(campaign, "testbed_down", lambda log: fake.calls.append(("testbed_down",)) or 0)
    monkeypatch.setattr("os.geteuid", lambda: 0)
    up = iter([False, True])  # down before the experiment, up after it
    monkeypatch.setattr(topology, "is_up", lambda run_dir: next(up))
    logs: list[str] = []
    names = [common.campaign_name(common.spec_path(stem, True)) for stem in get("www20").load().SPECS]
    assert names
    runs = common.run_experiment(get("www20"), True, log=logs.append)
    assert runs == {n: "r1" for n in names}
    assert len(seen) == len(names) and all(o.keep_testbed and not o.report and o.ingest for o in seen)
    assert fake.order == ["testbed_up", "run_units", "ingest"] * len(names) + ["testbed_down"]  # down once, at the end
    assert f"experiment www20: {names[0]} run r1: 4 records {{'ok': 4}}; ingest {{'ingested': 4, 'duplicates': 0, " \
           "'quarantined': 0}" in logs
