"""Finding the external tools tests call. `make deps` (install/*.sh) installs every one of them,
so a missing tool is a broken install: the test fails naming the tool and the install step,
it never passes silently and is never skipped."""

from __future__ import annotations

import os
import shutil

import pytest

# Debian puts daemons' helpers in /usr/sbin, which is not on a non-root PATH; the install steps
# put what they build (CoreDNS, linkem, geckodriver) in the user cache's bin dir.
_EXTRA_DIRS = ("/usr/sbin", "/sbin")


def find(tool: str) -> str | None:
    """Absolute path of ``tool`` on PATH, in /usr/sbin or /sbin, or in dnscamp's bin dir."""
    from vantage_agent.paths import bin_dir

    path = os.pathsep.join([os.environ.get("PATH", ""), *_EXTRA_DIRS, str(bin_dir())])
    return shutil.which(tool, path=path)


def require(tool: str, installer: str) -> str:
    """``find(tool)``, or fail the test: "<tool> not found ...: run <installer>"."""
    exe = find(tool)
    if exe is None:
        pytest.fail(f"{tool} not found (PATH, {', '.join(_EXTRA_DIRS)}, dnscamp bin dir): "
                    f"run {installer} (or `make deps`)", pytrace=False)
    return exe
