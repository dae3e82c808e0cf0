"""Unit tests of the linkem Python driver (no sockets, no namespaces, no root)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from testbed.linkem import driver

pytestmark = pytest.mark.unit


def test_binary_path_honours_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert driver.binary_path() == tmp_path / "dnscamp" / "bin" / "linkem"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert driver.binary_path() == Path.home() / ".cache" / "dnscamp" / "bin" / "linkem"


def test_detect_backend_override_and_cache(monkeypatch):
    monkeypatch.setattr(driver, "_BACKEND_CACHE", None)
    monkeypatch.setenv("DNSCAMP_LINKEM_BACKEND", "nfqueue")
    assert driver.detect_backend() == "nfqueue"
    monkeypatch.setenv("DNSCAMP_LINKEM_BACKEND", "netem")
    assert driver.detect_backend() == "nfqueue"  # cached in-process
    monkeypatch.setattr(driver, "_BACKEND_CACHE", None)
    monkeypatch.setenv("DNSCAMP_LINKEM_BACKEND", "bogus")
    with pytest.raises(driver.LinkError):
        driver.detect_backend()
    monkeypatch.setattr(driver, "_BACKEND_CACHE", None)


def test_normalize_fills_defaults_and_rejects_unknown():
    c = driver.normalize_direction({"delay_ms": 7.4, "loss": {"model": "gilbert_elliott", "p": 0.01, "r": 0.3}})
    assert c["jitter_dist"] == "uniform" and c["reorder"] is False and c["framing_overhead_bytes"] == 38
    assert c["loss"] == {"model": "gilbert_elliott", "p": 0.01, "r": 0.3, "k": 1.0, "h": 0.0}
    with pytest.raises(driver.LinkError):
        driver.normalize_direction({"delay": 5})
    with pytest.raises(driver.LinkError):
        driver.normalize_direction({"jitter_dist": "pareto"})


def test_netem_argv_matches_rust_tests():
    # the same cases as netem_argv_full in src/lib.rs
    a = driver.netem_argv("veth0", {"delay_ms": 53.3, "jitter_ms": 1.0, "jitter_dist": "normal",
                                    "jitter_correlation": 0.25, "loss": {"model": "random", "p": 0.005},
                                    "rate_mbps": 22.1, "queue_limit_ms": 100.0})
    assert " ".join(a) == ("tc qdisc replace dev veth0 root netem delay 53300us 1000us 25% distribution normal "
                           "loss random 0.5% rate 22100kbit 24 limit 1000")
    g = driver.netem_argv("e", {"delay_ms": 10.0, "loss": {"model": "gilbert_elliott", "p": 0.01, "r": 0.25,
                                                          "k": 0.99, "h": 0.1},
                                "rate_mbps": 100.0, "queue_limit_ms": 200.0})
    assert " ".join(g) == ("tc qdisc replace dev e root netem delay 10000us loss gemodel 1% 25% 90% 1% "
                           "rate 100000kbit 24 limit 1750")
    with pytest.raises(driver.LinkError):
        driver.netem_argv("e", {"trace_file": "x"})


def test_link_config_file_and_describe(tmp_path):
    lk = driver.Link("acc1", "dc-x-r", "ra", "rb", {"delay_ms": 5}, {"delay_ms": 6, "rate_mbps": 10},
                     tmp_path, backend="nfqueue")
    cfg = lk._link_config()
    assert cfg["queues"]["a_to_b"] != cfg["queues"]["b_to_a"]
    assert cfg["a_to_b"]["delay_ms"] == 5 and cfg["b_to_a"]["rate_mbps"] == 10
    json.dumps(cfg)
    d = lk.describe()
    assert d["backend"] == "nfqueue" and d["fail"] == "closed"
    rules = lk._rule_specs()
    assert all("dnscamp-linkem:acc1" in r for r in rules)
    assert "--queue-bypass" not in sum(rules, [])
    n = driver.Link("acc1", "dc-x-r", "ra", "rb", {"delay_ms": 5}, {"delay_ms": 6}, tmp_path, backend="netem")
    assert n.describe()["netem"]["a_to_b"][4] == "rb"  # a_to_b leaves on if_b


def test_stop_is_idempotent_without_namespace(tmp_path):
    lk = driver.Link("gone", f"dc-missing-{os.getpid()}", "ra", "rb", {}, {}, tmp_path, backend="nfqueue")
    lk.stop()
    lk.stop()
    assert not lk.alive()
