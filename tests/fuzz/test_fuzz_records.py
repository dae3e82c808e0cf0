"""Records v1 under fuzzing (no database): parse_line never raises anything but RecordError,
with a one-line reason; every valid record is accepted and reads back equal after
re-serialisation; every line the contract calls bad is refused."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from tests.fuzz import strategies as S
from tests.fuzz.conftest import FACTOR, TALLY, examples
from vantage_agent.records import RecordError, parse_line

pytestmark = pytest.mark.unit

LINES = 10_000
PER_EXAMPLE = (40, 60)
# Byte-level defects: whether parse_line or the ingest framing refuses them is the
# implementation's choice (ingest must quarantine them: test_fuzz_ingest.py).
FRAMING = ("bom",)


def check_line(line: S.Line, v: S.Violations) -> None:
    """The record-level contract for one generated line."""
    try:
        env, body = parse_line(line.raw)
    except RecordError as exc:
        v.check(len(exc.reason.splitlines()) == 1, "RecordError reason is not one line", line)
        v.check(line.role not in ("valid", "dup", "conflict"), f"valid record refused ({exc.reason[:80]})", line)
        return
    except Exception as exc:  # noqa: BLE001 - the property: nothing but RecordError
        v.check(False, f"parse_line raised {type(exc).__name__}, not RecordError", line)
        return
    how = line.why.split()[0] if line.why else line.role
    # NaN inside a free-form object (env) is refused by the ingest, not by the models (a
    # recursive JSON type would cost ~25 % of parse_line; docs/records.md "Value rules"):
    # test_fuzz_ingest holds the ingest to it.
    if not v.check(
        line.role in ("valid", "dup", "conflict", S.EITHER) or how in FRAMING or line.why == "nan in env",
        f"accepted a line the contract refuses: {how}",
        line,
    ):
        return
    again = parse_line(env.model_dump_json(by_alias=True))
    v.check(_values(*again) == _values(env, body), "re-serialised record reads back different", line)


def _values(env, body) -> tuple:
    """What a record says, whichever path of parse_line built the models."""
    return env.model_dump(mode="json", by_alias=True, exclude={"body"}), body and body.model_dump(mode="json")


def test_parse_line_contract():
    seen = []

    @settings(max_examples=examples(LINES // (PER_EXAMPLE[0] - 4) + 1))  # ~5 % of lines are blank
    @given(S.batches(*PER_EXAMPLE))
    def prop(lines: list[S.Line]) -> None:
        v = S.Violations()
        for line in lines:
            if line.role != "blank":
                check_line(line, v)
                seen.append(1)
        v.raise_any()

    prop()
    TALLY["records"] += len(seen)
    assert len(seen) >= LINES * min(1, FACTOR), f"only {len(seen)} generated lines went through parse_line"
