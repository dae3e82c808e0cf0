"""The engine against CoreDNS 1.15 on loopback (the implementation of the testbed's
frontends): every transport x policy, TLS resumption and QUIC 0-RTT against a server that is
not ours, and the DoH/DoH3 clients against a Go HTTP/2 / HTTP/3 stack."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.tools import require

from vantage_agent.dns import registry
from vantage_agent.dns._common import QueryOptions
from vantage_agent.dns.policy import Policy

pytestmark = pytest.mark.local
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from _dns_coredns import COREDNS, LocalCoreDNS  # noqa: E402


@pytest.fixture(scope="module")
def coredns(tmp_path_factory):
    require(COREDNS.name, "install/40-testbed-servers.sh")
    s = LocalCoreDNS(tmp_path_factory.mktemp("coredns"))
    yield s
    s.close()


@pytest.mark.parametrize("transport", registry.names())
@pytest.mark.parametrize("mode", ["fresh", "reuse", "resume"])
def test_transport_policy(coredns, transport, mode):
    c = registry.client(transport, coredns.endpoint(transport), Policy(mode), QueryOptions(timeout_s=3))
    try:
        res = [c.query(f"n{i}.example.test.", "AAAA" if i == 2 else "A") for i in range(3)]
    finally:
        c.close()
    assert [r.status for r in res] == ["ok"] * 3, [r.error for r in res]
    assert res[0].answers == ("n0.example.test. A 192.0.2.1",)
    assert res[2].answers == ("n2.example.test. AAAA 2001:db8::1",)
    connected = transport != "do53"
    assert [r.connection_reused for r in res] == [False, connected and mode == "reuse", connected and mode == "reuse"]
    if transport in ("dot", "doh", "doh3", "doq"):
        if mode == "resume":
            assert res[0].resumed is False and res[1].resumed
            # libcurl closes a FORBID_REUSE connection as soon as the answer is in: when the
            # server's fresh ticket arrives later, the next connection is a full handshake
            # (and recorded as such). Our own drivers (DoT, DoQ) always resume.
            if transport in ("dot", "doq"):
                assert res[2].resumed
        if mode == "resume" and transport in ("doh3", "doq"):
            assert res[1].early_data  # 0-RTT accepted by CoreDNS/quic-go
            if transport == "doq":  # our own stamps; libcurl's POSTTRANSFER may follow its handshake
                assert res[1].t_query_sent <= res[1].t_tls_done
            assert all(bool(r.early_data) == bool(r.resumed) for r in res)
        if mode == "fresh":
            assert not any(r.resumed for r in res)
