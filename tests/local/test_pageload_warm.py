"""``warm_origin`` (experiment 4's 0-RTT column): Chromium loads the page once, closes
its connections and clears its host cache, then the measured load reconnects to the origin with
the QUIC session ticket of the first (0-RTT attempted and accepted by Caddy, per the netlog) and
resolves the name again. Against the loopback Caddy of test_pageload_h3."""

import time

import pytest

from tests.local.test_pageload_h3 import caddy_site  # noqa: F401 - the module's Caddy fixture
from vantage_agent.pageload import chromium, dnsmode
from vantage_agent.pageload.common import LoadOptions

pytestmark = pytest.mark.local


def _load(site, port, tmp_path, warm: bool):
    # work_dir does not exist yet, as at a campaign run's first load
    opts = LoadOptions(ca_file=str(site.ca), work_dir=str(tmp_path / "work"), timeout_s=20, http="h3",
                       h3_origins=(f"www.site.test:{port}",), warm_origin=warm)
    with dnsmode.setup(dnsmode.parse(f"do53:{site.resolver('do53')}"), tmp_path / "dns") as ds:
        t0 = time.time()
        r = chromium.load(f"https://www.site.test:{port}/", opts, ds)
    looked_up = [e for e in site.log.since(t0) if e[2] == "www.site.test" and e[3] == "A"]
    return r, looked_up


def test_warm_origin_measures_a_second_load_over_a_resumed_quic_connection(caddy_site, tmp_path):  # noqa: F811
    site, port = caddy_site
    r, looked_up = _load(site, port, tmp_path, warm=True)
    assert r.status == "ok", r.error
    assert r.warm["warm_up"]["status"] == "ok" and r.warm["warm_up"]["plt_ms"] > 0
    z = r.warm["zero_rtt"]
    assert z["sessions"] >= 1 and z["resumed"] and z["zero_rtt_packets"] >= 1, z
    assert z["state"] == "AttemptedAndSucceeded", z  # Caddy 2.6 (quic-go ListenEarly) accepts 0-RTT
    assert r.navigation["nextHopProtocol"] == "h3"
    assert len(looked_up) == 2, looked_up  # the host cache was cleared: the measured load resolved again
    assert not list((tmp_path / "work").glob("dc-netlog-*")), "the netlog is removed after the load"


def test_a_cold_load_has_no_warm_up_and_no_netlog(caddy_site, tmp_path):  # noqa: F811
    site, port = caddy_site
    r, looked_up = _load(site, port, tmp_path, warm=False)
    assert r.status == "ok", r.error
    assert r.warm is None and len(looked_up) == 1
    assert "--enable-net-benchmarking" not in chromium._args(LoadOptions(), dnsmode.DnsSetup(dnsmode.parse("system")), tmp_path)
