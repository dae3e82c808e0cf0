"""Collecting the testbed tests has no side effect on the machine: no namespace is created and
the linkem backend is not probed (detect_backend() makes a throwaway namespace) until a test
runs. Collection runs in a subprocess with tests/unit/_collect_guard.py, which makes both raise."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.unit


def _collect(*paths: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "DNSCAMP_LINKEM_BACKEND"}  # it would hide a probe
    return subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "tests.unit._collect_guard",
                           "-p", "no:cacheprovider", *paths], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=300)


def test_collecting_the_testbed_tests_probes_nothing():
    p = _collect("tests/testbed", "testbed/linkem")
    out = p.stdout + p.stderr
    assert "COLLECT-GUARD" not in out, out[-3000:]
    assert p.returncode == 0, out[-3000:]
    assert "test_conformance_check_meets_targets[nfqueue]" in out and "test_conformance_check_meets_targets[netem]" in out


def test_the_guard_catches_a_probe(tmp_path):
    # the guard itself can fail: a test module that probes at collection is a collection error
    (tmp_path / "test_probe_at_collection.py").write_text(
        "import pytest\nfrom testbed.linkem.driver import detect_backend\n\n"
        "@pytest.mark.parametrize('b', [detect_backend()])\ndef test_x(b):\n    pass\n")
    (tmp_path / "test_netns_at_collection.py").write_text(
        "import subprocess\nsubprocess.run(['ip', 'netns', 'list'])\n\ndef test_y():\n    pass\n")
    p = _collect(str(tmp_path))
    assert p.returncode != 0
    assert "detect_backend() called at collection" in p.stdout + p.stderr
    assert "namespace command at collection: ip netns list" in p.stdout + p.stderr
