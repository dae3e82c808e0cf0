"""What every browser module shares: load options, the one result type, error mapping.

Each browser module (``firefox.py``, ``chromium.py``) exposes the same function::

    load(url: str, opts: LoadOptions, dns: DnsSetup) -> LoadResult

Every load starts clean (a fresh profile and a fresh browser process, so no HTTP cache, no
DNS cache, no open connections), and every failure comes back as a ``LoadResult`` with a
``status`` from ``vantage_agent.errors`` (WWW'20 Table 1: success, page_load_timeout,
dns_error, driver_error, other) and the browser's own error text — never an exception.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vantage_agent import errors

# Default page-load timeout: 30 s, the value of the issue brief for the WWW'20 set-up
# (002_6fa4cf280535d36b.txt, Table 1 counts loads that exceed it as "Page-load Timeout").
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_VIEWPORT = (1366, 768)


@dataclass(frozen=True)
class LoadOptions:
    """How to load one page. Defaults are the campaign defaults."""

    timeout_s: float = DEFAULT_TIMEOUT_S
    viewport: tuple[int, int] = DEFAULT_VIEWPORT
    http: str = "h2"  # "h2": HTTP/2 only (QUIC off); "h3": HTTP/3 forced for h3_origins
    h3_origins: tuple[str, ...] = ()  # "host:port" the browser must use QUIC for (h3)
    ca_file: str | None = None  # extra trust anchor (testbed CA) for sites and DoH
    work_dir: str | None = None  # where per-load profiles go (a temp dir when None)
    har: bool = True  # collect network events and write a HAR
    keep_profile: bool = False  # debugging: keep the profile directory
    # Chromium: load the page once, close the connections and clear the host cache (the TLS /
    # QUIC session tickets stay), then time a second load (H3 0-RTT; docs/pageload.md)
    warm_origin: bool = False


@dataclass
class LoadResult:
    """The one result type of every browser module."""

    url: str
    browser: str
    status: str = errors.OK
    error: str | None = None
    final_url: str | None = None
    navigation: dict[str, Any] | None = None
    paint: dict[str, float] = field(default_factory=dict)
    lcp_ms: float | None = None
    resources: list[dict[str, Any]] = field(default_factory=list)
    time_origin_ms: float | None = None  # performance.timeOrigin (ms since the epoch)
    har: dict[str, Any] | None = None
    versions: dict[str, str] = field(default_factory=dict)
    wall_ms: dict[str, float] = field(default_factory=dict)  # start / load / collect / quit
    restarts: int = 0
    warm: dict[str, Any] | None = None  # warm_origin: the warm-up load and the measured load's 0-RTT evidence


def classify_exception(exc: BaseException, browser_text: str | None = None) -> errors.MeasurementError:
    """Map a Selenium / driver exception to the WWW'20 failure taxonomy (Table 1)."""
    from selenium.common import exceptions as sx

    text = (browser_text or getattr(exc, "msg", None) or str(exc) or type(exc).__name__).strip()
    text = text.splitlines()[0] if text else type(exc).__name__
    if isinstance(exc, sx.TimeoutException):
        return errors.PageLoadTimeout(text)
    low = text.lower()
    if is_dns_error_text(low):
        return errors.DnsError(text)
    if isinstance(
        exc,
        (
            sx.InvalidSessionIdException,
            sx.SessionNotCreatedException,
            sx.NoSuchWindowException,
            sx.NoSuchDriverException,
        ),
    ) or any(s in low for s in DRIVER_CRASH_TEXT):
        return errors.DriverError(text)
    if isinstance(exc, (ConnectionError, OSError)):
        return errors.DriverError(f"{type(exc).__name__}: {text}")
    if isinstance(exc, sx.WebDriverException) and "reached error page" in low:
        return errors.Other(text)
    if isinstance(exc, sx.WebDriverException):
        return errors.DriverError(text)
    return errors.Other(f"{type(exc).__name__}: {text}")


DRIVER_CRASH_TEXT = (
    "session deleted",
    "disconnected",
    "not reachable",
    "no such window",
    "tab crashed",
    "failed to decode response from marionette",
    "browsing context has been discarded",
    "connection refused",
    "invalid session id",
    "session not created",
)

DNS_ERROR_TEXT = (
    "err_name_not_resolved",
    "err_name_resolution_failed",
    "err_dns_",
    "e=dnsnotfound",
    "dnsnotfound",
)


def is_dns_error_text(low: str) -> bool:
    return any(s in low for s in DNS_ERROR_TEXT)


def classify_error_text(text: str) -> errors.MeasurementError:
    """A browser's net error text (Chromium errorText, Firefox about:neterror) -> status."""
    low = text.lower()
    if is_dns_error_text(low):
        return errors.DnsError(text)
    if "err_timed_out" in low or "nettimeout" in low:
        return errors.PageLoadTimeout(text)
    return errors.Other(text)


def tool_version(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unknown ({type(exc).__name__})"
    return (out.strip().splitlines() or ["unknown"])[0]


def which(name: str, *extra_dirs: str) -> str | None:
    for d in extra_dirs:
        p = Path(d) / name
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
    return shutil.which(name)


def make_workdir(opts: LoadOptions, prefix: str) -> Path:
    base = opts.work_dir or None
    if base:
        Path(base).mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=base))


def ca_stamp(ca_file: str | None) -> str:
    """Identity of a CA file by content (a regenerated CA at the same path is a new CA)."""
    import hashlib

    if not ca_file:
        return "none"
    try:
        return hashlib.sha256(Path(ca_file).read_bytes()).hexdigest()
    except OSError:
        return f"missing:{ca_file}"


def init_nss(db: Path, ca_file: str | None) -> None:
    db.mkdir(parents=True, exist_ok=True)
    if not (db / "cert9.db").exists():
        subprocess.run(["certutil", "-d", f"sql:{db}", "-N", "--empty-password"], check=True, capture_output=True)
    if ca_file:
        subprocess.run(
            ["certutil", "-d", f"sql:{db}", "-A", "-t", "C,,", "-n", "dnscamp-ca", "-i", ca_file],
            check=True,
            capture_output=True,
        )


def ns_wrapper(path: Path, resolv_conf: str | None, binds: list[tuple[str, str]], target: str) -> str:
    """Write a driver wrapper that runs ``target`` in a private mount namespace.

    Inside it, ``/etc/resolv.conf`` is the per-load resolver file and any ``(src, dst)`` of
    ``binds`` is bind-mounted (Chromium's managed-policy directory): what one load sees is
    invisible to every other process on the machine, so concurrent runs never collide.
    """
    mounts = []
    if resolv_conf:
        mounts.append((resolv_conf, "/etc/resolv.conf"))
    mounts.extend(binds)
    lines = ["#!/bin/sh", "# generated by dnscamp (vantage_agent/pageload): per-load mount namespace"]
    if not mounts:
        lines.append(f'exec {target} "$@"')
    else:
        inner = []
        for src, dst in mounts:
            inner.append(f"mount --bind {sh_quote(src)} {sh_quote(dst)} || exit 97")
        inner_s = "; ".join(s for s in inner if s) + "; exec " + target + ' "$@"'
        lines.append(f'exec unshare --mount --propagation private sh -c {sh_quote(inner_s)} dnscamp-driver "$@"')
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o755)
    return str(path)


def sh_quote(s: str) -> str:
    return "'" + s.replace("'", "'\"'\"'") + "'"


def descendants(pid: int | None) -> list[Any]:
    """The process tree under the driver (browser, content processes), taken before quit."""
    if not pid:
        return []
    try:
        import psutil

        return psutil.Process(pid).children(recursive=True)
    except Exception:  # noqa: BLE001 - the driver is gone already
        return []


def kill_survivors(procs: list[Any]) -> int:
    """Kill what a crashed driver left behind (by PID, only our own children). Returns count."""
    import psutil

    alive = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                p.kill()
                alive.append(p)
        except psutil.Error:
            pass
    psutil.wait_procs(alive, timeout=3)
    return len(alive)


def shared_dir(name: str, ca_file: str | None, build: Any) -> Path:
    """A directory shared by every load of this machine and CA (Chromium's NSS HOME, Firefox's
    warmed profile template), under ``cache_dir()/pageload``, keyed by ``name`` and the CA's
    content. Built once by ``build(tmp_dir)`` under a lock, then renamed into place, so
    concurrent runs never see a half-built one. Loads only read it (Firefox copies it)."""
    import fcntl

    from vantage_agent.paths import cache_dir

    root = cache_dir() / "pageload"
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"{name}-{ca_stamp(ca_file)[:16]}"
    if (final / ".complete").exists():
        try:
            os.utime(final)  # in use: keep it from pruning
        except OSError:
            pass
        return final
    with open(root / f".{final.name}.lock", "w") as lk:
        fcntl.flock(lk, fcntl.LOCK_EX)
        if (final / ".complete").exists():
            return final
        tmp = root / f".{final.name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        build(tmp)
        (tmp / ".complete").write_text(ca_stamp(ca_file))
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        _prune(root, name, keep=final)
    return final


def _prune(root: Path, name: str, keep: Path, max_age_s: float = 6 * 3600) -> None:
    """Drop this kind's directories for other CAs unused for ``max_age_s`` (tests make a CA
    per session; a campaign's CA stays)."""
    import time

    for d in root.glob(f"{name}-*"):
        if d == keep or not d.is_dir():
            continue
        try:
            if time.time() - d.stat().st_mtime > max_age_s:
                shutil.rmtree(d, ignore_errors=True)
        except OSError:
            pass
