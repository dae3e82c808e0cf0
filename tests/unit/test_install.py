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
    # the whole lock, hash-checked, unless the demo's part of it (install/lock_subset.py)
    assert "--require-hashes --no-deps -r \"$lock\"" in steps["20-python.sh"]
    assert "want=$full lock=requirements.lock" in steps["20-python.sh"]
    assert "install/lock_subset.py requirements.lock pyproject.toml > \"$lock\"" in steps["20-python.sh"]


# --- `make demo` installs what the demo runs; `make test` everything ----------------------------
STEPS = sorted((ROOT / "install").glob("[0-9][0-9]-*.sh"))
TEST_ONLY_STEPS = {"60-infra.sh"}  # tflint, checkov, cloud-init: the fleet's tools


def test_every_step_says_whom_it_serves_and_make_test_runs_them_all(tmp_path):
    for step in STEPS:
        p = lib(f"step_targets {step}", tmp_path)
        assert p.returncode == 0, p.stderr
        targets = p.stdout.split()
        assert set(targets) <= {"demo", "test"} and "test" in targets, (step.name, targets)
        assert ("demo" not in targets) == (step.name in TEST_ONLY_STEPS), (step.name, targets)
        parallel = "\n# parallel: yes\n" in step.read_text()
        assert parallel == (step.name in {"40-testbed-servers.sh", "50-browsers.sh"}), step.name  # the two builds
    nameless = tmp_path / "99-x.sh"
    nameless.write_text("#!/usr/bin/env bash\necho hi\n")
    p = lib(f"step_targets {nameless}", tmp_path)
    assert p.returncode == 2 and "has no '# for:' line" in p.stderr


STAND_IN = "source install/lib.sh\nfor_demo && echo '{name} demo' || echo '{name} all'\n"


def run_steps(tmp_path: Path, *args: str, steps=None) -> subprocess.CompletedProcess:
    """install/run.sh over stand-in steps (name, header lines, body; by default three that print
    the target they were given), as root (a fake id)."""
    inst = tmp_path / "repo" / "install"
    inst.mkdir(parents=True)
    for f in ("run.sh", "lib.sh"):
        (inst / f).write_text((ROOT / "install" / f).read_text())
    if steps is None:
        steps = [(name, f"# for: {targets}", STAND_IN.format(name=name))
                 for name, targets in (("10-a.sh", "demo test"), ("20-b.sh", "test"), ("30-c.sh", "test demo"))]
    for name, header, body in steps:
        (inst / name).write_text(f"#!/usr/bin/env bash\n{header}\nset -euo pipefail\n{body}")
    d = fake(tmp_path, "id", "0")
    return subprocess.run(["bash", str(inst / "run.sh"), *args], capture_output=True, text=True, timeout=60,
                          env={"PATH": f"{d}:/usr/bin:/bin", "HOME": str(tmp_path)})


def test_run_sh_demo_runs_the_demos_steps_only(tmp_path):
    p = run_steps(tmp_path, "demo")
    assert p.returncode == 0, p.stderr
    ran = [line for line in p.stdout.splitlines() if line.endswith((" demo", " all"))]
    assert ran == ["10-a.sh demo", "30-c.sh demo"], p.stdout
    assert "== install: 20-b.sh: skipped (for: test)" in p.stdout


def test_run_sh_runs_every_step_whole_by_default_and_refuses_another_target(tmp_path):
    p = run_steps(tmp_path)
    assert p.returncode == 0, p.stderr
    assert [line for line in p.stdout.splitlines() if line.endswith((" demo", " all"))] == [
        "10-a.sh all", "20-b.sh all", "30-c.sh all"]
    p = subprocess.run(["bash", "install/run.sh", "fleet"], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "usage: install/run.sh [demo|test]" in p.stderr


def test_make_demo_installs_for_the_demo_and_make_test_everything():
    def first(target: str) -> str:
        return subprocess.run(["make", "--no-print-directory", "-n", target], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.splitlines()[0]
    assert first("demo") == "bash install/run.sh demo"
    assert first("test") == "bash install/run.sh test"
    assert first("deps") == "bash install/run.sh test"
    base = (ROOT / "install" / "10-apt-base.sh").read_text()
    assert "for_demo || apt_install cron socat faketime docker-compose" in base  # rehearsal and compose tests only


def _lock_subset():
    import importlib.util
    spec = importlib.util.spec_from_file_location("lock_subset", ROOT / "install" / "lock_subset.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_demos_lock_is_the_runtime_closure_of_requirements_lock():
    """Every kept block is the lock's own (same pin, same hashes); every [project] dependency and
    everything each kept package requires (its installed metadata, extras left out) is kept; the
    test extra's tools are not. (What `pip check` says after the demo's install.)"""
    import tomllib
    from importlib import metadata

    ls = _lock_subset()
    lock = (ROOT / "requirements.lock").read_text()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    subset = ls.runtime_subset(lock, pyproject)
    _, all_blocks, _ = ls.blocks(lock)
    _, kept, _ = ls.blocks(subset)
    assert all(all_blocks[name] == text for name, text in kept.items())
    assert {ls.norm(r) for r in pyproject["project"]["dependencies"]} <= set(kept)
    assert "setuptools" in kept  # the editable install builds without isolation
    assert {"pytest", "hypothesis", "moto", "python-hcl2", "cfn-lint", "sympy"}.isdisjoint(kept)
    assert "numpy" in kept  # a test pin, but pyarrow and matplotlib need it
    # a requirement counts unless its marker names an extra; one that pip-compile left out of the
    # lock (a marker false on this Python and platform) is not installed anywhere
    unmet = []
    for name in kept:
        for req in metadata.requires(name) or []:
            spec, _, marker = req.partition(";")
            needed = ls.norm(spec)
            if "extra" not in marker and needed in all_blocks and needed not in kept:
                unmet.append(f"{name} requires {needed}")
    assert not unmet, unmet


def test_lock_subset_follows_via_chains():
    ls = _lock_subset()
    lock = ("# header\n"
            "a==1 \\\n    --hash=sha256:aa\n    # via dnscamp (pyproject.toml)\n"
            "b==2 \\\n    --hash=sha256:bb\n    # via\n    #   a\n    #   t\n"
            "c==3 \\\n    --hash=sha256:cc\n    # via b\n"
            "t==4 \\\n    --hash=sha256:tt\n    # via dnscamp (pyproject.toml)\n"
            "u==5 \\\n    --hash=sha256:uu\n    # via t\n"
            "\n# The following packages are considered to be unsafe in a requirements file:\n"
            "setuptools==6 \\\n    --hash=sha256:ss\n    # via dnscamp (pyproject.toml::build-system.requires)\n")
    pyproject = {"project": {"dependencies": ["A==1"], "optional-dependencies": {"test": ["t==4"]}},
                 "build-system": {"requires": ["setuptools>=68"]}}
    out = ls.runtime_subset(lock, pyproject)
    assert out.startswith("# header\na==1")
    assert [line.split("==")[0] for line in out.splitlines() if "==" in line] == ["a", "b", "c", "setuptools"]


def test_parallel_steps_run_together_and_the_next_step_waits_for_them(tmp_path):
    """40-testbed-servers and 50-browsers build at the same time; 60-infra starts after both."""
    flag = tmp_path / "flags"
    flag.mkdir()
    # each waits (at most 20 s) for the other to have started: only concurrent steps both finish
    meet = ("touch {me}; for _ in $(seq 200); do [ -e {other} ] && break; sleep 0.1; done; "
            "[ -e {other} ] && echo '{name} met {other_name}'\n")
    steps = [
        ("40-a.sh", "# for: demo test\n# parallel: yes",
         meet.format(me=flag / "a", other=flag / "b", name="40-a.sh", other_name="50-b.sh")),
        ("50-b.sh", "# for: demo test\n# parallel: yes",
         meet.format(me=flag / "b", other=flag / "a", name="50-b.sh", other_name="40-a.sh")),
        ("60-c.sh", "# for: test", f"ls {flag} | tr '\\n' ' '; echo '60-c.sh after'\n"),
    ]
    p = run_steps(tmp_path, steps=steps)
    assert p.returncode == 0, p.stdout + p.stderr
    out = p.stdout
    assert "40-a.sh met 50-b.sh" in out and "50-b.sh met 40-a.sh" in out
    assert out.index("(40-a.sh:") < out.index("== install: 60-c.sh") < out.index("a b 60-c.sh after")
    assert "== install: 40-a.sh: started (parallel)" in out and "(50-b.sh: " in out


def test_a_failed_parallel_step_fails_the_install_with_its_output(tmp_path):
    steps = [
        ("40-a.sh", "# for: demo test\n# parallel: yes", "sleep 0.5; echo 'a done'\n"),
        ("50-b.sh", "# for: demo test\n# parallel: yes", "echo 'b says why'; exit 3\n"),
        ("60-c.sh", "# for: demo test", "echo 'never here'\n"),
    ]
    p = run_steps(tmp_path, "demo", steps=steps)
    assert p.returncode == 1
    assert "b says why" in p.stdout and "(50-b.sh: failed, exit 3)" in p.stdout and "a done" in p.stdout
    assert "never here" not in p.stdout


def test_apt_install_calls_queue_and_update_runs_once_a_day(tmp_path):
    """Two steps in parallel: their apt-get calls never overlap, and `apt-get update` runs once."""
    d = tmp_path / "bin"
    d.mkdir()
    log = tmp_path / "apt.log"
    (d / "dpkg-query").write_text("#!/bin/sh\nexit 1\n")  # nothing installed
    (d / "apt-get").write_text(f"#!/bin/sh\necho \"start $*\" >> {log}; sleep 0.3; echo end >> {log}\n")
    for f in d.iterdir():
        f.chmod(0o755)
    state = tmp_path / "state"
    call = "{ apt_install pkg-a & a=$!; apt_install pkg-b & b=$!; wait $a && wait $b; }"
    p = lib(call, tmp_path, path=f"{d}:/usr/bin:/bin", DNSCAMP_APT_STATE=str(state))
    assert p.returncode == 0, p.stderr
    lines = log.read_text().splitlines()
    assert lines[0::2] == [line for line in lines if line.startswith("start")]  # start, end, start, end...
    assert all(line == "end" for line in lines[1::2])
    starts = [line for line in lines if line.startswith("start")]
    assert sum("update" in line for line in starts) == 1 and len(starts) == 3, lines
