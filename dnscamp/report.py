"""The campaign report: read from the SQL views (never raw JSON) as the read-only role."""

from __future__ import annotations

from typing import Any

import psycopg
from rich.console import Console
from rich.table import Table

# Each section: (title, view it needs, SQL with %(campaign)s and %(run)s).
SECTIONS: list[tuple[str, str, str]] = [
    (
        "Records by kind and status",
        "v_results",
        """SELECT kind, network_profile AS profile, status, count(*) AS n
           FROM v_results WHERE campaign = %(campaign)s AND (%(run)s::text IS NULL OR run = %(run)s)
           GROUP BY 1, 2, 3 ORDER BY 1, 2, 3""",
    ),
    (
        "ping: RTT (ms) by profile and target",
        "v_ping",
        """SELECT network_profile AS profile, target, protocol, count(*) AS records,
                  sum(sent) AS sent, sum(received) AS received,
                  round(percentile_cont(0.5) WITHIN GROUP (ORDER BY rtt_median_ms)::numeric, 3) AS rtt_p50_ms,
                  round(min(rtt_min_ms)::numeric, 3) AS rtt_min_ms
           FROM v_ping WHERE campaign = %(campaign)s AND (%(run)s::text IS NULL OR run = %(run)s)
           GROUP BY 1, 2, 3 ORDER BY 1, 2, 3""",
    ),
]


def _views(conn: psycopg.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT table_name FROM information_schema.views")}


def gather(url: str, campaign: str, run: str | None = None) -> list[dict[str, Any]]:
    out = []
    with psycopg.connect(url) as conn:
        views = _views(conn)
        for title, view, sql in SECTIONS:
            if view not in views:
                continue
            cur = conn.execute(sql, {"campaign": campaign, "run": run})
            cols = [d.name for d in cur.description]
            out.append({"title": title, "columns": cols, "rows": [list(r) for r in cur.fetchall()]})
    return out


def render(sections: list[dict[str, Any]], console: Console | None = None) -> None:
    console = console or Console()
    for s in sections:
        t = Table(title=s["title"], title_justify="left")
        for c in s["columns"]:
            t.add_column(c)
        for r in s["rows"]:
            t.add_row(*("" if v is None else str(v) for v in r))
        console.print(t)
