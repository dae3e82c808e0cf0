"""Records schema v1: valid fixtures parse, every invalid fixture is refused with its reason."""

import json
from pathlib import Path

import pytest

from vantage_agent import errors
from vantage_agent.records import BODIES, RecordError, json_schema, parse_line

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
