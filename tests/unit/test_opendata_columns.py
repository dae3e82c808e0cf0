"""The archive's column types without Arrow (dnscamp.opendata.columns) are the ones DuckDB
reads from codec's and pgarrow's Arrow schemas: an empty kind or Atlas table, made in DuckDB
from the former, has the same columns and types as the empty Arrow table it stands for."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

from dnscamp.opendata import codec, columns, duck, pgarrow
from vantage_agent.records import BODIES

pytestmark = pytest.mark.unit


def described(con: duckdb.DuckDBPyConnection, source: str) -> list[tuple[str, str]]:
    return [(r[0], r[1]) for r in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()]


@pytest.mark.parametrize("kind", sorted(BODIES) + ["no_such_kind"])
def test_an_empty_kind_has_the_arrow_schemas_types(kind):
    con = duckdb.connect()
    arrow = codec.schema(kind).empty_table()
    con.register("arrow_empty", arrow)
    assert described(con, duck._empty(columns.kind_duck_types(kind))) == described(con, "arrow_empty")


def test_an_empty_store_table_has_the_arrow_schemas_types():
    cols = [[f"c_{i}", t] for i, t in enumerate([*pgarrow.ARROW, "timestamp without time zone", "interval"])]
    assert set(columns.STORE_DUCK) == set(pgarrow.ARROW)
    con = duckdb.connect()
    con.register("arrow_empty", pgarrow.schema(cols).empty_table())
    assert described(con, duck._empty(columns.store_duck_types(cols))) == described(con, "arrow_empty")


def test_codec_and_pgarrow_keep_their_names():
    """The pieces that moved to columns are still codec's and pgarrow's (the same objects)."""
    assert codec.ENVELOPE is columns.ENVELOPE and codec.body_fields is columns.body_fields
    assert codec.JSON is columns.JSON and (codec.ABSENT, codec.EXTRA) == (columns.ABSENT, columns.EXTRA)
    assert pgarrow.JSONISH is columns.JSONISH
    assert isinstance(codec.schema("dns_query"), pa.Schema)
