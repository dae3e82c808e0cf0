"""Rows of a Postgres query as Arrow record batches, typed from the columns' store types
(information_schema's data_type): what the exports and the archive's Atlas tables share."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import orjson
import pyarrow as pa

from dnscamp.opendata.columns import JSONISH

if TYPE_CHECKING:
    import psycopg

ROWS_PER_BATCH = 50_000
ARROW = {
    "text": pa.string(), "character varying": pa.string(), "uuid": pa.string(), "integer": pa.int32(),
    "smallint": pa.int16(), "bigint": pa.int64(), "double precision": pa.float64(), "real": pa.float32(),
    "numeric": pa.float64(), "boolean": pa.bool_(), "jsonb": pa.string(), "json": pa.string(),
    "timestamp with time zone": pa.timestamp("us", tz="UTC"), "date": pa.date32(), "ARRAY": pa.list_(pa.float64()),
    "text[]": pa.list_(pa.string()),  # v_run_completeness's missing units and objects; "ARRAY" is float8[]
}  # fmt: skip
ARRAYS = ("ARRAY", "text[]")


def columns(conn: psycopg.Connection, like: str) -> dict[str, list[list[str]]]:
    """{relation: [[column, data_type], ...]} of the schema's tables and views named LIKE ``like``."""
    rows = conn.execute(
        "SELECT table_name, column_name, CASE WHEN data_type = 'ARRAY' AND udt_name = '_text' THEN 'text[]' "
        "ELSE data_type END FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND table_name LIKE %s ORDER BY table_name, ordinal_position",
        (like,),
    ).fetchall()
    out: dict[str, list[list[str]]] = {}
    for rel, col, typ in rows:
        out.setdefault(rel, []).append([col, typ])
    return out


def schema(cols: list[list[str]], *, flat: bool = False) -> pa.Schema:
    """Arrow schema of store columns; ``flat`` (CSV) writes arrays as JSON text too."""
    return pa.schema([pa.field(c, pa.string() if (flat and t in ARRAYS) else ARROW.get(t, pa.string())) for c, t in cols])


def batch(rows: list[tuple], cols: list[list[str]], sch: pa.Schema, *, flat: bool = False) -> pa.RecordBatch:
    """JSON values as JSON text, UUIDs as text, numerics as float64."""
    arrays = []
    for i, (name, typ) in enumerate(cols):
        vals = [r[i] for r in rows]
        if typ in JSONISH or (typ in ARRAYS and flat):
            vals = [None if v is None else orjson.dumps(v).decode() for v in vals]
        elif typ == "uuid":
            vals = [None if v is None else str(v) for v in vals]
        elif typ == "numeric":
            vals = [None if v is None else float(v) for v in vals]
        arrays.append(pa.array(vals, type=sch.field(name).type))
    return pa.RecordBatch.from_arrays(arrays, schema=sch)


def batches(conn: psycopg.Connection, sql: str, args: tuple, cols: list[list[str]], *, flat: bool = False,
            cursor: str = "dnscamp_pgarrow") -> Iterator[pa.RecordBatch]:  # fmt: skip
    """Record batches of ``sql`` (its columns are ``cols``), through a server-side cursor."""
    sch = schema(cols, flat=flat)
    with conn.transaction(), conn.cursor(name=cursor) as cur:
        cur.itersize = ROWS_PER_BATCH
        cur.execute(sql, args)
        while rows := cur.fetchmany(ROWS_PER_BATCH):
            yield batch(rows, cols, sch, flat=flat)
