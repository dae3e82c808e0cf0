"""`dnscamp dns` end to end against loopback servers (declared as a testbed resolver through
$DNSCAMP_TESTBED_INFO), the dns_query kind, and the v_dns_query view over ingested records."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import dns.message as dns_message
import psycopg
import pytest

from tests.local import dnsfake
from vantage_agent.records import parse_line

pytestmark = pytest.mark.local
TRANSPORTS = ["do53", "do53-tcp", "dot", "doh", "doh3", "doq"]


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    s = dnsfake.AllServers(tmp_path_factory.mktemp("dnsfake"))
    yield s
    s.close()


def _testbed_info(servers) -> dict:
    eps = {}
    for t in ("do53", "dot", "doh", "doh3", "doq"):
        ep = servers.endpoint(t)
        eps[t] = {"address": ep.address, "port": ep.port, "tls_name": ep.tls_name, "url": ep.url}
    return {"up": True, "resolvers": [{"name": "loopback-fake", "endpoints": eps}], "ca_file": servers.ca,
            "clients": {"fiber": {"ns": "dc-client-fiber", "profile": {"up": {"delay_ms": 7.4}, "down": {"delay_ms": 7.4}}}}}


@pytest.fixture()
def env(servers, tmp_path):
    info = tmp_path / "info.json"
    info.write_text(json.dumps(_testbed_info(servers)))
    e = dict(os.environ, DNSCAMP_TESTBED_INFO=str(info), DNSCAMP_SPOOL=str(tmp_path / "spool"))
    return e


def dns(env, *args):
    return subprocess.run([sys.executable, "-m", "dnscamp.cli", "dns", *args], env=env, capture_output=True, text=True, timeout=120)


def test_cli_json_and_spool(env, tmp_path):
    p = dns(env, "--resolver", "loopback-fake", "--transport", ",".join(TRANSPORTS), "--name", "a.example.test",
            "--name", "nx.example.test", "--count", "3", "--policy", "reuse", "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert list(out) == TRANSPORTS
    for t, s in out.items():
        assert s["n"] == 6 and s["ok"] == 6, (t, s)
        assert 0 < s["p50_ms"] <= s["p90_ms"] <= s["p99_ms"]
        assert s["rtt_multiple_p50"] is None  # not in the testbed: no access RTT
    files = sorted((tmp_path / "spool").rglob("*.jsonl"))
    assert len(files) == len(TRANSPORTS)
    recs = [parse_line(line) for f in files for line in f.read_text().splitlines()]
    assert len(recs) == 6 * len(TRANSPORTS)
    bodies = [b for _, b in recs]
    assert {b.transport for b in bodies} == set(TRANSPORTS)
    assert {b.rcode for b in bodies} == {"NOERROR", "NXDOMAIN"}
    assert all(e.kind == "dns_query" and e.status == "ok" for e, _ in recs)


def test_cli_table_counts_errors(env):
    p = dns(env, "-r", "loopback-fake", "-t", "do53", "-n", "refused.example.test", "-n", "a.example.test")
    assert p.returncode == 0, p.stderr
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("do53")][0]
    assert line.split()[1:3] == ["2", "1"] and "refused 1" in line


def test_cli_access_rtt_gives_rtt_multiple(env):
    p = dns(env, "-r", "loopback-fake", "-t", "do53", "-n", "a.example.test", "--json", "--access-rtt-ms", "10")
    s = json.loads(p.stdout)["do53"]
    assert s["rtt_multiple_p50"] == pytest.approx(s["p50_ms"] / 10, rel=1e-3, abs=1e-3)


@pytest.mark.parametrize(
    "args,needle",
    [
        (["-r", "nosuch", "-t", "do53", "-n", "a.test"], "unknown resolver 'nosuch' (known: adguard, cloudflare, google"),
        (["-r", "cloudflare", "-t", "doq", "-n", "a.test"], "offers no doq endpoint"),
        (["-r", "loopback-fake", "-t", "dox", "-n", "a.test"], "unknown transport 'dox'"),
        (["-r", "loopback-fake", "-t", "do53"], "--name"),
        (["-r", "loopback-fake", "-t", "do53", "-n", "a.test", "--policy", "sometimes"], "unknown connection policy"),
        (["-r", "loopback-fake", "-t", "do53", "--names", "/nonexistent/names.txt"], "/nonexistent/names.txt"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(env, args, needle):
    p = dns(env, *args)
    assert p.returncode == 2, p.stdout + p.stderr
    assert needle in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_kind_runs_a_unit(servers):
    from vantage_agent.dns.kind import KIND, DnsQueryParams
    from vantage_agent.kind import RunContext, Unit
    from vantage_agent.records import Vantage

    params = DnsQueryParams(resolvers=["loopback-fake"], transports=["dot", "doq"], names=["a.example.test", "b.example.test"], count=2)
    assert KIND.targets(params) == ["loopback-fake/dot", "loopback-fake/doq"]
    unit = Unit(id="u1", campaign="c", run="r", kind="dns_query", vantage=Vantage(id="tb", provider="testbed", network_profile="fiber"),
                target="loopback-fake/doq", repetition=0, params=params.model_dump(), seed=7)
    ctx = RunContext(spool_dir=Path("/nonexistent"), artifacts_dir=Path("/nonexistent"), testbed=_testbed_info(servers))
    recs = list(KIND.run(unit, ctx))
    assert len(recs) == 4 and all(r.status == "ok" for r in recs)
    assert [r.body["sequence"] for r in recs] == [0, 1, 2, 3]
    assert recs[0].body["access_rtt_ms"] == pytest.approx(14.8)
    assert recs[1].body["connection_reused"] is True
    bad = Unit(**{**unit.__dict__, "target": "nosuch/doq"})
    (rec,) = KIND.run(bad, ctx)
    assert rec.status == "setup_error" and "nosuch" in rec.error


@pytest.mark.parametrize("warm,has_do53", [(True, True), (False, True), (True, False)])
def test_kind_warms_the_resolver_cache_untimed(servers, warm, has_do53):
    # One unit times one transport; the resolver's cache is shared, so each unit first resolves
    # its names once (Do53 if offered, else its own transport), untimed and unrecorded.
    from vantage_agent.dns.kind import KIND, DnsQueryParams
    from vantage_agent.kind import RunContext, Unit
    from vantage_agent.records import Vantage

    info = _testbed_info(servers)
    if not has_do53:
        del info["resolvers"][0]["endpoints"]["do53"]
    params = DnsQueryParams(resolvers=["loopback-fake"], transports=["doq"], names=["w1.example.test", "w2.example.test"],
                            count=2, warm_cache=warm)
    unit = Unit(id="uw", campaign="c", run="r", kind="dns_query", vantage=Vantage(id="tb", provider="testbed", network_profile="fiber"),
                target="loopback-fake/doq", repetition=0, params=params.model_dump(), seed=3)
    ctx = RunContext(spool_dir=Path("/nonexistent"), artifacts_dir=Path("/nonexistent"), testbed=info)
    udp0, doq0 = servers.udp.stats.queries, servers.doq.stats.queries
    recs = list(KIND.run(unit, ctx))
    assert len(recs) == 4 and all(r.status == "ok" for r in recs)  # the warm-up is not recorded
    assert {r.body["cache_warmed"] for r in recs} == ({True} if warm else {None})
    warm_do53, warm_doq = (2, 0) if (warm and has_do53) else (0, 2) if warm else (0, 0)
    assert servers.udp.stats.queries - udp0 == warm_do53
    assert servers.doq.stats.queries - doq0 == 4 + warm_doq


def test_kind_warm_up_goes_on_past_a_failed_name(servers):
    # a name that gets no answer marks the unit cache_warmed false but still warms the others
    from vantage_agent.dns.kind import KIND, DnsQueryParams
    from vantage_agent.kind import RunContext, Unit
    from vantage_agent.records import Vantage

    params = DnsQueryParams(resolvers=["loopback-fake"], transports=["doq"], names=["drop.example.test", "w3.example.test"],
                            count=1, timeout_s=0.3, attempts=1)
    unit = Unit(id="ud", campaign="c", run="r", kind="dns_query", vantage=Vantage(id="tb", provider="testbed", network_profile="fiber"),
                target="loopback-fake/doq", repetition=0, params=params.model_dump(), seed=0)  # seed 0 plans drop. first
    ctx = RunContext(spool_dir=Path("/nonexistent"), artifacts_dir=Path("/nonexistent"), testbed=_testbed_info(servers))
    udp0 = servers.udp.stats.queries
    recs = list(KIND.run(unit, ctx))
    assert servers.udp.stats.queries - udp0 == 2  # both names sent, though drop. came first
    assert {r.body["cache_warmed"] for r in recs} == {False}
    assert sorted(r.status for r in recs) == ["ok", "timeout"]  # the timed queries are recorded either way


def test_view_derives_durations(env, tmp_path, empty_db):
    from collectors.ingest import ingest

    p = dns(env, "-r", "loopback-fake", "-t", "do53,dot,doq", "-n", "a.example.test", "-c", "2", "--policy", "reuse",
            "--access-rtt-ms", "1")
    assert p.returncode == 0, p.stderr
    ingest([tmp_path / "spool"], empty_db, workers=1)
    with psycopg.connect(empty_db) as c:
        rows = c.execute(
            "SELECT transport, connection_reused, connect_ms, handshake_ms, exchange_ms, total_ms, total_rtt_multiple,"
            " total_bytes, total_packets, total_ip_bytes FROM v_dns_query ORDER BY transport, sequence"
        ).fetchall()
        warmed = c.execute("SELECT DISTINCT cache_warmed FROM v_dns_query").fetchall()
    assert warmed == [(True,)]  # the CLI runs the kind: it warms the cache like a campaign unit
    assert len(rows) == 6
    for tr, reused, conn, hs, exch, total, mult, b, pk, ipb in rows:
        assert exch > 0 and total >= exch and mult == pytest.approx(total)
        assert b > 0 and pk > 0 and ipb > b
        if reused or tr == "do53":
            assert conn is None and hs is None
        else:
            assert conn > 0 and hs > 0


class _RecordingResolver:
    """A Do53/UDP resolver that logs (CLOCK_MONOTONIC ns, qname) of every query it answers:
    CLOCK_MONOTONIC is one clock for all processes of the host, so its times compare with the
    t_start of the records the CLI subprocess writes."""

    def __init__(self):
        import socket
        import threading

        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.log: list[tuple[int, str]] = []
        self._stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        import time

        while not self._stop:
            try:
                data, peer = self.sock.recvfrom(4096)
            except OSError:
                continue
            out = dnsfake.answer(data)
            self.log.append((time.monotonic_ns(), str(dns_message.from_wire(data).question[0].name)))
            if out is not None:
                self.sock.sendto(out, peer)

    def close(self):
        self._stop = True
        self.thread.join(2)
        self.sock.close()


@pytest.mark.parametrize("warm", [True, False])
def test_cli_runs_the_kind_and_warms_the_cache_before_timing(servers, tmp_path, warm):
    # `dnscamp dns` had its own loop, without the kind's warm-up, so the first
    # transport paid the recursion. Do53 -> a recording resolver; DoT -> the fake DoT server.
    rec = _RecordingResolver()
    try:
        info = _testbed_info(servers)
        info["resolvers"][0]["endpoints"]["do53"]["port"] = rec.port
        (tmp_path / "info.json").write_text(json.dumps(info))
        e = dict(os.environ, DNSCAMP_TESTBED_INFO=str(tmp_path / "info.json"), DNSCAMP_SPOOL=str(tmp_path / "spool"))
        dot0 = servers.dot.stats.queries
        p = dns(e, "-r", "loopback-fake", "-t", "dot", "-n", "w1.example.test", "-n", "w2.example.test", "-c", "2",
                "--json", *([] if warm else ["--no-warm-cache"]))
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout)["dot"]["ok"] == 4
        recs = [parse_line(line) for f in (tmp_path / "spool").rglob("*.jsonl") for line in f.read_text().splitlines()]
        assert len(recs) == 4 and servers.dot.stats.queries - dot0 == 4
        assert {b.cache_warmed for _, b in recs} == ({True} if warm else {None})
        assert {b.engine for _, b in recs} == {"dnscamp"} and all(b.engine_version.startswith("dnscamp ") for _, b in recs)
        if warm:
            assert sorted(n for _, n in rec.log) == ["w1.example.test.", "w2.example.test."]
            assert max(t for t, _ in rec.log) < min(b.t_start for _, b in recs)  # warm-up before the timed queries
        else:
            assert rec.log == []
    finally:
        rec.close()


def test_cli_calls_the_kinds_run(servers, tmp_path, monkeypatch):
    # the CLI and campaigns share one code path: the dns_query kind's run(), once per transport
    from typer.testing import CliRunner

    from dnscamp.cli import app
    from vantage_agent.dns.kind import KIND

    (tmp_path / "info.json").write_text(json.dumps(_testbed_info(servers)))
    monkeypatch.setenv("DNSCAMP_TESTBED_INFO", str(tmp_path / "info.json"))
    monkeypatch.setenv("DNSCAMP_SPOOL", str(tmp_path / "spool"))
    calls = []
    real = KIND.run

    def spy(unit, ctx):
        calls.append((unit.target, unit.kind, unit.params["warm_cache"]))
        yield from real(unit, ctx)

    monkeypatch.setattr(KIND, "run", spy)
    r = CliRunner().invoke(app, ["dns", "-r", "loopback-fake", "-t", "do53,doq", "-n", "a.example.test", "--json"])
    assert r.exit_code == 0, r.output
    assert calls == [("loopback-fake/do53", "dns_query", True), ("loopback-fake/doq", "dns_query", True)]


def test_cli_failure_is_a_kind_record(env, tmp_path):
    # a unit that cannot start is the kind's setup_error record (asked parameters, null address)
    info = json.loads(Path(env["DNSCAMP_TESTBED_INFO"]).read_text())
    info["resolvers"][0]["endpoints"]["dot"]["tls_name"] = None
    info["resolvers"][0]["endpoints"]["dot"]["port"] = 1  # nothing listens: connect_error records
    Path(env["DNSCAMP_TESTBED_INFO"]).write_text(json.dumps(info))
    p = dns(env, "-r", "loopback-fake", "-t", "dot", "-n", "a.example.test", "--timeout", "1", "--json")
    assert p.returncode == 0, p.stderr
    s = json.loads(p.stdout)["dot"]
    assert s["n"] == 1 and s["ok"] == 0 and s["errors"] == {"connect_error": 1}
