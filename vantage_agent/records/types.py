"""Value types of records v1: what a number, a text and a timestamp may be on the wire.

Every rule is a pydantic-core constraint (no Python call per record: ingest validates a
million lines). Together with ``Frozen``'s ``strict=True, allow_inf_nan=False`` they make a
record refused (quarantined at ingest) rather than stored when a value would be misread or
would make a view or a reader fail (docs/records.md "Value rules"):

- integers are JSON integers (``3.0``, ``true``, ``"3"`` are refused) within the SQL type
  the views read them as (``Count``, ``Positive``: integer, ``BigCount``: bigint; ``Int64`` for the rest);
- floats are finite (NaN, Infinity and overflowing literals such as ``1e999`` are refused);
  durations, RTTs, PLTs and byte counts are ``>= 0`` (``NonNeg``);
- timestamps are RFC 3339 strings with an offset, in [2000-01-01, 2100-01-01) UTC (``Timestamp``).

Free-form objects (``env``, a page's navigation timing, ...) are JSON values checked by the
ingest, which parses every line again as strict RFC 8259 JSON: NaN / Infinity there and a NUL
character anywhere (PostgreSQL text and jsonb cannot hold U+0000) are quarantined by
collectors/parse.py. A recursive pydantic JSON-value type or a NUL pattern on every text
field would do it here at a quarter (resp. a tenth) of the validation throughput.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Annotated, Any

from pydantic import Field, GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic_core import core_schema

INT32_MAX = 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
TIME_MIN = datetime(2000, 1, 1, tzinfo=timezone.utc)
TIME_MAX = datetime(2100, 1, 1, tzinfo=timezone.utc)  # exclusive
TIME_RANGE = "RFC 3339 with an offset (Z or +hh:mm), 2000-01-01T00:00:00Z <= t < 2100-01-01T00:00:00Z"
# RFC 3339 §5.6 date-time (T or space, Z or numeric offset, seconds required). Checked before
# parsing because the datetime parser alone also takes "12345" (a Unix time) and "2026-01-01_..."
RFC3339 = r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$"

Count = Annotated[int, Field(ge=0, le=INT32_MAX)]
Positive = Annotated[int, Field(ge=1, le=INT32_MAX)]
BigCount = Annotated[int, Field(ge=0, le=INT64_MAX)]
Int64 = Annotated[int, Field(ge=INT64_MIN, le=INT64_MAX)]
NonNeg = Annotated[float, Field(ge=0)]
Fraction = Annotated[float, Field(ge=0, le=1)]


class _Rfc3339:
    """``datetime`` that is, in JSON, an RFC 3339 string with an offset inside [TIME_MIN, TIME_MAX).

    JSON: the string must match RFC3339, then it is parsed; Python (producers): an aware
    datetime in the same range."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        def dt(strict: bool) -> core_schema.CoreSchema:
            return core_schema.datetime_schema(strict=strict, tz_constraint="aware", ge=TIME_MIN, lt=TIME_MAX)

        text = core_schema.custom_error_schema(
            core_schema.str_schema(pattern=RFC3339, strict=True), custom_error_type="rfc3339",
            custom_error_message="not an RFC 3339 date-time with an offset (e.g. 2026-11-22T08:00:00Z)",
        )
        return core_schema.json_or_python_schema(
            json_schema=core_schema.chain_schema([text, dt(strict=False)]),
            python_schema=dt(strict=True),
        )

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler) -> dict:
        return {"type": "string", "format": "date-time", "pattern": RFC3339,
                "formatMinimum": TIME_MIN.isoformat().replace("+00:00", "Z"),
                "formatExclusiveMaximum": TIME_MAX.isoformat().replace("+00:00", "Z")}  # fmt: skip


Timestamp = Annotated[datetime, _Rfc3339]

