"""Fidelity of the link emulator in real namespaces (root; builds dc-lt-<pid>-* and removes it)."""

from __future__ import annotations

import os

import pytest

from testbed.linkem import driver, selftest

pytestmark = [
    pytest.mark.testbed,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)"),
    pytest.mark.skipif(not driver.binary_path().exists(), reason="run install/30-linkem.sh first"),
]


def test_rtt_loss_goodput():
    r = selftest.measure(delays_ms=[14.8], probes=100, loss_packets=10000, rates=[20.0], tcp_seconds=5)
    rtt = r["rtt"][0]
    assert rtt["replies"] == rtt["probes"]
    assert abs(rtt["median_error_ms"]) <= 0.2, rtt
    assert r["loss"]["pass"], r["loss"]
    t = r["tcp"][0]
    assert t["a_to_b"]["pass"] and t["b_to_a"]["pass"], t
