"""The testbed's servers, checked from the client namespaces of the running island:
every transport of both resolvers (kdig as the independent client; pycurl for DoH3), the
whoami zone, instant NXDOMAIN for unknown names, pages over HTTP/2 and HTTP/3 with
certificate verification, the round-trip structure, flush-caches and supervision."""

from __future__ import annotations

import json
import os
import re
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.testbed.conftest import ROOT, dnscamp

pytestmark = pytest.mark.testbed

TIMING_N = 15  # exchanges per transport in the round-trip structure test
RESOLVERS = {"isp": ("10.53.1.1", "isp-resolver.test"), "public": ("10.53.2.1", "public-resolver.test")}


@pytest.fixture(scope="module")
def svc(testbed):
    from testbed.services import info as services_info

    d = services_info.describe(testbed.run_dir)
    assert d["running"], f"no services.json in {testbed.run_dir}: did start_all run?"
    return d


def probe(testbed, ns: str, *args: str, timeout: float = 120) -> dict:
    p = testbed.exec(ns, [sys.executable, "-m", "tests.testbed.svc_probe", *args], timeout=timeout, cwd=ROOT)
    assert p.returncode == 0, f"svc_probe {args} in {ns}: {p.stderr[-2000:]}"
    return json.loads(p.stdout.strip().splitlines()[-1])


def kdig(testbed, ns: str, *args: str) -> str:
    p = testbed.exec(ns, ["kdig", "+time=5", "+retry=1", *args], timeout=30)
    assert p.returncode == 0, f"kdig {args}: rc {p.returncode} {p.stderr} {p.stdout}"
    return p.stdout


def _a_records(out: str) -> list[str]:
    return re.findall(r"\sIN\s+A\s+(\d+\.\d+\.\d+\.\d+)", out)


def test_every_server_runs_under_the_supervisor(testbed, svc):
    from testbed.services import PROCESSES

    procs = {p["name"]: p for p in testbed.supervisor.status()}
    for name in PROCESSES:
        assert name in procs and procs[name]["alive"], f"{name} not running: {procs.get(name)}"
        assert Path(procs[name]["log"]).exists()


@pytest.mark.parametrize("resolver", sorted(RESOLVERS))
@pytest.mark.parametrize("transport", ["do53", "do53-tcp", "dot", "doh", "doq"])
def test_kdig_resolves_a_site_name(testbed, svc, resolver, transport):
    addr, tls_name = RESOLVERS[resolver]
    host = "www.multi-10.test"
    want = svc["hosts"][host]["address"]
    ca = svc["ca_file"]
    verify = [f"+tls-ca={ca}", f"+tls-hostname={tls_name}"]
    opts = {
        "do53": [], "do53-tcp": ["+tcp"], "dot": ["+tls", *verify], "doh": ["+https", *verify],
        # kdig 3.2.6 (Debian 12) segfaults on +quic with +tls-ca/+tls-hostname: DoQ with
        # certificate verification is checked with aioquic in test_doq_and_doh3_verified.
        "doq": ["+quic"],
    }[transport]
    out = kdig(testbed, testbed.client_ns("fiber"), f"@{addr}", *opts, host, "A")
    assert "NOERROR" in out, out
    assert _a_records(out) == [want], out
    # the frontend logged the query under the transport it came in on
    log = Path(svc["processes"][f"frontend-{resolver}"]["log"])
    tag = {"do53-tcp": "do53"}.get(transport, transport)
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        lines = [ln for ln in log.read_text().splitlines() if f" {host}. " in ln]
        if any(f"] {tag} " in ln for ln in lines):
            break
        time.sleep(0.1)
    assert any(f"] {tag} " in ln for ln in lines), lines[-5:]
    if transport == "do53-tcp":
        assert any(f"] do53 " in ln and " tcp " in ln for ln in lines)


@pytest.mark.parametrize("resolver", sorted(RESOLVERS))
@pytest.mark.parametrize("transport", ["doq", "doh3", "dot", "doh"])
def test_doq_and_doh3_verified(testbed, svc, resolver, transport):
    """Certificate-verified queries: DoQ (aioquic), DoH3 and DoH (pycurl), DoT (ssl)."""
    addr, tls_name = RESOLVERS[resolver]
    host = "m10.tags.test"
    out = probe(testbed, testbed.client_ns("fiber"), "query", transport, "--name", host, "--addr", addr,
                "--tls-name", tls_name, "--ca", svc["ca_file"])
    assert out["rcode"] == "NOERROR" and out["addresses"] == [svc["hosts"][host]["address"]], out
    if transport == "doh3":
        assert out["http_version"] == 30, out  # CURL_HTTP_VERSION_3
    if transport == "doh":
        assert out["http_version"] == 3, out  # CURL_HTTP_VERSION_2


def test_unknown_names_are_answered_at_once(testbed, svc):
    ns = testbed.client_ns("fiber")
    for name in (f"x{uuid.uuid4().hex[:8]}.google.com", "mozilla.org", f"nope{uuid.uuid4().hex[:6]}.test"):
        t0 = time.monotonic()
        out = kdig(testbed, ns, "@10.53.1.1", name, "A")
        assert time.monotonic() - t0 < 1.0, f"{name} took {time.monotonic() - t0:.2f}s"
        assert "NXDOMAIN" in out, out


def test_whoami_answers_the_asking_resolver_and_logs(testbed, svc):
    ns = testbed.client_ns("fiber")
    log = Path(svc["whoami"]["log"])
    for resolver, (addr, _) in RESOLVERS.items():
        label = f"r{uuid.uuid4().hex[:12]}"
        out = kdig(testbed, ns, f"@{addr}", f"{label}.{svc['whoami']['zone']}", "A")
        assert _a_records(out) == [addr], out  # Unbound's egress address is its service address
        deadline = time.monotonic() + 3
        while label not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        line = next(ln for ln in log.read_text().splitlines() if label in ln)
        assert f"whoami {addr}:" in line, line


@pytest.mark.parametrize("h3", [False, True], ids=["h2", "h3"])
def test_pages_over_h2_and_h3_with_verified_certificates(testbed, svc, h3):
    from testbed.services import sites

    gen = sites.generate(svc["seed"])
    ns = testbed.client_ns("fiber")
    for prof in ("single", "js", "multi-5"):
        page = gen.pages[prof]
        for url in [page.url, *page.resources()[:3]]:
            out = probe(testbed, ns, "fetch", url, "--ca", svc["ca_file"], *(["--h3"] if h3 else []))
            host = url.split("/")[2]
            path = "/" + url.split("/", 3)[3] if url.count("/") > 2 else "/"
            assert out["status"] == 200, (url, out)
            assert out["http_version"] == (30 if h3 else 3), (url, out)
            assert out["verify_result"] == 0, out
            assert out["headers"].get("timing-allow-origin") == "*", out
            assert out["ip"] == svc["hosts"][host]["address"], out
            assert out["bytes"] == len(page.files[host][path]), (url, out)


def test_round_trip_structure_warm_cache(testbed, svc):
    """Fresh connections, warm resolver cache (000_6647a8606a2226e0.txt §III: DoUDP 1 RTT,
    DoQ 2, DoH 3; DoT like DoH): measured on the 4g profile (91.9 ms), where the ~5-10 ms of
    client CPU per TLS/QUIC handshake on this shared 2-core machine stays inside 0.2 RTT."""
    prof = testbed.info["clients"]["4g"]["profile"]
    rtt = float(prof["up"]["delay_ms"]) + float(prof["down"]["delay_ms"])
    assert abs(rtt - 91.9) < 0.01, prof  # Kosek et al. Table I, 4G
    expected = {"do53": 1, "doq": 2, "dot": 3, "doh": 3}
    # One series of TIMING_N exchanges per transport, fixed in advance (no second series after a
    # miss). The statistic is the minimum: the round-trip count is a floor set by propagation,
    # and CPU bursts of other tenants on this shared machine only ever add time, so the fastest
    # of TIMING_N is the one to compare with the RTT multiple (medians are printed alongside).
    out = probe(testbed, testbed.client_ns("4g"), "timing", "--name", "www.js.test", "--addr", "10.53.1.1",
                "--tls-name", "isp-resolver.test", "--ca", svc["ca_file"], "--n", str(TIMING_N),
                "--transports", "do53,doq,dot,doh", timeout=300)
    ratios = {tr: out[tr]["min_ms"] / rtt for tr in expected}
    medians = {tr: round(out[tr]["median_ms"] / rtt, 2) for tr in expected}
    print(f"RTT multiples: min {ratios}, median {medians}")
    for tr, n in expected.items():
        assert len(out[tr]["all_ms"]) == TIMING_N, out[tr]
        assert abs(ratios[tr] - n) <= 0.2, f"{tr}: {ratios[tr]:.2f} RTT (expected {n}); medians {medians}"


def test_cache_miss_adds_backbone_round_trips_and_flush_caches(testbed, svc):
    """After `flush-caches` the ISP resolver walks the hierarchy across the backbone: priming
    (. NS) + root + TLD + site server = 4 backbone round trips; then a name in another site
    zone costs TLD + site = 2, a name in a zone already known costs 1, a cached name 0."""
    backbone = float(testbed.info["backbone_rtt_ms"])
    ns = testbed.client_ns("fiber")

    def q(name: str) -> float:
        return probe(testbed, ns, "query", "do53", "--name", name, "--addr", "10.53.1.1",
                     "--tls-name", "isp-resolver.test", "--ca", svc["ca_file"])["ms"]

    q("www.single.test")
    warm = min(q("www.single.test") for _ in range(3))
    cases = [("www.multi-20.test", 4), ("www.multi-30.test", 2), ("static.multi-30.test", 1), ("www.multi-30.test", 0)]
    # three rounds, each after a fresh flush; the fastest of each case (this machine is shared)
    rounds = []
    for _ in range(3):
        dnscamp("testbed", "flush-caches")
        rounds.append([q(name) - warm for name, _ in cases])
    got = [(name, n, min(r[i] for r in rounds)) for i, (name, n) in enumerate(cases)]
    for name, n, extra in got:
        assert n * backbone - 3 <= extra <= n * backbone + 8, f"{name}: expected {n} x {backbone} ms more: {got}; {rounds}"


def test_info_describes_the_servers(testbed, svc):
    from testbed.services import info as services_info

    d = services_info.describe(testbed.run_dir)
    names = [r["name"] for r in d["catalog"]]
    assert names == ["testbed-isp", "testbed-public"]
    isp = d["catalog"][0]["endpoints"]
    assert isp["doh"]["url"] == "https://isp-resolver.test/dns-query" and isp["dot"]["tls_name"] == "isp-resolver.test"
    assert set(isp) == {"do53", "dot", "doh", "doh3", "doq"}
    assert Path(d["ca_file"]).exists()
    assert set(d["site_urls"]) == {"single", "js", "js-css", "multi-5", "multi-10", "multi-20", "multi-30"}
    assert set(d["clients"]) == set(testbed.profiles)
    assert d["whoami"]["zone"] == "whoami.test"


def test_status_reports_a_dead_server(testbed, svc):
    """Kill one server by its PID: status names it; restarting the island's services heals it."""
    import signal

    sup = testbed.supervisor
    pid = sup.pid("dns-whoami")
    assert pid
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while sup.alive("dns-whoami") and time.monotonic() < deadline:
        time.sleep(0.05)
    p = dnscamp("testbed", "status", "--json", check=False)
    st = json.loads(p.stdout)
    assert p.returncode == 1 and any("dns-whoami" in x for x in st["problems"]), st["problems"]
    # bring the island back for the other tests
    testbed.down()
    testbed.ensure_up()
