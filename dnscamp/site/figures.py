"""The seeds' figures and tables, drawn from our views: one Item per figure or table, its SQL
(the only definition of that query), how to draw it (matplotlib, SVG) and, where the paper
gives numbers, the paper's number beside ours (cited by seed file and section).

Seeds: the seed papers' README (their files are cited by name). Every query reads the reader views with the report's
filters and scopes (dnscamp/report.py): a whole campaign from the rollups, one run from its records in the
rollups' buckets; only the per-run page-load pairs (which no rollup keeps) and the per-probe Atlas rows are read
record by record. Every aggregate shown carries its n; medians their distribution-free 95 % interval and rates
and shares their Wilson interval, through the store's functions (docs/sql.md "Intervals")."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from matplotlib.figure import Figure
from matplotlib.ticker import ScalarFormatter

from dnscamp.report import ATLAS_FILTER, RUN_FILTER, dns_counts, dns_hist, p50_with_interval_sql, hist_stats, page_counts, page_hist, wilson

Rows = list[dict[str, Any]]
Table = tuple[list[str], list[list[Any]]]


@dataclass(frozen=True)
class Item:
    slug: str
    title: str
    view: str  # the view it needs (an older store without it: "no data", not an error)
    sql: str
    caption: str
    draw: Callable[[Rows], Figure] | None = None  # None: the item is a table
    table: Callable[[Rows], Table] | None = None  # ours beside the paper's (default: the rows)
    empty: str = "no rows"  # what is missing when the query returns nothing
    # The dashboard panel that shows the same thing live: (dashboard uid, a regular expression
    # its title matches). The panel's id is read from the generated dashboard JSON when the
    # report is built (dnscamp/site/build.py panel_links), so a regenerated dashboard moves no link.
    panel: tuple[str, str] | None = None


@dataclass(frozen=True)
class Seed:
    key: str  # "000"
    file: str  # the seed paper's file name
    title: str
    takes: str  # what this page shows from it
    items: list[Item] = field(default_factory=list)


# --- helpers ---------------------------------------------------------------------------------

TRANSPORT_ORDER = ["system", "do53", "dot", "doh", "doh3", "doq"]


def _profile_order() -> list[str]:
    # The testbed's profiles in their file's order (by access delay): how the papers sort
    # access technologies (000 Fig. 8 rows sorted by delay).
    try:
        from testbed.profiles import load_profiles

        return list(load_profiles())
    except Exception:  # noqa: BLE001 - ordering only: a store read without the testbed package
        return []


PROFILE_ORDER = _profile_order()


def _key(order: list[str]) -> Callable[[Any], tuple[int, str]]:
    return lambda v: (order.index(v) if v in order else len(order), str(v))


# A CDF over millions of rows is drawn from at most ECDF_POINTS + 1 points per series, read
# in SQL: the rows at which the empirical CDF crosses each 1 / ECDF_POINTS step (and the
# first and last), so a figure and its CSV stay small whatever the campaign's size and the
# drawn curve is within 1 / ECDF_POINTS (0.5 %) of the exact one; a series of fewer rows is
# drawn exactly.
ECDF_POINTS = 200


def ecdf_sql(source: str, groups: str, value: str, medians: bool = False) -> str:
    """The sampled empirical CDF of ``value`` per ``groups`` over the rows of ``source`` (a
    query): columns groups..., n (rows in the group), value, cdf (fraction of rows <= value).
    With ``medians``, every row also carries its group's median (the order statistic of rank
    ceil(n/2), as percentile_disc(0.5)) and the median's distribution-free 95 % interval (ranks
    dnscamp_median_ci_rank(n) and n + 1 - that): {value}_p50, _p50_lo, _p50_hi, read from the
    same sort as the CDF, so a figure and its table cost one pass over the rows."""
    extra = (f""",
         max({value}) FILTER (WHERE i = (n + 1) / 2) OVER g AS {value}_p50,
         max({value}) FILTER (WHERE i = dnscamp_median_ci_rank(n)) OVER g AS {value}_p50_lo,
         max({value}) FILTER (WHERE i = n + 1 - dnscamp_median_ci_rank(n)) OVER g AS {value}_p50_hi""" if medians else "")
    stats_cols = f", {value}_p50, {value}_p50_lo, {value}_p50_hi" if medians else ""
    return f"""WITH s AS (
{source}
), x AS (
  SELECT s.*, row_number() OVER (PARTITION BY {groups} ORDER BY {value}) AS i,
         count(*) OVER (PARTITION BY {groups}) AS n
  FROM s
), y AS (
  SELECT x.*{extra}
  FROM x
  WINDOW g AS (PARTITION BY {groups})
)
SELECT {groups}, n, {value}, i * 1.0 / n AS cdf{stats_cols}
FROM y
WHERE i = 1 OR i = n OR i * {ECDF_POINTS} / n > (i - 1) * {ECDF_POINTS} / n
ORDER BY {groups}, i"""


def hist_cdf(source: str, keys: str, value: str) -> str:
    """The empirical CDF per ``keys`` from a histogram (rows keys..., bucket, n of ``source``, a
    query: dnscamp.report.dns_hist / page_hist): one point per non-empty bucket at its upper
    edge, where the fraction of values below it is exact; between two points the values lie
    within the bucket's 2 %. Columns keys..., n (values in the series), value, cdf."""
    return f"""WITH h AS (
{source}
), s AS (
  SELECT {keys}, bucket, sum(n) AS c FROM h GROUP BY {keys}, bucket
)
SELECT {keys}, (sum(c) OVER (PARTITION BY {keys}))::bigint AS n, 0.001 * power(1.02::float8, bucket) AS {value},
       (sum(c) OVER (PARTITION BY {keys} ORDER BY bucket) / sum(c) OVER (PARTITION BY {keys}))::float8 AS cdf
FROM s
ORDER BY {keys}, bucket"""


def interval(lo: Any, hi: Any, fmt: str = "{:.2f}") -> str | None:
    """A 95 % interval as a table shows it; None (a dash) when n is too small for one."""
    if lo is None or hi is None:
        return None
    return f"{fmt.format(float(lo))}–{fmt.format(float(hi))}"


def pct_interval(v: Any, lo: Any, hi: Any) -> str | None:
    """A share with its Wilson interval: "36.7% (32.4–41.2%)"."""
    if v is None:
        return None
    return f"{100 * float(v):.1f}% ({100 * float(lo):.1f}–{100 * float(hi):.1f}%)"


def ecdf_points(xs: list[Any]) -> tuple[int, list[tuple[float, float]]]:
    """(n, [(value, cdf)]) of raw values: the exact empirical CDF (for per-probe series)."""
    v = sorted(float(x) for x in xs if x is not None)
    return len(v), [(x, (i + 1) / len(v)) for i, x in enumerate(v)]


def ecdf_series(rows: Rows, by: str, value: str) -> dict[Any, tuple[int, list[tuple[float, float]]]]:
    """{group: (n, points)} from the rows of an ecdf_sql query."""
    out: dict[Any, tuple[int, list[tuple[float, float]]]] = {}
    for r in rows:
        n, pts = out.setdefault(r[by], (int(r["n"]), []))
        pts.append((float(r[value]), float(r["cdf"])))
    return out


def _cdf(ax: Any, series: dict[Any, tuple[int, list[tuple[float, float]]]], xlabel: str, logx: bool = False) -> None:
    for label, (n, pts) in series.items():
        if not pts:
            continue
        ax.step([pts[0][0]] + [x for x, _ in pts], [0.0] + [y for _, y in pts], where="post", label=f"{label} (n={n})")
    # The x axis ends at the largest 99th percentile of the series: a long tail (a few
    # retransmissions of seconds) would otherwise squeeze every curve against the left edge.
    p99 = [next(x for x, y in pts if y >= 0.99) for _, pts in series.values() if pts]
    lo = min(x for _, pts in series.values() for x, _ in pts[:1])
    values = [x for _, pts in series.values() for x, _ in pts if x > 0]
    if logx and values and max(values) / min(values) > 20:  # a narrow range reads better on a linear axis
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(ScalarFormatter())
    if p99 and max(p99) > lo:
        pad = 0.05 * (max(p99) - lo)
        ax.set_xlim(lo - pad if ax.get_xscale() == "linear" else None, max(p99) + pad)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("CDF")
    ax.set_ylim(0, 1.02)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")


def _panels(n: int, width: float = 4.2, height: float = 3.2) -> tuple[Figure, list[Any]]:
    fig = Figure(figsize=(min(n, 3) * width, ((n + 2) // 3) * height), layout="constrained")
    axes = fig.subplots((n + 2) // 3, min(n, 3), squeeze=False).ravel().tolist()
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes[:n]


def _by_profile_cdf(rows: Rows, value: str, xlabel: str, logx: bool = False, by: str = "transport") -> Figure:
    profiles = sorted({r["profile"] for r in rows}, key=_key(PROFILE_ORDER))
    fig, axes = _panels(len(profiles))
    for ax, p in zip(axes, profiles):
        g = ecdf_series([r for r in rows if r["profile"] == p], by, value)
        _cdf(ax, {t: g[t] for t in sorted(g, key=lambda k: (_key(TRANSPORT_ORDER)(k.split(":")[0]), k))}, xlabel, logx)
        ax.set_title(f"profile {p}")
    return fig


def page_name(url: str) -> str:
    u = urlsplit(url)
    return (u.hostname or url).removeprefix("www.") + (u.path if u.path not in ("", "/") else "")


def _grid(n: int, m: int) -> list[list[float]]:
    return [[math.nan] * m for _ in range(n)]


def _heat(ax: Any, m: list[list[float]], rows: list[str], cols: list[str], cmap: str, vmin: float, vmax: float,
          fmt: str, color: Callable[[float], str], counts: list[list[str]] | None = None) -> Any:
    """A heat map of vector cells (pcolormesh: imshow would embed a raster image in the SVG),
    first row at the top, each cell annotated with its value and, given ``counts``, the n
    behind it on a second line."""
    im = ax.pcolormesh(m, cmap=cmap, vmin=vmin, vmax=vmax)
    ax.set_xticks([j + 0.5 for j in range(len(cols))], cols)
    ax.set_yticks([i + 0.5 for i in range(len(rows))], rows)
    ax.invert_yaxis()
    for i, row in enumerate(m):
        for j, v in enumerate(row):
            if not math.isnan(v):
                text = fmt.format(v) + (f"\n{counts[i][j]}" if counts is not None and counts[i][j] else "")
                ax.text(j + 0.5, i + 0.5, text, ha="center", va="center", color=color(v), fontsize="x-small")
    return im


def _colorbar(fig: Figure, im: Any, ax: Any, label: str) -> None:
    cb = fig.colorbar(im, ax=ax, label=label)
    cb.solids.set_rasterized(False)  # matplotlib rasterizes a colorbar's many cells: keep the SVG vector
    cb.solids.set_edgecolor("face")  # and without seams between the cells


# --- 000: Kosek et al., DoQ and H3 0-RTT coalescing ----------------------------------------

# 000_6647a8606a2226e0.txt §IV-B ("On DNS Overheads"): expected round trips of a whole DNS
# exchange on a fresh connection (DoUDP 1, DoQ 2, DoH over TLS 1.3 3) and the measured
# medians over all access technologies (Fig. 5), and per technology where the text gives them
# (Fig. 6 fiber and 4G, the DSL paragraph).
PAPER_000_EXPECTED = {"do53": 1, "doq": 2, "doh": 3}
PAPER_000_MEDIAN = {"all": {"do53": 1.03, "doq": 2.50, "doh": 3.43},
                    "fiber": {"doq": 2.78, "doh": 3.71},
                    "4g": {"doq": 2.13, "doh": 3.12},
                    "dsl": {"doq": 2.94, "doh": 3.51}}

# A new connection: every query that did not reuse one (fresh or resumed; the rollups' connection).
NEW_CONNECTION = "connection <> 'reuse'"

SQL_RTT_MULTIPLES = f"""WITH p AS (
{dns_hist("total_rtt_multiple", ["COALESCE(network_profile, '(none)') AS profile", "transport"], NEW_CONNECTION)}
), h AS (
  SELECT profile, transport, bucket, n FROM p
  UNION ALL
  SELECT 'all', transport, bucket, n FROM p
)
{hist_stats(["profile", "transport"], "rtt_multiple", (), extremes=True)}
ORDER BY 1, 2"""


def draw_rtt_heatmap(rows: Rows) -> Figure:
    profiles = sorted({r["profile"] for r in rows}, key=_key(["all"] + PROFILE_ORDER))
    transports = sorted({r["transport"] for r in rows}, key=_key(TRANSPORT_ORDER))
    m = _grid(len(profiles), len(transports))
    counts = [[""] * len(transports) for _ in profiles]
    for r in rows:
        i, j = profiles.index(r["profile"]), transports.index(r["transport"])
        m[i][j] = float(r["rtt_multiple_p50"])
        counts[i][j] = f"n={r['n']}" if r.get("n") is not None else ""
    fig = Figure(figsize=(1.2 * len(transports) + 2.5, 0.55 * len(profiles) + 1.6), layout="constrained")
    ax = fig.subplots()
    vmax = max([3.5] + [v for row in m for v in row if not math.isnan(v)])
    im = _heat(ax, m, profiles, transports, "viridis", 1, vmax, "{:.2f}", lambda v: "white" if v < 2.5 else "black",
               counts)
    _colorbar(fig, im, ax, "median exchange time / access RTT")
    ax.set_title("DNS exchange on a fresh connection, in access RTTs")
    return fig


def table_rtt_multiples(rows: Rows) -> Table:
    head = ["profile", "transport", "n", "ours: median", "ours: 95 % interval", "ours: min–max", "paper: expected",
            "paper: median"]
    out = []
    for r in sorted(rows, key=lambda r: (_key(["all"] + PROFILE_ORDER)(r["profile"]), _key(TRANSPORT_ORDER)(r["transport"]))):
        paper = PAPER_000_MEDIAN.get(r["profile"], {}).get(r["transport"])
        out.append([r["profile"], r["transport"], r["n"], r["rtt_multiple_p50"],
                    interval(r.get("rtt_multiple_p50_lo"), r.get("rtt_multiple_p50_hi")),
                    f"{r['rtt_multiple_min']:.2f}–{r['rtt_multiple_max']:.2f}",
                    PAPER_000_EXPECTED.get(r["transport"]), paper])
    return head, out


SQL_RTT_MULTIPLE_CDF = hist_cdf(dns_hist("total_rtt_multiple", ["transport"], NEW_CONNECTION), "transport", "rtt_multiple")


def draw_rtt_multiple_cdf(rows: Rows) -> Figure:
    fig = Figure(figsize=(6.4, 4.0), layout="constrained")
    ax = fig.subplots()
    g = ecdf_series(rows, "transport", "rtt_multiple")
    _cdf(ax, {t: g[t] for t in sorted(g, key=_key(TRANSPORT_ORDER))}, "DNS exchange time / access RTT")
    for x in (1, 2, 3):
        ax.axvline(x, color="grey", lw=0.6, ls=":")
    ax.set_title("All profiles, fresh connections (000 Fig. 5)")
    return fig


PAGE_KEYS = ["COALESCE(network_profile, '(none)') AS profile", "url", "browser", "COALESCE(http, '') AS http",
             "dns_mode", "dns_transport"]


def plt_vs_do53(per_run: bool) -> str:
    """The one definition of "PLT against Do53" (000 Fig. 8, 002 Figs. 2 and 4): per profile,
    page, browser, HTTP version and DNS mode (and run, for 002's pairs), the median PLT and the
    median PLT with Do53 to the same resolver (the alias after the mode's ':'), or, when the
    campaign has no Do53 to that resolver, with each Do53 it has (as 002 compares every
    configuration with the local Do53). The system mode has no pair. Every join is on plain
    equalities (http '' for none, not IS NOT DISTINCT FROM) so that PostgreSQL can hash them:
    a nested loop over 2,500 runs took 40 s.

    Per run (the pairs) the medians are the run's loads' (a few each, read from the records:
    no rollup keeps runs); over the whole campaign they are read from the per-page rollup's
    histograms (dnscamp.report.page_hist), so the heat map costs the same at any size."""
    same_run = "AND b.run = m.run " if per_run else ""
    same_run_e = "AND e.run = m.run " if per_run else ""
    if per_run:
        medians = f"""SELECT run, {", ".join(PAGE_KEYS)}, count(*) AS n,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY plt_ms) AS plt_p50_ms
    FROM v_page_load
    WHERE {RUN_FILTER} AND status = 'ok' AND plt_ms IS NOT NULL
    GROUP BY 1, 2, 3, 4, 5, 6, 7"""
    else:
        keys = ["profile", "url", "browser", "http", "dns_mode", "dns_transport"]
        medians = f"""SELECT {", ".join(keys)}, n, plt_ms_p50 AS plt_p50_ms
    FROM (WITH h AS (
{page_hist(PAGE_KEYS, per_page=True)}
)
{hist_stats(keys, "plt_ms", ())}) AS x"""
    return f"""  WITH m AS (
    SELECT *, split_part(dns_mode, ':', 2) AS resolver_alias
    FROM ({medians}) AS med)
  SELECT {'m.run, ' if per_run else ''}m.profile, m.url, m.browser, m.http, m.dns_mode AS mode, m.dns_transport AS transport,
         b.dns_mode AS baseline, m.n, m.plt_p50_ms, b.n AS do53_n, b.plt_p50_ms AS do53_plt_p50_ms
  FROM m JOIN m AS b
    ON b.profile = m.profile AND b.url = m.url AND b.browser = m.browser {same_run}
   AND b.http = m.http AND b.dns_transport = 'do53' AND b.plt_p50_ms > 0
   AND (b.resolver_alias = m.resolver_alias OR NOT EXISTS (
         SELECT 1 FROM m AS e
         WHERE e.profile = m.profile AND e.url = m.url AND e.browser = m.browser {same_run_e}
           AND e.http = m.http AND e.dns_transport = 'do53'
           AND e.resolver_alias = m.resolver_alias))
  WHERE m.dns_transport NOT IN ('do53', 'system')"""


# 000 §IV-C, Fig. 8: relative increase of the median PLT over the DoUDP baseline, pages x
# access technologies, one panel per protocol combination. Here: one panel per DNS mode and
# browser, against Do53 (plt_vs_do53).
SQL_PLT_HEATMAP = f"""SELECT profile, url, browser, http, mode, transport, baseline, n, plt_p50_ms, do53_n, do53_plt_p50_ms,
       100 * (plt_p50_ms / do53_plt_p50_ms - 1) AS increase_pct
FROM (
{plt_vs_do53(False)}
) AS p
ORDER BY mode, browser, profile, url"""

MAX_HEATMAP_PAGES = 12  # columns of one panel; more pages stay in the CSV


def draw_plt_heatmap(rows: Rows) -> Figure:
    panels = sorted({(r["mode"], r["browser"]) for r in rows}, key=lambda k: (_key(TRANSPORT_ORDER)(k[0].split(":")[0]), k))
    profiles = sorted({r["profile"] for r in rows}, key=_key(PROFILE_ORDER))
    loads: dict[str, int] = defaultdict(int)
    for r in rows:
        loads[page_name(r["url"])] += int(r["n"])
    pages = sorted(sorted(loads, key=lambda p: -loads[p])[:MAX_HEATMAP_PAGES])
    lim = max([5.0] + [abs(float(r["increase_pct"])) for r in rows])
    per_row = 2 if len(pages) <= 6 else 1
    nrows = (len(panels) + per_row - 1) // per_row
    fig = Figure(figsize=(max(4.5, 0.9 * len(pages) + 2.0) * min(len(panels), per_row), (0.45 * len(profiles) + 1.6) * nrows),
                 layout="constrained")
    axes = fig.subplots(nrows, min(len(panels), per_row), squeeze=False).ravel().tolist()
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    im = None
    for ax, (mode, browser) in zip(axes, panels):
        m = _grid(len(profiles), len(pages))
        counts = [[""] * len(pages) for _ in profiles]
        base = set()
        for r in rows:
            if (r["mode"], r["browser"]) == (mode, browser) and page_name(r["url"]) in pages:
                i, j = profiles.index(r["profile"]), pages.index(page_name(r["url"]))
                m[i][j] = float(r["increase_pct"])
                # the loads behind the two medians: the mode's / Do53's
                counts[i][j] = f"n={r['n']}/{r['do53_n']}" if r.get("do53_n") is not None else f"n={r['n']}"
                base.add(r["baseline"])
        im = _heat(ax, m, profiles, pages, "RdBu_r", -lim, lim, "{:+.1f}%", lambda v: "black", counts)
        ax.tick_params(axis="x", labelsize="x-small", labelrotation=30 if len(pages) > 4 else 0)
        ax.set_title(f"{mode} vs {', '.join(sorted(base))} ({browser})", fontsize="small")
    _colorbar(fig, im, axes[: len(panels)], "median PLT increase over Do53 (%)")
    return fig


# --- 001: Sy et al., QuicSocks -------------------------------------------------------------

SQL_QUICSOCKS = f"""SELECT campaign, prb_id, rtt_dns_ms, rtt_server_ms, rtt_direct_ms,
       status_quo_ms, proposal_ms, status_quo_retry_ms, proposal_retry_ms,
       saving_ms, saving_retry_ms
FROM v_quicsocks_savings
WHERE {ATLAS_FILTER}
  AND isp_resolver AND rtt_dns_ms IS NOT NULL AND rtt_server_ms IS NOT NULL AND rtt_direct_ms IS NOT NULL
ORDER BY campaign, prb_id"""


def _raw_series(rows: Rows, columns: dict[str, str]) -> dict[str, tuple[int, list[tuple[float, float]]]]:
    # one row per probe: a campaign has at most a few thousand, drawn exactly
    return {label: ecdf_points([r[c] for r in rows]) for label, c in columns.items()}


def draw_quicsocks_rtts(rows: Rows) -> Figure:
    fig = Figure(figsize=(6.4, 4.0), layout="constrained")
    ax = fig.subplots()
    _cdf(ax, _raw_series(rows, {"RTT_direct": "rtt_direct_ms", "RTT_Server": "rtt_server_ms", "RTT_DNS": "rtt_dns_ms"}),
         "RTT (ms)", logx=True)
    return fig


def draw_quicsocks_latency(rows: Rows) -> Figure:
    fig = Figure(figsize=(6.4, 4.0), layout="constrained")
    ax = fig.subplots()
    _cdf(ax, _raw_series(rows, {"status quo, with retry": "status_quo_retry_ms", "proposal, with retry": "proposal_retry_ms",
                                "status quo, w/o retry": "status_quo_ms", "proposal, w/o retry": "proposal_ms"}),
         "latency to establish the connection, incl. DNS (ms)", logx=True)
    return fig


def draw_quicsocks_savings(rows: Rows) -> Figure:
    fig = Figure(figsize=(6.4, 4.0), layout="constrained")
    ax = fig.subplots()
    _cdf(ax, _raw_series(rows, {"saving w/o retry (RTT_direct - RTT_Server)": "saving_ms",
                                "saving with retry (x2)": "saving_retry_ms"}), "saving of the proxy (ms)")
    for x in (5, 10):
        ax.axvline(x, color="grey", lw=0.6, ls=":")
    return fig


# 001_3c494309ab66be23.txt §IV-B (474 German probes behind an ISP resolver): shares of probes
# whose RTT_Server beats RTT_direct by at least x ms (Fig. 6 and Fig. 7 text), and of probes
# with RTT_DNS below 10 ms.
PAPER_001_SHARES = {"share_saving_5ms": 0.51, "share_saving_10ms": 0.367, "share_saving_15ms": 0.243,
                    "share_saving_30ms": 0.10, "share_saving_40ms": 0.072, "share_saving_50ms": 0.038,
                    "share_rtt_dns_below_10ms": 0.60}

COLUMNS = ",\n       "  # select items, one a line

_SHARE_CONDITIONS = {f"share_saving_{x}ms": f"saving_ms >= {x}" for x in (5, 10, 15, 30, 40, 50)}
_SHARE_CONDITIONS["share_rtt_dns_below_10ms"] = "rtt_dns_ms < 10"

SQL_QUICSOCKS_SHARES = f"""SELECT count(*) AS probes,
       {COLUMNS.join(wilson(f"count(*) FILTER (WHERE {c})", "count(*)", k) for k, c in _SHARE_CONDITIONS.items())}
FROM v_quicsocks_savings
WHERE {ATLAS_FILTER} AND isp_resolver AND saving_ms IS NOT NULL AND rtt_dns_ms IS NOT NULL
HAVING count(*) > 0"""


def table_quicsocks_shares(rows: Rows) -> Table:
    r = rows[0]
    out = [["probes (ISP resolver)", r["probes"], 474]]
    for k, paper in PAPER_001_SHARES.items():
        label = "RTT_DNS < 10 ms" if k == "share_rtt_dns_below_10ms" else f"saving ≥ {k.split('_')[-1][:-2]} ms"
        out.append([label, pct_interval(r[k], r.get(f"{k}_lo"), r.get(f"{k}_hi")), _pct(paper)])
    return ["share of probes", "ours (95 % Wilson interval)", "paper (001 §IV-B)"], out


# 001 §IV-A, Table II: RTT_DNS = RTT_Server = 30 ms, RTT_direct = 60 ms (an average U.S. LTE
# connection) gives 90 -> 60 ms without and 150 -> 90 ms with a stateless retry.
PAPER_001_TABLE_II = {"rtt_dns_ms": 30, "rtt_server_ms": 30, "rtt_direct_ms": 60,
                      "status_quo_ms": 90, "proposal_ms": 60, "status_quo_retry_ms": 150, "proposal_retry_ms": 90}

TABLE_II_TERMS = ["rtt_dns_ms", "rtt_server_ms", "rtt_direct_ms", "status_quo_ms", "proposal_ms", "status_quo_retry_ms",
                  "proposal_retry_ms"]

# Every probe has every term (the filter), so one n serves every median's interval.
SQL_TABLE_II = f"""SELECT probes,
       {COLUMNS.join(p50_with_interval_sql(t, "probes", t) for t in TABLE_II_TERMS)}
FROM (SELECT *, count(*) OVER () AS probes
      FROM v_quicsocks_savings
      WHERE {ATLAS_FILTER}
        AND isp_resolver AND rtt_dns_ms IS NOT NULL AND rtt_server_ms IS NOT NULL AND rtt_direct_ms IS NOT NULL) AS s
GROUP BY probes"""


def table_ii(rows: Rows) -> Table:
    r, p = rows[0], PAPER_001_TABLE_II

    def med(t: str) -> str:
        ci = interval(r.get(f"{t}_p50_lo"), r.get(f"{t}_p50_hi"), "{:.1f}")
        return f"{float(r[f'{t}_p50']):.1f}" + (f" ({ci})" if ci else "")

    out = [["RTT_DNS / RTT_Server / RTT_direct",
            " / ".join(med(t) for t in ("rtt_dns_ms", "rtt_server_ms", "rtt_direct_ms")), "",
            f"{p['rtt_dns_ms']} / {p['rtt_server_ms']} / {p['rtt_direct_ms']}", ""]]
    for label, sq, pr in (("w/o stateless retry", "status_quo_ms", "proposal_ms"),
                          ("with stateless retry", "status_quo_retry_ms", "proposal_retry_ms")):
        out.append([label, med(sq), med(pr), p[sq], p[pr]])
    head = ["", "ours: status quo (ms, 95 % interval)", "ours: proposal (ms, 95 % interval)",
            "paper: status quo (ms)", "paper: proposal (ms)"]
    return head, [[f"probes: {r['probes']}", "", "", "", ""]] + out


# --- 002: Hounsel et al., DNS / DoT / DoH and web performance ------------------------------

# 002_6fa4cf280535d36b.txt §4.3, Fig. 4 (Cloudflare, Frankfurt): median PLT difference to
# Do53 on emulated 4G (DoT -11 ms, DoH +58 ms) and lossy 4G (DoT -101 ms, DoH -33 ms); §4.2:
# without emulation each protocol within 30 ms of the others. Our profiles of those
# conditions: testbed/profiles.toml "4g-www", "lossy-4g".
PAPER_002_DIFF = {"4g-www": {"dot": -11, "doh": 58}, "lossy-4g": {"dot": -101, "doh": -33}}

# 002's pairs: per run, the median PLT of a mode minus that of Do53 (plt_vs_do53).
PLT_PAIRS = f"""  SELECT profile, mode, transport, baseline, plt_p50_ms - do53_plt_p50_ms AS diff_ms
  FROM (
{plt_vs_do53(True)}
  ) AS p"""

# The CDF of the pairs and, on every row, the median of the paired differences with its
# distribution-free 95 % interval over the pairs (not a difference of medians: each pair holds
# resolver, run, page, browser and HTTP version fixed, so what varies is the DNS mode). One
# query for the figure and its table: the pairs are read from the records (no rollup keeps
# runs), the report's costliest step at 10^6 page loads.
SQL_PLT_DIFF = ecdf_sql(PLT_PAIRS, "profile, mode, transport, baseline", "diff_ms", medians=True)


def _pair_series(rows: Rows) -> Rows:
    """Rows labelled by their CDF series: the mode, and its baseline when that is not Do53 to
    the mode's own resolver (a campaign without one compares with each Do53 it has)."""
    def label(r: dict[str, Any]) -> str:
        same = r["baseline"].split(":", 1)[-1] == r["mode"].split(":", 1)[-1]
        return r["mode"] if same else f"{r['mode']} vs {r['baseline']}"
    return [{**r, "series": label(r)} for r in rows]


def draw_plt_diff(rows: Rows) -> Figure:
    fig = _by_profile_cdf(_pair_series(rows), "diff_ms", "PLT - PLT with Do53 (ms)", by="series")
    for ax in fig.axes:
        if ax.get_visible():
            ax.axvline(0, color="grey", lw=0.6)
    return fig


def table_plt_diff(rows: Rows) -> Table:
    out = []
    groups = {(r["profile"], r["mode"], r["transport"], r["baseline"]): r for r in rows}  # one row per group
    for r in sorted(groups.values(), key=lambda r: (_key(PROFILE_ORDER)(r["profile"]), _key(TRANSPORT_ORDER)(r["transport"]),
                                                    r["mode"], r["baseline"])):
        out.append([r["profile"], r["mode"], r["baseline"], r["n"], r["diff_ms_p50"],
                    interval(r.get("diff_ms_p50_lo"), r.get("diff_ms_p50_hi"), "{:.1f}"),
                    PAPER_002_DIFF.get(r["profile"], {}).get(r["transport"])])
    return ["profile", "DNS mode", "against", "pairs", "ours: median difference (ms)", "ours: 95 % interval (ms)",
            "paper: median difference, Cloudflare (ms)"], out


# 002 §4.3, Table 1: share of successful page loads with Cloudflare from Frankfurt, per
# network condition and protocol ("(none)" is no emulation: the paper's "Default").
_DEFAULT_002 = {"do53": 0.7870, "dot": 0.7865, "doh": 0.7885}
PAPER_002_SUCCESS = {"none": _DEFAULT_002, "(none)": _DEFAULT_002,
                     "4g-www": {"do53": 0.8002, "dot": 0.7971, "doh": 0.7861},
                     "lossy-4g": {"do53": 0.7829, "dot": 0.7813, "doh": 0.7695},
                     "3g": {"do53": 0.2810, "dot": 0.2787, "doh": 0.2006}}

SQL_PAGE_OUTCOMES = f"""WITH k AS (
{page_counts(["COALESCE(network_profile, '(none)') AS profile", "dns_transport AS transport", "status"])}
)
SELECT profile, transport, status, n, {wilson("n", "loads", "share")}, loads
FROM (SELECT profile, transport, status, sum(n)::bigint AS n,
             (sum(sum(n)) OVER (PARTITION BY profile, transport))::bigint AS loads
      FROM k GROUP BY 1, 2, 3) AS s
ORDER BY 1, 2, 3"""


def table_page_outcomes(rows: Rows) -> Table:
    statuses = sorted({r["status"] for r in rows}, key=lambda s: (s != "ok", s))
    cells: dict[tuple[str, str], dict[str, Any]] = defaultdict(dict)
    for r in rows:
        cells[(r["profile"], r["transport"])][r["status"]] = r
    out = []
    for (p, t) in sorted(cells, key=lambda k: (_key(PROFILE_ORDER)(k[0]), _key(TRANSPORT_ORDER)(k[1]))):
        c = cells[(p, t)]
        out.append([p, t, sum(x["n"] for x in c.values())]
                   + [pct_interval(c[s]["share"], c[s].get("share_lo"), c[s].get("share_hi")) if s in c else "" for s in statuses]
                   + [_pct(PAPER_002_SUCCESS.get(p, {}).get(t))])
    return ["profile", "transport", "loads"] + statuses + ["paper: successful"], out


# --- 003: Böttger et al., the cost of DoH ---------------------------------------------------

SQL_RESOLUTION = hist_cdf(dns_hist("total_ms", ["COALESCE(network_profile, '(none)') AS profile", "transport"]),
                          "profile, transport", "total_ms")


def draw_resolution(rows: Rows) -> Figure:
    return _by_profile_cdf(rows, "total_ms", "resolution time incl. handshakes (ms)", logx=True)


# 003_b61199a6a5b37f70.txt, section "Overhead", Figs. 3 and 4 (medians per resolution, IP
# bytes and packets): UDP 182 B / 2 packets; DoH without a persistent connection 5,737 B / 27
# (Cloudflare), with one 864 B / 8 (Cloudflare).
PAPER_003_BYTES = {("do53", False): (182, 2), ("doh", False): (5737, 27), ("doh", True): (864, 8)}

# Packets: the rollups keep their sum over the ok queries, not a histogram, so ours is the mean
# per resolution beside the paper's median.
_BYTES_KEYS = ["transport", "connection = 'reuse' AS connection_reused"]
SQL_BYTES = f"""WITH h AS (
{dns_hist("total_ip_bytes", _BYTES_KEYS)}
), k AS (
{dns_counts(_BYTES_KEYS)}
), st AS (
{hist_stats(["transport", "connection_reused"], "ip_bytes", (), extremes=True)}
)
SELECT st.*, p.packets / NULLIF(p.ok, 0) AS packets_mean
FROM st
LEFT JOIN (SELECT transport, connection_reused, sum(n - failures) AS ok, sum(packets)::float8 AS packets
           FROM k GROUP BY 1, 2) AS p USING (transport, connection_reused)
ORDER BY 1, 2"""


def draw_bytes(rows: Rows) -> Figure:
    rows = sorted(rows, key=lambda r: (_key(TRANSPORT_ORDER)(r["transport"]), r["connection_reused"]))
    labels = [f"{r['transport']}\n{'reused' if r['connection_reused'] else 'new'}\nn={r['n']}" for r in rows]
    fig = Figure(figsize=(max(6.4, 0.8 * len(rows) + 1.5), 4.0), layout="constrained")
    ax = fig.subplots()
    x = list(range(len(rows)))
    med = [float(r["ip_bytes_p50"]) for r in rows]
    lo = [m - float(r["ip_bytes_min"]) for m, r in zip(med, rows)]
    hi = [float(r["ip_bytes_max"]) - m for m, r in zip(med, rows)]
    ax.bar(x, med, color="tab:blue", alpha=0.7, label="ours: median (whiskers: min-max)")
    ax.errorbar(x, med, yerr=[lo, hi], fmt="none", ecolor="black", capsize=3)
    paper = [PAPER_003_BYTES.get((r["transport"], bool(r["connection_reused"])), (math.nan,))[0] for r in rows]
    ax.scatter(x, paper, marker="D", color="tab:red", zorder=3, label="paper (003 Fig. 3, Cloudflare)")
    ax.set_xticks(x, labels, fontsize="small")
    ax.set_yscale("log")
    ax.set_ylabel("IP bytes per resolution")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize="small")
    return fig


def table_bytes(rows: Rows) -> Table:
    out = []
    for r in sorted(rows, key=lambda r: (_key(TRANSPORT_ORDER)(r["transport"]), r["connection_reused"])):
        pb, pp = PAPER_003_BYTES.get((r["transport"], bool(r["connection_reused"])), (None, None))
        out.append([r["transport"], "reused" if r["connection_reused"] else "new", r["n"],
                    r["ip_bytes_p50"], interval(r.get("ip_bytes_p50_lo"), r.get("ip_bytes_p50_hi"), "{:.0f}"),
                    r["packets_mean"], pb, pp])
    return ["transport", "connection", "n", "ours: median IP bytes", "ours: 95 % interval", "ours: mean packets",
            "paper: median bytes", "paper: median packets"], out


def _pct(v: Any) -> str | None:
    return None if v is None else f"{100 * float(v):.1f}%"


# --- the pages ------------------------------------------------------------------------------

SEEDS = [
    Seed("000", "000_6647a8606a2226e0.txt", "Kosek et al., DNS over QUIC and HTTP/3 0-RTT connection coalescing (IEEE TNSM 2024)",
         "DNS exchange time in multiples of the access RTT per transport and profile (§IV-B, Figs. 5–6) and the "
         "relative page-load-time increase over Do53 as a heat map of profiles × pages (§IV-C, Fig. 8).",
         [Item("rtt-multiples", "DNS exchange time in access RTTs, fresh connections", "v_dns_query", SQL_RTT_MULTIPLES,
               "Median total time (connect + handshake + query) of queries that opened their connection, divided by "
               "the profile's access RTT. Paper: 000 §IV-B (expected 1 / 2 / 3 round trips for DoUDP / DoQ / DoH; "
               "measured medians 1.03 / 2.50 / 3.43 over all technologies, per technology from Fig. 6 and the DSL "
               "paragraph). DoT and DoH3 have no paper number.",
               draw_rtt_heatmap, table_rtt_multiples, "no successful dns_query records with an access RTT",
               panel=('dnscamp-dns', 'multiples of the access RTT')),
          Item("rtt-multiple-cdf", "CDF of the DNS exchange time in access RTTs", "v_dns_query", SQL_RTT_MULTIPLE_CDF,
               "000 Fig. 5: the paper's medians are 1.03 (DoUDP), 2.50 (DoQ) and 3.43 (DoH) RTTs; dotted lines at "
               "the expected 1, 2 and 3.", draw_rtt_multiple_cdf, None,
               "no successful dns_query records with an access RTT",
               panel=('dnscamp-dns', 'multiples of the access RTT')),
          Item("plt-heatmap", "Relative PLT increase over Do53 (profiles × pages)", "v_page_load", SQL_PLT_HEATMAP,
               "Median page-load time (onLoad) per profile, page and browser with each DNS mode, relative to "
               "Do53 to the same resolver (or, without one, to each Do53 of the campaign: the panel title says which). "
               "Paper: 000 §IV-C Fig. 8 (baseline DoUDP + H3 1-RTT): DoH has the highest "
               "increase everywhere, worst 53.7 % (example page, 4G medium); the abstract gives > 30 % on fixed line "
               "and > 50 % on mobile for DoH with H3 1-RTT.", draw_plt_heatmap, None,
               "no successful page loads with both Do53 and another transport",
               panel=('dnscamp-pageloads', 'difference to Do53'))]),
    Seed("001", "001_3c494309ab66be23.txt", "Sy et al., Accelerating QUIC's connection establishment on high-latency access networks (QuicSocks)",
         "Per probe behind a resolver in its own AS: RTT_DNS, RTT_Server, RTT_direct (§IV-B, Fig. 6), the "
         "connection latency of the status quo and of a proxy next to the resolver (Fig. 7), the savings, and "
         "Table II at our medians.",
         [Item("quicsocks-rtts", "CDF of RTT_DNS, RTT_Server and RTT_direct", "v_quicsocks_savings", SQL_QUICSOCKS,
               "001 Fig. 6 (474 probes in Germany): 60 % of the probes had RTT_DNS below 10 ms; RTT_Server is almost "
               "always below RTT_direct.", draw_quicsocks_rtts, None, "no Atlas probes behind an ISP resolver",
               panel=('dnscamp-quicsocks', 'Table I')),
          Item("quicsocks-latency", "CDF of the connection latency incl. DNS: status quo vs proposal", "v_quicsocks_savings",
               SQL_QUICSOCKS, "001 Fig. 7, from the model of Table I: status quo RTT_DNS + RTT_direct (×2 RTT_direct "
               "with a stateless retry) versus proposal RTT_DNS + RTT_Server (×2 RTT_Server).",
               draw_quicsocks_latency, None, "no Atlas probes behind an ISP resolver",
               panel=('dnscamp-quicsocks', 'Table I')),
          Item("quicsocks-savings", "Distribution of the savings", "v_quicsocks_savings", SQL_QUICSOCKS,
               "Saving = RTT_direct − RTT_Server per probe (doubled with a stateless retry); the table below gives "
               "the shares the paper reports (001 §IV-B).", draw_quicsocks_savings, None,
               "no Atlas probes behind an ISP resolver",
               panel=('dnscamp-quicsocks', 'CDF of per-probe savings')),
          Item("quicsocks-shares", "Share of probes saving at least x ms", "v_quicsocks_savings", SQL_QUICSOCKS_SHARES,
               "001 §IV-B: 51 % save ≥ 5 ms, 36.7 % ≥ 10 ms, 24.3 % ≥ 15 ms, about 10 % ≥ 30 ms, 7.2 % ≥ 40 ms, "
               "3.8 % ≥ 50 ms; 60 % have RTT_DNS < 10 ms.", None, table_quicsocks_shares,
               "no Atlas probes behind an ISP resolver",
               panel=('dnscamp-quicsocks', 'Probes saving at least')),
          Item("quicsocks-table-ii", "Table II at our medians", "v_quicsocks_savings", SQL_TABLE_II,
               "001 §IV-A Table II: with RTT_DNS = RTT_Server = 30 ms and RTT_direct = 60 ms the proposal takes "
               "60 ms instead of 90 ms, and 90 ms instead of 150 ms with a stateless retry. Ours: the medians over "
               "our probes of each quantity.", None, table_ii, "no Atlas probes behind an ISP resolver",
               panel=('dnscamp-quicsocks', 'Table I'))]),
    Seed("002", "002_6fa4cf280535d36b.txt", "Hounsel et al., Comparing the effects of DNS, DoT, and DoH on web performance (WWW 2020)",
         "Page-load-time difference to Do53 per network condition (§4.2–4.3, Figs. 2 and 4) and the page-load "
         "outcomes (Table 1). 004_9d5842b322ef90bc.txt (ANRW 2019) is the short version of this paper.",
         [Item("plt-diff", "PLT difference to Do53 per condition: CDF and medians", "v_page_load", SQL_PLT_DIFF,
               "Each point is one (run, page, browser, HTTP version) pair: median PLT with the DNS mode minus median "
               "PLT with Do53 to the same resolver in the same run (or, without one, each Do53 of the campaign: the "
               "legend and table say which). The table gives the number of pairs and the median of the paired "
               "differences with its 95 % interval (order statistics). Paper: 002 §4.3 Fig. 4 (Cloudflare from "
               "Frankfurt): on 4G DoT −11 ms and DoH +58 ms, on lossy 4G DoT −101 ms and DoH −33 ms at the median "
               "(4G = our 4g-www, lossy 4G = lossy-4g); §4.2: without emulation all within 30 ms. The system "
               "resolver has no Do53 pair and is left out.", draw_plt_diff, table_plt_diff,
               "no successful page loads with both Do53 and another transport",
               panel=('dnscamp-pageloads', 'difference to Do53')),
          Item("page-outcomes", "Page-load outcomes per condition and transport", "v_page_load", SQL_PAGE_OUTCOMES,
               "Shares of the statuses of the taxonomy (docs/records.md) per profile and DNS transport. Paper: 002 "
               "Table 1, successful page loads with Cloudflare (4G = our 4g-www, lossy 4G = lossy-4g, "
               "Default = no emulation).", None, table_page_outcomes, "no page_load records",
               panel=('dnscamp-failures', 'Page-load failure rate'))]),
    Seed("003", "003_b61199a6a5b37f70.txt", "Böttger et al., An empirical study of the cost of DNS-over-HTTPS (IMC 2019)",
         "Resolution time per transport (the paper's resolution-time CDFs) and bytes and packets per resolution "
         "with and without connection reuse (section \"Overhead\", Figs. 3–4).",
         [Item("resolution-cdf", "CDF of the resolution time per transport", "v_dns_query", SQL_RESOLUTION,
               "Time from the start of the query (incl. connect and handshakes when the connection is new) to the "
               "response, per profile. 003 measures resolution times on localhost and page loads; 002 Fig. 3 draws "
               "the same CDF per emulated network.", draw_resolution, None, "no successful dns_query records",
               panel=('dnscamp-dns', 'CDF of resolution time')),
          Item("bytes", "Bytes per resolution", "v_dns_query", SQL_BYTES,
               "IP bytes (payload + IPv4/UDP or IPv4/TCP headers per packet, see v_dns_query) per resolution. Paper: "
               "003 \"Overhead\", Figs. 3–4, medians for Cloudflare: UDP 182 B / 2 packets, DoH on a new connection "
               "5,737 B / 27, on a persistent one 864 B / 8.", draw_bytes, table_bytes,
               "no successful dns_query records with byte counts",
               panel=('dnscamp-dns', 'Bytes'))]),
]
