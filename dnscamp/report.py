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

# Scale: a campaign of 10^7 records cannot be read record by record for every table (an exact
# percentile over them takes seconds to minutes per figure, docs/benchmarks.md). A whole
# campaign is read from the rollups ingest maintains (counts exact; percentiles from 2 % log
# buckets, within 1 % of percentile_disc); one run (--run), which no rollup keeps, from that
# run's records put into the same buckets by the rollups' own function (dnscamp_hist_bucket16).
# Each query has both branches and the bound parameters leave one of them: the same columns and
# accuracy either way, from one definition.
CAMPAIGN_WIDE = "campaign = %(campaign)s AND %(run)s::text IS NULL"
ONE_RUN = "campaign = %(campaign)s AND run = %(run)s"
# dns_conn_daily's connection mode, from a record's columns (docs/store.md "Rollups")
DNS_CONNECTION = "CASE WHEN connection_reused THEN 'reuse' WHEN resumed THEN 'resume' ELSE 'fresh' END"


def _keys(n: int) -> str:
    return ", ".join(str(i + 1) for i in range(n))


def dns_hist(measure: str, groups: list[str], where: str = "TRUE") -> str:
    """Rows (groups..., bucket, n): the histogram of ``measure`` (one of v_dns_conn_daily_hist's
    measures) over the ok dns_query records, per ``groups`` (select expressions over the columns
    the rollup and the records share: vantage_id, network_profile, resolver, transport,
    connection) and restricted by ``where`` (over the same columns)."""
    g = ", ".join(groups)
    return f"""  SELECT {g}, bucket, sum(n) AS n
  FROM v_dns_conn_daily_hist
  WHERE {CAMPAIGN_WIDE} AND measure = '{measure}' AND {where}
  GROUP BY {_keys(len(groups) + 1)}
  UNION ALL
  SELECT {g}, dnscamp_hist_bucket16({measure})::int AS bucket, count(*) AS n
  FROM (SELECT *, {DNS_CONNECTION} AS connection FROM v_dns_query
        WHERE {ONE_RUN} AND status = 'ok' AND {measure} IS NOT NULL) AS r
  WHERE {where}
  GROUP BY {_keys(len(groups) + 1)}"""


def dns_counts(groups: list[str], where: str = "TRUE") -> str:
    """Rows (groups..., n, failures, packets): dns_query records, those whose status is not ok,
    and the sum of the ok records' total_packets, per ``groups`` (as dns_hist)."""
    g = ", ".join(groups)
    return f"""  SELECT {g}, sum(n) AS n, sum(failures) AS failures, sum(total_packets) AS packets
  FROM v_dns_conn_daily
  WHERE {CAMPAIGN_WIDE} AND {where}
  GROUP BY {_keys(len(groups))}
  UNION ALL
  SELECT {g}, count(*), count(*) FILTER (WHERE status <> 'ok'), sum(total_packets) FILTER (WHERE status = 'ok')
  FROM (SELECT *, {DNS_CONNECTION} AS connection FROM v_dns_query WHERE {ONE_RUN}) AS r
  WHERE {where}
  GROUP BY {_keys(len(groups))}"""


def page_hist(groups: list[str], where: str = "TRUE", per_page: bool = False) -> str:
    """Rows (groups..., bucket, n): the histogram of plt_ms over the successful page loads per
    ``groups`` (expressions over network_profile, browser, dns_mode, dns_transport, http, and
    url with ``per_page``), restricted by ``where``."""
    g = ", ".join(groups)
    rollup = ("v_page_load_url_daily_hist" if per_page else "v_page_load_daily_hist")
    ok = "TRUE" if per_page else "status = 'ok'"  # the per-page rollup holds successful loads only
    return f"""  SELECT {g}, bucket, sum(n) AS n
  FROM {rollup}
  WHERE {CAMPAIGN_WIDE} AND {ok} AND {where}
  GROUP BY {_keys(len(groups) + 1)}
  UNION ALL
  SELECT {g}, dnscamp_hist_bucket16(plt_ms)::int AS bucket, count(*) AS n
  FROM v_page_load
  WHERE {ONE_RUN} AND status = 'ok' AND plt_ms IS NOT NULL AND {where}
  GROUP BY {_keys(len(groups) + 1)}"""


def page_counts(groups: list[str], where: str = "TRUE") -> str:
    """Rows (groups..., n, ok): page loads and the successful ones per ``groups`` (as page_hist)."""
    g = ", ".join(groups)
    return f"""  SELECT {g}, sum(n) AS n, sum(n) FILTER (WHERE status = 'ok') AS ok
  FROM v_page_load_daily
  WHERE {CAMPAIGN_WIDE} AND {where}
  GROUP BY {_keys(len(groups))}
  UNION ALL
  SELECT {g}, count(*), count(*) FILTER (WHERE status = 'ok')
  FROM v_page_load
  WHERE {ONE_RUN} AND {where}
  GROUP BY {_keys(len(groups))}"""


def hist_stats(keys: list[str], name: str, quantiles: tuple[float, ...] = (0.9, 0.99), extremes: bool = False,
               source: str = "h") -> str:
    """Per ``keys``, from the rows (keys..., bucket, n) of ``source``: n (values), the median
    with its distribution-free 95 % interval (the order statistics of ranks
    dnscamp_median_ci_rank(n) and n + 1 - that, read from the summed histogram: docs/sql.md
    "Intervals") and further quantiles, as columns n, {name}_p50, {name}_p50_lo, {name}_p50_hi,
    {name}_p90, ... (and with ``extremes`` {name}_min, {name}_max). Every value is a bucket's
    middle: within 1 % of the exact order statistic."""
    k = ", ".join(keys)
    more = "".join(f",\n       dnscamp_hist_quantile(b, c, {q}) AS {name}_p{round(q * 100)}" for q in quantiles)
    if extremes:
        more += f",\n       dnscamp_hist_rank(b, c, 1) AS {name}_min,\n       dnscamp_hist_rank(b, c, n) AS {name}_max"
    return f"""SELECT {k}, n,
       dnscamp_hist_quantile(b, c, 0.5) AS {name}_p50,
       dnscamp_hist_rank(b, c, dnscamp_median_ci_rank(n)) AS {name}_p50_lo,
       dnscamp_hist_rank(b, c, n + 1 - dnscamp_median_ci_rank(n)) AS {name}_p50_hi{more}
FROM (SELECT {k}, sum(n)::bigint AS n, array_agg(bucket ORDER BY bucket) AS b, array_agg(n ORDER BY bucket) AS c
      FROM (SELECT {k}, bucket, sum(n) AS n FROM {source} GROUP BY {k}, bucket) AS s
      GROUP BY {k}) AS a"""


def p50_with_interval_sql(value: str, n: str, name: str) -> str:
    """Select items: the median of ``value`` with its distribution-free 95 % interval
    (percentile_disc at dnscamp_median_ci_q_lo / _q_hi of ``n``, the group's count of values,
    a grouped column: an aggregate's fraction cannot be another aggregate). For the small
    per-probe and ping views only."""
    return (f"percentile_disc(0.5) WITHIN GROUP (ORDER BY {value}) AS {name}_p50,\n"
            f"       percentile_disc(dnscamp_median_ci_q_lo({n})) WITHIN GROUP (ORDER BY {value}) AS {name}_p50_lo,\n"
            f"       percentile_disc(dnscamp_median_ci_q_hi({n})) WITHIN GROUP (ORDER BY {value}) AS {name}_p50_hi")


def wilson(k: str, n: str, name: str) -> str:
    """Select items: the rate k / n with its Wilson 95 % interval (dnscamp_wilson_lo / _hi)."""
    return (f"({k})::float8 / NULLIF({n}, 0) AS {name}, dnscamp_wilson_lo(({k})::bigint, ({n})::bigint) AS {name}_lo, "
            f"dnscamp_wilson_hi(({k})::bigint, ({n})::bigint) AS {name}_hi")


DNS_GROUPS = ["COALESCE(network_profile, '(none)') AS profile", "resolver", "transport", "connection"]
PAGE_GROUPS = ["COALESCE(network_profile, '(none)') AS profile", "browser", "dns_mode", "COALESCE(http, '') AS http"]
DNS_KEYS = ["profile", "resolver", "transport", "connection"]
PAGE_KEYS = ["profile", "browser", "dns_mode", "http"]

# Each section: (slug, title, view it needs, SQL with %(campaign)s and %(run)s). The static site
# shows the same sections as HTML tables (dnscamp/site/build.py), from these definitions. Every
# aggregate carries its n; medians their 95 % interval (_lo, _hi), rates and shares their
# Wilson interval.
SECTIONS: list[tuple[str, str, str, str]] = [
    (
        "results",
        "Records by kind and status",
        "v_failures",
        """SELECT kind, profile, status, n, """ + wilson("n", "of_n", "share") + """, of_n
           FROM (SELECT kind, profile, status, n, sum(n) OVER (PARTITION BY kind, profile) AS of_n
                 FROM (SELECT kind, profile, status, sum(n)::bigint AS n
                       FROM (SELECT kind, network_profile AS profile, status, n FROM v_failures WHERE """ + CAMPAIGN_WIDE + """
                             UNION ALL
                             SELECT kind, network_profile, status, 1 FROM v_results WHERE """ + ONE_RUN + """) AS x
                       GROUP BY 1, 2, 3) AS y) AS z
           ORDER BY 1, 2, 3""",
    ),
    (
        "ping",
        "ping: RTT (ms) by profile and target (median of the records' median RTTs)",
        "v_ping",
        """SELECT profile, target, protocol, records, sent, received, """ + wilson("sent - received", "sent", "loss") + """,
                  rtt_ms_p50, rtt_ms_p50_lo, rtt_ms_p50_hi, rtt_min_ms
           FROM (SELECT network_profile AS profile, target, protocol, count(*) AS records,
                        sum(sent) AS sent, sum(received) AS received,
                        """ + p50_with_interval_sql("rtt_median_ms", "nn", "rtt_ms") + """,
                        min(rtt_min_ms) AS rtt_min_ms
                 FROM (SELECT *, count(rtt_median_ms) OVER (PARTITION BY network_profile, target, protocol) AS nn
                       FROM v_ping WHERE """ + RUN_FILTER + """) AS p
                 GROUP BY network_profile, target, protocol, nn) AS g
           ORDER BY 1, 2, 3""",
    ),
    (
        "dns_query",
        "dns_query: resolution time (total_ms, ok queries) by profile, resolver, transport and connection",
        "v_dns_conn_daily_hist",
        """WITH h AS (
""" + dns_hist("total_ms", DNS_GROUPS) + """
), k AS (
""" + dns_counts(DNS_GROUPS) + """
), cs AS (SELECT profile, resolver, transport, connection, sum(n)::bigint AS queries, sum(failures)::bigint AS failures
          FROM k GROUP BY 1, 2, 3, 4), t AS (
""" + hist_stats(DNS_KEYS, "total_ms") + """
)
SELECT cs.profile, cs.resolver, cs.transport, cs.connection, cs.queries, cs.failures,
       """ + wilson("cs.failures", "cs.queries", "failure_rate") + """,
       t.n AS timed, t.total_ms_p50, t.total_ms_p50_lo, t.total_ms_p50_hi, t.total_ms_p90, t.total_ms_p99
FROM cs LEFT JOIN t USING (profile, resolver, transport, connection)
ORDER BY 1, 2, 3, 4""",
    ),
    (
        "page_load",
        "page_load: page-load time (onLoad, ms, successful loads) by profile, browser, DNS mode, HTTP version",
        "v_page_load_daily_hist",
        """WITH h AS (
""" + page_hist(PAGE_GROUPS) + """
), k AS (
""" + page_counts(PAGE_GROUPS) + """
), cs AS (SELECT profile, browser, dns_mode, http, sum(n)::bigint AS loads, sum(ok)::bigint AS ok FROM k GROUP BY 1, 2, 3, 4),
t AS (
""" + hist_stats(PAGE_KEYS, "plt_ms") + """
)
SELECT cs.profile, cs.browser, cs.dns_mode, cs.http, cs.loads, """ + wilson("cs.ok", "cs.loads", "success") + """,
       t.n AS timed, t.plt_ms_p50, t.plt_ms_p50_lo, t.plt_ms_p50_hi, t.plt_ms_p90, t.plt_ms_p99
FROM cs LEFT JOIN t USING (profile, browser, dns_mode, http)
ORDER BY 1, 2, 3, 4""",
    ),
    (
        "quicsocks_savings",
        "QuicSocks: per-probe savings of a proxy next to the resolver (001_3c494309ab66be23.txt Table I)",
        "v_quicsocks_savings",
        """SELECT count(*) AS probes, count(*) FILTER (WHERE isp_resolver) AS isp_resolver_probes,
                  """ + p50_with_interval_sql("rtt_dns_ms", "n_dns", "rtt_dns_ms") + """,
                  """ + p50_with_interval_sql("saving_ms", "n_saving", "saving_ms") + """,
                  n_saving AS savings,
                  """ + wilson("count(*) FILTER (WHERE saving_ms >= 10)", "n_saving", "share_saving_10ms") + """,
                  """ + wilson("count(*) FILTER (WHERE saving_retry_ms >= 10)", "count(saving_retry_ms)",
                               "share_saving_10ms_retry") + """
           FROM (SELECT *, count(rtt_dns_ms) OVER () AS n_dns, count(saving_ms) OVER () AS n_saving
                 FROM v_quicsocks_savings WHERE """ + ATLAS_FILTER + """) AS s
           GROUP BY n_dns, n_saving""",
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
        for _, title, view, sql in SECTIONS:
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
