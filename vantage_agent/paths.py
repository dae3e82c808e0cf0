"""Where dnscamp keeps things on a machine. One place, so every part agrees."""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    """$DNSCAMP_HOME, default ~/.local/share/dnscamp: store, spool, testbed run files."""
    return Path(os.environ.get("DNSCAMP_HOME") or Path.home() / ".local" / "share" / "dnscamp")


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
