"""What `dnscamp schedule install|list|remove|fire|skipped` does with a spec's
``[campaign.schedule]`` (its model, ScheduleSpec, lives with the spec in dnscamp.spec): the
cron.d file or crontab block, and one firing (end of life, spool pruning and the disk floor,
jitter, the campaign run in a supervised child, timeouts, ship and status).
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
from datetime import datetime, timedelta, timezone
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
    from vantage_agent.agent_state import ensure_launched

    ensure_launched(home, campaign)  # the end of life counts from the first install on this machine
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
    run: str | None  # None when the firing did not measure (end of life, disk floor)
    resumed: bool
    exit_code: int | None  # the run's exit code; None when it was stopped at max_runtime_s (or did not run)
    timed_out_units: int = 0
    shipped: dict | None = None
    phase: str = "measuring"  # the status it wrote: measuring, disk_floor or ended
    pruned: dict | None = None


def fleet_setting(spec, name: str, default):
    """A [fleet] setting of the agent's spec (its default without a [fleet] section)."""
    return getattr(spec.fleet, name, default) if getattr(spec, "fleet", None) is not None else default


def end_of_life(spec, home: Path) -> datetime | None:
    """When this agent stops measuring: its launched_at + [fleet] days; None without [fleet]."""
    from vantage_agent import agent_state

    if getattr(spec, "fleet", None) is None:
        return None
    launched = agent_state.parse_iso(agent_state.ensure_launched(home, spec.campaign.name))
    return launched + timedelta(days=float(spec.fleet.days))


def record_skipped(home: Path, campaign: str) -> dict:
    """Count a firing that found the previous one still holding the lock; returns the state."""
    from vantage_agent import agent_state

    with agent_state.updating(home, campaign) as st:
        st["skipped_firings"] = int(st["skipped_firings"] or 0) + 1
        st["last_skipped_at"] = agent_state.now_iso()
        return dict(st)


def shutdown_at_end(log: logging.Logger) -> None:
    """Power the instance off a minute from now, on EC2 only: its user data sets
    DNSCAMP_SHUTDOWN_AT_END=1 (the instance's shutdown behaviour decides stop or terminate)."""
    if os.environ.get("DNSCAMP_SHUTDOWN_AT_END") != "1":
        log.info("end of life: not an instance that shuts itself down (DNSCAMP_SHUTDOWN_AT_END unset)")
        return
    p = subprocess.run(["shutdown", "-h", "+1"], capture_output=True, text=True)
    log.warning("end of life: shutdown -h +1: exit %d %s", p.returncode, (p.stderr or p.stdout).strip()[:200])


def close_run(spec, spool_dir: Path, run_id: str, *, status: str, reason: str, summary: dict,
              count_field: str) -> int | None:  # fmt: skip
    """Every unit of the run that did not finish gets one record of ``status`` (its own spool
    file, so it is done), and the run is complete, so no later firing resumes it. Returns the
    number of such units; None for a run made from another spec text (its plan cannot be
    rebuilt: complete.json then says so, and its unrun units stay missing, by name, from its
    manifest's planned units)."""
    from dnscamp import runner
    from dnscamp.planner import plan as make_plan
    from vantage_agent.kind import make_record, utcnow
    from vantage_agent.spool import SpoolWriter, write_atomic

    run_dir = spool_dir / spec.campaign.name / run_id
    try:
        same = json.loads((run_dir / "plan.json").read_text()).get("spec_sha256") == spec.sha256
    except (OSError, ValueError, AttributeError):
        same = not (run_dir / "plan.json").exists()  # a run stopped before it wrote plan.json is this spec's
    if not same:
        write_atomic(run_dir / "complete.json", json.dumps({**summary, "campaign": spec.campaign.name, "run": run_id,
                                                            "closed_without_plan": reason}, indent=1).encode())  # fmt: skip
        return None
    the_plan = make_plan(spec, run_id, max_units=None)
    done = {e.name[: -len(".jsonl")] for e in os.scandir(run_dir) if e.name.endswith(".jsonl")} if run_dir.is_dir() else set()
    runnable = {i for i, b in enumerate(the_plan.blocks) if runner.runs_here(b.vantage)}
    spool, n, now = SpoolWriter(spool_dir), 0, utcnow()
    for u in the_plan.units(blocks=runnable):
        if u.id not in done:
            spool.write([make_record(runner.as_run_here(u), started_at=now, body={}, status=status, error=reason)], name=u.id)
            n += 1
    if not (run_dir / runner.PLANNED).exists():  # stopped before the runner wrote it: the same units
        run_dir.mkdir(parents=True, exist_ok=True)
        runner.write_planned(run_dir / runner.PLANNED, (uid for b, uid in the_plan.cells(shuffled=True) if b in runnable))
    out = {"campaign": spec.campaign.name, "run": run_id, **summary, count_field: n, "units_total": the_plan.size}
    write_atomic(run_dir / "complete.json", json.dumps(out, indent=1).encode())
    return n


def mark_timeout(spec, spool_dir: Path, run_id: str, max_runtime_s: float) -> int:
    """After a run was stopped at max_runtime_s: every unit it did not finish gets one
    ``timeout`` record, and the run is complete. Returns the number of such units."""
    from vantage_agent.errors import Timeout

    reason = f"{Timeout.__name__}: the scheduled run was stopped at max_runtime_s = {max_runtime_s:g} s before this unit ended"
    n = close_run(spec, spool_dir, run_id, status=Timeout.status, reason=reason,
                  summary={"stopped_at_max_runtime_s": max_runtime_s}, count_field="units_timeout")  # fmt: skip
    return n or 0


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


def _ship(ship: Callable[..., dict] | None, log: logging.Logger, **kw) -> dict | None:
    if ship is None:
        return None
    try:
        out = ship(**kw)
        log.info("ship: %s", json.dumps(out))
        return out
    except Exception as exc:  # a failed ship is retried by the next firing: the queue waits on disk
        log.warning("ship failed (the next firing ships the queue): %s: %s", type(exc).__name__, str(exc)[:300])
        return None


def _close_at_end(spec, spool_dir: Path, log: logging.Logger) -> None:
    """The runs a killed firing left unfinished are not resumed after the end of life: their
    unrun units become records saying so, and the runs are complete, so they ship."""
    from vantage_agent.agent_state import now_iso

    base = spool_dir / spec.campaign.name
    for run_dir in sorted(p for p in base.iterdir() if p.is_dir()) if base.is_dir() else []:
        if (run_dir / "complete.json").exists():
            continue
        reason = ("the campaign's end of life ([fleet] days after the agent's launch) came before this unit ran; "
                  "its run was left unfinished by an interrupted firing")  # fmt: skip
        n = close_run(spec, spool_dir, run_dir.name, status="other", reason=reason,
                      summary={"closed_at_end_of_life": now_iso()}, count_field="units_not_run")  # fmt: skip
        log.warning("end of life: run %s closed (%s units not run)", run_dir.name, "unknown" if n is None else n)


def end_firing(spec, *, home: Path, spool_dir: Path, log: logging.Logger, ship: Callable[..., dict] | None,
               shutdown: Callable[[], None] | None) -> Firing:  # fmt: skip
    """A firing after the end of life: no measuring; close unfinished runs, ship everything,
    write the final status (phase ``ended``). Once nothing is pending (and the status is in
    S3), remove the schedule and shut down; otherwise the next firing tries again."""
    from vantage_agent import agent_state
    from vantage_agent.ship import backlog

    campaign = spec.campaign.name
    log.warning("end of life: launched %s, [fleet] days = %g: not measuring; shipping everything",
                agent_state.read(home, campaign)["launched_at"], spec.fleet.days)  # fmt: skip
    _close_at_end(spec, spool_dir, log)
    shipped = _ship(ship, log, phase="ended")
    pending, _ = backlog(spool_dir, campaign)
    res = Firing(None, False, None, shipped=shipped, phase="ended")
    if ship is not None and (shipped is None or pending or "status_object" not in shipped):
        log.warning("end of life: %d objects still pending (or no final status): the next firing ships again", pending)
        return res
    with agent_state.updating(home, campaign) as st:
        st["ended_at"] = agent_state.now_iso()
    log.warning("end of life: everything shipped; schedule %s", "removed" if remove(campaign) else "was not installed")
    if shutdown is not None:
        shutdown()
    return res


def fire(spec, spec_path: Path, *, home: Path, spool_dir: Path, log: logging.Logger,
         ship: Callable[..., dict] | None = None, rng=None, shutdown: Callable[[], None] | None = None,
         disk_free: Callable[[Path], int] | None = None) -> Firing:  # fmt: skip
    """One scheduled firing: past the agent's end of life, ``end_firing``; else prune the spool
    files shipped long enough ago; below the disk floor, ship and say so without measuring;
    else jitter, run (or resume the run a killed firing left unfinished) in a supervised child,
    stop it at max_runtime_s (its unfinished units become timeout records), then ``ship()``
    (which ships every completed run not shipped yet and PUTs the status object)."""
    import random
    import signal
    import threading
    import time

    from dnscamp import runner
    from vantage_agent import agent_state
    from vantage_agent import ship as shipping

    sched = spec.campaign.schedule
    if sched is None:
        raise ScheduleError(f"{spec_path}: campaign.schedule: missing (a [campaign.schedule] table with cron = ...)")
    campaign = spec.campaign.name
    agent_state.ensure_launched(home, campaign)
    eol = end_of_life(spec, home)
    if eol is not None and datetime.now(timezone.utc) > eol:
        return end_firing(spec, home=home, spool_dir=spool_dir, log=log, ship=ship, shutdown=shutdown)
    pruned = shipping.prune(spool_dir, campaign, float(fleet_setting(spec, "prune_shipped_after_days", 7)))
    if pruned["files"]:
        log.info("pruned %d spool files (%d bytes) of %d runs shipped whole", pruned["files"], pruned["bytes"], pruned["runs"])
    floor = int(fleet_setting(spec, "disk_floor_mib", 1024)) << 20 if getattr(spec, "fleet", None) is not None else 0
    spool_dir.mkdir(parents=True, exist_ok=True)
    free = (disk_free or shipping.disk_free)(spool_dir)
    if free < floor:
        line = f"{free >> 20} MiB free on the spool's filesystem, below [fleet] disk_floor_mib = {floor >> 20}: not measuring"
        log.warning("disk floor: %s", line)
        shipped = _ship(ship, log, phase="disk_floor", error={"step": "disk_floor", "log_tail": [line]})
        return Firing(None, False, None, shipped=shipped, phase="disk_floor", pruned=pruned)
    delay = (rng or random).uniform(0, sched.jitter_s)
    log.info("firing %s: jitter sleep %.1f s", spec_path, delay)
    time.sleep(delay)
    resumable = runner.find_resumable(spool_dir, spec)
    run_id = resumable or runner.new_run_id()
    started = agent_state.now_iso()
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
    res = Firing(run_id, bool(resumable), code, pruned=pruned)
    if code is None:
        res.timed_out_units = mark_timeout(spec, spool_dir, run_id, sched.max_runtime_s)
        log.warning("run %s: %d unfinished units recorded as timeout; the run is complete", run_id, res.timed_out_units)
    else:
        log.info("run %s: exit code %d", run_id, code)
    with agent_state.updating(home, campaign) as st:
        st["firings"] = int(st["firings"] or 0) + 1
        st["last_firing"] = {"run": run_id, "started_at": started, "ended_at": agent_state.now_iso(),
                             "exit_code": code, "timed_out_units": res.timed_out_units}  # fmt: skip
    res.shipped = _ship(ship, log, phase="measuring")
    return res
