"""dnscamp schedule install|list|remove: the cron.d file (a temp directory, DNSCAMP_CRON_D) and
the user's crontab (a fake `crontab` command, DNSCAMP_CRONTAB); never this machine's cron."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from croniter import croniter
from typer.testing import CliRunner

from dnscamp import schedule as sch
from dnscamp.cli import app

pytestmark = pytest.mark.unit

SPEC = """
[campaign]
name = "{name}"
[campaign.schedule]
cron = "17  */3 * * *"
jitter_s = 30
max_runtime_s = 600
[[vantages]]
id = "v"
provider = "local"
[kinds.ping]
targets = ["127.0.0.1"]
"""
# A cron.d line: 5 time fields, a user, a command (Debian's cron(8) format).
CRON_D_LINE = re.compile(r"^(\S+ \S+ \S+ \S+ \S+) (root|\S+) (.+)$")
FAKE_CRONTAB = """#!/bin/sh
# crontab -l / crontab - on a file (what cron(8)'s crontab does for the user's table)
f="$FAKE_CRONTAB_FILE"
case "$1" in
  -l) [ -f "$f" ] && cat "$f" || { echo "no crontab for test" >&2; exit 1; } ;;
  -) cat > "$f" ;;
esac
"""


@pytest.fixture()
def spec_file(tmp_path: Path):
    def make(name="sched"):
        p = tmp_path / f"{name}.toml"
        p.write_text(SPEC.format(name=name))
        return p

    return make


@pytest.fixture()
def cron_d(tmp_path, monkeypatch):
    d = tmp_path / "cron.d"
    d.mkdir()
    monkeypatch.setenv("DNSCAMP_CRON_D", str(d))
    return d


@pytest.fixture()
def user_crontab(tmp_path, monkeypatch):
    monkeypatch.setattr(sch, "system_wide", lambda: False)  # a non-root user (root gets cron.d)
    script = tmp_path / "crontab"
    script.write_text(FAKE_CRONTAB)
    script.chmod(0o755)
    table = tmp_path / "table"
    monkeypatch.delenv("DNSCAMP_CRON_D", raising=False)
    monkeypatch.setenv("DNSCAMP_CRONTAB", str(script))
    monkeypatch.setenv("FAKE_CRONTAB_FILE", str(table))
    return table


def _cli(*args):
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def test_install_writes_a_valid_cron_d_file_idempotently(cron_d, spec_file):
    spec = spec_file()
    r = _cli("schedule", "install", str(spec))
    assert r.exit_code == 0, r.output
    f = cron_d / "dnscamp-sched"
    first = f.read_text()
    assert _cli("schedule", "install", str(spec)).exit_code == 0
    assert f.read_text() == first  # idempotent: the same file, one entry
    assert oct(f.stat().st_mode & 0o777) == "0o644"
    entries = [ln for ln in first.splitlines() if ln and not ln.startswith("#") and "=" not in ln.split()[0]]
    assert len(entries) == 1
    m = CRON_D_LINE.match(entries[0])
    assert m, entries[0]
    assert m.group(1) == "17 */3 * * *" and croniter.is_valid(m.group(1))
    cmd = m.group(3)
    words = shlex.split(cmd.replace(";", " ; "))
    assert "flock" in words and "-n" in words and words[words.index("-E") + 1] == str(sch.SKIPPED)
    assert str(spec.resolve()) in words and "fire" in words and "skipped" in words
    assert "%" not in entries[0]  # cron would turn it into a newline
    r = _cli("schedule", "list", str(spec))
    assert r.exit_code == 0 and r.output.strip() == entries[0]


def test_cron_line_runs_under_sh(cron_d, spec_file, tmp_path):
    """The command part, as cron's /bin/sh would run it, with dnscamp replaced by echo: it is
    valid shell and the flock / skipped branches are wired."""
    sch_spec = sch.ScheduleSpec(cron="* * * * *")
    line = sch.cron_line(sch_spec, "c", spec_file("c"), tmp_path, system=False)
    cmd = line.split(" ", 5)[5]
    dc = " ".join(shlex.quote(a) for a in sch.dnscamp_argv())
    (tmp_path / "locks").mkdir()
    out = subprocess.run(["/bin/sh", "-c", cmd.replace(dc, "echo")], capture_output=True, text=True)
    assert out.returncode == 0 and "schedule fire" in out.stdout
    with open(tmp_path / "locks" / "c.lock", "w") as held:  # the lock held: flock -n fails with -E
        import fcntl

        fcntl.flock(held, fcntl.LOCK_EX)
        out = subprocess.run(["/bin/sh", "-c", cmd.replace(dc, "echo")], capture_output=True, text=True)
    assert f"schedule skipped {spec_file('c')} --code {sch.SKIPPED}" in out.stdout


def test_remove_removes_only_ours(cron_d, spec_file):
    other = cron_d / "someone-else"
    other.write_text("0 * * * * root true\n")
    for name in ("a", "b"):
        assert _cli("schedule", "install", str(spec_file(name))).exit_code == 0
    assert _cli("schedule", "remove", str(spec_file("a"))).exit_code == 0
    assert sorted(p.name for p in cron_d.iterdir()) == ["dnscamp-b", "someone-else"]
    assert other.read_text() == "0 * * * * root true\n"
    assert "not installed" in _cli("schedule", "remove", str(spec_file("a"))).output
    assert _cli("schedule", "list", str(spec_file("a"))).exit_code == 1


def test_user_crontab_block_is_idempotent_and_removed_alone(user_crontab, spec_file):
    user_crontab.write_text("MAILTO=me\n5 4 * * * backup.sh\n")
    for _ in range(2):
        assert _cli("schedule", "install", str(spec_file("a"))).exit_code == 0
    assert _cli("schedule", "install", str(spec_file("b"))).exit_code == 0
    text = user_crontab.read_text()
    assert text.count("# BEGIN dnscamp-a") == 1 and text.count("# BEGIN dnscamp-b") == 1
    lines = [ln for ln in text.splitlines() if ln and not ln.startswith("#") and "=" not in ln.split()[0]]
    assert all(croniter.is_valid(" ".join(ln.split()[:5])) for ln in lines)
    assert not any(ln.split()[5] == "root" for ln in lines if "dnscamp" in ln)  # no user field in a crontab
    assert _cli("schedule", "remove", str(spec_file("a"))).exit_code == 0
    text = user_crontab.read_text()
    assert "dnscamp-a" not in text and "dnscamp-b" in text and text.startswith("MAILTO=me\n5 4 * * * backup.sh\n")


def test_a_spec_without_schedule_is_refused(cron_d, tmp_path):
    p = tmp_path / "n.toml"
    p.write_text(SPEC.split("[campaign.schedule]")[0].format(name="n") + SPEC.split("max_runtime_s = 600\n")[1])
    r = CliRunner().invoke(app, ["schedule", "install", str(p)])
    assert r.exit_code == 2 and "campaign.schedule: missing" in (r.stderr if r.stderr_bytes is not None else r.output)
    assert not list(cron_d.iterdir())


def test_next_firings_follow_the_cron():
    from datetime import datetime, timezone

    t = sch.next_firings(sch.ScheduleSpec(cron="17 */3 * * *"), 2, datetime(2026, 1, 1, 1, 0, tzinfo=timezone.utc))
    assert [x.strftime("%H:%M") for x in t] == ["03:17", "06:17"]


def test_overlap_warning_when_a_run_can_outlast_the_gap():
    assert sch.overlap_warning(sch.ScheduleSpec(cron="17 */3 * * *", jitter_s=300, max_runtime_s=3600)) is None
    w = sch.overlap_warning(sch.ScheduleSpec(cron="*/10 * * * *", jitter_s=120, max_runtime_s=540))
    assert w and "660 s exceeds the shortest gap between firings (600 s)" in w


def test_the_firing_log_rotates_by_size(tmp_path, monkeypatch):
    monkeypatch.setattr(sch, "LOG_BYTES", 4096)
    log = sch.firing_log(tmp_path, "rot")
    for i in range(400):
        log.info("line %d %s", i, "x" * 60)
    names = sorted(p.name for p in (tmp_path / "logs").iterdir())
    assert names == ["rot.log", *(f"rot.log.{i}" for i in range(1, sch.LOG_BACKUPS + 1))]
    assert all(p.stat().st_size <= 4096 for p in (tmp_path / "logs").iterdir())
    for h in log.handlers:
        h.close()


def test_vantage_env_file_fills_only_what_is_unset(tmp_path, monkeypatch):
    f = tmp_path / "vantage.env"
    f.write_text("# cloud-init\nDNSCAMP_VANTAGE=v-eu\nDNSCAMP_RESULTS_BUCKET=b1\nnot a line\n")
    monkeypatch.setenv("DNSCAMP_RESULTS_BUCKET", "set-by-cron")
    monkeypatch.setenv("DNSCAMP_VANTAGE", "")  # recorded, so that the teardown removes what the file sets
    monkeypatch.delenv("DNSCAMP_VANTAGE")
    sch.load_env_file(f)
    assert os.environ["DNSCAMP_VANTAGE"] == "v-eu" and os.environ["DNSCAMP_RESULTS_BUCKET"] == "set-by-cron"
    sch.load_env_file(tmp_path / "missing.env")  # no file: nothing happens
