"""``[campaign.schedule]`` of a campaign spec: when scheduled agents fire (issue 14).

    [campaign.schedule]
    cron = "17 */3 * * *"   # standard 5-field cron (croniter validates it)
    jitter_s = 300          # each firing sleeps a random 0..jitter_s first (spreads the fleet)
    max_runtime_s = 3600    # a run still going after this is stopped; its units end as timeout

Only the model lives here; installing it (cron.d / crontab) is ``dnscamp schedule``.
"""

from __future__ import annotations

from croniter import croniter
from pydantic import BaseModel, ConfigDict, Field, field_validator


class ScheduleSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    cron: str = Field(description="5-field cron expression (minute hour day-of-month month day-of-week).")
    jitter_s: float = Field(0.0, ge=0, le=86_400, allow_inf_nan=False,
                            description="Random delay 0..jitter_s before each firing.")
    max_runtime_s: float = Field(3600.0, gt=0, le=7 * 86_400, allow_inf_nan=False,
                                 description="A run still going after this is stopped (its units: timeout).")

    @field_validator("cron")
    @classmethod
    def _cron(cls, v: str) -> str:
        v = " ".join(v.split())
        # cron.d lines are 5 fields; croniter would also take 6 (seconds) or 7 (year)
        if len(v.split(" ")) != 5 or not croniter.is_valid(v):
            raise ValueError(f"not a 5-field cron expression: {v!r}")
        return v
