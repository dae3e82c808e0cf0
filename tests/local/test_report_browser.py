"""The demo report in a real browser: every page opened in headless Chromium (started as the
page-load engine starts it: vantage_agent/pageload/chromium.py's binaries and arguments)
from a loopback HTTP server, failing on any console error (SEVERE) and on any <img> / <object>
whose SVG does not decode; a full-page screenshot of each page is saved under the test's
tmp_path (screenshots/)."""

from __future__ import annotations

import functools
import http.server
import threading
from pathlib import Path

import pytest

from tests.local.test_report_site import build, demo_store  # noqa: F401 - the demo store fixture
from tests.scaffolding.demo_data import CAMPAIGN
from tests.tools import require

pytestmark = pytest.mark.local

# For each <img> and <object>: its source and whether it decoded (an SVG that does not parse
# has naturalWidth 0; an <object> whose SVG does not parse has no SVG root document).
DECODED_JS = """
return [...document.images].map(i => [i.getAttribute('src'), i.complete && i.naturalWidth > 0])
  .concat([...document.querySelectorAll('object')].map(o => [o.getAttribute('data'),
     !!(o.contentDocument && o.contentDocument.documentElement &&
        o.contentDocument.documentElement.nodeName.toLowerCase() === 'svg')]));
"""


class Server:
    """The site over HTTP on loopback (as a static host serves it: Content-Types by suffix)."""

    def __init__(self, root: Path):
        handler = functools.partial(_Quiet, directory=str(root))
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a):  # the test reports what matters; no access log on stderr
        pass


@pytest.fixture()
def chromium(tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    from vantage_agent.pageload import chromium as engine

    require("chromedriver", "install/50-browsers.sh")
    binary, driver_path = engine.binaries()
    o = webdriver.ChromeOptions()
    o.binary_location = binary
    for a in engine.BASE_ARGS + (f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,900"):
        o.add_argument(a)
    o.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    home = tmp_path / "home"
    home.mkdir()
    svc = Service(executable_path=driver_path, env={"HOME": str(home), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
                  log_output=str(tmp_path / "chromedriver.log"))
    driver = webdriver.Chrome(service=svc, options=o)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def check_page(driver, url: str, shot: Path) -> list[str]:
    """Open url; return its problems (console errors, images that did not decode); save a
    full-page screenshot to shot."""
    driver.get_log("browser")  # drop what an earlier page left
    driver.get(url)
    problems = [f"console: {e['message']}" for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    problems += [f"not decoded: {src}" for src, ok in driver.execute_script(DECODED_JS) if not ok]
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, min(max(height, 600), 16000))
    shot.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(shot))
    driver.set_window_size(1280, 900)
    return problems


def test_every_page_renders_without_errors(demo_store, chromium, tmp_path):  # noqa: F811
    d = build(tmp_path / "site").parent  # every campaign: the campaigns' index and each campaign's pages
    server = Server(d)
    try:
        pages = sorted(p.relative_to(d).as_posix() for p in d.rglob("*.html"))
        assert pages == ["default/index.html"] + [f"default/seed-{k}.html" for k in ("000", "001", "002", "003")] + ["index.html"]
        for p in pages:
            shot = tmp_path / "screenshots" / (p.replace("/", "-").removesuffix(".html") + ".png")
            assert check_page(chromium, f"{server.url}/{p}", shot) == [], p
            assert shot.stat().st_size > 10_000
        check_page(chromium, f"{server.url}/default/seed-000.html", tmp_path / "screenshots" / "again.png")
        images = chromium.execute_script(DECODED_JS)  # a page with figures: they were there, and decoded
        assert len(images) == 3 and all(ok for _, ok in images)
    finally:
        server.close()


def test_the_check_catches_a_broken_figure_and_a_console_error(demo_store, chromium, tmp_path):  # noqa: F811
    # The check itself can fail: an SVG that does not parse, an <object> with a missing SVG and
    # a script error are each reported.
    d = build(tmp_path / "site", "--campaign", CAMPAIGN).parent
    (d / "fig" / "bytes.svg").write_text("<svg xmlns='http://www.w3.org/2000/svg'><unclosed></svg>")
    (d / "broken.html").write_text("<!DOCTYPE html><html><head><link rel='icon' href='favicon.svg'></head><body>"
                                   "<object data='fig/missing.svg' type='image/svg+xml'></object>"
                                   "<script>undefinedFunction()</script></body></html>")
    server = Server(d)
    try:
        problems = check_page(chromium, f"{server.url}/seed-003.html", tmp_path / "shots" / "broken-figure.png")
        assert problems == ["not decoded: fig/bytes.svg"]
        problems = check_page(chromium, f"{server.url}/broken.html", tmp_path / "shots" / "broken-page.png")
        assert "not decoded: fig/missing.svg" in problems
        assert any("undefinedFunction" in p for p in problems), problems
    finally:
        server.close()
