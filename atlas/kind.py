"""The ``atlas`` kind: a small offline RIPE Atlas run on the testbed inside a campaign.

``[kinds.atlas]`` in a campaign spec (e.g. ``probes = 20``) adds one unit per repetition; the
unit builds its own probe namespaces (where = "host"), runs the pipeline of
``atlas.testbed.run_offline`` (discovery, pings, ingest into the atlas_* tables, analysis) and
yields one record with the ground-truth check and the QuicSocks summary.
"""

from __future__ import annotations

import os
from typing import Iterable

from pydantic import BaseModel, ConfigDict, Field


class AtlasParams(BaseModel):
    """``[kinds.atlas]`` of a campaign spec."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    probes: int = Field(20, ge=1, le=99, description="Atlas-like probes on the testbed.")
    seed: int = Field(1, description="Seed of the probes' link delays.")


def _empty(unit, params: AtlasParams | None) -> dict:
    return {"atlas_campaign": f"{unit.campaign}/{unit.run}", "probes": params.probes if params else 0,
            "seed": params.seed if params else 0, "link_backend": None, "discovery_correct": 0,
            "discovery_wrong": [], "isp_filter_correct": False, "errors_ms": {}, "summary": {},
            "ingest": {}, "passed": False, "duration_s": 0.0}


class _AtlasKind:
    name = "atlas"
    params_model = AtlasParams
    where = "host"  # builds and removes its own probe namespaces
    per_profile = False  # its probes have their own access links: once per vantage, not per profile

    def targets(self, params: BaseModel) -> list[str]:
        return ["offline"]

    def run(self, unit, ctx) -> Iterable:
        from vantage_agent import errors
        from vantage_agent.kind import make_record, utcnow
        from vantage_agent.records.atlas import AtlasRunBody

        started = utcnow()
        params = None
        try:
            params = AtlasParams.model_validate(unit.params or {})
            if os.geteuid() != 0:
                raise errors.SetupError("the offline Atlas run needs root (network namespaces)")
            from atlas import testbed as tb
            from db import engine, migrate

            migrate.upgrade(engine.sqlalchemy_url("owner"))
            campaign = f"{unit.campaign}/{unit.run}"
            r = tb.run_offline(n_probes=params.probes, campaign=campaign, seed=params.seed + unit.repetition,
                               db_url=engine.database_url("owner"),
                               run_dir=ctx.artifacts_dir / f"atlas-{unit.id}" if ctx and ctx.artifacts_dir else None)
            body = AtlasRunBody(
                atlas_campaign=campaign, probes=r["probes"], seed=r["seed"], link_backend=r["link_backend"],
                discovery_correct=r["discovery"]["correct"], discovery_wrong=r["discovery"]["wrong"],
                isp_filter_correct=r["isp_filter_correct"], errors_ms=r["errors_ms"], summary=r["summary"],
                ingest=r["ingest"], passed=r["ok"], duration_s=r["duration_s"],
            )
            yield make_record(unit, started_at=started, body=body, env={"link_backend": r["link_backend"]})
        except errors.MeasurementError as exc:
            yield make_record(unit, started_at=started, body=_empty(unit, params), status=exc.status, error=exc.message)
        except Exception as exc:  # never escape: a record with a status
            yield make_record(unit, started_at=started, body=_empty(unit, params), status=errors.Other.status,
                              error=f"{type(exc).__name__}: {exc}"[:500])


KIND = _AtlasKind()
