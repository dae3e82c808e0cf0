"""The agent's local state and ledger read back whatever a crash or a full disk left in them."""

from __future__ import annotations

import hashlib
import json
import threading

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vantage_agent import agent_state, ship

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(data=st.one_of(st.binary(max_size=200), st.text(max_size=200).map(str.encode),
                      st.dictionaries(st.text(max_size=12), st.integers() | st.none() | st.text(max_size=5)).map(
                          lambda d: json.dumps(d).encode())))  # fmt: skip
def test_a_torn_or_foreign_state_file_reads_as_the_defaults_for_what_it_lacks(tmp_path, data):
    p = agent_state.state_path(tmp_path, "c")
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)
    st_ = agent_state.read(tmp_path, "c")
    assert set(st_) == set(agent_state.DEFAULTS)
    with agent_state.updating(tmp_path, "c") as s:  # and the next update writes a whole file again
        s["firings"] = 3
    assert json.loads(p.read_text())["firings"] == 3


def test_concurrent_updates_lose_no_count(tmp_path):
    def bump():
        for _ in range(25):
            with agent_state.updating(tmp_path, "c") as s:
                s["skipped_firings"] += 1

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert agent_state.read(tmp_path, "c")["skipped_firings"] == 100


def test_launched_at_is_set_once(tmp_path):
    first = agent_state.ensure_launched(tmp_path, "c", at="2026-01-01T00:00:00+00:00")
    assert agent_state.ensure_launched(tmp_path, "c") == first == "2026-01-01T00:00:00+00:00"


@SETTINGS
@given(junk=st.lists(st.one_of(st.text(max_size=40), st.just('{"unit": 3}'), st.just("[1]"), st.just('{"unit": "u0"')),
                     max_size=6))  # fmt: skip
def test_a_torn_ledger_line_ships_that_object_again_and_the_manifest_stays_whole(tmp_path_factory, junk):
    run = tmp_path_factory.mktemp("spool") / "c" / "r1"
    run.mkdir(parents=True)
    (run / "u0.jsonl").write_bytes(b'{"a": 1}\n{"a": 2}\n')
    (run / "complete.json").write_text("{}")
    body = ship.gz((run / "u0.jsonl").read_bytes())
    good = {"unit": "u0", "key": "results/c/v/r1/u0.jsonl.gz", "etag": "x", "bytes": len(body)}  # an older agent's line
    (run / ship.LEDGER).write_text("\n".join([*junk, json.dumps(good)]) + "\n")
    assert ship.read_ledger(run) == {"u0"}
    m = ship.build_manifest(run, "v")
    assert m["objects"] == [{"unit": "u0", "key": good["key"], "sha256": hashlib.sha256(body).hexdigest(),
                             "bytes": len(body), "records": 2}]  # fmt: skip
    assert m["units_planned"] == ["u0"] and ship.backlog(run.parent.parent, "c") == (1, 0)  # the manifest waits
