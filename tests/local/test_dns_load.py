"""The open-loop load mode (vantage_agent/dns/load.py) against real servers on loopback: every
transport over ONE connection against our fake servers (tests/local/dnsfake.py: answers, ids,
timeouts), and head-of-line blocking against CoreDNS 1.15 (the testbed frontends'
implementation) with a zone whose answers come 1,000 ms late (the ``erratic`` plugin, as the
testbed's slow.hol.test): a delayed answer holds the queries behind it on HTTP/1.1 and DoT,
and not on Do53, HTTP/2 or DoQ."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.local import dnsfake
from tests.tools import require
from vantage_agent import errors
from vantage_agent.dns import load, registry
from vantage_agent.dns._common import Endpoint, QueryOptions
from vantage_agent.dns.policy import Policy

pytestmark = pytest.mark.local
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from _dns_coredns import COREDNS, TEMPLATE, TLS_NAME, _free_port  # noqa: E402

ALL = ["do53", "do53-tcp", "dot", "doh", "doh3", "doq"]


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    s = dnsfake.AllServers(tmp_path_factory.mktemp("dnsfake"))
    yield s
    s.close()


def _run(endpoint, transport, names, offsets, **opt):
    client = registry.client(transport, endpoint, Policy("reuse"), QueryOptions(**opt))
    t0 = time.monotonic_ns() + 20_000_000
    return t0, load.run(client, names, offsets, seed=7, start_ns=t0)


@pytest.mark.parametrize("transport", ALL)
def test_one_connection_answers_matched_and_timeouts_recorded(servers, transport):
    srv = servers.server(transport)
    srv.stats.reset()
    names = [f"n{i}.example.test." for i in range(24)] + ["drop.example.test.", "nx.example.test."]
    offsets = load.schedule(len(names), 200.0, 3)
    t0, res = _run(servers.endpoint(transport), transport, names, offsets, timeout_s=1.0, attempts=1)
    assert [r.qname for r in res] == names
    assert [r.t_start for r in res] == [t0 + int(o * 1e9) for o in offsets]  # the scheduled arrivals
    for r in res[:24]:
        assert r.status == "ok", r.error
        assert r.answers == (f"{r.qname} A 192.0.2.1",)  # the answer to this query, not another's
        assert r.t_start <= (r.t_query_sent or r.t_start) <= r.t_response
        # libcurl's send offset is occasionally 0 for a multiplexed transfer: null, never guessed
        assert r.t_query_sent is not None or transport in ("doh", "doh3")
    assert res[24].status == errors.Timeout.status and res[24].t_response is None
    assert res[25].status == "ok" and res[25].rcode == "NXDOMAIN"
    if transport != "do53":
        assert srv.stats.connections == 1  # one connection carried them all
        assert [r.connection_reused for r in res].count(False) == 1 and res[0].t_connected is not None
    assert srv.stats.queries == len(names)


def test_do53_retransmits_after_timeout(servers):
    names = ["a.example.test.", "drop.example.test."]
    _, res = _run(servers.endpoint("do53"), "do53", names, [0.0, 0.01], timeout_s=0.3, attempts=2)
    assert res[0].ok and res[0].attempts == 1
    assert res[1].status == "timeout" and res[1].attempts == 2


def test_connection_refused_fails_each_query_with_a_taxonomy_status():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    ep = Endpoint("dot", "127.0.0.1", port, tls_name="dns.test")
    _, res = _run(ep, "dot", ["a.example.test.", "b.example.test."], [0.0, 0.05], timeout_s=1.0)
    assert [r.status for r in res] == [errors.ConnectError.status] * 2


# -- head-of-line blocking against CoreDNS ----------------------------------------------------------
class SlowZoneCoreDNS:
    """CoreDNS on 127.0.0.1 serving every transport: ``example.test`` answered at once
    (template), ``slow.example.test`` after 1,000 ms (erratic, every query)."""

    SCHEMES = {"do53": "dns", "dot": "tls", "doh": "https", "doh3": "https3", "doq": "quic"}

    def __init__(self, workdir: Path):
        self.dir = workdir
        self.ca, cert, key = dnsfake.make_certs(workdir, TLS_NAME)
        self.ports = {t: _free_port(socket.SOCK_STREAM if t in ("dot", "doh") else socket.SOCK_DGRAM)
                      for t in self.SCHEMES}
        blocks = []
        for t, port in self.ports.items():
            tls = f"  tls {cert} {key}\n" if t != "do53" else ""
            blocks.append(f"{self.SCHEMES[t]}://example.test.:{port} {{\n  bind 127.0.0.1\n{tls}{TEMPLATE}\n}}\n")
            blocks.append(f"{self.SCHEMES[t]}://slow.example.test.:{port} {{\n  bind 127.0.0.1\n{tls}"
                          f"  erratic {{\n    delay 1 1000ms\n  }}\n}}\n")
        (workdir / "Corefile").write_text("\n".join(blocks))
        self.log = open(workdir / "coredns.log", "wb")
        self.proc = subprocess.Popen([str(COREDNS), "-conf", str(workdir / "Corefile")], stdout=self.log,
                                     stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 15
        while True:
            assert self.proc.poll() is None, (workdir / "coredns.log").read_text()[-2000:]
            try:
                for t in ("dot", "doh"):
                    socket.create_connection(("127.0.0.1", self.ports[t]), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "coredns did not start listening"
                time.sleep(0.1)

    def endpoint(self, transport: str) -> Endpoint:
        key = "do53" if transport == "do53-tcp" else transport
        url = f"https://{TLS_NAME}:{self.ports[key]}/dns-query" if key in ("doh", "doh3") else None
        return Endpoint(key, "127.0.0.1", self.ports[key], tls_name=TLS_NAME, url=url, ca_file=self.ca)

    def close(self) -> None:
        self.proc.terminate()  # our own child, by PID
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


@pytest.fixture(scope="module")
def slow_coredns(tmp_path_factory):
    require(COREDNS.name, "install/40-testbed-servers.sh")
    s = SlowZoneCoreDNS(tmp_path_factory.mktemp("coredns-slow"))
    yield s
    s.close()


# the connection opens with a fast query; the slow one at 0.3 s; five fast ones while it is held
NAMES = ["a0.example.test.", "s.slow.example.test.", *(f"a{i}.example.test." for i in range(1, 6))]
OFFSETS = [0.0, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]


@pytest.mark.parametrize(("transport", "http_version", "blocks"), [
    ("do53", None, False), ("doh", "2", False), ("doh3", None, False), ("doq", None, False),
    ("doh", "1.1", True), ("dot", None, True),
])
def test_a_delayed_answer_blocks_the_others_only_without_multiplexing(slow_coredns, transport, http_version, blocks):
    _, res = _run(slow_coredns.endpoint(transport), transport, NAMES, OFFSETS, timeout_s=4.0,
                  http_version=http_version if transport == "doh" else None)
    assert [r.status for r in res] == ["ok"] * len(NAMES), [r.error for r in res]
    if transport == "doh":
        assert {r.http_version for r in res} == {http_version}
    slow = res[1].total_ns() / 1e6
    assert slow >= 990  # the server's delay
    behind = [r.total_ns() / 1e6 for r in res[2:]]  # arrived while the slow answer was pending
    if blocks:  # each waits for the slow answer: done no earlier than 0.3 s + 1 s after the start
        assert all(ms >= 1000 * (1.3 - o) - 50 for ms, o in zip(behind, OFFSETS[2:])), behind
    else:
        assert max(behind) < 300, behind
