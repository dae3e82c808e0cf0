"""The getdns engine (vantage_agent/dns/getdns_engine.py) against the loopback servers of
tests/local/dnsfake.py (Do53/UDP, DoT with the test CA through SSL_CERT_FILE) and CoreDNS:
answers equal to our engine's, server-side connection counts proving the policy, failures as
records, and the engine fields of every record."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from tests.local import dnsfake
from vantage_agent.dns import registry
from vantage_agent.dns._common import QueryOptions
from vantage_agent.dns.policy import Policy

pytestmark = pytest.mark.local
GETDNS = ["do53", "dot"]


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    s = dnsfake.AllServers(tmp_path_factory.mktemp("dnsfake"))
    yield s
    s.close()


def _run(servers, transport, mode, names, engine="getdns", endpoint=None, **opt):
    srv = servers.server(transport)
    srv.stats.reset()
    c = registry.client(transport, endpoint or servers.endpoint(transport), Policy(mode, opt.pop("idle", 10.0)),
                        QueryOptions(**opt), engine=engine)
    try:
        return [c.query(n) for n in names], srv.stats, getattr(c, "engine_version", None)
    finally:
        c.close()


@pytest.mark.parametrize("transport", GETDNS)
def test_answers_equal_our_engine(servers, transport):
    names = ["www.example.test.", "nx.example.test."]
    ours, _, _ = _run(servers, transport, "fresh", names, engine="dnscamp")
    theirs, stats, version = _run(servers, transport, "fresh", names)
    assert [t.status for t in theirs] == ["ok", "ok"], [t.error for t in theirs]
    assert [(t.rcode, t.answers) for t in theirs] == [(t.rcode, t.answers) for t in ours]
    assert {t.response_size for t in theirs} == {None}  # the binding cannot give the reply's wire (engine module)
    assert stats.queries == 2
    assert version.startswith("getdns-python ") and "libgetdns 1." in version
    for t in theirs:
        # our clock around the call; the phases getdns cannot give are null, never estimated
        assert t.t_response > t.t_start and t.t_query_sent is None and t.t_connected is None and t.t_tls_done is None
        assert t.handshake is None and t.query is None and t.wire_basis == "unavailable"
        run_ms = dict(t.details)["engine_run_time_ms"]
        assert isinstance(run_ms, int) and 0 <= run_ms <= (t.t_response - t.t_start) / 1e6 + 1
    if transport == "dot":
        assert {t.tls_version for t in theirs} == {"TLSv1.3"}


@pytest.mark.parametrize("mode,connections,reused", [("fresh", 3, [False] * 3), ("reuse", 1, [False, True, True])])
def test_dot_policy_by_server_side_connections(servers, mode, connections, reused):
    res, stats, _ = _run(servers, "dot", mode, [f"p{i}.example.test." for i in range(3)])
    assert [t.status for t in res] == ["ok"] * 3, [t.error for t in res]
    assert stats.connections == connections and stats.queries == 3
    assert [t.connection_reused for t in res] == reused


def test_reuse_opens_a_new_connection_after_the_idle_timeout(servers):
    # getdns's own idle timer does not fire with the sync API: the engine enforces idle_timeout_s
    import time

    c = registry.client("dot", servers.endpoint("dot"), Policy("reuse", 0.3), QueryOptions(), engine="getdns")
    servers.dot.stats.reset()
    try:
        a = c.query("i1.example.test.")
        b = c.query("i2.example.test.")
        time.sleep(0.5)
        d = c.query("i3.example.test.")
    finally:
        c.close()
    assert [x.connection_reused for x in (a, b, d)] == [False, True, False]
    assert servers.dot.stats.connections == 2


@pytest.mark.parametrize(
    "name,status,rcode",
    [("refused.example.test.", "refused", "REFUSED"), ("servfail.example.test.", "servfail", "SERVFAIL"),
     ("drop.example.test.", "timeout", None),
     ("malformed.example.test.", "timeout", None)],  # getdns drops an undecodable reply and waits
)
def test_failures_are_records_with_taxonomy_statuses(servers, name, status, rcode):
    (t,), _, _ = _run(servers, "do53", "fresh", [name], timeout_s=0.5)
    assert (t.status, t.rcode) == (status, rcode), t.error
    if status == "timeout":
        assert t.t_response is None and t.error


@pytest.mark.parametrize("name", ["a" * 70 + ".example.test.", "a..b.test."])
def test_invalid_name_is_bad_input_and_nothing_is_sent(servers, name):
    (t,), stats, _ = _run(servers, "do53", "fresh", [name])
    assert t.status == "bad_input" and t.attempts == 0 and stats.queries == 0


def test_resume_is_a_bad_input_record_without_sending(servers):
    (t,), stats, version = _run(servers, "dot", "resume", ["r.example.test."])
    assert t.status == "bad_input" and "resume" in t.error and stats.connections == 0


def test_dot_without_the_ca_fails_as_a_record(servers):
    ep = dataclasses.replace(servers.endpoint("dot"), ca_file=None)  # the system store does not know the test CA
    (t,), stats, _ = _run(servers, "dot", "fresh", ["ca.example.test."], endpoint=ep)
    assert t.status != "ok" and t.error and stats.queries == 0


def test_registry_refuses_other_transports():
    with pytest.raises(registry.UnsupportedEngine, match="does not support transport"):
        registry.client_class("doh", "getdns")
    with pytest.raises(registry.UnsupportedEngine, match="unknown engine 'bind'"):
        registry.engine_transports("bind")


# -- the kind and the CLI ---------------------------------------------------------------------------
def _info(servers) -> dict:
    eps = {t: {"address": "127.0.0.1", "port": servers.endpoint(t).port, "tls_name": dnsfake.TLS_NAME,
               "url": servers.endpoint(t).url} for t in ("do53", "dot", "doh", "doh3", "doq")}
    return {"up": True, "resolvers": [{"name": "loopback-fake", "endpoints": eps}], "ca_file": servers.ca}


def test_spec_engine_errors_name_the_field():
    from vantage_agent.dns.kind import DnsQueryParams

    with pytest.raises(ValidationError, match="engine: engine 'getdns' does not support transport.s. doh"):
        DnsQueryParams(transports=["do53", "doh"], names=["a.test"], engine="getdns")
    with pytest.raises(ValidationError, match="engine: 'getdns' does not support policy 'resume'"):
        DnsQueryParams(transports=["dot"], names=["a.test"], engine="getdns", policy="resume")
    assert DnsQueryParams(transports=["dot"], names=["a.test"]).engine == "dnscamp"


def test_kind_records_carry_the_engine(servers):
    from vantage_agent.dns.kind import KIND, DnsQueryParams
    from vantage_agent.kind import RunContext, Unit
    from vantage_agent.records import Vantage
    from vantage_agent.records.dns_query import DnsQueryBody

    out = {}
    for engine in ("dnscamp", "getdns"):
        params = DnsQueryParams(resolvers=["loopback-fake"], transports=["dot"], names=["k1.example.test"], count=2,
                                engine=engine)
        unit = Unit(id=f"u-{engine}", campaign="c", run="r", kind="dns_query", vantage=Vantage(id="l", provider="local"),
                    target="loopback-fake/dot", repetition=0, params=params.model_dump(), seed=1)
        ctx = RunContext(spool_dir=Path("/nonexistent"), artifacts_dir=Path("/nonexistent"), testbed=_info(servers))
        out[engine] = [DnsQueryBody.model_validate(r.body) for r in KIND.run(unit, ctx)]
    for engine, bodies in out.items():
        assert len(bodies) == 2 and {b.engine for b in bodies} == {engine} and {b.cache_warmed for b in bodies} == {True}
    assert {b.engine_run_time_ms for b in out["dnscamp"]} == {None}
    assert all(isinstance(b.engine_run_time_ms, int) for b in out["getdns"])
    assert out["dnscamp"][0].engine_version.startswith("dnscamp ")
    assert "libgetdns" in out["getdns"][0].engine_version
    assert [b.connection_reused for b in out["getdns"]] == [False, True]


def _cli(servers, tmp_path, *args):
    (tmp_path / "info.json").write_text(json.dumps(_info(servers)))
    env = dict(os.environ, DNSCAMP_TESTBED_INFO=str(tmp_path / "info.json"), DNSCAMP_SPOOL=str(tmp_path / "spool"))
    return subprocess.run([sys.executable, "-m", "dnscamp.cli", "dns", *args], env=env, capture_output=True, text=True,
                          timeout=120)


def test_cli_engine_getdns(servers, tmp_path):
    p = _cli(servers, tmp_path, "-r", "loopback-fake", "-t", "do53,dot", "-n", "c1.example.test", "-c", "3",
             "--engine", "getdns", "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert {t: (s["n"], s["ok"]) for t, s in out.items()} == {"do53": (3, 3), "dot": (3, 3)}
    from vantage_agent.records import parse_line

    bodies = [parse_line(ln)[1] for f in (tmp_path / "spool").rglob("*.jsonl") for ln in f.read_text().splitlines()]
    assert {b.engine for b in bodies} == {"getdns"} and len(bodies) == 6


@pytest.mark.parametrize("args,needle", [(["-t", "doh"], "--engine: engine 'getdns' does not support transport(s) doh"),
                                         (["-t", "dot", "--policy", "resume"], "--engine: 'getdns' does not support policy")])
def test_cli_engine_errors_are_one_line(servers, tmp_path, args, needle):
    p = _cli(servers, tmp_path, "-r", "loopback-fake", "-n", "a.example.test", "--engine", "getdns", *args)
    assert p.returncode == 2 and needle in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


# -- CoreDNS (the testbed's frontend implementation), a server that is not ours ----------------------
def test_getdns_against_coredns(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from _dns_coredns import COREDNS, LocalCoreDNS

    if not COREDNS.exists():
        pytest.fail(f"CoreDNS binary missing: {COREDNS} (built by install/40-testbed-servers.sh)")
    s = LocalCoreDNS(tmp_path)
    try:
        for t in GETDNS:
            c = registry.client(t, s.endpoint(t), Policy("reuse"), QueryOptions(timeout_s=3), engine="getdns")
            try:
                res = [c.query(f"g{i}.example.test.", "AAAA" if i else "A") for i in range(2)]
            finally:
                c.close()
            assert [r.status for r in res] == ["ok", "ok"], [r.error for r in res]
            assert res[1].answers == ("g1.example.test. AAAA 2001:db8::1",)
    finally:
        s.close()  # the worker process, not this one, held the getdns context (its destructor waits for children)
