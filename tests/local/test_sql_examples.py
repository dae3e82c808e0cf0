"""docs/sql.md, the researchers' guide, against the store: every example query runs as the
reader role on the demo campaign and returns rows, and every view's documented columns are the
view's columns (a view that gains, loses or renames a column fails here until the guide says so)."""

from __future__ import annotations

import re
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from db import engine
from tests.scaffolding.demo_data import load_demo

pytestmark = pytest.mark.local
GUIDE = Path(__file__).resolve().parents[2] / "docs" / "sql.md"


def sections(text: str, level: str) -> dict[str, str]:
    """{heading: body} for the headings of one level ("##", "###") in text."""
    parts = re.split(rf"^{level} (.+)$", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def examples(text: str = GUIDE.read_text()) -> list[tuple[str, str]]:
    """(heading, SQL) of each example: the ```sql blocks, each under its own ### heading."""
    out = []
    for title, body in sections(sections(text, "##")["Examples"], "###").items():
        blocks = re.findall(r"^```sql\n(.*?)^```", body, flags=re.M | re.S)
        assert len(blocks) == 1, f"docs/sql.md: example {title!r} has {len(blocks)} sql blocks, want 1"
        out.append((title, blocks[0]))
    return out


def documented_columns(body: str) -> list[str]:
    """The first-cell column names of a view's table (a cell may name several: `a`, `b`)."""
    cols = []
    for line in body.splitlines():
        if line.startswith("| `"):
            cols += re.findall(r"`([a-z_0-9]+)`", line.split("|")[1])
    return cols


def test_the_guide_has_ten_examples_and_no_other_sql_block():
    text = GUIDE.read_text()
    ex = examples(text)
    assert len(ex) == 10 and len({t for t, _ in ex}) == 10
    assert text.count("```sql") == 10  # every sql block is an example, so every one is run


def test_every_example_returns_rows_as_the_reader(fresh_db):
    load_demo(fresh_db)
    reader = engine.database_url("reader", dbname=conninfo_to_dict(fresh_db)["dbname"])
    failures = []
    with psycopg.connect(reader, autocommit=True) as conn:
        assert conn.execute("SELECT current_user").fetchone()[0] == engine.READER
        for title, sql in examples():
            try:
                rows = conn.execute(sql).fetchall()
            except psycopg.Error as exc:
                failures.append(f"{title}: {str(exc).splitlines()[0]}")
                continue
            if not rows:
                failures.append(f"{title}: no rows")
            elif all(v is None for r in rows for v in r[1:]):
                failures.append(f"{title}: only NULLs")
    assert failures == []


def test_each_view_documented_with_its_columns(fresh_db):
    views = {t: body for t, body in sections(sections(GUIDE.read_text(), "##")["The views"], "###").items()}
    with psycopg.connect(fresh_db) as conn:
        actual: dict[str, list[str]] = {}
        for name, col in conn.execute(
                "SELECT table_name, column_name FROM information_schema.columns "
                "WHERE table_schema = 'public' AND table_name LIKE 'v\\_%' ORDER BY table_name, ordinal_position"):
            actual.setdefault(name, []).append(col)
    assert sorted(views) == sorted(actual)
    for name, body in views.items():
        assert sorted(documented_columns(body)) == sorted(actual[name]), name
