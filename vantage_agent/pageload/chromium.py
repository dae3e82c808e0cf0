"""Chromium page loads (Debian's chromium + chromedriver, Selenium 4, nothing downloaded).

Every load starts a fresh Chromium with a fresh ``--user-data-dir`` (no HTTP cache, no host
cache, no sockets left over), in a private mount namespace that carries the load's
``/etc/resolv.conf`` and managed-policy directory (DoH). Metrics come from Navigation /
Resource / Paint Timing and LCP (as 000_6647a8606a2226e0.txt used Chromium), the HAR from the
CDP Network events of the performance log.

``warm_origin`` (LoadOptions): the page is loaded once (the warm-up), then the browser closes
every connection and clears its host cache through ``chrome.benchmarking`` (the
``--enable-net-benchmarking`` switch; net-internals has no socket flush any more) while its
TLS / QUIC session tickets stay, and the second load is the measured one: its origin can be
reached with QUIC 0-RTT (000_6647a8606a2226e0.txt §III: "a QUIC 0-RTT handshake within
Chromium's H3 request"). Chromium's netlog tells whether it was (``zero_rtt_summary``).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from vantage_agent import errors
from vantage_agent.pageload import har as harmod
from vantage_agent.pageload import metrics, session
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
# warm_origin: it can close its connections and keep its session tickets (chrome.benchmarking)
WARM_ORIGIN = True
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


def _args(opts: LoadOptions, dns: DnsSetup, profile: Path, netlog: Path | None = None) -> list[str]:
    w, h = opts.viewport
    args = list(BASE_ARGS) + [f"--user-data-dir={profile}", f"--window-size={w},{h}"]
    if opts.warm_origin:  # chrome.benchmarking for the page between the loads; the netlog for the evidence
        args.append("--enable-net-benchmarking")
        if netlog is not None:
            args += [f"--log-net-log={netlog}", "--net-log-capture-mode=Default"]
    if opts.http == "h3":
        args.append("--enable-quic")
        if opts.h3_origins:
            args.append("--origin-to-force-quic-on=" + ",".join(opts.h3_origins))
    else:
        args.append("--disable-quic")
    args += dns.chromium_args
    return args


def load(url: str, opts: LoadOptions, dns: DnsSetup) -> LoadResult:
    """Load ``url`` in a fresh Chromium (twice with ``warm_origin``: the record is the second,
    ``res.warm`` says how the first went and whether the second used 0-RTT); never raises."""
    if not opts.warm_origin:
        return _load(url, opts, dns, None)
    if opts.work_dir:
        Path(opts.work_dir).mkdir(parents=True, exist_ok=True)  # a run's first load makes it
    fd, name = tempfile.mkstemp(prefix="dc-netlog-", suffix=".json", dir=opts.work_dir or None)
    os.close(fd)
    netlog = Path(name)
    try:
        res = _load(url, opts, dns, netlog)
        after = res.warm.pop("measured_after_epoch_ms", None) if res.warm is not None else None
        if after is not None:  # the browser has quit: the netlog is complete JSON
            res.warm["zero_rtt"] = zero_rtt_summary(_read_netlog(netlog), url, after)
        return res
    finally:
        netlog.unlink(missing_ok=True)


def _load(url: str, opts: LoadOptions, dns: DnsSetup, netlog: Path | None) -> LoadResult:
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
        for a in _args(opts, dns, profile, netlog):
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
        if opts.warm_origin and not _warm_up(driver, url, opts, dns, res):
            return res
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


# Run in the warm-up page: close every connection (QUIC sessions included: the network
# session's CloseAllConnections) and forget resolved names; session tickets are kept.
FORGET_JS = """
const done = arguments[arguments.length - 1];
Promise.resolve(chrome.benchmarking.closeConnections())
  .then(() => chrome.benchmarking.clearHostResolverCache())
  .then(() => done('ok'), e => done('error: ' + e));
"""


def _warm_up(driver: Any, url: str, opts: LoadOptions, dns: DnsSetup, res: LoadResult) -> bool:
    """The warm-up load of ``url``, then forget what a cold load would not have (connections,
    host cache, the stub's upstream connection) but the session tickets. False (``res`` has the
    warm-up's failure) when the warm-up did not load: there is nothing warm to measure."""
    w = LoadResult(url=url, browser=NAME)
    t = time.monotonic()
    nav_exc = session.navigate(driver, url, opts, w)
    if nav_exc is not None:
        session.set_failure(w, classify_exception(nav_exc))
    else:
        session.collect_timings(driver, w)
        if w.status == errors.OK and (w.final_url or "").startswith("chrome-error://"):
            session.set_failure(w, classify_error_text(f"error page for {url}"))
    res.warm = {"warm_up": {"status": w.status, "error": w.error, "plt_ms": metrics.plt_ms(w.navigation),
                            "wall_ms": round((time.monotonic() - t) * 1000, 3)}}
    if w.status != errors.OK:
        res.status, res.error = w.status, f"warm-up load: {w.error or w.status}"
        return False
    forgot = driver.execute_async_script(FORGET_JS)
    if forgot != "ok":
        res.status, res.error = errors.SetupError.status, f"warm_origin: chrome.benchmarking: {forgot}"
        return False
    dns.fresh_upstream()
    dns.reset_stats()  # the stub's figures and names are the measured load's
    _perf_events(driver)  # drained: the HAR is the measured load's
    res.warm["measured_after_epoch_ms"] = time.time() * 1000
    return True


def _read_netlog(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None  # no netlog (the browser crashed before writing it out)


def zero_rtt_summary(netlog: dict[str, Any] | None, url: str, after_epoch_ms: float) -> dict[str, Any]:
    """What Chromium's netlog says about the measured load's QUIC connections to ``url``'s
    origin (those created after ``after_epoch_ms``, the end of the warm-up): ``state``, the
    netlog's QUIC_SESSION_ZERO_RTT_STATE of the first (NotAttempted / AttemptedAndSucceeded /
    AttemptedAndRejected), ``resumed`` (transport parameters resumed: a ticket was used),
    ``zero_rtt_packets`` sent, and ``request_in_0rtt``: an HTTP/3 request left on it before the
    handshake completed, i.e. the page's request went out as early data. ``sessions``: 0 when the
    load used no new QUIC connection to the origin (h2, or a connection not to the origin)."""
    from urllib.parse import urlsplit

    if not netlog:
        return {"sessions": None, "error": "no netlog"}
    u = urlsplit(url)
    host, port = (u.hostname or "").lower(), u.port or 443
    c = netlog.get("constants", {})
    name = {v: k for k, v in c.get("logEventTypes", {}).items()}
    quic_source = c.get("logSourceType", {}).get("QUIC_SESSION")
    offset = float(c.get("timeTickOffset", 0))
    sessions: dict[int, dict[str, Any]] = {}
    for ev in netlog.get("events", []):
        src = ev.get("source", {})
        if src.get("type") != quic_source:
            continue
        kind, p, sid = name.get(ev.get("type")), ev.get("params") or {}, src.get("id")
        if kind == "QUIC_SESSION" and "host" in p:
            if p.get("host", "").lower() == host and int(p.get("port", 443)) == port \
                    and offset + float(ev.get("time", 0)) >= after_epoch_ms:
                sessions[sid] = {"state": None, "resumed": False, "zero_rtt_packets": 0, "request_in_0rtt": False,
                                 "handshake_done": False}
            continue
        s = sessions.get(sid)
        if s is None:
            continue
        if kind == "QUIC_SESSION_ZERO_RTT_STATE":
            s["state"] = p.get("state")
        elif kind == "QUIC_SESSION_TRANSPORT_PARAMETERS_RESUMED":
            s["resumed"] = True
        elif kind == "QUIC_SESSION_PACKET_SENT" and p.get("encryption_level") == "ENCRYPTION_ZERO_RTT":
            s["zero_rtt_packets"] += 1
        elif kind == "QUIC_SESSION_CRYPTO_HANDSHAKE_COMPLETE":
            s["handshake_done"] = True
        elif kind == "HTTP3_HEADERS_SENT" and not s["handshake_done"]:
            s["request_in_0rtt"] = True
    if not sessions:
        return {"sessions": 0}
    first = sessions[min(sessions)]
    return {"sessions": len(sessions), **{k: v for k, v in first.items() if k != "handshake_done"}}


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
