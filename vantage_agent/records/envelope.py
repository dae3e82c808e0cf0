"""Result records, schema ``dnscamp.result/1``: the contract between agents and the store.

One JSON object per line. The envelope is the same for every kind; ``body`` is validated by
the model registered for the record's ``kind`` (see ``records/__init__.py``). Records are
frozen: what was measured is never edited after the fact.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone  # noqa: F401
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from vantage_agent import errors

from .types import TIME_RANGE, Timestamp

SCHEMA_V1 = "dnscamp.result/1"
SUPPORTED_SCHEMAS = (SCHEMA_V1,)

# Checked in pydantic-core (no Python call per record): ingest validates a million of these.
Status = Literal[tuple(errors.statuses())]  # type: ignore[valid-type]


class Frozen(BaseModel):
    # strict: a JSON integer field takes only JSON integers (not 3.0, true or "3"), a float field
    # JSON numbers, a text field JSON strings; allow_inf_nan: NaN and Infinity are refused in
    # every float (they have no JSON spelling and no jsonb one). See records/types.py.
    # defer_build: a model's validator is built when it first validates or serialises, not at
    # import; what only reads the fields (the archive's columns, `dnscamp sql --archive`) is
    # spared the build (~40 ms of CPU for every body model).
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False, defer_build=True)


class Vantage(Frozen):
    """Where a measurement ran."""

    id: str = Field(min_length=1, description="Vantage identifier, e.g. 'testbed' or 'ec2-us-east-2-a'.")
    provider: str = Field(min_length=1, description="'testbed', 'ec2', 'local', ...")
    region: str | None = Field(None, description="Cloud region or testbed site.")
    network_profile: str | None = Field(
        None, description="Access-network profile in force (testbed/linkem profile name), or None."
    )


class Envelope(Frozen):
    schema_: Literal["dnscamp.result/1"] = Field(alias="schema", description="Record schema version.")
    kind: str = Field(min_length=1, description="Measurement kind: ping, dns_query, page_load, link_check, ...")
    id: uuid.UUID = Field(description="Unique record id; ingest is idempotent on it.")
    campaign: str = Field(min_length=1)
    run: str = Field(min_length=1, description="Run identifier within the campaign.")
    unit: str | None = Field(None, description="Planner unit id that produced this record.")
    vantage: Vantage
    started_at: Timestamp = Field(
        description="When the measurement started (not when stored); stored in UTC. " + TIME_RANGE + "."
    )
    status: Status = Field(description="'ok' or a status from the error taxonomy (docs/records.md).")
    error: str | None = Field(None, description="Why it failed; required when status is not 'ok'.")
    env: dict[str, Any] = Field(
        default_factory=dict,
        description="Environment: tool/browser versions, link backend and lateness, kernel, seed.",
    )
    body: dict[str, Any] = Field(description="Kind-specific body, validated by the kind's model.")

    model_config = ConfigDict(populate_by_name=True)  # merged with Frozen's

    @model_validator(mode="after")
    def _error_iff_failed(self) -> "Envelope":
        if self.status != errors.OK and not self.error:
            raise ValueError(f"status {self.status!r} needs an 'error' message")
        if self.status == errors.OK and self.error:
            raise ValueError("status 'ok' must not carry an 'error'")
        return self

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True)
