"""docs/sql.md, the researchers' guide, against the store: every example query (the rollup form
and its exact form) runs as the reader role on the demo campaign and returns rows; each rollup
form agrees with its exact form (counts equal, percentiles within the histograms' 1 %); and
every view's documented columns are the view's columns (a view that gains, loses or renames a
column fails here until the guide says so)."""

from __future__ import annotations

import importlib.util
import math
import re
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from db import engine
from tests.scaffolding.demo_data import CAMPAIGN, load_demo

pytestmark = pytest.mark.local
GUIDE = Path(__file__).resolve().parents[2] / "docs" / "sql.md"
EXACT = " (exact form)"  # the title suffix of an example's exact form
# A percentile read from the rollups' histograms (2 % log buckets, the bucket's geometric middle)
# is within 1 % of percentile_disc over the records: docs/sql.md, "v_dns_hourly".
PERCENTILE = re.compile(r"(^|_)(p\d\d|median)(_|$)")
HIST_ERROR = 0.01
_spec = importlib.util.spec_from_file_location("gen_campaign_examples", GUIDE.parents[1] / "bench" / "gen_campaign.py")
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)


def sections(text: str, level: str) -> dict[str, str]:
    """{heading: body} for the headings of one level ("##", "###") in text."""
    parts = re.split(rf"^{level} (.+)$", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def examples(text: str = GUIDE.read_text()) -> list[tuple[str, str]]:
    """(title, SQL) of each example's ```sql blocks: the first under its ### heading, and a
    second, its exact form, after a paragraph starting "Exact form" (titled heading + EXACT)."""
    out = []
    for title, body in sections(sections(text, "##")["Examples"], "###").items():
        blocks = re.findall(r"^```sql\n(.*?)^```", body, flags=re.M | re.S)
        assert 1 <= len(blocks) <= 2, f"docs/sql.md: example {title!r} has {len(blocks)} sql blocks, want 1 or 2"
        out.append((title, blocks[0]))
        if len(blocks) == 2:
            between = body[body.index(blocks[0]) + len(blocks[0]):body.index(blocks[1])]
            assert re.search(r"^Exact form \(base views", between, flags=re.M), f"docs/sql.md: {title!r}: second block"
            out.append((title + EXACT, blocks[1]))
    return out


def documented_columns(body: str) -> list[str]:
    """The first-cell column names of a view's table (a cell may name several: `a`, `b`)."""
    cols = []
    for line in body.splitlines():
        if line.startswith("| `"):
            cols += re.findall(r"`([a-z_0-9]+)`", line.split("|")[1])
    return cols


def _num(v):
    return float(v) if isinstance(v, (int, float, Decimal)) and not isinstance(v, bool) else None


def disagreements(cols: list[str], rollup: list[tuple], exact_cols: list[str], exact: list[tuple]) -> list[str]:
    """How a rollup form's rows differ from its exact form's: rows matched on their key (the
    columns both have that hold no number; one row per key), then every column both have: a
    percentile (PERCENTILE in its name) within HIST_ERROR of the exact one, `increase_pct`
    (100 * (x / do53 - 1) of two such medians, rounded to 0.1) within what that allows,
    anything else (counts, shares) equal."""
    both = [c for c in cols if c in exact_cols]
    numeric = {c for cs, rows in ((cols, rollup), (exact_cols, exact)) for r in rows
               for c, v in zip(cs, r) if _num(v) is not None}

    def keyed(cs, rows):
        return {tuple(r[cs.index(c)] for c in both if c not in numeric): dict(zip(cs, r)) for r in rows}

    got, want = keyed(cols, rollup), keyed(exact_cols, exact)
    out = [f"rows {sorted(map(str, got))} != {sorted(map(str, want))}"] if got.keys() != want.keys() else []
    out += [f"{len(rows)} rows, {len(k)} keys" for rows, k in ((rollup, got), (exact, want)) if len(rows) != len(k)]
    for key in got.keys() & want.keys():
        for col in both:
            a, b = _num(got[key][col]), _num(want[key][col])
            if a is None or b is None:
                ok = got[key][col] == want[key][col]
            elif PERCENTILE.search(col):
                ok = abs(a - b) <= HIST_ERROR * abs(b) + 1e-9
            elif col == "increase_pct":  # the ratio of two medians each within 1 %: 1.01 / 0.99
                ok = abs(a - b) <= (1.01 / 0.99 - 1) * (100 + b) + 0.1
            else:
                ok = math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
            if not ok:
                out.append(f"{key} {col}: rollup {got[key][col]} exact {want[key][col]}")
    return out


def test_the_guide_has_eleven_examples_and_no_other_sql_block():
    text = GUIDE.read_text()
    ex = examples(text)
    titles = [t for t, _ in ex if not t.endswith(EXACT)]
    assert len(titles) == 11 and len(set(titles)) == 11
    assert [t.split(".")[0] for t in titles] == [str(i) for i in range(1, 12)]
    assert text.count("```sql") == len(ex)  # every sql block is an example's, so every one is run
    # a form reading a rollup view has its exact form over the base views below it
    for title, sql in ex:
        if re.search(r"\bv_(dns_hourly|dns_conn_daily|page_load_daily|page_load_url_daily)", sql):
            assert not title.endswith(EXACT) and title + EXACT in dict(ex), title


def test_the_comparison_fails_one_bucket_off():
    """What the agreement test rejects: a percentile a bucket (2 %) off, a count off by one."""
    cols = ["transport", "queries", "total_p50_ms", "increase_pct"]
    exact = [("doh", 10, 100.0, Decimal("50.0"))]
    assert disagreements(cols, [("doh", 10, 100.99, Decimal("52.9"))], cols, exact) == []
    assert len(disagreements(cols, [("doh", 10, 102.0, Decimal("50.0"))], cols, exact)) == 1
    assert len(disagreements(cols, [("doh", 11, 100.0, Decimal("50.0"))], cols, exact)) == 1
    assert len(disagreements(cols, [("doh", 10, 100.0, Decimal("53.2"))], cols, exact)) == 1
    assert disagreements(cols, [("dot", 10, 100.0, Decimal("50.0"))], cols, exact)
    assert disagreements(cols, exact * 2, cols, exact)  # two rows of one key: the key misses a column


def run_examples(reader: str) -> tuple[dict[str, tuple[list[str], list[tuple]]], list[str]]:
    """Every example block as the reader: ({title: (columns, rows)}, failures)."""
    failures, results = [], {}
    with psycopg.connect(reader, autocommit=True) as conn:
        assert conn.execute("SELECT current_user").fetchone()[0] == engine.READER
        for title, sql in examples():
            try:
                cur = conn.execute(sql)
                rows = cur.fetchall()
            except psycopg.Error as exc:
                failures.append(f"{title}: {str(exc).splitlines()[0]}")
                continue
            results[title] = ([d.name for d in cur.description], rows)
            if not rows:
                failures.append(f"{title}: no rows")
            elif all(v is None for r in rows for v in r[1:]):
                failures.append(f"{title}: only NULLs")
    return results, failures


def rollup_vs_exact(results: dict[str, tuple[list[str], list[tuple]]]) -> list[str]:
    """disagreements() of every rollup form with its exact form (there are seven)."""
    failures, compared = [], 0
    for title, (cols, rows) in results.items():
        if title + EXACT in results:
            ecols, erows = results[title + EXACT]
            assert set(cols) <= set(ecols), title  # the exact form answers everything the rollup form does
            failures += [f"{title}: {d}" for d in disagreements(cols, rows, ecols, erows)]
            compared += 1
    assert compared == 7
    return failures


def test_every_example_returns_rows_and_agrees_with_its_exact_form(empty_db, tmp_path):
    """On the demo data (113 records), then with a generated campaign of the same name added
    (bench/gen_campaign.py: a few thousand records with failures of every kind, four profiles,
    h2 and h3), where a rollup form that counted or filtered otherwise than its exact form, or
    read another quantile, would show."""
    load_demo(empty_db)
    reader = engine.database_url("reader", dbname=conninfo_to_dict(empty_db)["dbname"])
    results, failures = run_examples(reader)
    assert failures == []
    assert rollup_vs_exact(results) == []
    gen.generate(tmp_path, seed=16, dns_queries_n=4000, page_loads_n=1500, atlas_n=200, campaign=CAMPAIGN)
    gen.load(tmp_path, empty_db, workers=1)
    results, failures = run_examples(reader)
    assert failures == [] and rollup_vs_exact(results) == []


def test_each_view_documented_with_its_columns(empty_db):
    views = {t: body for t, body in sections(sections(GUIDE.read_text(), "##")["The views"], "###").items()}
    with psycopg.connect(empty_db) as conn:
        actual: dict[str, list[str]] = {}
        for name, col in conn.execute(
                "SELECT table_name, column_name FROM information_schema.columns "
                "WHERE table_schema = 'public' AND table_name LIKE 'v\\_%' ORDER BY table_name, ordinal_position"):
            actual.setdefault(name, []).append(col)
    assert sorted(views) == sorted(actual)
    for name, body in views.items():
        assert sorted(documented_columns(body)) == sorted(actual[name]), name


# Example 7 as 002's pairing was first written in the guide: a self-join of the per-run medians
# (sorted twice at 1 M loads: 6.7 s). Its window form must give the same rows.
EXAMPLE_7_JOIN = """
WITH m AS (
  SELECT run, network_profile, browser, url, dns_transport,
         split_part(dns_mode, ':', 2) AS resolver_alias,
         percentile_cont(0.5) WITHIN GROUP (ORDER BY plt_ms) AS plt_ms
  FROM v_page_load
  WHERE campaign = 'default' AND status = 'ok'
  GROUP BY run, network_profile, browser, url, dns_transport, split_part(dns_mode, ':', 2)
)
SELECT x.network_profile, x.dns_transport, count(*) AS pairs,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY x.plt_ms - b.plt_ms) AS diff_p50_ms,
       min(x.plt_ms - b.plt_ms) AS diff_min_ms,
       max(x.plt_ms - b.plt_ms) AS diff_max_ms
FROM m AS x
JOIN m AS b ON b.run = x.run AND b.network_profile = x.network_profile AND b.browser = x.browser
           AND b.url = x.url AND b.resolver_alias = x.resolver_alias AND b.dns_transport = 'do53'
WHERE x.dns_transport NOT IN ('do53', 'system')
GROUP BY x.network_profile, x.dns_transport
ORDER BY x.network_profile, x.dns_transport
"""


def _without_alias(sql: str, pairing: str, instead: str = "") -> str:
    assert sql.count(pairing) == 1, pairing
    return sql.replace(pairing, instead)


def test_example_7_window_form_gives_the_self_joins_rows(empty_db, tmp_path):
    """On the demo data and a generated campaign beside it (its Do53 goes to another resolver
    than its encrypted modes, so its loads pair only without the resolver alias, as the guide
    says): the same rows both ways, with pairs, and more of them without the alias."""
    window = dict(examples())["7. Page-load-time difference to Do53 per condition"]
    load_demo(empty_db)
    gen.generate(tmp_path, seed=7, dns_queries_n=200, page_loads_n=3000, atlas_n=20, campaign=CAMPAIGN)
    gen.load(tmp_path, empty_db, workers=1)
    reader = engine.database_url("reader", dbname=conninfo_to_dict(empty_db)["dbname"])
    forms = [(window, EXAMPLE_7_JOIN),
             (_without_alias(window, ", resolver_alias)", ")"),
              _without_alias(EXAMPLE_7_JOIN, " AND b.resolver_alias = x.resolver_alias"))]
    pairs = []
    with psycopg.connect(reader, autocommit=True) as conn:
        for new, old in forms:
            got, want = conn.execute(new).fetchall(), conn.execute(old).fetchall()
            assert got == want
            pairs.append(sum(r[2] for r in got))
    assert 0 < pairs[0] < pairs[1]
