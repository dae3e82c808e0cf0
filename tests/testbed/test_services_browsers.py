"""Smoke test: headless Chromium and Firefox load a multi-host page from a client namespace,
through the testbed's DNS (the client's OS resolver is the ISP resolver) and the testbed CA
(an NSS db in HOME for Chromium, the profile's NSS db for Firefox). The page's depth-3
resource is injected by a depth-2 script that a depth-1 script injected, so finding it in the
DOM proves the whole chain resolved and loaded over verified TLS."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from tests.tools import require

from tests.testbed.conftest import ROOT

pytestmark = pytest.mark.testbed

FF_SCRIPT = r"""
import sys, os, tempfile, time
from pathlib import Path
from selenium import webdriver
from selenium.webdriver.firefox.options import Options
from selenium.webdriver.firefox.service import Service
from testbed.services import ca
prof = Path(tempfile.mkdtemp(prefix="dc-ffprof-"))
ca.add_to_firefox_profile(prof, Path(sys.argv[1]))
(prof / "user.js").write_text('user_pref("network.dns.disableIPv6", true);\n')
o = Options()
for a in ("-headless", "-profile", str(prof)):
    o.add_argument(a)
o.binary_location = sys.argv[3]
d = webdriver.Firefox(options=o, service=Service(executable_path=sys.argv[4]))
try:
    d.set_page_load_timeout(60)
    d.get(sys.argv[2])
    deadline = time.time() + 10
    srcs = ""
    while time.time() < deadline:
        srcs = d.execute_script(
            "return Array.from(document.querySelectorAll('[src],link[href]')).map(e => e.src || e.href).join(' ')")
        if all(h in srcs for h in sys.argv[5].split(",")):
            break
        time.sleep(0.2)
    print(srcs)
finally:
    d.quit()
    import shutil
    shutil.rmtree(prof, ignore_errors=True)
"""


def _page(svc):
    page = svc["sites"]["multi-10"]
    deepest = [h for h in page["hosts"] if svc["hosts"][h]["depth"] == 3]
    assert deepest, page
    return page["url"], deepest


def _chromium() -> str:
    return require("chromium", "install/50-browsers.sh")


def test_chromium_loads_a_multi_host_page(testbed):
    from testbed.services import ca, info

    svc = info.describe(testbed.run_dir)
    url, deepest = _page(svc)
    exe = _chromium()
    home = Path(tempfile.mkdtemp(prefix="dc-chrome-home-"))
    try:
        ca.make_nssdb(home, Path(svc["ca_file"]))
        p = testbed.exec(testbed.client_ns("fiber"), [
            "env", f"HOME={home}", exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={home / 'ud'}", "--virtual-time-budget=15000", "--dump-dom", url], timeout=90)
        assert p.returncode == 0, p.stderr[-2000:]
        for h in deepest:
            assert f"https://{h}/" in p.stdout, (h, p.stdout[-1500:], p.stderr[-1500:])
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_firefox_loads_a_multi_host_page(testbed):
    from testbed.services import info

    svc = info.describe(testbed.run_dir)
    url, deepest = _page(svc)
    ff = require("firefox-esr", "install/50-browsers.sh")
    gd = require("geckodriver", "install/50-browsers.sh")
    p = testbed.exec(testbed.client_ns("fiber"), [sys.executable, "-c", FF_SCRIPT, svc["ca_file"], url, ff, str(gd),
                                                   ",".join(deepest)], timeout=150, cwd=ROOT,
                     env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0, p.stderr[-2000:]
    for h in deepest:
        assert f"https://{h}/" in p.stdout, (h, p.stdout[-1500:])
