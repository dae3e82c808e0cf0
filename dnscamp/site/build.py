"""Write the static report: per campaign an overview page (the terminal report's tables) and one
page per seed paper (dnscamp/site/figures.py), each figure an SVG with a CSV of its data and
the SQL behind it. Self-contained: no script, no font or style from elsewhere, nothing fetched."""

from __future__ import annotations

import csv
import datetime as dt
import html
import importlib.util
import io
import json
import math
import os
import re
import shutil
import urllib.parse
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import matplotlib
import psycopg
import psycopg.sql

from dnscamp import report
from dnscamp.site.figures import SEEDS, Item, Seed

# Text stays text in the SVG (a fraction of the size of glyph paths, selectable); a fixed hash
# salt and no date make a rebuilt figure byte-identical when the data are.
SVG_RC = {"svg.fonttype": "none", "svg.hashsalt": "dnscamp-report", "font.size": 9}
MAX_TABLE_ROWS = 60  # longer results stay in their CSV: a page must stay light

CSS = """body{font-family:system-ui,sans-serif;margin:0 auto;max-width:72rem;padding:0 1rem 3rem;color:#222}
nav{border-bottom:1px solid #ccc;padding:.6rem 0;margin-bottom:1rem}nav a{margin-right:1rem}
h1{font-size:1.5rem}h2{font-size:1.25rem;margin-top:2.2rem;border-top:1px solid #eee;padding-top:1rem}
figure{margin:0}figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption,.note{color:#444;font-size:.9rem;max-width:60rem}.nodata{background:#fff6e0;padding:.6rem;border-left:4px solid #e0a000}
table{border-collapse:collapse;font-size:.85rem;margin:.6rem 0}td,th{border:1px solid #ddd;padding:.2rem .5rem;text-align:right}
th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}
pre{background:#f7f7f7;padding:.6rem;overflow-x:auto;font-size:.8rem}.files a{margin-right:1rem}
"""
GENERATOR = "<meta name='generator' content='dnscamp report'>"  # how a rebuild knows the directory is ours
FAVICON = ("<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 16 16'>"
           "<rect width='16' height='16' rx='3' fill='#1f77b4'/></svg>\n")


# Where the figures' dashboard links point (docker-compose.yml's Grafana unless told otherwise).
GRAFANA_URL = "http://localhost:3000"
# The overview tables' live counterparts (the seeds' figures name theirs: figures.Item.panel).
OVERVIEW_PANELS = {
    "results": ("dnscamp-failures", r"failure rate"),
    "dns_query": ("dnscamp-dns", r"per transport.*resolver"),
    "page_load": ("dnscamp-pageloads", r"^PLT per DNS mode"),
    "quicsocks_savings": ("dnscamp-quicsocks", r"saving"),
}


def dashboards_dir() -> Path | None:
    """The generated dashboards (dashboards/provisioning/dashboards), found without importing
    the dashboards package (its Grafana SDK is not needed to read JSON)."""
    spec = importlib.util.find_spec("dashboards")
    if spec is None or not spec.submodule_search_locations:
        return None
    d = Path(next(iter(spec.submodule_search_locations))) / "provisioning" / "dashboards"
    return d if d.is_dir() else None


def panel_ids(directory: Path | None = None) -> dict[str, list[tuple[int, str]]]:
    """{dashboard uid: [(panel id, title)]} of every generated dashboard (rows' panels included)."""
    directory = directory or dashboards_dir()
    out: dict[str, list[tuple[int, str]]] = {}
    if directory is None:
        return out

    def walk(panels: list[dict[str, Any]], into: list[tuple[int, str]]) -> None:
        for pn in panels:
            if "id" in pn and pn.get("type") != "row":
                into.append((int(pn["id"]), str(pn.get("title", ""))))
            walk(pn.get("panels", []), into)

    for f in sorted(directory.glob("*.json")):
        d = json.loads(f.read_text())
        if d.get("uid"):
            walk(d.get("panels", []), out.setdefault(d["uid"], []))
    return out


def panel_url(panels: dict[str, list[tuple[int, str]]], ref: tuple[str, str] | None, base: str,
              campaign: str) -> str | None:
    """The URL of the first panel of dashboard ref[0] whose title matches ref[1] (case
    ignored), with the campaign selected (/d/<uid>?viewPanel=<id>&var-campaign=...); None
    when there is no such panel."""
    if ref is None:
        return None
    uid, pattern = ref
    for pid, title in panels.get(uid, []):
        if re.search(pattern, title, re.IGNORECASE):
            q = urllib.parse.urlencode({"viewPanel": pid, "var-campaign": campaign})
            return f"{base.rstrip('/')}/d/{urllib.parse.quote(uid)}?{q}"
    return None


# The report's own session limits, raised per connection above the reader role's defaults
# (docs/store.md "Roles"): the PLT pairs of a 10^6-load campaign sort ~10^6 rows, which must stay
# in memory (a role's temp_file_limit cannot be raised by the role), and take ~20 s on two shared
# cores, more than an interactive statement_timeout allows.
SESSION = {"work_mem": "256MB", "statement_timeout": "10min"}


class ReportError(Exception):
    """One line: why the report cannot be written there."""


@dataclass
class Result:
    """One item's outcome on a campaign: its rows, or why there are none."""

    item: Item
    sql: str  # the query as run, parameters bound (pasteable into psql as the reader)
    columns: list[str]
    rows: list[list[Any]]
    missing: str | None  # why there is no figure, or None

    def dicts(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, r)) for r in self.rows]


def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "campaign"


def campaigns(conn: psycopg.Connection) -> list[str]:
    # v_contexts: from the contexts and a daily rollup, not a scan of every record
    return [r[0] for r in conn.execute("SELECT DISTINCT campaign FROM v_contexts ORDER BY 1")]


# Records and the measurement period of a campaign (v_contexts, from rollups) or of one run.
SQL_EXTENT = f"""SELECT COALESCE(sum(n), 0)::bigint, min(first_started), max(last_started)
FROM (SELECT records AS n, first_started, last_started FROM v_contexts WHERE {report.CAMPAIGN_WIDE}
      UNION ALL
      SELECT count(*), min(started_at), max(started_at) FROM v_results WHERE {report.ONE_RUN}) AS x"""


def run_item(conn: psycopg.Connection, present: set[str], item: Item, campaign: str, run: str | None,
             cache: dict[str, tuple[list[str], list[list[Any]]]] | None = None) -> Result:
    """Run the item's query (once per build: figures that share a query share its rows through
    ``cache``, keyed by the SQL text)."""
    params = {"campaign": campaign, "run": run}
    bound = psycopg.ClientCursor(conn).mogrify(item.sql, params)
    if item.view not in present:
        return Result(item, bound, [], [], f"this store has no view {item.view}")
    if cache is not None and item.sql in cache:
        cols, rows = cache[item.sql]
    else:
        cols, rows = report.fetch(conn, item.sql, campaign, run)
        if cache is not None:
            cache[item.sql] = (cols, rows)
    return Result(item, bound, cols, rows, None if rows else f"No data in this campaign: {item.empty}.")


def _fraction(v: Any) -> bool:
    """A number shown with decimals: a float (or numeric) below 1000 that is not whole."""
    if isinstance(v, (float, Decimal)) and not isinstance(v, bool):
        f = float(v)
        return math.isfinite(f) and abs(f) < 1000 and not f.is_integer()
    return False


def fmt(v: Any, decimals: bool | None = None) -> str:
    """A value as a table shows it: floats from 1000 up without decimals, others with two;
    ``decimals`` False (a column with no fraction below 1000) shows whole floats without."""
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (float, Decimal)):
        f = float(v)
        if decimals is None:
            decimals = _fraction(v)
        return f"{f:.0f}" if abs(f) >= 1000 or not decimals else f"{f:.2f}"
    return str(v)


def html_table(head: list[str], rows: list[list[Any]]) -> str:
    """Rows as an HTML table: a column's numbers below 1000 all with two decimals when any of
    them has a fraction (308.30 beside 300.00, not beside 300), else whole."""
    e = html.escape
    shown = rows[:MAX_TABLE_ROWS]
    decimals = [any(_fraction(r[i]) for r in shown if i < len(r)) for i in range(max(map(len, shown), default=0))]
    out = ["<table><thead><tr>", *(f"<th>{e(h)}</th>" for h in head), "</tr></thead><tbody>"]
    for r in shown:
        out.append("<tr>" + "".join(f"<td>{e(fmt(v, decimals[i]))}</td>" for i, v in enumerate(r)) + "</tr>")
    out.append("</tbody></table>")
    if len(rows) > MAX_TABLE_ROWS:
        out.append(f"<p class='note'>First {MAX_TABLE_ROWS} of {len(rows)} rows; all of them are in the CSV.</p>")
    return "".join(out)


def write_files(d: Path, res: Result) -> list[tuple[str, str]]:
    """The item's CSV, SQL and (for a figure with data) SVG; returns the links to show."""
    name = res.item.slug
    (d / "sql" / f"{name}.sql").write_text(res.sql.rstrip() + ";\n")
    links = [("SQL", f"sql/{name}.sql")]
    if res.missing is None:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(res.columns)
        w.writerows(res.rows)
        (d / "data" / f"{name}.csv").write_text(buf.getvalue())
        links.insert(0, ("data (CSV)", f"data/{name}.csv"))
        if res.item.draw is not None:
            with matplotlib.rc_context(SVG_RC):
                fig = res.item.draw(res.dicts())
                fig.savefig(d / "fig" / f"{name}.svg", format="svg", metadata={"Date": None})
    return links


def section(d: Path, res: Result, panel: str | None = None) -> str:
    e, item = html.escape, res.item
    links = write_files(d, res)
    if panel is not None:
        links.append(("dashboard panel", panel))
    parts = [f"<section id='{e(item.slug)}'><h2>{e(item.title)}</h2>"]
    if res.missing is not None:
        parts.append(f"<p class='nodata'>{e(res.missing)}</p><p class='note'>{e(item.caption)}</p>")
    else:
        if item.draw is not None:
            parts.append(f"<figure><img src='fig/{e(item.slug)}.svg' alt='{e(item.title)}'>"
                         f"<figcaption>{e(item.caption)}</figcaption></figure>")
        else:
            parts.append(f"<p class='note'>{e(item.caption)}</p>")
        if item.table is not None:
            parts.append(html_table(*item.table(res.dicts())))
        elif item.draw is None:
            parts.append(html_table(res.columns, res.rows))
    parts.append("<p class='files'>" + "".join(f"<a href='{e(h)}'>{e(t)}</a>" for t, h in links) + "</p>")
    parts.append(f"<details><summary>The SQL behind it</summary><pre>{e(res.sql.strip())};</pre></details></section>")
    return "".join(parts)


def write_static(d: Path) -> None:
    (d / "style.css").write_text(CSS)
    (d / "favicon.svg").write_text(FAVICON)  # else a browser asks for /favicon.ico: a 404 in its console


def page(title: str, nav: str, body: str) -> str:
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>" + GENERATOR +
            "<meta name='viewport' content='width=device-width,initial-scale=1'>"
            f"<title>{html.escape(title)}</title><link rel='icon' href='favicon.svg'>"
            "<link rel='stylesheet' href='style.css'></head>"
            f"<body><nav>{nav}</nav><h1>{html.escape(title)}</h1>{body}</body></html>\n")


def build_campaign(conn: psycopg.Connection, d: Path, campaign: str, run: str | None, up: str | None = None,
                   grafana: str = GRAFANA_URL) -> Path:
    """Write one campaign's pages into d; returns its index.html. Each figure links to its
    dashboard panel at grafana (the panels of the generated dashboards, found by title)."""
    for sub in ("fig", "data", "sql"):
        shutil.rmtree(d / sub, ignore_errors=True)  # a rebuild leaves no stale figure behind
        (d / sub).mkdir(parents=True)
    write_static(d)
    present = report.views(conn)
    e = html.escape
    nav = (f"<a href='{e(up)}'>All campaigns</a>" if up else "") + "<a href='index.html'>Overview</a>" + "".join(
        f"<a href='seed-{s.key}.html'>{s.key}</a>" for s in SEEDS)
    scope = f"campaign {campaign}" + (f", run {run}" if run else ", all runs")
    counts = conn.execute(SQL_EXTENT, {"campaign": campaign, "run": run}).fetchone()
    panels = panel_ids()
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    intro = (f"<p>{e(scope)}: {counts[0]} records" + (f", measured {counts[1]:%Y-%m-%d %H:%M} – {counts[2]:%Y-%m-%d %H:%M} UTC"
                                                      if counts[0] else "") + f". Built {stamp} from the reader views "
             "(docs/sql.md); every table and figure links its data, the SQL behind it and its dashboard panel. "
             "Every aggregate carries its n; a median its distribution-free 95 % interval (order statistics), a rate "
             "or share its Wilson 95 % interval. Over a whole campaign they are read from the store's rollups "
             "(percentiles within 1 %); over one run from its records.</p>")
    seeds_list = "<ul>" + "".join(f"<li><a href='seed-{s.key}.html'>{e(s.key)}: {e(s.title)}</a> — {e(s.takes)}</li>"
                                  for s in SEEDS) + "</ul>"
    overview = []
    for name, title, view, sql in report.SECTIONS:
        item = Item(name, title, view, sql, f"From {view}; the same table as `dnscamp campaign report`.",
                    empty=f"no {name} rows", panel=OVERVIEW_PANELS.get(name))
        overview.append(section(d, run_item(conn, present, item, campaign, run),
                                panel_url(panels, item.panel, grafana, campaign)))
    (d / "index.html").write_text(page(f"dnscamp report: {campaign}", nav, intro + "<h2>The papers' figures</h2>"
                                       + seeds_list + "".join(overview)))
    cache: dict[str, tuple[list[str], list[list[Any]]]] = {}
    for s in SEEDS:
        body = seed_intro(s) + "".join(section(d, run_item(conn, present, i, campaign, run, cache),
                                               panel_url(panels, i.panel, grafana, campaign)) for i in s.items)
        (d / f"seed-{s.key}.html").write_text(page(f"{s.key}: {s.title}", nav, f"<p>{e(scope)}.</p>" + body))
    return d / "index.html"


def seed_intro(s: Seed) -> str:
    return (f"<p class='note'>Seed paper <code>{html.escape(s.file)}</code> (see the seeds' README). "
            f"{html.escape(s.takes)} Figures are drawn from this campaign's data; the paper's numbers stand beside ours "
            "where the paper gives them.</p>")


def check_scope(conn: psycopg.Connection, campaign: str, run: str | None) -> None:
    """A campaign (and run) the store has no record of is a mistyped name, not an empty report."""
    if campaign not in campaigns(conn):
        raise ReportError(f"report: campaign {campaign!r} has no records in the store")
    if run is not None and conn.execute("SELECT 1 FROM v_results WHERE campaign = %s AND run = %s LIMIT 1",
                                        (campaign, run)).fetchone() is None:
        raise ReportError(f"report: campaign {campaign!r} has no run {run!r} in the store")


def build(url: str, out: Path, campaign: str | None = None, run: str | None = None, grafana: str | None = None) -> Path:
    """Build the site under out (as the role of url, normally the reader); returns the page to
    open: out/index.html. Without a campaign, one sub-site per campaign in the store. out must
    be empty, missing, or an earlier report (whose fig/, data/ and sql/ are replaced)."""
    index = out / "index.html"
    if out.exists() and any(out.iterdir()) and not (index.is_file() and GENERATOR in index.read_text(errors="replace")):
        raise ReportError(f"{out}: not empty and not a dnscamp report (its fig/, data/ and sql/ would be replaced)")
    grafana = grafana or os.environ.get("DNSCAMP_GRAFANA_ROOT_URL") or GRAFANA_URL
    with psycopg.connect(url) as conn:
        for name, value in SESSION.items():
            conn.execute(psycopg.sql.SQL("SELECT set_config({}, {}, false)").format(name, value))
        if campaign is not None:
            check_scope(conn, campaign, run)  # before anything is written
        out.mkdir(parents=True, exist_ok=True)
        if campaign is not None:
            return build_campaign(conn, out, campaign, run, grafana=grafana)
        items, used = [], set()
        for c in campaigns(conn):
            sub = slug(c)
            while sub in used:  # two names with the same path-safe form ("a/b", "a-b")
                sub += "_"
            used.add(sub)
            build_campaign(conn, out / sub, c, run, up="../index.html", grafana=grafana)
            items.append(f"<li><a href='{html.escape(sub)}/index.html'>{html.escape(c)}</a></li>")
    write_static(out)
    body = ("<ul>" + "".join(items) + "</ul>") if items else "<p class='nodata'>The store holds no campaign yet.</p>"
    (out / "index.html").write_text(page("dnscamp report: campaigns", "<a href='index.html'>Campaigns</a>", body))
    return out / "index.html"
