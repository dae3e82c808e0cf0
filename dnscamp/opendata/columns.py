"""The archive's columns without Arrow: what a kind's Parquet files hold (the envelope, one
column per body field, the two JSON side columns) and the DuckDB type each column reads as.
codec builds the Arrow schema from the same fields; ``dnscamp sql --archive`` on a local archive
reads them from here, so it needs neither pyarrow nor numpy (their import is most of its
start-up)."""

from __future__ import annotations

import types
import typing
from functools import lru_cache
from typing import Any

ENVELOPE = ("id", "schema", "campaign", "run", "unit", "vantage_id", "provider", "region", "network_profile",
            "started_at", "status", "error", "env")  # fmt: skip
ABSENT, EXTRA = "_body_absent", "_body_extra"
JSON = "json"  # marker type: JSON text
JSONISH = ("jsonb", "json")  # store types whose archived column is JSON text

# The DuckDB type of a column as DuckDB reads codec's Arrow type of it (codec.schema,
# pgarrow.ARROW); tests/unit/test_opendata_columns.py holds the two in step.
_BODY_DUCK = {int: "BIGINT", float: "DOUBLE", bool: "BOOLEAN", str: "VARCHAR", JSON: "VARCHAR"}
STORE_DUCK = {
    "text": "VARCHAR", "character varying": "VARCHAR", "uuid": "VARCHAR", "integer": "INTEGER",
    "smallint": "SMALLINT", "bigint": "BIGINT", "double precision": "DOUBLE", "real": "FLOAT", "numeric": "DOUBLE",
    "boolean": "BOOLEAN", "jsonb": "VARCHAR", "json": "VARCHAR", "timestamp with time zone": "TIMESTAMP WITH TIME ZONE",
    "date": "DATE", "ARRAY": "DOUBLE[]", "text[]": "VARCHAR[]",
}  # fmt: skip


def _scalar(ann: Any) -> Any:
    """int / float / bool / str for a (possibly Optional / Annotated / Literal) annotation, else JSON."""
    origin = typing.get_origin(ann)
    if origin is typing.Annotated:
        return _scalar(typing.get_args(ann)[0])
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(ann) if a is not type(None)]
        return _scalar(inner[0]) if len(inner) == 1 else JSON
    if origin is typing.Literal:
        vals = typing.get_args(ann)
        return str if all(isinstance(v, str) for v in vals) else JSON
    return ann if ann in (int, float, bool, str) else JSON


@lru_cache(maxsize=None)
def body_fields(kind: str) -> tuple[tuple[str, str, Any], ...]:
    """(body field, column name, python type or JSON) of a kind's model; () for a kind without one."""
    from vantage_agent.records import BODIES

    model = BODIES.get(kind)
    if model is None:
        return ()
    out = []
    for name, info in model.model_fields.items():
        key = info.alias or name
        col = f"body_{key}" if key in ENVELOPE or key in ("kind", "day") else key
        out.append((key, col, _scalar(info.annotation)))
    return tuple(out)


def kind_duck_types(kind: str) -> list[tuple[str, str]]:
    """(column, DuckDB type) of a kind's files, in codec.schema's order."""
    env = [(c, "TIMESTAMP WITH TIME ZONE" if c == "started_at" else "VARCHAR") for c in ENVELOPE]
    body = [(col, _BODY_DUCK[t]) for _, col, t in body_fields(kind)]
    return env + body + [(ABSENT, "VARCHAR"), (EXTRA, "VARCHAR")]


def store_duck_types(cols: list[list[str]]) -> list[tuple[str, str]]:
    """(column, DuckDB type) of an archived store table's files (pgarrow.schema's columns)."""
    return [(c, STORE_DUCK.get(t, "VARCHAR")) for c, t in cols]
