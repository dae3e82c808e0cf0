"""The campaign report: read from the SQL views (never raw JSON) as the read-only role."""

from __future__ import annotations

import sys
from typing import Any

import psycopg
from rich.console import Console
from rich.table import Table

# Where clauses every report query uses (the terminal report here, the static site in
# dnscamp/site): the records of one campaign, optionally one run. The atlas kind labels its
# Atlas campaign as "<campaign>/<run>" (dnscamp/atlas_offline.py), so the Atlas views match on that.
RUN_FILTER = "campaign = %(campaign)s AND (%(run)s::text IS NULL OR run = %(run)s)"
# (starts_with, not LIKE: a "_" or "%" in a campaign name is not a wildcard)
ATLAS_FILTER = ("(campaign = %(campaign)s || '/' || %(run)s"
                " OR (%(run)s::text IS NULL AND starts_with(campaign, %(campaign)s || '/')))")

# Each section: (title, view it needs, SQL with %(campaign)s and %(run)s). The static site
# shows the same sections as HTML tables (dnscamp/site/pages.py), from these definitions.
SECTIONS: list[tuple[str, str, str]] = [
    (
        "Records by kind and status",
        "v_results",
        """SELECT kind, network_profile AS profile, status, count(*) AS n
           FROM v_results WHERE """ + RUN_FILTER + """
           GROUP BY 1, 2, 3 ORDER BY 1, 2, 3""",
    ),
    (
        "ping: RTT (ms) by profile and target",
        "v_ping",
        """SELECT network_profile AS profile, target, protocol, count(*) AS records,
                  sum(sent) AS sent, sum(received) AS received,
                  round(percentile_cont(0.5) WITHIN GROUP (ORDER BY rtt_median_ms)::numeric, 3) AS rtt_p50_ms,
                  round(min(rtt_min_ms)::numeric, 3) AS rtt_min_ms
           FROM v_ping WHERE """ + RUN_FILTER + """
           GROUP BY 1, 2, 3 ORDER BY 1, 2, 3""",
    ),
    (
        "dns_query: exchange time (ms) and multiples of the access RTT, by profile, transport, policy",
        "v_dns_query",
        """SELECT network_profile AS profile, resolver, transport, policy, count(*) AS n,
                  count(*) FILTER (WHERE status = 'ok') AS ok,
                  round(percentile_cont(0.5) WITHIN GROUP (ORDER BY total_ms)::numeric, 2) AS total_p50_ms,
                  round(percentile_cont(0.9) WITHIN GROUP (ORDER BY total_ms)::numeric, 2) AS total_p90_ms,
                  round(percentile_cont(0.5) WITHIN GROUP (ORDER BY total_rtt_multiple)::numeric, 2) AS rtt_multiple_p50,
                  round(percentile_cont(0.5) WITHIN GROUP (ORDER BY total_bytes)::numeric, 0) AS bytes_p50
           FROM v_dns_query WHERE """ + RUN_FILTER + """
           GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4""",
    ),
    (
        "page_load: page-load time (onLoad, ms) by profile, browser, DNS mode, HTTP version",
        "v_page_load",
        """SELECT network_profile AS profile, browser, dns_mode, http, count(*) AS n,
                  round(avg((status = 'ok')::int)::numeric, 2) AS success,
                  round(percentile_cont(0.5) WITHIN GROUP (ORDER BY plt_ms)::numeric, 1) AS plt_p50_ms,
                  round(percentile_cont(0.9) WITHIN GROUP (ORDER BY plt_ms)::numeric, 1) AS plt_p90_ms,
                  round(avg(dns_lookups)::numeric, 1) AS dns_lookups,
                  bool_and(dns_transport_verified) AS transport_verified
           FROM v_page_load WHERE """ + RUN_FILTER + """
           GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4""",
    ),
    (
        "QuicSocks: per-probe savings of a proxy next to the resolver (001_3c494309ab66be23.txt Table I)",
        "v_quicsocks_savings",
        """SELECT count(*) AS probes,
                  count(*) FILTER (WHERE isp_resolver) AS isp_resolver_probes,
                  round(percentile_cont(0.5) WITHIN GROUP (ORDER BY rtt_dns_ms)::numeric, 2) AS rtt_dns_p50_ms,
                  round(percentile_cont(0.5) WITHIN GROUP (ORDER BY saving_ms)::numeric, 2) AS saving_p50_ms,
                  round(avg((saving_ms >= 10)::int)::numeric, 2) AS share_saving_10ms,
                  round(avg((saving_retry_ms >= 10)::int)::numeric, 2) AS share_saving_10ms_retry
           FROM v_quicsocks_savings WHERE """ + ATLAS_FILTER,
    ),
]


def views(conn: psycopg.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT table_name FROM information_schema.views")}


def fetch(conn: psycopg.Connection, sql: str, campaign: str, run: str | None) -> tuple[list[str], list[list[Any]]]:
    """Run one report query (its %(campaign)s / %(run)s bound): (column names, rows)."""
    cur = conn.execute(sql, {"campaign": campaign, "run": run})
    return [d.name for d in cur.description], [list(r) for r in cur.fetchall()]


def gather(url: str, campaign: str, run: str | None = None) -> list[dict[str, Any]]:
    out = []
    with psycopg.connect(url) as conn:
        present = views(conn)
        for title, view, sql in SECTIONS:
            if view not in present:
                continue
            cols, rows = fetch(conn, sql, campaign, run)
            out.append({"title": title, "columns": cols, "rows": rows})
    return out


def render(sections: list[dict[str, Any]], console: Console | None = None) -> None:
    # Wide tables even when piped (make demo's output is read in logs, not only on a tty).
    console = console or Console(width=None if sys.stdout.isatty() else 160)
    for s in sections:
        t = Table(title=s["title"], title_justify="left")
        for c in s["columns"]:
            t.add_column(c)
        for r in s["rows"]:
            t.add_row(*("" if v is None else str(v) for v in r))
        console.print(t)
