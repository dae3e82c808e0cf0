"""Migration 0016_page_load_warm: v_page_load reads a warm-origin load's body (
experiment 4) into two columns appended after the existing ones: warm_origin (false, never
NULL, for a cold load) and request_in_0rtt (the netlog's evidence; NULL when unknown)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from collectors.ingest import ingest
from db import engine
from vantage_agent.records import parse_record

pytestmark = pytest.mark.local
V1 = Path(__file__).resolve().parent.parent / "fixtures" / "results" / "v1"
# the zero_rtt summaries vantage_agent.pageload.chromium.zero_rtt_summary writes
EARLY = {"sessions": 1, "state": "AttemptedAndSucceeded", "resumed": True, "zero_rtt_packets": 3, "request_in_0rtt": True}
LATE = {**EARLY, "zero_rtt_packets": 0, "request_in_0rtt": False}
NO_QUIC = {"sessions": 0}  # an h2 load: no QUIC session to the origin


def _variant(base: dict, warm_origin: object, drop: bool = False) -> dict:
    body = {k: v for k, v in base["body"].items() if k != "warm_origin"}
    if not drop:
        body["warm_origin"] = warm_origin
    rec = {**base, "id": str(uuid.uuid4()), "body": body}
    parse_record(rec)  # the shape records v1 accept, as the agent writes it
    return rec


def test_warm_origin_columns_through_the_reader(empty_db, tmp_path):
    base = json.loads((V1 / "page_load.jsonl").read_text().splitlines()[0])
    assert "warm_origin" not in base["body"]  # a record of before warm loads
    warm = lambda z: {"warm_up": {"status": "ok", "error": None, "plt_ms": 812.5, "wall_ms": {"total": 1500}},  # noqa: E731
                      "zero_rtt": z}
    cases = {"early": _variant(base, warm(EARLY)), "late": _variant(base, warm(LATE)),
             "h2": _variant(base, warm(NO_QUIC)), "null": _variant(base, None), "absent": _variant(base, None, drop=True)}
    f = tmp_path / "warm.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in cases.values()))
    stats = ingest([f], empty_db, workers=1)
    assert (stats.ingested, stats.quarantined) == (len(cases), 0), stats.reasons

    reader = engine.database_url("reader", dbname=conninfo_to_dict(empty_db)["dbname"])
    with psycopg.connect(reader) as c:
        cur = c.execute("SELECT * FROM v_page_load LIMIT 0")
        names = [d.name for d in cur.description]
        got = {str(r[0]): r[1:] for r in c.execute("SELECT id, warm_origin, request_in_0rtt, plt_ms FROM v_page_load")}
    # appended: the columns of 0015 keep their positions
    assert names[-3:] == ["seed", "warm_origin", "request_in_0rtt"]
    expect = {"early": (True, True), "late": (True, False), "h2": (True, None), "null": (False, None),
              "absent": (False, None)}
    assert {k: got[r["id"]][:2] for k, r in cases.items()} == expect
    assert all(got[r["id"]][2] == base["body"]["plt_ms"] for r in cases.values())  # the other columns unchanged
