"""tests/tools.py: a tool the install steps provide is found where they put it, and a missing
one fails the test with the tool and the install step named (never a silent pass or a skip)."""

from __future__ import annotations

import pytest

from tests import tools

pytestmark = pytest.mark.unit


def test_missing_tool_fails_naming_tool_and_installer(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(tools, "_EXTRA_DIRS", ())
    with pytest.raises(pytest.fail.Exception, match=r"^openssl not found .*: run install/40-testbed-servers\.sh"):
        tools.require("openssl", "install/40-testbed-servers.sh")


def test_sbin_and_the_dnscamp_bin_dir_are_searched(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # a non-root PATH: no /usr/sbin
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    (tmp_path / "dnscamp" / "bin").mkdir(parents=True)
    exe = tmp_path / "dnscamp" / "bin" / "linkem"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    assert tools.require("linkem", "install/30-linkem.sh") == str(exe)
    assert tools.require("unbound-checkconf", "install/40-testbed-servers.sh").startswith(("/usr/sbin/", "/sbin/"))
