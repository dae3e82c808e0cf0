"""[campaign.schedule]: cron validated by croniter (5 fields, as cron.d takes), bounded jitter and
runtime; a bad value is a one-line SpecError naming the field."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from dnscamp import spec
from dnscamp.spec import ScheduleSpec

pytestmark = pytest.mark.unit

BASE = """
[campaign]
name = "s"
{schedule}

[[vantages]]
id = "v"
provider = "local"

[kinds.ping]
targets = ["127.0.0.1"]
"""


@pytest.mark.parametrize("cron", ["17 */3 * * *", "0 0 * * 0", "*/5 1-5 1,15 * mon-fri", "  17   */3 * * * "])
def test_valid_cron(cron):
    assert ScheduleSpec(cron=cron).cron == " ".join(cron.split())


@pytest.mark.parametrize("cron", ["61 * * * *", "* * * *", "0 0 * * * *", "0 0 * * * * 2030", "@hourly", "", "0 0 32 * *",
                                  "0 0 * * *\n* * * * * root rm -rf /"])
def test_invalid_cron(cron):
    with pytest.raises(ValidationError):
        ScheduleSpec(cron=cron)


@given(st.floats(allow_nan=True, allow_infinity=True))
@settings(max_examples=200, deadline=None)
def test_jitter_and_runtime_bounds(x):
    ok = math.isfinite(x) and 0 <= x <= 86_400
    try:
        ScheduleSpec(cron="* * * * *", jitter_s=x)
        assert ok
    except ValidationError:
        assert not ok


def test_spec_section_and_one_line_error(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text(BASE.format(schedule='[campaign.schedule]\ncron = "17 */3 * * *"\njitter_s = 60'))
    s = spec.load(f)
    assert s.campaign.schedule == ScheduleSpec(cron="17 */3 * * *", jitter_s=60)
    f.write_text(BASE.format(schedule='[campaign.schedule]\ncron = "17 */3 * *"'))
    with pytest.raises(spec.SpecError) as e:
        spec.load(f)
    assert "campaign.schedule.cron" in str(e.value) and str(f) in str(e.value)
    f.write_text(BASE.format(schedule=""))
    assert spec.load(f).campaign.schedule is None
