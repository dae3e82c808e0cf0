"""Page loads on the testbed from the fiber client, each load's transport checked from the ISP
frontend's log (CoreDNS logs every query with the transport of its server block), HARs valid,
HTTP version as asked. Loads go through the `dnscamp pageload` CLI (`--testbed-client fiber`),
so the command is tested too.

`make test` loads a pairwise design: every DNS mode over h2 and over h3, each with one browser,
so that every (browser, mode), (mode, HTTP) and (browser, HTTP) pair is loaded (12 loads, half
the full product). DNSCAMP_PAGELOAD_FULL_MATRIX=1 loads the full product, both browsers x
every DNS mode x h2/h3 (24 loads):

    DNSCAMP_PAGELOAD_FULL_MATRIX=1 .venv/bin/python -m pytest tests/testbed/test_pageload_testbed.py
"""

import json
import os
import re
from pathlib import Path

import pytest

from tests.testbed.conftest import dnscamp
from vantage_agent.pageload import har
from vantage_agent.pageload.kind import parse_log_line

pytestmark = pytest.mark.testbed

MODES = ["system", "do53:isp", "dot:isp", "doh:isp", "doq:isp", "doh3:isp"]
EXPECT = {"system": "do53", "do53:isp": "do53", "dot:isp": "dot", "doh:isp": "doh", "doq:isp": "doq", "doh3:isp": "doh3"}


@pytest.fixture(scope="module")
def world(testbed):
    from testbed.services import info as sinfo

    d = sinfo.describe(testbed.run_dir)
    if not d.get("running"):
        pytest.fail("testbed services are not running (services.json missing)")
    return testbed, d


def _load(tb, d, page, browser, mode, http):
    log = tb.run_dir / "logs" / "frontend-isp.log"
    offset = log.stat().st_size if log.exists() else 0
    url = d["sites"][page]["url"]
    p = dnscamp("pageload", "--testbed-client", "fiber", "--browser", browser, "--dns", mode, "--http", http,
                "--timeout", "30", "--json", url, timeout=300)  # fmt: skip
    summary = json.loads(p.stdout.strip().splitlines()[-1])
    rec_path = re.search(r"records: (\S+)", p.stderr).group(1)
    rec = json.loads(Path(rec_path).read_text().splitlines()[-1])
    text = log.read_bytes()[offset:].decode(errors="replace") if log.exists() else ""
    lines = [f for f in (parse_log_line(ln) for ln in text.splitlines()) if f]
    return summary, rec, Path(rec_path).parent / "artifacts", lines


def _cases() -> list[tuple[str, str, str]]:
    """(browser, mode, http): pairwise (even modes: Chromium over h2 and Firefox over h3; odd
    modes the other way round), or the full product with DNSCAMP_PAGELOAD_FULL_MATRIX=1."""
    full = os.environ.get("DNSCAMP_PAGELOAD_FULL_MATRIX") == "1"
    return [(browser, mode, http) for browser in ("chromium", "firefox") for i, mode in enumerate(MODES)
            for http in ("h2", "h3") if full or (browser == "chromium") == ((http == "h2") == (i % 2 == 0))]


@pytest.mark.parametrize("browser,mode,http", _cases())
def test_load_uses_that_transport_only(world, browser, mode, http):
    tb, d = world
    client = tb.client_address("fiber")
    summary, rec, artifacts, lines = _load(tb, d, "js", browser, mode, http)
    assert summary["n"] == 1 and summary["success"] == 1, (rec["status"], rec["error"])
    b = rec["body"]
    page_hosts = set(d["sites"]["js"]["hosts"])
    ours = [ln for ln in lines if len(ln) > 5 and ln[1].rsplit(":", 1)[0] == client]
    names = {ln[4].rstrip(".").lower() for ln in ours}
    assert page_hosts <= names, (
        f"frontend did not see the page's names from {client}: {page_hosts - names}; "
        f"{len(lines)} new log lines, first: {lines[:4]}; record: {b['dns_verification']}"
    )
    transports = {ln[0] for ln in ours}
    assert transports == {EXPECT[mode]}, f"{mode} load used {sorted(transports)}"
    assert b["next_hop_protocol"] == http
    assert b["har_valid"] is True
    h = json.loads((artifacts / b["har_path"]).read_text())
    assert har.validate(h) == [] and page_hosts <= set(har.unique_names(h))
    # the record's own verdict (the harness reads the same logs) agrees
    assert b["dns_transport_verified"] is True, b["dns_verification"]
    assert summary["dns_transport_verified"] is True


@pytest.mark.parametrize("browser", ["chromium", "firefox"])
def test_multi_host_page_names_all_resolved(world, browser):
    tb, d = world
    summary, rec, artifacts, lines = _load(tb, d, "multi-5", browser, "doq:isp", "h2")
    assert summary["success"] == 1, rec["error"]
    hosts = set(d["sites"]["multi-5"]["hosts"])
    assert hosts <= set(rec["body"]["hostnames"])
    assert rec["body"]["unique_hostnames"] >= len(hosts)
    assert hosts <= {ln[4].rstrip(".").lower() for ln in lines if ln and ln[0] == "doq"}
