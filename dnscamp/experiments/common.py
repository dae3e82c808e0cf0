"""What every experiment shares: its spec files, running them as `dnscamp campaign run` does,
finding the stored runs, and printing a table."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any, Iterable, Sequence

SPEC_DIR = Path(__file__).resolve().parents[2] / "campaigns" / "experiments"


def spec_path(stem: str, reduced: bool) -> Path:
    return SPEC_DIR / f"{stem}{'-reduced' if reduced else ''}.toml"


def campaign_name(path: Path) -> str:
    from dnscamp.spec import load

    return load(path).campaign.name


def run_campaign(path: Path, *, keep_testbed: bool = False) -> dict[str, Any]:
    """Run one spec through `dnscamp campaign run` itself (testbed up/down, runner, ingest) and
    return its JSON summary (campaign, run, statuses, ingest)."""
    import typer

    from dnscamp import planner
    from dnscamp.commands.campaign import run_cmd

    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            run_cmd(spec=path, run_id=None, spool=None, ingest=True, show_report=False, as_json=True,
                    keep_testbed=keep_testbed, max_units=planner.MAX_UNITS)
    except typer.Exit as exc:  # exit 3: a line was quarantined; the summary was printed before
        if exc.exit_code != 3:
            raise
    lines = [x for x in out.getvalue().splitlines() if x.startswith("{")]
    return json.loads(lines[-1])


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
