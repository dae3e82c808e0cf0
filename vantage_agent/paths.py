"""Where dnscamp keeps things on a machine. One place, so every part agrees."""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    """$DNSCAMP_HOME: store, spool, testbed run files. Default ~/.local/share/dnscamp, or
    /var/lib/dnscamp for root, because the store's service user (db/embedded.py) cannot reach
    anything under /root (0700) and dnscamp does not chmod directories above its home."""
    if os.environ.get("DNSCAMP_HOME"):
        return Path(os.environ["DNSCAMP_HOME"])
    user_default = Path.home() / ".local" / "share" / "dnscamp"
    if os.geteuid() != 0:
        return user_default
    system = Path("/var/lib/dnscamp")
    # A store made by older dnscamp under root's home stays found (db up says how to move it).
    return user_default if user_default.exists() and not system.exists() else system


def cache_dir() -> Path:
    """Build caches shared by every checkout (CoreDNS, linkem, geckodriver builds)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dnscamp"


def bin_dir() -> Path:
    """Binaries built by the install steps (linkem, coredns, geckodriver, ...)."""
    return cache_dir() / "bin"


def spool_dir() -> Path:
    return Path(os.environ.get("DNSCAMP_SPOOL") or home() / "spool")


def testbed_dir() -> Path:
    """Run directory of the testbed: pid files, logs, configs, CA, generated sites."""
    return home() / "testbed"
