"""What a measurement kind is, and the helpers every kind uses to build its records.

A kind (ping, dns_query, page_load, link_check, atlas, ...) is a module-level object with:

- ``name``: the kind name stored in records;
- ``params_model``: a pydantic model validating the kind's table in the campaign spec
  (``[kinds.<name>]``);
- ``targets(params) -> list[str]``: the values of the matrix's target axis for this kind;
- ``per_profile`` (optional, default True): False for a kind that does not use the vantage's
  access profile (it runs once per vantage, with ``network_profile`` None);
- ``where``: ``"client"`` (run inside the vantage's client namespace, e.g. dc-client-fiber on
  the testbed) or ``"host"`` (run where the runner runs; for kinds that manage namespaces
  themselves);
- ``run(unit, ctx) -> Iterable[Envelope]``: perform one unit; every failure is a record with a
  status from ``vantage_agent.errors`` (never an exception escaping, never a missing record).

The registry from kind name to module lives in ``dnscamp/kinds.py``; no other code branches on
kind names.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Protocol

from pydantic import BaseModel

from vantage_agent import errors, link_state
from vantage_agent.records import SCHEMA_V1, Envelope, Vantage


@dataclass(frozen=True)
class Unit:
    """One cell of the campaign matrix: everything a kind needs to run it."""

    id: str
    campaign: str
    run: str
    kind: str
    vantage: Vantage
    target: str
    repetition: int
    params: dict[str, Any]
    seed: int
    order: int = 0

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["vantage"] = self.vantage.model_dump()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Unit":
        d = dict(d)
        d["vantage"] = Vantage(**d["vantage"])
        return cls(**d)


@dataclass
class RunContext:
    """Where a unit runs: directories and what is known about the testbed."""

    spool_dir: Path
    artifacts_dir: Path
    testbed: dict[str, Any] | None = None  # `dnscamp testbed info --json`, when on the testbed
    namespace: str | None = None  # network namespace the unit runs in, if any
    extra: dict[str, Any] = field(default_factory=dict)


class Kind(Protocol):
    name: str
    params_model: type[BaseModel]
    where: str

    def targets(self, params: BaseModel) -> list[str]: ...

    def run(self, unit: Unit, ctx: RunContext) -> Iterable[Envelope]: ...


def base_env() -> dict[str, Any]:
    """Environment facts every record carries (kinds add their tool versions)."""
    return {
        "kernel": platform.release(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "hostname": platform.node(),
        "netns": os.environ.get("DNSCAMP_NETNS"),
    }


@functools.lru_cache(maxsize=8)
def _link_of_unit(campaign: str, run: str, unit_id: str) -> str:
    """env.link, read once per unit (a file read costs ~12 µs, and a DNS unit makes a record per
    query between its timed queries): the shaping in place when the unit's first record was made.
    JSON text so that no record shares a mutable dict with another."""
    return json.dumps(link_state.applied())


def make_record(
    unit: Unit,
    *,
    started_at: datetime,
    body: BaseModel | dict[str, Any],
    status: str = errors.OK,
    error: str | None = None,
    env: dict[str, Any] | None = None,
    record_id: uuid.UUID | None = None,
) -> Envelope:
    """Build (and validate) one record of ``unit``."""
    if isinstance(body, BaseModel):
        body = body.model_dump(mode="json")
    return Envelope(
        schema=SCHEMA_V1,
        kind=unit.kind,
        id=record_id or uuid.uuid4(),
        campaign=unit.campaign,
        run=unit.run,
        unit=unit.id,
        vantage=unit.vantage,
        started_at=started_at.astimezone(timezone.utc),
        status=status,
        error=error,
        env={**base_env(), "link": json.loads(_link_of_unit(unit.campaign, unit.run, unit.id)), **(env or {})},  # link: what `dnscamp link` shapes here
        body=body,
    )


def utcnow() -> datetime:
    return datetime.now(timezone.utc)
