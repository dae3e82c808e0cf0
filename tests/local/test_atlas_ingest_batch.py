"""Atlas ingest in blocks (collectors.atlas_ingest.ingest_items) against the per-result path
(``block=0``): the same rows in every Atlas table and the quarantine, in the same order, and
the same stats, with a result Postgres refuses inside a block (NUL, NaN, a number beyond int4)
and duplicates inside a block and across runs; JSON lines split on "\\n" only."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import psycopg
import pytest

from collectors.atlas_ingest import ingest_files, ingest_results, iter_items
from tests.store_util import empty_store

pytestmark = pytest.mark.local
FIX = Path(__file__).resolve().parents[1] / "fixtures" / "atlas"
RESULTS = [json.loads(x) for f in ("sagan_ping.jsonl", "sagan_dns.jsonl") for x in (FIX / f).read_text().splitlines()
           if x.strip()]  # fmt: skip
PING = next(r for r in RESULTS if r["type"] == "ping" and r.get("fw", 0) >= 4400 and "result" in r)


def _poisoned(kind: str) -> dict:
    r = copy.deepcopy(PING)
    r["timestamp"] += 1  # a key of its own
    if kind == "nul":  # jsonb refuses \u0000: quarantined (the raw result alone is refused too)
        r["from"] = "192.0.2.1\x00"
    elif kind == "nan":  # jsonb refuses NaN: quarantined
        r["result"][0]["rtt"] = float("nan")
    else:  # atlas_ping.sent is int4: the raw result alone, as malformed_response
        r["sent"] = 2**40
    return r


def _snapshot(url: str) -> dict:
    """Every Atlas row and quarantine row, in id order, without ids and ingest times."""
    with psycopg.connect(url) as c:
        def rows(sql):
            return [r[0] for r in c.execute(sql)]
        return {
            "raw": rows("SELECT to_jsonb(r) - 'id' - 'ingested_at' FROM atlas_results_raw r ORDER BY id"),
            "ping": rows("SELECT to_jsonb(p) - 'raw_id' || jsonb_build_object('line', r.source_line) "
                         "FROM atlas_ping p JOIN atlas_results_raw r ON r.id = p.raw_id ORDER BY r.id"),
            "dns": rows("SELECT to_jsonb(d) - 'id' - 'raw_id' || jsonb_build_object('line', r.source_line) "
                        "FROM atlas_dns d JOIN atlas_results_raw r ON r.id = d.raw_id ORDER BY d.id"),
            "latest": rows("SELECT to_jsonb(l) - 'raw_id' || jsonb_build_object('line', r.source_line) "
                           "FROM atlas_ping_latest l JOIN atlas_results_raw r ON r.id = l.raw_id ORDER BY r.id"),
            "quarantine": rows("SELECT to_jsonb(q) - 'id' - 'quarantined_at' - 'created_at' FROM quarantine q "
                               "ORDER BY line"),
        }


def _stats(s) -> dict:
    return {**s.as_json(), "by_status": s.by_status, "reasons": s.reasons}


def _both(url: str, files: list[Path], block: int) -> tuple[list, list]:
    """(per-result stats + rows, block stats + rows): each path twice (the second run: duplicates)."""
    out = []
    for b in (0, block):
        with psycopg.connect(url, autocommit=True) as c:
            empty_store(c)
        runs = [ingest_files(files, url, campaign="c", block=b) for _ in range(2)]
        out.append(([_stats(s) for s in runs], [s.blocks_redone for s in runs], _snapshot(url)))
    return out[0], out[1]


@pytest.mark.parametrize("kind", ["nul", "nan", "int4"])
def test_a_refused_result_in_a_block_is_handled_as_alone_and_the_block_is_kept(empty_db, tmp_path, kind):
    items = RESULTS[:6] + [_poisoned(kind)] + RESULTS[6:8] + [RESULTS[7], RESULTS[0]] + RESULTS[8:]
    f = tmp_path / "in.jsonl"
    f.write_text("".join(json.dumps(x) + "\n" for x in items) + "{not json\n")
    (old, _, old_rows), (new, redone, new_rows) = _both(empty_db, [f], block=5)
    assert new == old and new_rows == old_rows
    assert redone == [1, 1]  # only the block holding the poisoned result was redone, in both runs
    first = new[0]
    assert first["duplicates"] == 2 and new[1]["duplicates"] == first["ingested"] + 2  # inside one run, then across
    assert len(new_rows["raw"]) == first["ingested"] and len(new_rows["quarantine"]) == first["quarantined"]
    lines = {r["source_line"]: r for r in new_rows["raw"]}
    assert all(i in lines for i in (1, 2, 3, 4, 5, 6, 8, 9, len(items)))  # every other result of its block
    if kind == "int4":
        assert lines[7]["status"] == "malformed_response" and "out of range" in lines[7]["error"]
        assert first["quarantined"] == 1
    else:
        assert 7 not in lines and [q["line"] for q in new_rows["quarantine"]] == [7, len(items) + 1]
        assert "rejected by the store" in new_rows["quarantine"][0]["reason"]


def test_fixtures_in_blocks_equal_the_per_result_path_without_redoing(empty_db):
    files = [FIX / "sagan_ping.jsonl", FIX / "sagan_dns.jsonl"]
    (old, _, old_rows), (new, redone, new_rows) = _both(empty_db, files, block=3)
    assert new == old and new_rows == old_rows and redone == [0, 0]
    assert new_rows["ping"] and new_rows["dns"] and new_rows["latest"]  # the 0017 trigger fired on COPY
    assert new[1]["duplicates"] == 14 and new[1]["ingested"] == 0


def test_ingest_results_in_blocks_counts_a_repeated_result_once(empty_db):
    s = ingest_results(RESULTS + RESULTS[:3], empty_db, source="mem", block=4)
    assert (s.ingested, s.duplicates, s.quarantined, s.blocks_redone) == (14, 3, 0, 0)


def test_json_lines_split_on_newline_only(empty_db, tmp_path):
    r = copy.deepcopy(PING)
    r["dst_name"] = "a\u2028b\u2029c\x85d"  # valid raw inside a JSON string; str.splitlines() splits there
    f = tmp_path / "seps.jsonl"
    f.write_bytes((json.dumps(r, ensure_ascii=False) + "\r\n" + json.dumps(RESULTS[0]) + "\n").encode())
    assert [(n, v) for n, v, _ in iter_items(f)] == [(1, r), (2, RESULTS[0])]
    s = ingest_files([f], empty_db)
    assert (s.ingested, s.quarantined) == (2, 0)
    with psycopg.connect(empty_db) as c:
        assert c.execute("SELECT raw ->> 'dst_name' FROM atlas_results_raw WHERE source_line = 1").fetchone()[0] == \
            r["dst_name"]
