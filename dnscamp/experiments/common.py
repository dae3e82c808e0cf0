"""What every experiment shares: its spec files, running them through the campaign service
(dnscamp.campaign), finding the stored runs, and printing a table."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

if TYPE_CHECKING:
    from dnscamp.experiments import Experiment

SPEC_DIR = Path(__file__).resolve().parents[2] / "campaigns" / "experiments"


def spec_path(stem: str, reduced: bool) -> Path:
    return SPEC_DIR / f"{stem}{'-reduced' if reduced else ''}.toml"


def campaign_name(path: Path) -> str:
    from dnscamp.spec import load

    return load(path).campaign.name


def run_experiment(experiment: Experiment, reduced: bool, *, keep_testbed: bool = False,
                   log: Callable[[str], None]) -> dict[str, str]:  # fmt: skip
    """Run an experiment's campaigns through the campaign service (dnscamp.campaign: testbed up
    with each spec's profiles, runner, ingest), then its extra runs; returns {campaign: run} of
    what it stored. The testbed stays up from one campaign to the next; at the end it is taken
    down unless it was up before or ``keep_testbed``. A quarantined line does not stop it (the
    summary's ingest counts it)."""
    import os

    from dnscamp import campaign
    from dnscamp.experiments import ExperimentError
    from testbed import topology
    from vantage_agent.paths import testbed_dir

    mod = experiment.load()
    if os.geteuid() != 0:
        raise ExperimentError("experiments run on the testbed: they need root (network namespaces)")
    was_up = topology.is_up(testbed_dir())
    runs: dict[str, str] = {}
    try:
        for stem in mod.SPECS:
            spec = campaign.load(spec_path(stem, reduced))
            res = campaign.run(spec, campaign.RunOptions(keep_testbed=True, report=False), log=log)
            s = res.summary
            log(f"experiment {experiment.name}: {s.campaign} run {s.run}: {s.records} records {dict(s.statuses)}; "
                f"ingest {res.ingest.as_json() if res.ingest else None}")
            runs[s.campaign] = s.run
        if hasattr(mod, "run_extra"):
            runs.update(mod.run_extra(reduced))
    finally:
        if not keep_testbed and not was_up and topology.is_up(testbed_dir()):
            campaign.testbed_down(log)
    return runs


def latest_run(conn, campaign: str) -> str | None:
    """The latest run of ``campaign`` in the store (run ids are UTC times, so they sort)."""
    row = conn.execute("SELECT max(run) FROM v_results WHERE campaign = %s", (campaign,)).fetchone()
    return row[0] if row else None


def fetch_rows(conn, sql: str, runs: dict[str, str]) -> list[dict]:
    """``sql`` (parameters: campaign, run) for each of ``runs`` ({campaign: run}), as dict rows."""
    import psycopg.rows

    rows: list[dict] = []
    with conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        for campaign, run in runs.items():
            rows += cur.execute(sql, (campaign, run)).fetchall()
    return rows


def no_records(what: str, runs: dict[str, str]) -> str:
    """The one line an analysis prints when the runs hold none of its records."""
    return f"{what} in " + ", ".join(f"{c}/{r}" for c, r in runs.items())


def connect():
    """A reader connection to the store (`dnscamp campaign report` reads as the reader too)."""
    import psycopg

    from db import engine

    return psycopg.connect(engine.database_url("reader"))


def fmt(v: Any, nd: int = 1) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:,.{nd}f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], nd: int = 1) -> str:
    """A plain-text table for stdout: numbers right-aligned (``nd`` decimals), text left-aligned."""
    rows = [list(r) for r in rows]
    num = [all(isinstance(r[i], int | float) or r[i] is None for r in rows) for i in range(len(headers))]
    cells = [[str(h) for h in headers]] + [[fmt(c, nd) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    out = []
    for k, r in enumerate(cells):
        out.append("  ".join(c.rjust(w) if num[i] else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip())
        if k == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)
