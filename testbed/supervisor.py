"""A small process supervisor for the testbed (there is no systemd here).

``Supervisor(run_dir).start(name, ns, argv)`` runs ``ip netns exec NS argv`` in the
background (its own session, so it outlives the CLI that started it), logs to
``<run_dir>/logs/<name>.log`` and writes ``<run_dir>/pids/<name>.pid`` (JSON: pid, the
process start time from /proc as a guard against PID reuse, namespace, command). Processes
are stopped by PID only: SIGTERM, then SIGKILL.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,100}$")


class SupervisorError(RuntimeError):
    """A process could not be started, did not become ready, or could not be stopped."""


def proc_start_time(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot (/proc/PID/stat field 22), None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    # fields[0] is field 3 (state); field 22 (starttime) is fields[19]
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def _state(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()[0]


class Supervisor:
    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.log_dir = self.run_dir / "logs"
        self.pid_dir = self.run_dir / "pids"
        self._procs: dict[str, subprocess.Popen] = {}

    # -- paths ---------------------------------------------------------------------------------
    def log_path(self, name: str) -> Path:
        return self.log_dir / f"{name}.log"

    def pid_path(self, name: str) -> Path:
        return self.pid_dir / f"{name}.pid"

    def _read(self, name: str) -> dict | None:
        try:
            return json.loads(self.pid_path(name).read_text())
        except (OSError, ValueError):
            return None

    def names(self) -> list[str]:
        try:
            return sorted(p.stem for p in self.pid_dir.glob("*.pid"))
        except OSError:
            return []

    # -- API -----------------------------------------------------------------------------------
    def start(
        self,
        name: str,
        ns: str,
        argv: list[str],
        env: dict[str, str] | None = None,
        ready: Callable[[], bool] | None = None,
        timeout: float = 10,
    ) -> int:
        """Start ``argv`` inside namespace ``ns`` under ``name``; wait until ``ready()`` is true
        (polled) or ``timeout`` seconds. Returns the PID. Raises SupervisorError (with the log
        tail) if the process exits or is not ready in time (it is then stopped)."""
        if not NAME_RE.match(name):
            raise SupervisorError(f"bad process name {name!r}")
        if not argv:
            raise SupervisorError(f"{name}: empty argv")
        if self.alive(name):
            raise SupervisorError(f"{name} is already running (pid {self._read(name)['pid']})")
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.pid_dir.mkdir(parents=True, exist_ok=True)
        full_env = dict(os.environ)
        full_env["DNSCAMP_NETNS"] = ns
        if env:
            full_env.update(env)
        log = open(self.log_path(name), "ab")
        try:
            log.write(f"--- {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} start in {ns}: {argv}\n".encode())
            log.flush()
            try:
                # `ip netns exec` setns()es and execs argv: the child's PID is the server's PID.
                proc = subprocess.Popen(
                    ["ip", "netns", "exec", ns, *argv],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    env=full_env, start_new_session=True, close_fds=True,
                )
            except OSError as exc:
                raise SupervisorError(f"{name}: cannot start {argv[0]}: {exc}") from exc
        finally:
            log.close()
        self._procs[name] = proc
        record = {
            "name": name, "pid": proc.pid, "ns": ns, "cmd": list(argv),
            "start_time": proc_start_time(proc.pid), "started_at": time.time(),
            "log": str(self.log_path(name)),
        }
        tmp = self.pid_path(name).with_suffix(".tmp")
        tmp.write_text(json.dumps(record))
        os.replace(tmp, self.pid_path(name))
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                self._forget(name)
                raise SupervisorError(f"{name} exited with {proc.returncode} during start-up: {self.log_tail(name)}")
            try:
                ok = ready() if ready is not None else True
            except Exception:  # a readiness probe that raises means "not yet"
                ok = False
            if ok:
                return proc.pid
            if time.monotonic() > deadline:
                self.stop(name)
                raise SupervisorError(f"{name} not ready after {timeout}s: {self.log_tail(name)}")
            time.sleep(0.05)

    def log_tail(self, name: str, n: int = 800) -> str:
        try:
            return self.log_path(name).read_text(errors="replace")[-n:].strip() or "(empty log)"
        except OSError:
            return "(no log)"

    def pid(self, name: str) -> int | None:
        rec = self._read(name)
        if not rec:
            return None
        pid = rec.get("pid")
        if not isinstance(pid, int):
            return None
        st = rec.get("start_time")
        if st is not None and proc_start_time(pid) != st:
            return None  # gone, or the PID was reused by another process
        if _state(pid) in (None, "Z", "X"):
            return None
        return pid

    def alive(self, name: str) -> bool:
        return self.pid(name) is not None

    def stop(self, name: str, grace: float = 5.0) -> None:
        """SIGTERM, wait up to ``grace`` s, SIGKILL; removes the pid file. Idempotent."""
        pid = self.pid(name)
        if pid is not None:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + grace
            while self.pid(name) is not None and time.monotonic() < deadline:
                self._reap(name)
                time.sleep(0.05)
            if self.pid(name) is not None:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                deadline = time.monotonic() + grace
                while self.pid(name) is not None and time.monotonic() < deadline:
                    self._reap(name)
                    time.sleep(0.05)
            if self.pid(name) is not None:
                raise SupervisorError(f"{name} (pid {pid}) did not die")
        self._forget(name)

    def stop_all(self) -> None:
        errors = []
        for name in self.names():
            try:
                self.stop(name)
            except SupervisorError as exc:
                errors.append(str(exc))
        if errors:
            raise SupervisorError("; ".join(errors))

    def status(self) -> list[dict]:
        out = []
        for name in self.names():
            rec = self._read(name) or {}
            self._reap(name)
            out.append({
                "name": name,
                "ns": rec.get("ns"),
                "pid": rec.get("pid"),
                "alive": self.alive(name),
                "cmd": rec.get("cmd"),
                "log": rec.get("log"),
            })
        return out

    # -- internals -------------------------------------------------------------------------------
    def _reap(self, name: str) -> None:
        proc = self._procs.get(name)
        if proc is not None:
            proc.poll()

    def _forget(self, name: str) -> None:
        proc = self._procs.pop(name, None)
        if proc is not None:
            try:
                proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                pass
        try:
            self.pid_path(name).unlink()
        except FileNotFoundError:
            pass
