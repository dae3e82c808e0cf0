"""What `dnscamp schedule install|list|remove|fire` does with a spec's ``[campaign.schedule]``
(its model, ScheduleSpec, lives with the spec in dnscamp.spec): the cron.d file or crontab
block, and one firing (jitter, the campaign run in a supervised child, timeouts, ship).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import Callable

from croniter import croniter

from dnscamp.spec import ScheduleSpec


# --- installing a schedule (dnscamp schedule install|list|remove) ----------------------------
# Root writes /etc/cron.d/dnscamp-<campaign> (a file of its own); anyone else gets a marked block
# in their crontab (`crontab -l` / `crontab -`). Both are injectable so that tests never touch
# this machine's cron: DNSCAMP_CRON_D (the cron.d directory) and DNSCAMP_CRONTAB (the command).

SKIPPED = 75  # flock -E: the exit code of a firing skipped because the lock is held (EX_TEMPFAIL)
LOG_BYTES, LOG_BACKUPS = 1 << 20, 5  # the firing log rotates itself: 6 MiB at most per campaign
NAME_RE = re.compile(r"^[A-Za-z0-9_-]+$")  # cron ignores /etc/cron.d files with other characters


class ScheduleError(Exception):
    """A schedule that cannot be installed (no [campaign.schedule], a crontab that fails)."""


def cron_d() -> Path:
    return Path(os.environ.get("DNSCAMP_CRON_D") or "/etc/cron.d")


def crontab_cmd() -> list[str]:
    return shlex.split(os.environ.get("DNSCAMP_CRONTAB") or "crontab")


def system_wide() -> bool:
    """cron.d when root (or when DNSCAMP_CRON_D names a directory, as in tests)."""
    return os.geteuid() == 0 or bool(os.environ.get("DNSCAMP_CRON_D"))


def dnscamp_argv() -> list[str]:
    """How cron starts this very dnscamp: the script beside this interpreter, else -m."""
    script = Path(sys.executable).parent / "dnscamp"
    return [str(script)] if script.exists() else [sys.executable, "-m", "dnscamp.cli"]


def lock_path(home: Path, campaign: str) -> Path:
    return home / "locks" / f"{campaign}.lock"


def log_path(home: Path, campaign: str) -> Path:
    return home / "logs" / f"{campaign}.log"


def _marks(campaign: str) -> tuple[str, str]:
    return f"# BEGIN dnscamp-{campaign}", f"# END dnscamp-{campaign}"


def cron_line(sched: ScheduleSpec, campaign: str, spec_path: Path, home: Path, *, system: bool) -> str:
    """One cron line: flock -n keeps firings of a campaign from overlapping; a firing that
    finds the lock held exits SKIPPED and `schedule skipped` logs it. The environment is set
    inline (not as cron variable lines) so that it cannot leak into a user's other entries."""
    dc = " ".join(shlex.quote(a) for a in dnscamp_argv())
    spec = shlex.quote(str(spec_path))
    env = f"DNSCAMP_HOME={shlex.quote(str(home))}; export DNSCAMP_HOME; "
    cmd = (f"{env}flock -n -E {SKIPPED} {shlex.quote(str(lock_path(home, campaign)))} {dc} schedule fire {spec}"
           f" || {dc} schedule skipped {spec} --code $?")
    if not system:
        return f"{sched.cron} {cmd}"
    import pwd

    return f"{sched.cron} {pwd.getpwuid(os.geteuid()).pw_name} {cmd}"  # cron.d lines name the user


def _block(campaign: str, line: str, spec_path: Path) -> list[str]:
    begin, end = _marks(campaign)
    return [begin, f"# installed by dnscamp schedule install {spec_path}; remove with dnscamp schedule remove", line, end]


def _strip(text: str, campaign: str) -> list[str]:
    begin, end = _marks(campaign)
    out, inside = [], False
    for ln in text.splitlines():
        if ln == begin:
            inside = True
        elif ln == end and inside:
            inside = False
        elif not inside:
            out.append(ln)
    return out


def _crontab_read() -> str:
    p = subprocess.run([*crontab_cmd(), "-l"], capture_output=True, text=True)
    return p.stdout if p.returncode == 0 else ""  # "no crontab for user" is an empty crontab


def _crontab_write(lines: list[str]) -> None:
    p = subprocess.run([*crontab_cmd(), "-"], input="\n".join(lines) + "\n", capture_output=True, text=True)
    if p.returncode != 0:
        raise ScheduleError(f"crontab - failed (exit {p.returncode}): {p.stderr.strip()[:200]}")


def cron_file(campaign: str) -> Path:
    return cron_d() / f"dnscamp-{campaign}"


def install(sched: ScheduleSpec, campaign: str, spec_path: Path, home: Path) -> str:
    """Install (or replace) the campaign's entry; returns where. Idempotent."""
    if not NAME_RE.match(campaign):
        raise ScheduleError(f"campaign.name {campaign!r}: cron.d takes only letters, digits, _ and -")
    spec_path = spec_path.resolve()
    for d in (lock_path(home, campaign).parent, log_path(home, campaign).parent):
        d.mkdir(parents=True, exist_ok=True)
    line = cron_line(sched, campaign, spec_path, home, system=system_wide())
    if system_wide():
        from vantage_agent.spool import write_atomic  # cron reads the file whole or not at all

        path = cron_file(campaign)
        header = ["SHELL=/bin/sh", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]
        write_atomic(path, ("\n".join(header + _block(campaign, line, spec_path)) + "\n").encode())
        path.chmod(0o644)  # cron skips group/other-writable files
        return str(path)
    _crontab_write(_strip(_crontab_read(), campaign) + _block(campaign, line, spec_path))
    return "crontab"


def installed(campaign: str) -> list[str]:
    """The installed cron lines of this campaign (none when not installed)."""
    if system_wide():
        path = cron_file(campaign)
        text = path.read_text() if path.exists() else ""
    else:
        text = _crontab_read()
    begin, end = _marks(campaign)
    lines = text.splitlines()
    if begin not in lines:
        return []
    i = lines.index(begin)
    return [ln for ln in lines[i + 1 : lines.index(end, i)] if ln and not ln.startswith("#")]


def remove(campaign: str) -> bool:
    """Remove this campaign's entry (and nothing else); False when there was none."""
    if not installed(campaign):
        return False
    if system_wide():
        cron_file(campaign).unlink()
    else:
        _crontab_write(_strip(_crontab_read(), campaign))
    return True


def overlap_warning(sched: ScheduleSpec, samples: int = 200) -> str | None:
    """A warning when jitter + max_runtime can outlast the shortest gap between two firings:
    the later firing would then be skipped (flock -n), not run late."""
    t = next_firings(sched, samples, datetime(2026, 1, 1, tzinfo=timezone.utc))
    gap = min((b - a).total_seconds() for a, b in zip(t, t[1:]))
    need = sched.jitter_s + sched.max_runtime_s
    if need > gap:
        return (f"jitter_s + max_runtime_s = {need:g} s exceeds the shortest gap between firings ({gap:g} s): "
                "a firing that finds the previous one still running is skipped")
    return None


def next_firings(sched: ScheduleSpec, n: int = 3, start: datetime | None = None) -> list[datetime]:
    it = croniter(sched.cron, start or datetime.now(timezone.utc))
    return [it.get_next(datetime) for _ in range(n)]


# --- firing (dnscamp schedule fire) ------------------------------------------------------------


def firing_log(home: Path, campaign: str) -> logging.Logger:
    """The campaign's firing log, rotated by size in-process (no logrotate on the vantages)."""
    log = logging.getLogger(f"dnscamp.schedule.{campaign}")
    if not log.handlers:
        path = log_path(home, campaign)
        path.parent.mkdir(parents=True, exist_ok=True)
        h = RotatingFileHandler(path, maxBytes=LOG_BYTES, backupCount=LOG_BACKUPS)
        h.setFormatter(logging.Formatter("%(asctime)s pid=%(process)d %(message)s"))
        log.addHandler(h)
        log.setLevel(logging.INFO)
        log.propagate = False
    return log


def load_env_file(path: Path) -> None:
    """KEY=VALUE lines of the vantage's environment file (/etc/dnscamp/vantage.env, written by
    cloud-init) into os.environ, without overriding what is already set."""
    if not path.is_file():
        return
    for ln in path.read_text().splitlines():
        k, sep, v = ln.strip().partition("=")
        if sep and k and not k.startswith("#"):
            os.environ.setdefault(k, v)


@dataclass
class Firing:
    run: str
    resumed: bool
    exit_code: int | None  # the run's exit code; None when it was stopped at max_runtime_s
    timed_out_units: int = 0
    shipped: dict | None = None


def mark_timeout(spec, spool_dir: Path, run_id: str, max_runtime_s: float) -> int:
    """After a run was stopped at max_runtime_s: every unit it did not finish gets one
    ``timeout`` record (its own spool file, so it is done), and the run is complete, so no
    later firing resumes it. Returns the number of such units."""
    from dnscamp import runner
    from dnscamp.planner import plan as make_plan
    from vantage_agent.errors import Timeout
    from vantage_agent.kind import make_record, utcnow
    from vantage_agent.spool import SpoolWriter, write_atomic

    the_plan = make_plan(spec, run_id, max_units=None)
    run_dir = spool_dir / spec.campaign.name / run_id
    done = {e.name[: -len(".jsonl")] for e in os.scandir(run_dir) if e.name.endswith(".jsonl")} if run_dir.is_dir() else set()
    runnable = {i for i, b in enumerate(the_plan.blocks) if runner.runs_here(b.vantage)}
    spool, n, now = SpoolWriter(spool_dir), 0, utcnow()
    reason = f"{Timeout.__name__}: the scheduled run was stopped at max_runtime_s = {max_runtime_s:g} s before this unit ended"
    for u in the_plan.units(blocks=runnable):
        if u.id not in done:
            spool.write([make_record(runner.as_run_here(u), started_at=now, body={}, status=Timeout.status, error=reason)],
                        name=u.id)
            n += 1
    summary = {"campaign": spec.campaign.name, "run": run_id, "stopped_at_max_runtime_s": max_runtime_s,
               "units_timeout": n, "units_total": the_plan.size}  # fmt: skip
    write_atomic(run_dir / "complete.json", json.dumps(summary, indent=1).encode())
    return n


# The supervised child of a firing: a fresh interpreter (its own session, so that the stop at
# max_runtime_s reaches the run's vantage agents too) that runs the campaign service.
CHILD = "import sys; from dnscamp.schedule import run_child; sys.exit(run_child(*sys.argv[1:]))"


def run_child(spec_path: str, run_id: str, spool_dir: str) -> int:
    """Run (or resume) ``run_id`` of the spec through the campaign service, without ingest or
    report (the collector ingests what the firing ships); the run summary is one JSON line on
    stdout, messages go to stderr (the firing logs both). Returns the exit code: 2 for a spec
    that cannot be used or a campaign that cannot run here."""
    from dnscamp import campaign
    from dnscamp.spec import SpecError

    def say(message: str) -> None:
        sys.stderr.write(f"{message}\n")

    try:
        result = campaign.run(campaign.load(spec_path),
                              campaign.RunOptions(run_id=run_id, spool_dir=Path(spool_dir), ingest=False, report=False),
                              log=say)  # fmt: skip
    except SpecError as exc:
        for line in exc.lines:
            say(f"dnscamp: {line}")
        return 2
    except campaign.CampaignError as exc:
        say(f"dnscamp: {exc}")
        return 2
    sys.stdout.write(json.dumps(result.as_json()) + "\n")
    return 0


def _die_with_parent() -> None:
    """preexec of the supervised run: the kernel kills it when the firing dies (even by
    SIGKILL), so a killed firing never leaves a run going on unsupervised."""
    import ctypes
    import signal

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def fire(spec, spec_path: Path, *, home: Path, spool_dir: Path, log: logging.Logger,
         ship: Callable[[], dict] | None = None, rng=None) -> Firing:  # fmt: skip
    """One scheduled firing: jitter, run (or resume the run a killed firing left unfinished)
    in a supervised child, stop it at max_runtime_s (its unfinished units become timeout
    records), then ``ship()`` (which ships every completed run not shipped yet)."""
    import random
    import signal
    import threading
    import time

    from dnscamp import runner

    sched = spec.campaign.schedule
    if sched is None:
        raise ScheduleError(f"{spec_path}: campaign.schedule: missing (a [campaign.schedule] table with cron = ...)")
    delay = (rng or random).uniform(0, sched.jitter_s)
    log.info("firing %s: jitter sleep %.1f s", spec_path, delay)
    time.sleep(delay)
    resumable = runner.find_resumable(spool_dir, spec)
    run_id = resumable or runner.new_run_id()
    log.info("run %s (%s), max_runtime_s %g", run_id, "resuming a run a firing left unfinished" if resumable else "new",
             sched.max_runtime_s)  # fmt: skip
    argv = [sys.executable, "-c", CHILD, str(spec_path), run_id, str(spool_dir)]
    deadline = time.monotonic() + sched.max_runtime_s
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True, preexec_fn=_die_with_parent)  # fmt: skip

    def pump():  # the run's output into the rotated log, line by line
        for ln in child.stdout:
            log.info("run %s: %s", run_id, ln.rstrip())

    t = threading.Thread(target=pump, daemon=True)
    t.start()
    try:
        code: int | None = child.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        code = None
        log.warning("run %s: still going at max_runtime_s = %g s: stopping it", run_id, sched.max_runtime_s)
        for sig, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, None)):
            try:
                os.killpg(child.pid, sig)  # the run and its vantage agents (one session)
                child.wait(timeout=grace)
                break
            except subprocess.TimeoutExpired:
                continue
            except ProcessLookupError:
                break
        child.wait()
    t.join(timeout=5)
    res = Firing(run_id, bool(resumable), code)
    if code is None:
        res.timed_out_units = mark_timeout(spec, spool_dir, run_id, sched.max_runtime_s)
        log.warning("run %s: %d unfinished units recorded as timeout; the run is complete", run_id, res.timed_out_units)
    else:
        log.info("run %s: exit code %d", run_id, code)
    if ship is not None:
        try:
            res.shipped = ship()
            log.info("ship: %s", json.dumps(res.shipped))
        except Exception as exc:  # a failed ship is retried by the next firing: the queue waits on disk
            log.warning("ship failed (the next firing ships the queue): %s: %s", type(exc).__name__, str(exc)[:300])
    return res
