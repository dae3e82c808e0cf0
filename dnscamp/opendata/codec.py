"""A result record <-> a row of its kind's Arrow table, losslessly (restore gives back records
JSON-equal to the archived ones, so their content hashes and ingest's dedup hold).

Columns of a kind's table:
- the envelope, typed (``id`` as text, ``started_at`` as timestamp[us, UTC]); ``env`` as JSON
  text (dictionary-encoded: the same for every record of a run, so stored about once);
- one column per field of the kind's body model (vantage_agent/records.BODIES), typed from the
  model: int -> int64, float -> float64, bool, str / Literal -> string; lists, objects and
  anything else -> JSON text. A body field named like an envelope column is ``body_<name>``.
- ``_body_absent``: JSON list of the model's fields the record left out (null: none), and
  ``_body_extra``: JSON object of the fields that do not fit their typed column exactly (an
  integer written into a float field keeps being an integer; a record stored before the strict
  models, with ``"sent": 3.0``) or that the model does not know. Both are null for the records
  agents write today.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any, Iterable

import orjson
import pyarrow as pa

from db.records import iso_utc
from dnscamp.opendata.columns import ABSENT, ENVELOPE, EXTRA, JSON, body_fields  # noqa: F401 (codec's names too)

TS = pa.timestamp("us", tz="UTC")
_STR = pa.string()
_INT64 = (-(1 << 63), (1 << 63) - 1)
_ARROW = {int: pa.int64(), float: pa.float64(), bool: pa.bool_(), str: _STR, JSON: _STR}


def schema(kind: str) -> pa.Schema:
    env_cols = [pa.field(c, TS if c == "started_at" else _STR) for c in ENVELOPE]
    body = [pa.field(col, _ARROW[t]) for _, col, t in body_fields(kind)]
    return pa.schema(env_cols + body + [pa.field(ABSENT, _STR), pa.field(EXTRA, _STR)],
                     metadata={b"dnscamp.kind": kind.encode()})  # fmt: skip


def dumps(value: Any) -> str:
    """JSON text; integers beyond 64 bits (which orjson cannot write) by the stdlib."""
    try:
        return orjson.dumps(value).decode()
    except orjson.JSONEncodeError:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


_DIGITS = str.maketrans("123456789", "000000000")


def loads(text: str) -> Any:
    """JSON text back; a run of 19+ digits is read by the stdlib, whose integers are exact
    (orjson reads an integer beyond 64 bits as a float), as collectors/parse.py does."""
    if "0" * 19 in text.translate(_DIGITS):
        return json.loads(text)
    return orjson.loads(text)


def _fits(v: Any, t: Any) -> bool:
    if t is JSON:
        return True
    if type(v) is not t:  # exact: True is not an int here, 3 is not a float
        return False
    return t is not int or _INT64[0] <= v <= _INT64[1]


class Batch:
    """Columns of one kind's rows, filled record by record, turned into an Arrow table."""

    def __init__(self, kind: str):
        self.kind = kind
        self.fields = body_fields(kind)
        self.known = {f for f, _, _ in self.fields}
        self.schema = schema(kind)
        self.clear()

    def clear(self) -> None:
        self.cols: dict[str, list] = {f.name: [] for f in self.schema}

    def __len__(self) -> int:
        return len(self.cols["id"])

    def add(self, rec: dict[str, Any]) -> None:
        c = self.cols
        v = rec["vantage"]
        c["id"].append(rec["id"])
        c["schema"].append(rec["schema"])
        for k in ("campaign", "run", "unit", "status", "error"):
            c[k].append(rec.get(k))
        c["vantage_id"].append(v["id"])
        c["provider"].append(v["provider"])
        c["region"].append(v.get("region"))
        c["network_profile"].append(v.get("network_profile"))
        c["started_at"].append(datetime.fromisoformat(rec["started_at"].replace("Z", "+00:00")))
        c["env"].append(dumps(rec.get("env") or {}))
        body = rec["body"]
        absent, extra = [], {}
        for key, col, t in self.fields:
            if key not in body:
                absent.append(key)
                c[col].append(None)
                continue
            val = body[key]
            if val is None:
                c[col].append(None)
            elif t is JSON:
                c[col].append(dumps(val))
            elif _fits(val, t):
                c[col].append(val)
            else:
                extra[key] = val
                c[col].append(None)
        for key in body.keys() - self.known:
            extra[key] = body[key]
        c[ABSENT].append(dumps(absent) if absent else None)
        c[EXTRA].append(dumps(extra) if extra else None)

    def table(self) -> pa.Table:
        arrays = []
        for f in self.schema:
            a = pa.array(self.cols[f.name], type=f.type)
            if f.name == "env":
                a = a.dictionary_encode()
            arrays.append(a)
        return pa.Table.from_arrays(arrays, schema=_with_dict_env(self.schema))


def _with_dict_env(s: pa.Schema) -> pa.Schema:
    i = s.get_field_index("env")
    return s.set(i, pa.field("env", pa.dictionary(pa.int32(), _STR)))


def records(kind: str, table: pa.Table) -> Iterable[dict[str, Any]]:
    """The records of one kind's table, JSON-equal to those that were archived."""
    fields = body_fields(kind)
    cols = {name: table.column(name).to_pylist() for name in table.column_names}
    for i in range(table.num_rows):
        absent = set(loads(cols[ABSENT][i])) if cols[ABSENT][i] else set()
        body: dict[str, Any] = {}
        for key, col, t in fields:
            if key in absent:
                continue
            val = cols[col][i]
            body[key] = loads(val) if t is JSON and val is not None else val
        if cols[EXTRA][i]:
            body.update(loads(cols[EXTRA][i]))
        started = cols["started_at"][i]
        yield {
            "schema": cols["schema"][i], "kind": kind, "id": cols["id"][i], "campaign": cols["campaign"][i],
            "run": cols["run"][i], "unit": cols["unit"][i],
            "vantage": {"id": cols["vantage_id"][i], "provider": cols["provider"][i], "region": cols["region"][i],
                        "network_profile": cols["network_profile"][i]},
            "started_at": iso_utc(started.replace(tzinfo=started.tzinfo or timezone.utc)),
            "status": cols["status"][i], "error": cols["error"][i], "env": loads(cols["env"][i]), "body": body,
        }  # fmt: skip
