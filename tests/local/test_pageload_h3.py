"""HTTP version control: h2 keeps QUIC off, h3 forces HTTP/3 for the page's origin. A real
Caddy (the testbed's web server) serves h1/h2/h3 on loopback with the session's CA."""

import socket
import subprocess
import time

import pytest

from tests.tools import require

from tests.scaffolding import localsite
from vantage_agent.pageload import dnsmode, har, registry
from vantage_agent.pageload.common import LoadOptions

pytestmark = pytest.mark.local


@pytest.fixture(scope="module")
def caddy_site(tmp_path_factory):
    require("caddy", "install/40-testbed-servers.sh")
    require("chromedriver", "install/50-browsers.sh")
    wd = tmp_path_factory.mktemp("h3")
    site = localsite.LocalSite.start(wd / "site")
    s = socket.socket()
    s.bind((site.ip, 0))
    port = s.getsockname()[1]
    s.close()
    (wd / "www").mkdir()
    (wd / "www" / "index.html").write_text("<!doctype html><title>h3</title><h1>h3</h1><script src='a.js'></script>")
    (wd / "www" / "a.js").write_text("console.log(1)")
    (wd / "Caddyfile").write_text(
        "{\n  admin off\n  skip_install_trust\n  auto_https off\n  servers {\n    protocols h1 h2 h3\n  }\n}\n"
        f"https://www.site.test:{port} {{\n  bind {site.ip}\n  tls {site.cert} {site.key}\n  root * {wd / 'www'}\n  file_server\n}}\n"
    )
    env = {"HOME": str(wd), "XDG_DATA_HOME": str(wd / "data"), "XDG_CONFIG_HOME": str(wd / "cfg"), "PATH": "/usr/bin:/bin"}
    p = subprocess.Popen(["caddy", "run", "--config", str(wd / "Caddyfile"), "--adapter", "caddyfile"],
                         stdout=open(wd / "caddy.log", "w"), stderr=subprocess.STDOUT, env=env)  # fmt: skip
    try:
        deadline = time.monotonic() + 15
        while "serving initial configuration" not in (wd / "caddy.log").read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        yield site, port
    finally:
        p.terminate()
        p.wait(10)
        site.close()


@pytest.mark.parametrize("browser", ["chromium", "firefox"])
@pytest.mark.parametrize("http", ["h2", "h3"])
def test_http_version_is_what_was_asked(caddy_site, tmp_path, browser, http):
    site, port = caddy_site
    opts = LoadOptions(ca_file=str(site.ca), work_dir=str(tmp_path), timeout_s=20, http=http, h3_origins=(f"www.site.test:{port}",))
    mode = dnsmode.parse(f"do53:{site.resolver('do53')}")
    with dnsmode.setup(mode, tmp_path / "dns") as ds:
        r = registry.get(browser).load(f"https://www.site.test:{port}/", opts, ds)
    assert r.status == "ok", r.error
    assert r.navigation["nextHopProtocol"] == http
    assert all(x["nextHopProtocol"] == http for x in r.resources)
    assert har.validate(r.har) == []
    versions = {e["response"]["httpVersion"] for e in r.har["log"]["entries"] if e["response"]["status"] == 200}
    assert versions == {"HTTP/2" if http == "h2" else "HTTP/3"}
