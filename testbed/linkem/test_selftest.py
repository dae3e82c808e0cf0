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


# A fixed seed: a 99 % interval drawn from the clock fails one run in a hundred by design (CI
# once saw 126 of 10,000 against [74.4, 125.6]); with the seed fixed the emulator's draws are the
# same every run, so what can fail is the emulator or the path, not the dice.
LOSS_SEED = 20261125


def test_rtt_loss_goodput():
    r = selftest.measure(delays_ms=[14.8], probes=100, loss_packets=10000, loss_seed=LOSS_SEED, rates=[20.0],
                         tcp_seconds=5)
    rtt = r["rtt"][0]
    assert rtt["replies"] == rtt["probes"]
    assert abs(rtt["median_error_ms"]) <= 0.2, rtt
    assert r["loss"]["pass"], r["loss"]
    t = r["tcp"][0]
    assert t["a_to_b"]["pass"] and t["b_to_a"]["pass"], t


def test_same_loss_seed_same_drops():
    """The seed is the whole of the loss draws: two runs with it lose the same datagrams end to
    end (the sink's digest of the sequence numbers it received); another seed loses others."""
    runs = [selftest.measure(tests=("loss",), loss_packets=4000, loss_seed=seed)["loss"]
            for seed in (LOSS_SEED, LOSS_SEED, LOSS_SEED + 1)]
    for lo in runs:
        assert lo["lost_outside_emulator"] == 0, lo
    assert runs[0]["lost"] > 0, runs
    assert runs[0]["received_digest"] == runs[1]["received_digest"], runs
    assert runs[2]["received_digest"] != runs[0]["received_digest"], runs
