"""Records schema v1: valid fixtures parse, every invalid fixture is refused with its reason."""

import json
from pathlib import Path

import pytest

from vantage_agent import errors
from vantage_agent.records import BODIES, Envelope, RecordError, json_schema, parse_line, parse_record

pytestmark = pytest.mark.unit
V1 = Path(__file__).resolve().parent.parent / "fixtures" / "results" / "v1"


def test_valid_fixtures_parse_and_cover_every_kind():
    kinds = set()
    for f in sorted(V1.glob("*.jsonl")):
        for line in f.read_text().splitlines():
            env, _ = parse_line(line)
            kinds.add(env.kind)
            assert env.started_at.utcoffset() is not None
    assert kinds == set(BODIES), f"fixtures miss kinds {set(BODIES) - kinds}"


@pytest.mark.parametrize("name,expected", sorted(json.loads((V1 / "invalid" / "expected.json").read_text()).items()))
def test_invalid_fixture_is_refused_with_reason(name, expected):
    line = (V1 / "invalid" / name).read_text().strip()
    with pytest.raises(RecordError) as exc:
        parse_line(line)
    assert expected in exc.value.reason, exc.value.reason
    assert "\n" not in exc.value.reason


def test_every_invalid_fixture_has_an_expectation():
    listed = set(json.loads((V1 / "invalid" / "expected.json").read_text()))
    assert listed == {p.name for p in (V1 / "invalid").glob("*.jsonl")}


def test_timestamp_with_offset_keeps_the_instant():
    from datetime import datetime, timezone

    line = (V1 / "ping.jsonl").read_text().splitlines()[1]
    env, _ = parse_line(line)
    assert env.started_at == datetime(2026, 11, 22, 7, 0, 1, tzinfo=timezone.utc)


def test_failure_with_empty_body_is_a_record():
    env, body = parse_line((V1 / "ping.jsonl").read_text().splitlines()[3])
    assert env.status == "dns_error" and body is None


def test_ok_record_needs_a_full_body():
    line = (V1 / "ping.jsonl").read_text().splitlines()[0]
    obj = json.loads(line)
    obj["body"] = {}
    with pytest.raises(RecordError):
        parse_line(json.dumps(obj))


def test_json_schema_lists_every_kind_and_status_field():
    s = json_schema()
    assert set(s["x-bodies"]) == set(BODIES)
    assert {"schema", "kind", "id", "campaign", "run", "vantage", "started_at", "status", "error"} <= set(s["properties"])


def test_statuses_are_unique_and_include_the_taxonomy():
    st = errors.statuses()
    for s in ("ok", "timeout", "connect_error", "tls_error", "http_error", "quic_error", "refused",
              "servfail", "truncated", "malformed_response", "page_load_timeout", "dns_error", "driver_error", "other"):
        assert s in st


# -- strict value types --------------------------------------------------
HOSTILE_TYPES = V1.parent / "hostile" / "types.jsonl"


def _hostile_cases():
    # Python's json reads NaN / Infinity / 1e999, so every line names its case and expectation.
    return [pytest.param(line, id=json.loads(line)["env"]["case"]) for line in HOSTILE_TYPES.read_text().splitlines()]


@pytest.mark.parametrize("line", _hostile_cases())
def test_hostile_type_line_has_its_outcome(line):
    expect = json.loads(line)["env"]["expect"]
    if expect is None:
        env, _ = parse_line(line)
        assert env.started_at.utcoffset() is not None
        return
    with pytest.raises(RecordError) as exc:
        parse_line(line)
    assert exc.value.reason.startswith(f"{expect}: "), exc.value.reason
    assert "\n" not in exc.value.reason


def test_hostile_types_cover_refusals_and_acceptances():
    expects = [json.loads(line)["env"]["expect"] for line in HOSTILE_TYPES.read_text().splitlines()]
    assert expects.count(None) >= 15 and len(expects) - expects.count(None) >= 40


def test_parse_record_applies_the_line_rules():
    # parse_record gets decoded JSON (strings for ids and times) and validates it as a line would be.
    obj = json.loads((V1 / "ping.jsonl").read_text().splitlines()[0])
    assert parse_record(obj)[1].sent == 3
    for change, field in (({"sent": 3.0}, "body.sent"), ({"rtts_ms": [float("nan")] * 3}, "body.rtts_ms.0")):
        with pytest.raises(RecordError, match=f"^{field}: "):
            parse_record({**obj, "body": {**obj["body"], **change}})
    with pytest.raises(RecordError, match="^started_at: "):
        parse_record({**obj, "started_at": 12345})


def test_producers_get_the_same_rules_in_python():
    import uuid
    from datetime import datetime, timezone

    from pydantic import ValidationError

    from vantage_agent.records.ping import PingBody

    ok = dict(target="t", protocol="icmp", count=1, interval_ms=0, timeout_ms=1, sent=1, received=1, rtts_ms=[1.5])
    assert PingBody(**ok).interval_ms == 0.0  # an int for a float is fine
    for change in ({"sent": 1.0}, {"rtts_ms": [float("inf")]}, {"rtts_ms": [-1.0]}, {"count": True}):
        with pytest.raises(ValidationError):
            PingBody(**{**ok, **change})
    env = json.loads((V1 / "ping.jsonl").read_text().splitlines()[3])
    env["id"] = uuid.UUID(env["id"])  # in Python, values are of their type (strict)
    env["started_at"] = datetime(2026, 1, 1)  # naive
    with pytest.raises(ValidationError, match="timezone"):
        Envelope(**env)
    env["started_at"] = datetime(2026, 1, 1, tzinfo=timezone.utc)
    assert Envelope(**env).to_json().count('"started_at":"2026-01-01T00:00:00Z"') == 1


def test_json_schema_states_the_value_rules():
    s = json_schema()
    t = s["properties"]["started_at"]
    assert t["format"] == "date-time" and t["formatMinimum"] == "2000-01-01T00:00:00Z"
    assert t["formatExclusiveMaximum"] == "2100-01-01T00:00:00Z" and "2100" in t["description"]
    ping = s["x-bodies"]["ping"]["properties"]
    assert ping["sent"]["type"] == "integer" and ping["sent"]["minimum"] == 0 and ping["sent"]["maximum"] == 2**31 - 1
    assert ping["count"]["minimum"] == 1
    assert {"minimum": 0, "type": "number"} in ping["rtts_ms"]["items"]["anyOf"]
    dns = s["x-bodies"]["dns_query"]["properties"]
    # null when no query was ever made (a setup_error unit records no invented t_start)
    assert {"type": "integer", "minimum": 0, "maximum": 2**63 - 1} in dns["t_start"]["anyOf"]
    assert s["x-bodies"]["page_load"]["properties"]["plt_ms"]["anyOf"][0] == {"minimum": 0, "type": "number"}


def test_first_line_of_an_exception_is_one_line_even_when_empty():
    from vantage_agent.errors import first_line

    assert first_line(ValueError("")) == "ValueError"  # `str(exc).splitlines()[0]` raised IndexError here
    assert first_line(ValueError("  \n bad value \nDETAIL: more")) == "bad value"
