"""The supervisor, in a throwaway namespace of its own (dc-sv-<pid>; no island, no lease)."""

from __future__ import annotations

import json
import os
import time

import pytest

from testbed import netns
from testbed.supervisor import Supervisor, SupervisorError, proc_start_time

pytestmark = pytest.mark.testbed


@pytest.fixture()
def ns():
    name = f"dc-sv-{os.getpid()}"
    netns.del_ns(name)
    netns.add_ns(name)
    try:
        yield name
    finally:
        netns.del_ns(name)
        assert not netns.exists(name)


def test_start_ready_status_stop(ns, tmp_path):
    sup = Supervisor(tmp_path)
    flag = tmp_path / "ready"
    pid = sup.start("srv", ns, ["sh", "-c", f"echo hello; sleep 0.3; touch {flag}; exec sleep 60"],
                    env={"X_TEST": "1"}, ready=flag.exists, timeout=10)
    assert flag.exists() and sup.alive("srv") and sup.pid("srv") == pid
    # it really runs inside the namespace
    assert pid in netns.ns_pids(ns)
    rec = json.loads((tmp_path / "pids" / "srv.pid").read_text())
    assert rec["pid"] == pid and rec["ns"] == ns and rec["start_time"] == proc_start_time(pid)
    assert "hello" in (tmp_path / "logs" / "srv.log").read_text()
    st = sup.status()
    assert st == [{"name": "srv", "ns": ns, "pid": pid, "alive": True, "cmd": rec["cmd"], "log": rec["log"]}]
    # another Supervisor object (another process, e.g. `dnscamp testbed status`) sees it too
    assert Supervisor(tmp_path).alive("srv")
    with pytest.raises(SupervisorError, match="already running"):
        sup.start("srv", ns, ["sleep", "1"])
    sup.stop("srv")
    assert not sup.alive("srv") and not (tmp_path / "pids" / "srv.pid").exists()
    sup.stop("srv")  # idempotent


def test_sigterm_ignored_then_sigkill(ns, tmp_path):
    sup = Supervisor(tmp_path)
    pid = sup.start("stubborn", ns, ["sh", "-c", "trap '' TERM; while :; do sleep 0.1; done"])
    t0 = time.monotonic()
    sup.stop("stubborn", grace=0.5)
    assert time.monotonic() - t0 < 5
    assert proc_start_time(pid) is None or not sup.alive("stubborn")


def test_exit_during_startup_and_ready_timeout(ns, tmp_path):
    sup = Supervisor(tmp_path)
    with pytest.raises(SupervisorError, match="exited with 3.*boom"):
        sup.start("dies", ns, ["sh", "-c", "echo boom; exit 3"], ready=lambda: False, timeout=5)
    assert not (tmp_path / "pids" / "dies.pid").exists()
    with pytest.raises(SupervisorError, match="not ready after"):
        sup.start("slow", ns, ["sleep", "60"], ready=lambda: False, timeout=0.5)
    assert not sup.alive("slow")


def test_pid_reuse_guard_and_stop_all(ns, tmp_path):
    sup = Supervisor(tmp_path)
    sup.start("a", ns, ["sleep", "60"])
    sup.start("b", ns, ["sleep", "60"])
    # a pid file whose start time does not match its PID is a dead process, not a live stranger
    (tmp_path / "pids" / "ghost.pid").write_text(json.dumps({"name": "ghost", "pid": os.getpid(), "ns": ns,
                                                              "cmd": ["x"], "start_time": 1}))
    assert not sup.alive("ghost")
    dead = [p for p in sup.status() if not p["alive"]]
    assert [p["name"] for p in dead] == ["ghost"]
    sup.stop_all()
    assert sup.status() == [] and os.getpid()  # we were not killed
