"""install/lib.sh: a toolchain the install cannot find is reported in one line that names the
command to run (and the install's own prerequisite check does the same for root)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.unit


def lib(call: str, tmp_path: Path, path: str = "/usr/bin:/bin", **env: str) -> subprocess.CompletedProcess:
    """Run ``call`` after sourcing install/lib.sh, with a PATH lacking go/cargo and nothing cached."""
    base = {"PATH": path, "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache"),
            "DNSCAMP_GO_DIRS": "", "DNSCAMP_CARGO_DIRS": ""}
    return subprocess.run(["bash", "-c", f"source install/lib.sh && {call}"], capture_output=True, text=True,
                          cwd=ROOT, env={**base, **env}, timeout=30)


def fake(tmp_path: Path, name: str, version_line: str) -> Path:
    d = tmp_path / "bin"
    d.mkdir(exist_ok=True)
    (d / name).write_text(f"#!/bin/sh\necho '{version_line}'\n")
    (d / name).chmod(0o755)
    return d


def test_no_go_is_one_line_naming_the_command(tmp_path):
    p = lib("require_go", tmp_path)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("\n") == 1, p.stderr
    assert p.stderr.startswith("install: missing prerequisite: Go >= 1.24 for CoreDNS (found: none): "
                               "run: apt-get install -y golang-go"), p.stderr


def test_a_too_old_go_is_named_with_its_version(tmp_path):
    d = fake(tmp_path, "go", "go version go1.19.8 linux/amd64")  # Debian 12's golang-go
    p = lib("require_go", tmp_path, path=f"{d}:/usr/bin:/bin")
    assert p.returncode == 2 and f"{d}/go=1.19.8" in p.stderr and p.stderr.count("\n") == 1, p.stderr
    d = fake(tmp_path, "go", "go version go1.24.13 linux/amd64")
    p = lib("require_go", tmp_path, path=f"{d}:/usr/bin:/bin")
    assert p.returncode == 0 and p.stdout.strip() == f"{d}/go", p.stderr


def test_the_go_fetched_into_the_cache_is_found(tmp_path):
    d = tmp_path / "cache" / "dnscamp" / "go-1.24.13" / "bin"
    d.mkdir(parents=True)
    (d / "go").write_text("#!/bin/sh\necho 'go version go1.24.13 linux/amd64'\n")
    (d / "go").chmod(0o755)
    assert lib("find_go", tmp_path).stdout.strip() == f"{d}/go"


def test_no_cargo_is_one_line_naming_the_debian_package(tmp_path):
    p = lib("require_cargo", tmp_path)
    assert p.returncode == 2 and p.stderr.count("\n") == 1
    assert p.stderr == ("install: missing prerequisite: cargo >= 1.78 for linkem and geckodriver (found: none): "
                        "run: apt-get install -y cargo-web rustc-web\n")
    d = fake(tmp_path, "cargo", "cargo 1.65.0")  # Debian 12's plain `cargo` (Rust 1.63) is too old
    assert lib("require_cargo", tmp_path, path=f"{d}:/usr/bin:/bin").returncode == 2


def test_not_root_is_one_line(tmp_path):
    d = fake(tmp_path, "id", "1000")
    p = lib("check_prereqs", tmp_path, path=f"{d}:/usr/bin:/bin")
    assert p.returncode == 2
    assert p.stderr == "install: missing prerequisite: root (apt, network namespaces): run: sudo make deps\n"


@pytest.mark.parametrize("a,b,ge", [("1.24.13", "1.24", True), ("1.24", "1.24", True), ("1.9", "1.24", False),
                                    ("1.96.0", "1.78", True), ("1.63", "1.78", False)])
def test_version_ge(tmp_path, a, b, ge):
    assert (lib(f"version_ge {a} {b}", tmp_path).returncode == 0) is ge


def test_every_step_uses_the_toolchain_checks():
    steps = {p.name: p.read_text() for p in (ROOT / "install").glob("[0-9][0-9]-*.sh")}
    assert "GO=$(ensure_go) || exit 2" in steps["40-testbed-servers.sh"]
    assert "CARGO=$(ensure_cargo) || exit 2" in steps["30-linkem.sh"]
    assert "CARGO=$(ensure_cargo) || exit 2" in steps["50-browsers.sh"]
    assert "check_prereqs || exit 2" in (ROOT / "install" / "run.sh").read_text()
    assert "python3-venv" in steps["10-apt-base.sh"]
    assert "--require-hashes --no-deps -r requirements.lock" in steps["20-python.sh"]
