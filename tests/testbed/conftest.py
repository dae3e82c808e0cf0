"""The ``testbed`` fixture: the island with profiles fiber and 4g, for the whole test session.

- The session takes the machine-wide testbed lease first (namespaces are global: two test
  sessions on one machine would tear down each other's island), waiting for another session
  to finish if needed.
- A running island is reused only if this same test session started it (its owner token,
  ``DNSCAMP_TESTBED_OWNER``, is in state.json); anything else is torn down and rebuilt.
- Teardown (`dnscamp testbed down`) runs at the end of the session even if tests failed.

Tests that tear the island down themselves call ``testbed.ensure_up()`` afterwards.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

PROFILES = ["fiber", "4g"]
ROOT = Path(__file__).resolve().parents[2]
DNSCAMP = [sys.executable, "-m", "dnscamp.cli"]


def dnscamp(*args: str, check: bool = True, timeout: float = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run the dnscamp CLI (same interpreter, same DNSCAMP_HOME) and return the result."""
    p = subprocess.run([*DNSCAMP, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                       env={**os.environ, **(env or {})})
    if check and p.returncode != 0:
        raise AssertionError(f"dnscamp {' '.join(args)}: exit {p.returncode}\n{p.stderr[-2000:]}")
    return p


class Testbed:
    """Handle on the running island (what the testbed tests use)."""

    def __init__(self, token: str, profiles: list[str]):
        from vantage_agent.paths import testbed_dir

        self.token = token
        self.profiles = profiles
        self.run_dir = testbed_dir()

    @property
    def info(self) -> dict:
        from testbed import topology

        return topology.info(self.run_dir)

    def client_ns(self, profile: str) -> str:
        return self.info["clients"][profile]["ns"]

    def client_address(self, profile: str) -> str:
        return self.info["clients"][profile]["address"]

    @property
    def supervisor(self):
        from testbed.supervisor import Supervisor

        return Supervisor(self.run_dir)

    def exec(self, ns: str, argv: list[str], timeout: float = 60, **kw) -> subprocess.CompletedProcess:
        """Run ``argv`` inside namespace ``ns`` (captured text output)."""
        return subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True, text=True, timeout=timeout, **kw)

    def is_ours(self) -> bool:
        from testbed import topology

        st = topology.read_state(self.run_dir)
        return bool(st) and st.get("owner") == self.token and st["island"].get("profiles") == self.profiles \
            and topology.status(self.run_dir)["healthy"]

    def ensure_up(self) -> None:
        """Bring the island up unless this session's island is up and healthy."""
        if self.is_ours():
            return
        dnscamp("testbed", "down", check=False)
        dnscamp("testbed", "up", "--profiles", ",".join(self.profiles))
        assert self.is_ours(), "testbed up did not leave a healthy island"

    def down(self) -> subprocess.CompletedProcess:
        return dnscamp("testbed", "down", check=False)


@pytest.fixture(scope="session")
def testbed_lease():
    """The machine-wide testbed lease for this test session (and its owner token in the environment)."""
    if os.geteuid() != 0:
        pytest.fail("testbed tests need root (network namespaces, iptables)")
    from testbed import topology

    token = os.environ.get("DNSCAMP_TESTBED_OWNER") or f"pytest-{uuid.uuid4().hex[:12]}"
    os.environ["DNSCAMP_TESTBED_OWNER"] = token
    with topology.session_lease(token, log=lambda m: sys.stderr.write(f"\n{m}\n")):
        yield token


@pytest.fixture(scope="session")
def testbed(testbed_lease):
    """The island up with profiles fiber,4g; torn down at the end of the session, even on failure."""
    tb = Testbed(testbed_lease, list(PROFILES))
    try:
        tb.ensure_up()
        yield tb
    finally:
        p = tb.down()
        if p.returncode != 0:
            sys.stderr.write(f"testbed down failed: {p.stderr}\n")
