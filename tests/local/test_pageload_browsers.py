"""Real browsers against a real loopback world (tests/scaffolding/localsite.py: TLS +
HTTP/2 site with a CA generated per session, Do53/DoT/DoH server with a query log).

Each DNS mode is checked from the resolver side: the server's log for the load's window holds
the page's names, over that transport only."""

import time
from pathlib import Path

import pytest

from tests.tools import require

from tests.scaffolding import localsite
from vantage_agent.kind import Unit
from vantage_agent.pageload import dnsmode, har, registry
from vantage_agent.pageload.common import LoadOptions
from vantage_agent.pageload.kind import measure
from vantage_agent.records import Vantage, parse_record

pytestmark = pytest.mark.local


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    # installed by `make deps`: a missing one is a broken install, not a reason to skip
    for exe in ("chromedriver", "firefox-esr", "stubby"):
        require(exe, "install/50-browsers.sh")
    s = localsite.LocalSite.start(tmp_path_factory.mktemp("site"))
    yield s
    s.close()


def _unit(url):
    return Unit(id="u1", campaign="local", run="r1", kind="page_load", vantage=Vantage(id="local", provider="local"),
                target=url, repetition=0, params={}, seed=3)


@pytest.mark.parametrize("browser", ["chromium", "firefox"])
@pytest.mark.parametrize("transport", ["do53", "dot", "doh"])
def test_load_in_each_mode_uses_that_transport_only(site, tmp_path, browser, transport):
    mode = dnsmode.parse(f"{transport}:{site.resolver(transport)}")
    url = site.url("multi")
    opts = LoadOptions(ca_file=str(site.ca), work_dir=str(tmp_path / "work"), timeout_s=20)
    t0 = time.time()
    rec = measure(_unit(url), url, browser, mode, opts, tmp_path, rtt_count=None)
    seen = site.log.since(t0)
    assert rec.status == "ok", rec.error
    env, body = parse_record(__import__("json").loads(rec.to_json()))
    assert body.plt_ms and body.plt_ms > 0 and body.next_hop_protocol == "h2"
    assert body.unique_hostnames == 6 and len(body.resources) >= 5
    assert env.env["browser_version"] and env.env["driver_version"] and env.env["kernel"]
    page = {"www.site.test"} | {f"h{i}.site.test" for i in range(5)}
    names = {q[2] for q in seen}
    assert page <= names, f"resolver did not see the page's names: {page - names}"
    want = {"do53": {"do53", "do53-tcp"}, "dot": {"dot"}, "doh": {"doh"}}[transport]
    assert {q[1] for q in seen} <= want, f"{transport} load used {sorted({q[1] for q in seen})}"
    h = har.schema() and __import__("json").loads((tmp_path / body.har_path).read_text())
    assert body.har_valid and har.validate(h) == [] and body.har_entries >= 6
    assert set(har.unique_names(h)) >= page


@pytest.mark.parametrize("browser", ["chromium", "firefox"])
def test_unknown_name_is_a_dns_error(site, tmp_path, browser):
    url = f"https://nowhere.example:{site.web_port}/"
    mode = dnsmode.parse(f"do53:{site.resolver('do53')}")
    rec = measure(_unit(url), url, browser, mode, LoadOptions(ca_file=str(site.ca), work_dir=str(tmp_path), timeout_s=15), tmp_path, rtt_count=None)
    assert rec.status == "dns_error", (rec.status, rec.error)
    assert rec.error


@pytest.mark.parametrize("browser", ["chromium", "firefox"])
def test_silent_server_is_a_page_load_timeout(site, tmp_path, browser):
    import socket

    srv = socket.socket()
    srv.bind((site.ip, 0))
    srv.listen(16)  # accepts TCP, never speaks TLS
    try:
        url = f"https://www.site.test:{srv.getsockname()[1]}/"
        mode = dnsmode.parse(f"do53:{site.resolver('do53')}")
        t0 = time.monotonic()
        rec = measure(_unit(url), url, browser, mode, LoadOptions(ca_file=str(site.ca), work_dir=str(tmp_path), timeout_s=3), tmp_path, rtt_count=None)
        assert rec.status == "page_load_timeout", (rec.status, rec.error)
        assert time.monotonic() - t0 < 30
    finally:
        srv.close()


def test_crashed_browser_is_a_driver_error_and_the_next_load_works(site, tmp_path, monkeypatch):
    """Kill Chromium in the middle of a load: that load is driver_error, the next one is ok."""
    import threading

    import psutil

    mod = registry.get("chromium")
    mode = dnsmode.parse(f"do53:{site.resolver('do53')}")
    opts = LoadOptions(ca_file=str(site.ca), work_dir=str(tmp_path), timeout_s=20)
    me = psutil.Process()
    stop = threading.Event()

    def killer():
        while not stop.is_set():
            for p in me.children(recursive=True):
                try:
                    if p.name() in ("chromium", "chrome") and "--type=" not in " ".join(p.cmdline()):
                        p.kill()
                        return
                except psutil.Error:
                    pass
            time.sleep(0.02)

    import socket

    srv = socket.socket()
    srv.bind((site.ip, 0))
    srv.listen(16)  # a load that hangs until the browser dies
    t = threading.Thread(target=killer, daemon=True)
    with dnsmode.setup(mode, tmp_path / "dns") as ds:
        t.start()
        try:
            r1 = mod.load(f"https://www.site.test:{srv.getsockname()[1]}/", opts, ds)
        finally:
            stop.set()
            srv.close()
        assert r1.status == "driver_error", (r1.status, r1.error)
        r2 = mod.load(site.url("single"), opts, ds)
        assert r2.status == "ok", r2.error
