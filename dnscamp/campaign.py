"""The campaign service: a spec -> its plan -> the testbed (when the spec has testbed vantages)
-> the run -> the ingest -> the report, as plain functions and one result object.

`dnscamp campaign run`, a scheduled firing (dnscamp.schedule) and the experiments
(dnscamp.experiments) all run campaigns through ``run``; nothing here prints: messages go to
the ``log`` callback a caller passes (the runner's progress bar is ``show_progress``). Errors
are exceptions: SpecError (dnscamp.spec) for a spec or plan that cannot be used, CampaignError
for a campaign that cannot run here, collectors.ingest's IngestError / StoreUnavailable for an
ingest that cannot be done. The steps are the fields of ``Steps``, so that tests can run the
order of things without root, a testbed or a store.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:  # the heavy modules load when a step runs, not when the CLI starts
    from collectors.ingest import IngestStats
    from dnscamp.planner import Plan
    from dnscamp.runner import RunSummary
    from dnscamp.spec import CampaignSpec

Log = Callable[[str], None]


class CampaignError(Exception):
    """A campaign that cannot run here (its testbed vantages need root): one line for the user."""


def _quiet(message: str) -> None:
    pass


def load(path: Path | str) -> CampaignSpec:
    """The validated spec at ``path``; SpecError (every problem, one line each) otherwise."""
    from dnscamp.spec import load as load_spec

    return load_spec(path)


def default_max_units() -> int:
    """The planner's bound of a plan (dnscamp.limits.MAX_UNITS)."""
    from dnscamp.limits import MAX_UNITS

    return MAX_UNITS


def check_plan(spec: CampaignSpec, run: str, max_units: int | None) -> Plan:
    """The spec's plan; SpecError when it has more than ``max_units`` units (None: no bound)."""
    from dnscamp import planner

    return planner.plan(spec, run, max_units=max_units)


def testbed_up(spec: CampaignSpec, log: Log = _quiet) -> dict[str, Any] | None:
    """Bring the testbed up with the spec's profiles (and ``[testbed]`` backbone) and return its
    description; None when the spec has no testbed vantage."""
    import os

    profiles = spec.testbed_profiles()
    if not profiles:
        return None
    if os.geteuid() != 0:
        raise CampaignError("this campaign has testbed vantages: the testbed needs root (network namespaces)")
    from testbed import lifecycle

    return lifecycle.ensure_up(profiles, extra_profiles=spec.profiles, log=lambda m: log(f"testbed: {m}"),
                               backbone_rtt_ms=spec.testbed.backbone_rtt_ms)


def testbed_down(log: Log = _quiet) -> int:
    """Take the testbed down; the number of namespaces removed."""
    from testbed import lifecycle

    removed = len(lifecycle.down()["removed"])
    log(f"testbed: down ({removed} namespaces removed)")
    return removed


def run_units(spec: CampaignSpec, *, spool_dir: Path, run_id: str | None, show_progress: bool,
              testbed_info: Callable[[], dict[str, Any] | None], max_units: int | None) -> RunSummary:  # fmt: skip
    """Run (or resume) the plan's units into the spool (dnscamp.runner)."""
    from dnscamp import runner

    return runner.run(spec, spool_dir=spool_dir, run_id=run_id, show_progress=show_progress,
                      testbed_info=testbed_info, max_units=max_units)  # fmt: skip


def ingest(paths: list[Path], workers: int | None = None) -> IngestStats:
    """Migrate the store, then ingest ``paths`` as the writer (idempotent; bad lines are
    quarantined and counted, not raised), and store the Atlas bundles the ``atlas`` kind's units
    left under them (collectors.atlas_bundle; their counts are not records'). StoreUnavailable
    when the store cannot be reached or went away; IngestError for a path that cannot be
    ingested at all."""
    import logging

    import sqlalchemy.exc

    from collectors.ingest import StoreUnavailable, ingest as ingest_files
    from db import engine, migrate
    from vantage_agent.errors import first_line

    # psycopg logs a warning while it abandons a COPY on a lost connection; StoreUnavailable says it.
    logging.getLogger("psycopg").addHandler(logging.NullHandler())
    try:
        migrate.upgrade(engine.sqlalchemy_url("owner"))
    except sqlalchemy.exc.OperationalError as exc:
        raise StoreUnavailable(f"cannot reach the store ({first_line(exc.orig)}): run `dnscamp db up` "
                               "(or check DNSCAMP_DATABASE_URL), then the same ingest again") from None  # fmt: skip
    from collectors import atlas_bundle

    stats = ingest_files(paths, engine.database_url("writer"), workers=workers)  # collectors write as the writer
    # as the owner: a bundle replaces its campaign's discovery rows, which the writer may not delete
    atlas_bundle.store_all(paths, engine.database_url("owner"))
    return stats


def report(campaign: str, run: str | None) -> list[dict[str, Any]]:
    """The report's sections (dnscamp.report) of a campaign's run, read as the reader."""
    from db import engine
    from dnscamp import report as campaign_report

    return campaign_report.gather(engine.database_url("reader"), campaign, run)


@dataclass(frozen=True)
class Steps:
    """What ``run`` does at each step, in this order: testbed_up (when the runner reaches a
    testbed unit), run_units, testbed_down (when this run brought the testbed up and does not
    keep it), ingest, report. Only ingest and report reach the store: units never do."""

    testbed_up: Callable[[CampaignSpec, Log], dict[str, Any] | None] = testbed_up
    run_units: Callable[..., RunSummary] = run_units
    testbed_down: Callable[[Log], int] = testbed_down
    ingest: Callable[[list[Path]], IngestStats] = ingest
    report: Callable[[str, str | None], list[dict[str, Any]]] = report


@dataclass(frozen=True)
class RunOptions:
    run_id: str | None = None  # the run to create or resume; None: the latest unfinished run of the spec, else a new one
    spool_dir: Path | None = None  # None: $DNSCAMP_HOME/spool
    ingest: bool = True  # ingest the run's records afterwards
    report: bool = True  # gather the report afterwards (after an ingest only: it reads the store)
    keep_testbed: bool = False  # leave a testbed this run brought up running
    max_units: int | None = field(default_factory=default_max_units)  # refuse a larger plan (None: no bound)
    show_progress: bool = False  # the runner's progress bar (on stderr)


@dataclass
class CampaignResult:
    summary: RunSummary
    ingest: IngestStats | None = None  # None: not ingested
    report: list[dict[str, Any]] | None = None  # the report's sections; None: not gathered
    testbed_removed: int | None = None  # namespaces removed when this run took its testbed down

    @property
    def quarantined(self) -> int:
        return self.ingest.quarantined if self.ingest is not None else 0

    def as_json(self) -> dict[str, Any]:
        """The run summary, with the ingest's counts when there was one (`dnscamp campaign run --json`)."""
        out = self.summary.as_json()
        if self.ingest is not None:
            out["ingest"] = self.ingest.as_json()
        return out


def run(spec: CampaignSpec, options: RunOptions | None = None, *, log: Log = _quiet,
        steps: Steps = Steps()) -> CampaignResult:  # fmt: skip
    """Run (or resume) a campaign: plan (refused above ``max_units``), testbed up when its
    units need it, units -> spool, testbed down again unless kept (also when the run fails),
    then the ingest and the report when asked."""
    options = options or RunOptions()
    check_plan(spec, "run", options.max_units)  # an oversized plan is refused before any testbed or spool work
    if options.spool_dir is not None:
        spool_dir = options.spool_dir
    else:
        from vantage_agent import paths

        spool_dir = paths.spool_dir()
    brought_up: list[dict[str, Any]] = []

    def testbed_info() -> dict[str, Any] | None:
        d = steps.testbed_up(spec, log)
        if d and d.get("started_now"):
            brought_up.append(d)
        return d

    removed = None
    try:
        summary = steps.run_units(spec, spool_dir=spool_dir, run_id=options.run_id, show_progress=options.show_progress,
                                  testbed_info=testbed_info, max_units=options.max_units)  # fmt: skip
    finally:
        if brought_up and not options.keep_testbed:  # leave the machine as we found it
            removed = steps.testbed_down(log)
    result = CampaignResult(summary, testbed_removed=removed)
    if options.ingest:
        result.ingest = steps.ingest([summary.run_dir])
        if options.report:
            result.report = steps.report(summary.campaign, summary.run)
    return result
