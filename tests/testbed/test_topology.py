"""The island: reachability, isolation from the root namespace, teardown (also after SIGKILL),
status/exec, the supervisor, and the link-fidelity conformance suite."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testbed import netns, plan, topology

from .conftest import DNSCAMP, ROOT, dnscamp

pytestmark = pytest.mark.testbed

SERVICE_ADDRESSES = [plan.ROOT_SERVER, plan.TLD_SERVER, plan.SITES_AUTH_SERVER, plan.WHOAMI_AUTH_SERVER,
                     plan.ISP_RESOLVER, plan.PUBLIC_RESOLVER, "10.80.0.1", "10.80.200.7"]


def _island_ns() -> list[str]:
    return [n for n in netns.list_ns(plan.PREFIX) if topology.ISLAND_NS_RE.match(n)]


def _root_iptables() -> str:
    return subprocess.run(["iptables-save"], capture_output=True, text=True).stdout


def _assert_clean(before_root: dict) -> None:
    assert _island_ns() == [], f"island namespaces left: {_island_ns()}"
    after = netns.root_snapshot()
    assert after == before_root, "the root namespace's addresses/routes/links changed"
    assert "dnscamp-linkem" not in _root_iptables()
    from pathlib import Path

    etc = Path("/etc/netns")
    left_etc = [p.name for p in etc.glob("dc-*") if topology.ISLAND_NS_RE.match(p.name)] if etc.is_dir() else []
    assert left_etc == [], f"/etc/netns entries left: {left_etc}"


def _ping_all(pairs: list[tuple[str, str]]) -> list[str]:
    """Ping every (ns, address) in parallel; returns the failures."""
    procs = [(ns, a, subprocess.Popen(["ip", "netns", "exec", ns, "ping", "-n", "-c", "2", "-i", "0.2", "-W", "3", a],
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)) for ns, a in pairs]
    bad = []
    for ns, a, p in procs:
        out, _ = p.communicate(timeout=30)
        if p.returncode != 0:
            bad.append(f"{ns} -> {a}: {out.strip().splitlines()[-1] if out.strip() else p.returncode}")
    return bad


def test_every_node_reaches_every_service_address(testbed):
    testbed.ensure_up()
    info = testbed.info
    nodes = [n["ns"] for n in info["nodes"]]
    clients = [c["address"] for c in info["clients"].values()]
    pairs = [(ns, a) for ns in nodes for a in SERVICE_ADDRESSES + clients]
    bad = _ping_all(pairs)
    assert not bad, "unreachable:\n" + "\n".join(bad)


def test_island_not_reachable_outside_and_lo_up(testbed):
    testbed.ensure_up()
    for n in testbed.info["nodes"]:
        out = testbed.exec(n["ns"], ["ip", "-o", "link", "show", "lo"]).stdout
        assert "UP" in out.split("<", 1)[1].split(">", 1)[0], f"lo down in {n['ns']}"
    # core has no default route: an address outside the island is unreachable, not forwarded
    r = testbed.exec(testbed.client_ns("fiber"), ["ping", "-n", "-c", "1", "-W", "2", "192.0.2.1"])
    assert r.returncode != 0
    assert testbed.exec(plan.CORE_NS, ["ip", "route", "show", "default"]).stdout.strip() == ""


def test_access_link_rtt_is_the_profile(testbed):
    testbed.ensure_up()
    info = testbed.info
    for prof, want in (("fiber", 14.8), ("4g", 91.9)):
        c = info["clients"][prof]
        out = testbed.exec(c["ns"], ["ping", "-n", "-c", "5", "-i", "0.2", c["isp_side_address"]]).stdout
        avg = float(out.strip().splitlines()[-1].split("=")[1].split("/")[1])
        assert want - 0.05 < avg < want + 1.5, f"{prof}: ping avg {avg} ms vs {want}"
    # the backbone adds its 10 ms: client -> public resolver = access + backbone + public link
    c = info["clients"]["fiber"]
    out = testbed.exec(c["ns"], ["ping", "-n", "-c", "3", "-i", "0.2", plan.PUBLIC_RESOLVER]).stdout
    avg = float(out.strip().splitlines()[-1].split("=")[1].split("/")[1])
    assert 14.8 + 10 + 20 - 0.1 < avg < 14.8 + 10 + 20 + 3, avg


def test_status_json_and_exec(testbed):
    testbed.ensure_up()
    st = json.loads(dnscamp("testbed", "status", "--json").stdout)
    assert st["healthy"] and st["up"] and st["profiles"] == ["fiber", "4g"]
    assert st["backend"] in ("nfqueue", "netem")
    names = {lk["name"]: lk for lk in st["links"]}
    assert set(names) == {"lb", "lp", "la-fiber", "la-4g"} and all(lk["alive"] for lk in names.values())
    assert names["la-fiber"]["a_to_b"]["delay_ms"] == pytest.approx(7.4)
    # exec by profile name and by namespace name without prefix
    out = dnscamp("testbed", "exec", "fiber", "--", "ip", "-o", "-4", "addr", "show").stdout
    assert testbed.client_address("fiber") in out
    out = dnscamp("testbed", "exec", "isp", "--", "ip", "-o", "-4", "addr", "show", "lo").stdout
    assert plan.ISP_RESOLVER in out
    # a supervised process that dies is reported
    sup = testbed.supervisor
    sup.start("tb-test-sleeper", plan.DNS_NS, ["sleep", "30"])
    try:
        assert sup.alive("tb-test-sleeper")
        import os

        os.kill(sup.pid("tb-test-sleeper"), signal.SIGKILL)
        time.sleep(0.3)
        p = dnscamp("testbed", "status", "--json", check=False)
        st = json.loads(p.stdout)
        assert p.returncode == 1 and not st["healthy"]
        assert any(pr["name"] == "tb-test-sleeper" and not pr["alive"] for pr in st["processes"])
    finally:
        sup.stop("tb-test-sleeper")
    assert dnscamp("testbed", "status", "--json").returncode == 0


def test_up_again_same_profiles_is_a_noop(testbed):
    testbed.ensure_up()
    created = testbed.info["created_at"]
    p = dnscamp("testbed", "up", "--profiles", "fiber,4g")
    assert "already up" in p.stderr
    assert testbed.info["created_at"] == created


def test_down_removes_everything_and_is_idempotent(testbed):
    before = netns.root_snapshot()
    testbed.ensure_up()
    assert netns.root_snapshot() == before, "up changed the root namespace"
    try:
        dnscamp("testbed", "down")
        _assert_clean(before)
        p = dnscamp("testbed", "down")  # idempotent
        assert "nothing to remove" in p.stderr
        assert dnscamp("testbed", "status", "--json", check=False).returncode == 1
    finally:
        testbed.ensure_up()


def test_sigkill_during_up_then_down_cleans_everything(testbed):
    before = netns.root_snapshot()
    dnscamp("testbed", "down")
    try:
        p = subprocess.Popen([*DNSCAMP, "testbed", "up", "--profiles", "fiber,4g,dsl"], cwd=ROOT,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # kill it once the links are starting (namespaces exist, state says building/links)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            st = topology.read_state(testbed.run_dir) or {}
            if st.get("status") == "links" or len(_island_ns()) >= 10:
                break
            time.sleep(0.02)
        time.sleep(0.3)
        p.send_signal(signal.SIGKILL)
        p.wait()
        assert _island_ns(), "nothing was created before the kill (test did not exercise a partial up)"
        # also lose the state file: down must work from the prefix alone
        topology.state_path(testbed.run_dir).unlink(missing_ok=True)
        dnscamp("testbed", "down")
        _assert_clean(before)
        # no linkem process of ours survives
        links = testbed.run_dir / "links"
        for pidf in links.glob("*.pid") if links.is_dir() else []:
            pytest.fail(f"linkem pid file left: {pidf}")
    finally:
        testbed.ensure_up()


def test_not_root_is_one_clear_error(testbed, tmp_path):
    # run the CLI as nobody: exit 2 and one line. nobody keeps CAP_DAC_READ_SEARCH only, to read
    # the checkout wherever it is (a fresh clone under a 0700 mktemp -d, a venv's python under
    # /root); its euid, which is what the check is about, is 65534.
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
              "--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"]
    p = subprocess.run([*nobody, *DNSCAMP, "testbed", "status"],
                       capture_output=True, text=True, cwd=ROOT, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                                                                     "DNSCAMP_HOME": str(tmp_path)})
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().count("\n") == 0 and "root" in p.stderr


# The median of GOODPUT_RUNS iperf3 runs (`testbed check`'s own run and GOODPUT_RUNS - 1 more,
# all printed) is what meets the 5 % goodput target: goodput is CPU-sensitive on a shared 2-core
# machine, and an odd number of runs, fixed in advance, tolerates two runs disturbed by another
# tenant's burst without choosing among attempts after seeing them.
GOODPUT_RUNS = 5
GOODPUT_SECONDS = 4.0  # as `testbed check` (after its 2 s warm-up)


@pytest.mark.parametrize("backend", ["nfqueue", "netem"])
def test_conformance_check_meets_targets(testbed, backend, tmp_path):
    """`dnscamp testbed check --json` on fiber and 4g meets the link-fidelity targets: median RTT
    error <= 0.2 ms, loss within the binomial 99 % interval, TCP goodput (median of
    GOODPUT_RUNS runs) within 5 %, QUIC ok. netem only where this kernel has sch_netem: the
    probe (a throwaway namespace) runs here, in the test, never at collection."""
    import os

    if backend == "netem":
        from testbed.linkem.driver import detect_backend

        if os.environ.get("DNSCAMP_LINKEM_BACKEND") or detect_backend() != "netem":
            pytest.skip("this kernel has no sch_netem (testbed.linkem.driver.detect_backend), or "
                        "DNSCAMP_LINKEM_BACKEND forces one backend: only nfqueue is conformance-tested")
    testbed.ensure_up()
    env = None
    if testbed.info["backend"] != backend:  # rebuild the island on this backend, restore after
        env = {"DNSCAMP_LINKEM_BACKEND": backend}
        dnscamp("testbed", "down")
        dnscamp("testbed", "up", "--no-services", "--profiles", "fiber,4g", env=env)
    try:
        _conformance(testbed, backend, env, tmp_path)
    finally:
        if env:
            testbed.down()
            testbed.ensure_up()


def _goodput_runs(testbed, prof: str, first: float | None, reverse: bool, log_dir: Path) -> list[float | None]:
    """`testbed check`'s goodput (``first``) and GOODPUT_RUNS - 1 more iperf3 runs over the same link."""
    from testbed import check

    c = testbed.info["clients"][prof]
    runs = [first]
    for _ in range(GOODPUT_RUNS - 1):
        mbps, err = check._iperf(c["ns"], plan.ISP_NS, c["isp_side_address"], 47900, GOODPUT_SECONDS, reverse, log_dir)
        assert err is None, (prof, err)
        runs.append(mbps)
    return runs


def _conformance(testbed, backend, env, tmp_path):
    from testbed import check
    from vantage_agent.stats import median

    assert testbed.info["backend"] == backend
    results = {}
    for prof in ("fiber", "4g"):
        p = dnscamp("testbed", "check", "--profiles", prof, "--json", check=False, timeout=600, env=env)
        r = json.loads(p.stdout)[prof]
        print(f"{prof}: {json.dumps({k: v for k, v in r.items() if k != 'link_config'})}")
        results[prof] = r
    for prof, r in results.items():
        assert r["backend"] == backend
        assert r["probes_received"] >= 500 * 0.99
        assert abs(r["rtt_error_ms"]) <= 0.2, (prof, r["rtt_ms_p50"], r["rtt_ms_expected"])
        assert r["loss_up"]["sent"] >= 10000 and r["loss_down"]["sent"] >= 10000
        assert r["loss_pass"], (prof, r["loss_up"], r["loss_down"])
        assert r["quic_handshake_ok"], r["quic_error"]
        assert r["lateness_p99_ms"] is not None
        assert not [f for f in r["failures"] if not f.startswith("goodput")], r["failures"]
        for label, reverse in (("up", False), ("down", True)):
            runs = _goodput_runs(testbed, prof, r[f"{label}_mbps_measured"], reverse, tmp_path)
            want = r[f"{label}_mbps_expected"]
            print(f"{prof} goodput {label}: runs {runs} Mbit/s, expected {want}")
            assert None not in runs, (prof, label, runs)
            assert abs(median(runs) - want) <= check.GOODPUT_TOLERANCE * want, (prof, label, median(runs), want, runs)
    # the records went to the spool and validate
    from vantage_agent.paths import spool_dir
    from vantage_agent.records import parse_line

    files = sorted(spool_dir().glob("testbed-check/*/link_check.jsonl"))
    assert files
    env, body = parse_line(files[-1].read_text().splitlines()[0])
    assert env.kind == "link_check" and env.vantage.provider == "testbed" and env.env["link_backend"] == backend


def test_add_edge_node_and_service_address(testbed):
    """The helpers other parts use: a probe behind its own link, and an extra service address."""
    from testbed.profiles import load_profiles

    testbed.ensure_up()
    node = topology.add_edge_node(testbed.run_dir, "dc-probe-tbtest", plan.ISP_NS, load_profiles()["dsl"],
                                  "10.90.250.0/29")
    assert node.address == "10.90.250.2"
    topology.add_service_address(testbed.run_dir, "dc-probe-tbtest", "10.90.251.1/32")
    bad = _ping_all([("dc-probe-tbtest", plan.PUBLIC_RESOLVER), ("dc-probe-tbtest", plan.ROOT_SERVER),
                     (testbed.client_ns("fiber"), "10.90.250.2"), (plan.PUBRES_NS, "10.90.251.1")])
    assert not bad, bad
    out = testbed.exec("dc-probe-tbtest", ["ping", "-n", "-c", "3", "-i", "0.2", "10.90.250.5"]).stdout
    avg = float(out.strip().splitlines()[-1].split("=")[1].split("/")[1])
    assert 42.4 < avg < 42.4 + 5, avg  # dsl's 42.4 ms (+ 1 ms of serialisation at 0.8 Mbit/s up)
    st = json.loads(dnscamp("testbed", "status", "--json").stdout)
    assert st["healthy"] and any(lk["name"] == "lq-tbtest" and lk["alive"] for lk in st["links"])
