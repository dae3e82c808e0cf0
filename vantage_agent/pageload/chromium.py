"""Chromium page loads (Debian's chromium + chromedriver, Selenium 4, nothing downloaded).

Every load starts a fresh Chromium with a fresh ``--user-data-dir`` (no HTTP cache, no host
cache, no sockets left over), in a private mount namespace that carries the load's
``/etc/resolv.conf`` and managed-policy directory (DoH). Metrics come from Navigation /
Resource / Paint Timing and LCP (as 000_6647a8606a2226e0.txt used Chromium), the HAR from the
CDP Network events of the performance log.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from vantage_agent import errors
from vantage_agent.pageload import har as harmod
from vantage_agent.pageload import session
from vantage_agent.pageload.common import (
    LoadOptions,
    LoadResult,
    classify_error_text,
    classify_exception,
    init_nss,
    make_workdir,
    ns_wrapper,
    shared_dir,
    tool_version,
    which,
)
from vantage_agent.pageload.dnsmode import DnsSetup

NAME = "chromium"
POLICY_DIR = "/etc/chromium/policies/managed"

BASE_ARGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--disable-breakpad",
    "--disable-dev-shm-usage",
    "--metrics-recording-only",
    "--password-store=basic",
    "--use-mock-keychain",
    "--mute-audio",
    "--disk-cache-size=1",
    "--disable-features=OptimizationHints,MediaRouter,Translate,InterestFeedContentSuggestions,"
    "CalculateNativeWinOcclusion,AutofillServerCommunication,CertificateTransparencyComponentUpdater",
)


def binaries() -> tuple[str, str]:
    b = which("chromium") or which("chromium-browser")
    d = which("chromedriver")
    if not b or not d:
        raise errors.SetupError("chromium / chromedriver not found (run install/50-browsers.sh)")
    return b, d


_VERSIONS: dict[str, str] = {}


def versions() -> dict[str, str]:
    if not _VERSIONS:
        try:
            b, d = binaries()
        except errors.SetupError as exc:
            return {"browser": NAME, "error": exc.message}
        _VERSIONS.update(
            browser=NAME,
            browser_version=tool_version([b, "--version"]).replace("Chromium ", "").split(" ")[0],
            driver="chromedriver",
            driver_version=tool_version([d, "--version"]).split(" ")[1] if " " in tool_version([d, "--version"]) else "unknown",
        )
    return dict(_VERSIONS)


def _home(ca_file: str | None) -> Path:
    """A HOME whose NSS db (``.pki/nssdb``) trusts ``ca_file``: Chromium's trust store."""
    return shared_dir("chromium-home", ca_file, lambda d: init_nss(d / ".pki" / "nssdb", ca_file))


def _args(opts: LoadOptions, dns: DnsSetup, profile: Path) -> list[str]:
    w, h = opts.viewport
    args = list(BASE_ARGS) + [f"--user-data-dir={profile}", f"--window-size={w},{h}"]
    if opts.http == "h3":
        args.append("--enable-quic")
        if opts.h3_origins:
            args.append("--origin-to-force-quic-on=" + ",".join(opts.h3_origins))
    else:
        args.append("--disable-quic")
    args += dns.chromium_args
    return args


def load(url: str, opts: LoadOptions, dns: DnsSetup) -> LoadResult:
    """Load ``url`` once in a fresh Chromium; never raises."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    res = LoadResult(url=url, browser=NAME, versions=versions())
    try:
        bin_, drv = binaries()
    except errors.SetupError as exc:
        res.status, res.error = exc.status, exc.message
        return res
    wd = make_workdir(opts, "dc-chromium-")
    driver = None
    t0 = time.monotonic()
    try:
        home = _home(opts.ca_file)
        profile = wd / "profile"
        policy = wd / "policies"
        policy.mkdir()
        if dns.chromium_policy:
            (policy / "dnscamp.json").write_text(json.dumps(dns.chromium_policy))
        Path(POLICY_DIR).mkdir(parents=True, exist_ok=True)
        wrapper = ns_wrapper(wd / "chromedriver.sh", dns.resolv_conf, [(str(policy), POLICY_DIR)], drv)

        o = webdriver.ChromeOptions()
        o.binary_location = bin_
        for a in _args(opts, dns, profile):
            o.add_argument(a)
        o.page_load_strategy = "normal"
        o.set_capability("goog:loggingPrefs", {"performance": "ALL"})
        o.add_experimental_option("perfLoggingPrefs", {"enableNetwork": True, "enablePage": False})
        env = {"HOME": str(home), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
        svc = Service(executable_path=wrapper, env=env, log_output=str(wd / "chromedriver.log"))
        driver = session.start_driver(res, lambda: webdriver.Chrome(service=svc, options=o))
        if driver is None:
            return res
        res.wall_ms["start"] = (time.monotonic() - t0) * 1000
        nav_exc = session.navigate(driver, url, opts, res)
        events = _perf_events(driver)
        t2 = time.monotonic()
        if nav_exc is not None and session.set_failure(res, classify_exception(nav_exc)):
            return res
        session.collect_timings(driver, res)
        main_err = _main_document_error(events, url)
        if res.status == errors.OK and (main_err or (res.final_url or "").startswith("chrome-error://")):
            session.set_failure(res, classify_error_text(main_err or f"error page for {url}"))
        if opts.har:
            res.har = harmod.from_cdp(events, url, res, creator_version=res.versions.get("browser_version", ""))
        res.wall_ms["collect"] = (time.monotonic() - t2) * 1000
        return res
    except Exception as exc:  # noqa: BLE001 - never escape: a record with a status instead
        return session.fail(res, exc)
    finally:
        session.finish(driver, res, opts, wd, t0)


def _perf_events(driver: Any) -> list[dict[str, Any]]:
    try:
        raw = driver.get_log("performance")
    except Exception:  # noqa: BLE001 - no log: the HAR is empty, the load still counts
        return []
    out = []
    for r in raw:
        try:
            m = json.loads(r["message"])["message"]
        except (KeyError, ValueError, TypeError):
            continue
        out.append(m)
    return out


def _main_document_error(events: list[dict[str, Any]], url: str) -> str | None:
    """errorText of the top-level document request when it failed (Network.loadingFailed)."""
    doc_ids = []
    for ev in events:
        if ev.get("method") == "Network.requestWillBeSent":
            p = ev.get("params", {})
            if p.get("type") == "Document" and p.get("requestId") == p.get("loaderId"):
                doc_ids.append(p["requestId"])
    for ev in events:
        if ev.get("method") == "Network.loadingFailed":
            p = ev.get("params", {})
            if p.get("requestId") in doc_ids and not p.get("canceled"):
                return str(p.get("errorText") or "loading failed")
    return None
