"""Firefox page loads (Debian's firefox-esr + geckodriver built by install/50-browsers.sh,
Selenium 4, nothing downloaded): the WWW'20 set-up (002_6fa4cf280535d36b.txt §3.1.1,
headless Firefox driven by Selenium, onLoad from the HAR, cache cleared between loads).

Every load starts a fresh Firefox on a fresh profile (copied from a per-session template
whose NSS db trusts the campaign CA), inside a private mount namespace carrying the load's
``/etc/resolv.conf``. DoH is Firefox's own TRR in mode 3 (§3.2.1). The HAR comes from WebDriver
BiDi network events; timings from Navigation / Resource / Paint Timing with
``privacy.reduceTimerPrecision=false`` (otherwise Firefox rounds them to 1 ms).
"""

from __future__ import annotations

import json
import os
import shutil
import threading
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
from vantage_agent.paths import bin_dir

NAME = "firefox"
# warm_origin: no way to close its connections and keep its session tickets between two loads
WARM_ORIGIN = False

# Quiet, deterministic Firefox: no background traffic, no first-run pages, exact timers.
BASE_PREFS: dict[str, Any] = {
    "privacy.reduceTimerPrecision": False,
    "privacy.resistFingerprinting": False,
    "browser.cache.disk.enable": False,
    "browser.cache.memory.enable": True,
    "browser.shell.checkDefaultBrowser": False,
    "browser.startup.homepage_override.mstone": "ignore",
    "browser.aboutwelcome.enabled": False,
    "datareporting.policy.dataSubmissionEnabled": False,
    "datareporting.healthreport.uploadEnabled": False,
    "toolkit.telemetry.enabled": False,
    "toolkit.telemetry.unified": False,
    "app.update.enabled": False,
    "app.update.auto": False,
    "app.normandy.enabled": False,
    "extensions.update.enabled": False,
    "extensions.getAddons.cache.enabled": False,
    "extensions.blocklist.enabled": False,
    "browser.safebrowsing.malware.enabled": False,
    "browser.safebrowsing.phishing.enabled": False,
    "browser.safebrowsing.downloads.enabled": False,
    "browser.safebrowsing.provider.mozilla.updateURL": "",
    "network.captive-portal-service.enabled": False,
    "network.connectivity-service.enabled": False,
    "browser.newtabpage.enabled": False,
    "browser.newtabpage.activity-stream.feeds.system.topstories": False,
    "browser.topsites.contile.enabled": False,
    "services.settings.server": "",
    "browser.region.network.url": "",
    "browser.search.geoip.url": "",
    "geo.provider.network.url": "",
    "media.gmp-manager.url": "",
    "security.OCSP.enabled": 0,
    "security.remote_settings.crlite_filters.enabled": False,
    "security.remote_settings.intermediates.enabled": False,
    "network.trr.mode": 5,  # DoH off unless the DNS mode turns it on
    "doh-rollout.disable-heuristics": True,
    "network.dns.disableIPv6": False,
    "network.http.speculative-parallel-limit": 0,
    "browser.urlbar.speculativeConnect.enabled": False,
    "network.prefetch-next": False,
    "dom.push.connection.enabled": False,
    "security.enterprise_roots.enabled": False,
}


def binaries() -> tuple[str, str]:
    b = which("firefox-esr") or which("firefox")
    d = which("geckodriver", str(bin_dir()))
    if not b or not d:
        raise errors.SetupError("firefox-esr / geckodriver not found (run install/50-browsers.sh)")
    return b, d


_VERSIONS: dict[str, str] = {}


def versions() -> dict[str, str]:
    if not _VERSIONS:
        try:
            b, d = binaries()
        except errors.SetupError as exc:
            return {"browser": NAME, "error": exc.message}
        bv = tool_version([b, "--version"])
        dv = tool_version([d, "--version"])
        _VERSIONS.update(
            browser=NAME,
            browser_version=bv.split()[-1] if bv else "unknown",
            driver="geckodriver",
            driver_version=dv.split()[1] if len(dv.split()) > 1 else dv,
        )
    return dict(_VERSIONS)


def _template(ca_file: str | None) -> Path:
    """A warmed profile template whose NSS db (cert9.db) trusts ``ca_file``; copied per load.
    Keyed by the Firefox version too (its startup cache is version-specific)."""
    ver = versions().get("browser_version", "unknown")

    def build(d: Path) -> None:
        init_nss(d, ca_file)
        _warm(d)

    return shared_dir(f"firefox-{ver}", ca_file, build)


# Files a started profile keeps that carry state from one load to the next: removed from the
# warmed template, so every load starts with no cache, cookies, HSTS / alt-svc or history.
STATE_FILES = (
    "cache2", "cookies.sqlite", "cookies.sqlite-wal", "places.sqlite-wal", "SiteSecurityServiceState.bin",
    "SiteSecurityServiceState.txt", "AlternateServices.bin", "AlternateServices.txt", "sessionstore.jsonlz4",
    "sessionstore-backups", "storage", "webappsstore.sqlite", "formhistory.sqlite", "permissions.sqlite",
    "content-prefs.sqlite", "favicons.sqlite", "places.sqlite", "datareporting", "saved-telemetry-pings",
    "crashes", "minidumps", "lock", ".parentlock", "user.js", "prefs.js", "security_state", "shader-cache",
    "bounce-tracking-protection.sqlite", "storage.sqlite", "thumbnails", "favicons.sqlite-wal",
    "sessionCheckpoints.json", "times.json",
)


def _warm(tpl: Path) -> None:
    """Start Firefox once on the template (it creates its startup cache, extension registry
    and NSS/module state: ~1 s less per later start), then drop every piece of site state."""
    from selenium import webdriver
    from selenium.webdriver.firefox.service import Service

    try:
        b, d = binaries()
        o = webdriver.FirefoxOptions()
        o.binary_location = b
        for a in ("-headless", "-profile", str(tpl)):
            o.add_argument(a)
        for k, v in BASE_PREFS.items():
            o.set_preference(k, v)
        # The warm-up must not talk to anything: its resolver is a closed loopback port.
        rc = tpl.parent / f".warm-resolv-{os.getpid()}.conf"
        rc.write_text("nameserver 127.0.0.254\noptions timeout:1 attempts:1\n")
        wrapper = ns_wrapper(tpl.parent / f".warm-geckodriver-{os.getpid()}.sh", str(rc), [], d)
        drv = webdriver.Firefox(service=Service(executable_path=wrapper, log_output=os.devnull), options=o)
        try:
            drv.get("about:blank")
        finally:
            drv.quit()
    except Exception:  # noqa: BLE001 - a cold template still works, only slower
        return
    finally:
        for f in tpl.parent.glob(f".warm-*-{os.getpid()}.*"):
            f.unlink(missing_ok=True)
    for name in STATE_FILES:
        p = tpl / name
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        elif p.exists() or p.is_symlink():
            p.unlink()


def prefs(opts: LoadOptions, dns: DnsSetup) -> dict[str, Any]:
    p = dict(BASE_PREFS)
    if opts.http == "h3":
        p["network.http.http3.enable"] = True
        p["network.http.http3.enabled"] = True
        # H3 to a private CA (TOOLCHAIN.md): allow it and map the origins to h3 from the start.
        p["network.http.http3.disable_when_third_party_roots_found"] = False
        if opts.h3_origins:
            p["network.http.http3.alt-svc-mapping-for-testing"] = ",".join(
                f"{o.rsplit(':', 1)[0]};h3=:{o.rsplit(':', 1)[1] if ':' in o else '443'}" for o in opts.h3_origins
            )
        p["network.http.altsvc.oe"] = True
    else:
        p["network.http.http3.enable"] = False
        p["network.http.http3.enabled"] = False
    p.update(dns.firefox_prefs)
    return p


def _user_js(prefs_: dict[str, Any]) -> str:
    return "".join(f"user_pref({json.dumps(k)}, {json.dumps(v)});\n" for k, v in prefs_.items())


class _BidiRecorder:
    """Collects BiDi network events (thread-safe; events arrive on Selenium's ws thread)."""

    EVENTS = ("network.beforeRequestSent", "network.responseCompleted", "network.fetchError")

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.lock = threading.Lock()
        self.ok = False

    def attach(self, driver: Any) -> None:
        if driver._websocket_connection is None:  # Selenium's BiDi connection (enable_bidi)
            driver._start_bidi()
        conn = driver._websocket_connection
        for ev in self.EVENTS:
            conn.add_callback(_Ev(ev), self._cb(ev))
        reply = conn.send_cmd("session.subscribe", {"events": list(self.EVENTS)})
        if "error" in reply:
            raise RuntimeError(f"BiDi subscribe: {reply.get('error')}: {reply.get('message')}")
        self.ok = True

    def wait_for_completed(self, n: int, timeout_s: float = 2.0) -> None:
        """Wait (bounded) until ``n`` requests have ended (responseCompleted / fetchError):
        the events arrive over the websocket after onLoad, and a HAR built at once missed
        some (2 of 7 entries for the multi-host page, seen in CI)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                done = sum(name != "network.beforeRequestSent" for name, _ in self.events)
            if done >= n:
                return
            time.sleep(0.02)

    def _cb(self, name: str):
        def f(params: Any) -> None:
            with self.lock:
                self.events.append((name, params if isinstance(params, dict) else {}))

        return f


class _Ev:
    """The event class protocol of Selenium's WebSocketConnection: ``event_class`` + ``from_json``."""

    def __init__(self, name: str):
        self.event_class = name

    def from_json(self, params: dict[str, Any]) -> dict[str, Any]:
        return params


def load(url: str, opts: LoadOptions, dns: DnsSetup) -> LoadResult:
    """Load ``url`` once in a fresh Firefox; never raises."""
    from selenium import webdriver
    from selenium.webdriver.firefox.service import Service

    res = LoadResult(url=url, browser=NAME, versions=versions())
    try:
        bin_, drv = binaries()
    except errors.SetupError as exc:
        res.status, res.error = exc.status, exc.message
        return res
    wd = make_workdir(opts, "dc-firefox-")
    driver = None
    t0 = time.monotonic()
    try:
        tpl = _template(opts.ca_file)
        profile = wd / "profile"
        shutil.copytree(tpl, profile, ignore=shutil.ignore_patterns(".complete"))
        p = prefs(opts, dns)
        (profile / "user.js").write_text(_user_js(p))
        wrapper = ns_wrapper(wd / "geckodriver.sh", dns.resolv_conf, [], drv)

        o = webdriver.FirefoxOptions()
        o.binary_location = bin_
        o.add_argument("-headless")
        o.add_argument("-profile")
        o.add_argument(str(profile))
        w, h = opts.viewport
        o.add_argument(f"--width={w}")
        o.add_argument(f"--height={h}")
        for k, v in p.items():
            o.set_preference(k, v)
        o.page_load_strategy = "normal"
        if opts.har:
            o.enable_bidi = True
        env = {"HOME": str(wd), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8", "MOZ_HEADLESS": "1"}
        svc = Service(executable_path=wrapper, env=env, log_output=str(wd / "geckodriver.log"))
        driver = session.start_driver(res, lambda: webdriver.Firefox(service=svc, options=o))
        if driver is None:
            return res
        res.wall_ms["start"] = (time.monotonic() - t0) * 1000
        rec = _BidiRecorder()
        if opts.har:
            try:
                rec.attach(driver)
            except Exception:  # noqa: BLE001 - HAR falls back to Resource Timing
                rec.ok = False
        nav_exc = session.navigate(driver, url, opts, res)
        t2 = time.monotonic()
        if nav_exc is not None:
            msg = getattr(nav_exc, "msg", None) or str(nav_exc)
            if "about:neterror" in msg or "Reached error page" in msg:
                e = classify_error_text(msg.strip().splitlines()[0])
            else:
                e = classify_exception(nav_exc)
            if session.set_failure(res, e):
                return res
        session.collect_timings(driver, res)
        if res.status == errors.OK and (res.final_url or "").startswith("about:neterror"):
            session.set_failure(res, classify_error_text(res.final_url or ""))
        if opts.har:
            bv = res.versions.get("browser_version", "")
            if rec.ok:
                rec.wait_for_completed(1 + len(res.resources))  # the document + Resource Timing's entries
                with rec.lock:
                    evs = list(rec.events)
                res.har = harmod.from_bidi(evs, url, res, creator_version=bv)
            if not res.har or not res.har["log"]["entries"]:
                res.har = harmod.from_timing(url, res, NAME, bv)
        res.wall_ms["collect"] = (time.monotonic() - t2) * 1000
        return res
    except Exception as exc:  # noqa: BLE001 - never escape: a record with a status instead
        return session.fail(res, exc)
    finally:
        session.finish(driver, res, opts, wd, t0, quit_=_quit)


def _quit(driver: Any) -> None:
    """Selenium's BiDi close joins its websocket thread for up to 10 s when the socket
    lingers: detach it, quit, then close the socket without waiting."""
    ws = getattr(driver, "_websocket_connection", None)
    driver._websocket_connection = None
    try:
        driver.quit()
    finally:
        if ws is not None and getattr(ws, "_ws", None) is not None:
            try:
                ws._ws.close()
            except Exception:  # noqa: BLE001 - already closed with the browser
                pass
