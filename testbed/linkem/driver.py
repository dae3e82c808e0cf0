"""Python driver of the dnscamp link emulator (stdlib only).

A :class:`Link` emulates one link that crosses a router network namespace: packets entering
the router on ``if_a`` and leaving on ``if_b`` get the ``a_to_b`` impairments, the others the
``b_to_a`` ones. Two backends:

- ``"netem"``: ``tc qdisc replace dev <egress> root netem ...`` in the router namespace
  (egress of ``if_b`` for a_to_b, of ``if_a`` for b_to_a), where the kernel has sch_netem;
- ``"nfqueue"``: the Rust ``linkem`` binary, run inside the router namespace, with two
  iptables rules (``FORWARD -i if_a -j NFQUEUE --queue-num Q``; the same two in ip6tables)
  that hand each direction to its own queue. No ``--queue-bypass``: if the emulator is not running, packets are dropped
  (fail closed), so an un-emulated link can never be measured by mistake.

A direction config is a dict with the keys of :data:`DIRECTION_DEFAULTS` (see README.md).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import zlib
from pathlib import Path

__all__ = [
    "DIRECTION_DEFAULTS",
    "Link",
    "LinkError",
    "binary_path",
    "detect_backend",
    "netem_argv",
    "normalize_direction",
]

BACKENDS = ("netem", "nfqueue")
RULE_COMMENT_PREFIX = "dnscamp-linkem:"
READY_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0

#: Keys of one direction's config and their defaults (mirrors DirectionConfig in src/lib.rs).
DIRECTION_DEFAULTS: dict = {
    "delay_ms": 0.0,
    "jitter_ms": 0.0,
    "jitter_dist": "uniform",  # "uniform" (+-jitter_ms) | "normal" (sd = jitter_ms)
    "jitter_correlation": 0.0,  # netem-style: j = c * j_prev + (1 - c) * fresh
    "reorder": False,  # False: FIFO (departure = max(previous departure, computed))
    "loss": {"model": "none"},  # {"model": "random", "p"} | {"model": "gilbert_elliott", "p", "r", "k", "h"}
    "rate_mbps": None,  # None = unlimited; counted on frame bytes (IP + framing_overhead_bytes)
    "queue_limit_ms": None,  # tail-drop limit of the rate queue (default 500 ms when a rate is set)
    "queue_limit_bytes": None,
    "trace_file": None,  # Mahimahi trace (nfqueue backend only), exclusive with rate_mbps
    "seed": 1,
    "framing_overhead_bytes": 38,  # Ethernet 14 + FCS 4 + preamble/SFD 8 + inter-frame gap 12
}


class LinkError(RuntimeError):
    """A link could not be set up, queried or torn down."""


# --------------------------------------------------------------------------------------------
# paths and backend detection
# --------------------------------------------------------------------------------------------


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dnscamp"


def binary_path() -> Path:
    """Where install/30-linkem.sh puts the built ``linkem`` binary."""
    return _cache_dir() / "bin" / "linkem"


_BACKEND_CACHE: str | None = None


def _run(argv: list[str], check: bool = True, timeout: float = 20.0) -> subprocess.CompletedProcess:
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise LinkError(f"{' '.join(argv)}: exit {p.returncode}: {p.stderr.strip()}")
    return p


def detect_backend() -> str:
    """``"netem"`` if this kernel has sch_netem, else ``"nfqueue"`` (cached in-process).

    Probes with ``tc qdisc add dev lo root netem delay 1ms`` inside a throwaway namespace
    ``dc-netemprobe-<pid>``, deleted afterwards. ``DNSCAMP_LINKEM_BACKEND`` overrides.
    """
    global _BACKEND_CACHE
    if _BACKEND_CACHE is not None:
        return _BACKEND_CACHE
    forced = os.environ.get("DNSCAMP_LINKEM_BACKEND")
    if forced:
        if forced not in BACKENDS:
            raise LinkError(f"DNSCAMP_LINKEM_BACKEND={forced!r}: expected one of {BACKENDS}")
        _BACKEND_CACHE = forced
        return forced
    ns = f"dc-netemprobe-{os.getpid()}"
    result = "nfqueue"
    created = False
    try:
        if _run(["ip", "netns", "add", ns], check=False).returncode == 0:
            created = True
            p = _run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"],
                     check=False)
            if p.returncode == 0:
                result = "netem"
    finally:
        if created:
            _run(["ip", "netns", "del", ns], check=False)
    _BACKEND_CACHE = result
    return result


# --------------------------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------------------------


def normalize_direction(cfg: dict) -> dict:
    """The direction config with defaults filled in; unknown keys raise LinkError."""
    unknown = set(cfg) - set(DIRECTION_DEFAULTS)
    if unknown:
        raise LinkError(f"unknown link config keys: {sorted(unknown)}")
    out = dict(DIRECTION_DEFAULTS)
    out.update(cfg)
    if out["loss"] is None:
        out["loss"] = {"model": "none"}
    loss = dict(out["loss"])
    if loss.get("model") == "gilbert_elliott":
        loss.setdefault("k", 1.0)
        loss.setdefault("h", 0.0)
    out["loss"] = loss
    if out["jitter_dist"] not in ("uniform", "normal"):
        raise LinkError(f"jitter_dist must be 'uniform' or 'normal', not {out['jitter_dist']!r}")
    if out["trace_file"] is not None:
        out["trace_file"] = str(out["trace_file"])
    return out


def _pct(x: float) -> str:
    s = f"{x * 100:.6f}".rstrip("0").rstrip(".")
    return f"{s or '0'}%"


def netem_argv(dev: str, cfg: dict) -> list[str]:
    """The tc command for one direction (same rules as ``netem_argv`` in src/lib.rs)."""
    c = normalize_direction(cfg)
    if c["trace_file"]:
        raise LinkError("the netem backend cannot replay a trace_file")
    a = ["tc", "qdisc", "replace", "dev", dev, "root", "netem"]

    def us(ms: float) -> str:
        return f"{round(ms * 1000)}us"

    if c["delay_ms"] > 0 or c["jitter_ms"] > 0:
        a += ["delay", us(c["delay_ms"])]
        if c["jitter_ms"] > 0:
            a.append(us(c["jitter_ms"]))
            if c["jitter_correlation"] > 0:
                a.append(_pct(c["jitter_correlation"]))
            if c["jitter_dist"] == "normal":
                a += ["distribution", "normal"]
    loss = c["loss"]
    if loss["model"] == "random":
        a += ["loss", "random", _pct(loss["p"])]
    elif loss["model"] == "gilbert_elliott":
        a += ["loss", "gemodel", _pct(loss["p"]), _pct(loss["r"]), _pct(1 - loss["h"]), _pct(1 - loss["k"])]
    elif loss["model"] != "none":
        raise LinkError(f"unknown loss model {loss['model']!r}")
    limit = 1000.0
    if c["rate_mbps"] is not None:
        mbps = c["rate_mbps"]
        a += ["rate", f"{mbps * 1000:.6f}".rstrip("0").rstrip(".") + "kbit"]
        extra = c["framing_overhead_bytes"] - 14  # netem's rate already counts the 14 B header
        if extra:  # positional (`rate RATE [PACKETOVERHEAD ...]`, iproute2 q_netem.c): tc has no keyword
            a.append(str(extra))
        if c["queue_limit_bytes"] is not None:
            q_ms = c["queue_limit_bytes"] * 8 / (mbps * 1e3)
        else:
            q_ms = c["queue_limit_ms"] if c["queue_limit_ms"] is not None else 500.0
        hold_ms = c["delay_ms"] + 4 * c["jitter_ms"] + q_ms
        import math

        limit = max(limit, math.ceil(mbps * 1e6 / 8 / 1500 * hold_ms / 1000 - 1e-6))
    a += ["limit", str(int(limit))]
    return a


def _queue_numbers(name: str) -> tuple[int, int]:
    """Two queue numbers derived from the link name (queues are per network namespace)."""
    base = 1000 + (zlib.crc32(name.encode()) % 30000) * 2
    return base, base + 1


# --------------------------------------------------------------------------------------------
# Link
# --------------------------------------------------------------------------------------------


class Link:
    """One emulated link across the router namespace ``router_ns``."""

    def __init__(self, name: str, router_ns: str, if_a: str, if_b: str, a_to_b: dict, b_to_a: dict,
                 run_dir: Path, backend: str | None = None):
        if not name or any(ch.isspace() or ch == "/" for ch in name):
            raise LinkError(f"bad link name {name!r}")
        self.name = name
        self.router_ns = router_ns
        self.if_a = if_a
        self.if_b = if_b
        self.a_to_b = normalize_direction(a_to_b)
        self.b_to_a = normalize_direction(b_to_a)
        self.run_dir = Path(run_dir)
        self.backend = backend or detect_backend()
        if self.backend not in BACKENDS:
            raise LinkError(f"unknown backend {self.backend!r}")
        self.queues = _queue_numbers(name)
        self.config_path = self.run_dir / f"{name}.json"
        self.stats_path = self.run_dir / f"{name}.stats.json"
        self.ready_path = self.run_dir / f"{name}.ready"
        self.log_path = self.run_dir / f"{name}.log"
        self.pid_path = self.run_dir / f"{name}.pid"
        self._proc: subprocess.Popen | None = None
        self._pid: int | None = None
        self._rules_installed = False
        self._qdiscs_installed = False
        self.ipv6: bool | None = None

    # --- helpers -------------------------------------------------------------------------

    def _ns(self, argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
        return _run(["ip", "netns", "exec", self.router_ns, *argv], check=check)

    def _ns_exists(self) -> bool:
        return Path("/run/netns", self.router_ns).exists()

    def _rule_specs(self) -> list[list[str]]:
        comment = RULE_COMMENT_PREFIX + self.name
        return [
            ["FORWARD", "-i", iface, "-m", "comment", "--comment", comment, "-j", "NFQUEUE", "--queue-num", str(q)]
            for iface, q in ((self.if_a, self.queues[0]), (self.if_b, self.queues[1]))
        ]

    def _link_config(self) -> dict:
        return {
            "name": self.name,
            "netns": self.router_ns,
            "queues": {"a_to_b": self.queues[0], "b_to_a": self.queues[1]},
            "stats_file": str(self.stats_path),
            "ready_file": str(self.ready_path),
            "a_to_b": self.a_to_b,
            "b_to_a": self.b_to_a,
        }

    # --- API -----------------------------------------------------------------------------

    def start(self) -> None:
        if self.alive():
            raise LinkError(f"link {self.name} already running (pid {self._pid})")
        if not self._ns_exists():
            raise LinkError(f"router namespace {self.router_ns} does not exist")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if self.backend == "netem":
            self._start_netem()
        else:
            self._start_nfqueue()

    def _start_netem(self) -> None:
        self._qdiscs_installed = True
        try:
            self._ns(netem_argv(self.if_b, self.a_to_b))
            self._ns(netem_argv(self.if_a, self.b_to_a))
        except Exception:
            self.stop()
            raise

    def _start_nfqueue(self) -> None:
        binary = binary_path()
        if not binary.exists():
            raise LinkError(f"{binary} missing: run install/30-linkem.sh")
        for p in (self.stats_path, self.ready_path):
            p.unlink(missing_ok=True)
        self.config_path.write_text(json.dumps(self._link_config(), indent=2))
        with open(self.log_path, "ab") as log:
            # `ip netns exec` setns()es and execs the binary: Popen.pid is linkem's pid.
            self._proc = subprocess.Popen(
                ["ip", "netns", "exec", self.router_ns, str(binary), str(self.config_path)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
            )
        self._pid = self._proc.pid
        self.pid_path.write_text(f"{self._pid}\n")
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not self.ready_path.exists():
            if self._proc.poll() is not None:
                self._proc = None
                raise LinkError(f"linkem {self.name} exited: {self._log_tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise LinkError(f"linkem {self.name} not ready after {READY_TIMEOUT_S}s: {self._log_tail()}")
            time.sleep(0.01)
        # The emulator is bound: only now send the traffic to it.
        try:
            for spec in self._rule_specs():
                self._ns(["iptables", "-w", "-I", *spec[:1], "1", *spec[1:]])
                self._rules_installed = True
            # IPv6 goes to the same queues; a namespace without IPv6 has no v6 traffic to
            # emulate, so a failure here is recorded, not fatal.
            self.ipv6 = True
            for spec in self._rule_specs():
                if self._ns(["ip6tables", "-w", "-I", *spec[:1], "1", *spec[1:]], check=False).returncode != 0:
                    self.ipv6 = False
        except Exception:
            self.stop()
            raise

    def _log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-800:].strip()
        except OSError:
            return "(no log)"

    def _is_our_process(self, pid: int) -> bool:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return False
        return str(self.config_path).encode() in cmd

    def stop(self) -> None:
        """Remove rules / qdiscs and stop the emulator; idempotent, tolerates a deleted namespace."""
        ns_ok = self._ns_exists()
        if self._rules_installed or (self.backend == "nfqueue" and ns_ok):
            if ns_ok:
                for tool in ("iptables", "ip6tables"):
                    for spec in self._rule_specs():
                        # delete every copy of the rule (start() may have been called twice)
                        for _ in range(8):
                            if self._ns([tool, "-w", "-D", *spec], check=False).returncode != 0:
                                break
            self._rules_installed = False
        if self._qdiscs_installed or self.backend == "netem":
            if ns_ok:
                for dev in (self.if_a, self.if_b):
                    self._ns(["tc", "qdisc", "del", "dev", dev, "root"], check=False)
            self._qdiscs_installed = False
        pid = self._pid if self._pid is not None else self._pid_from_file()
        if pid is not None and self._is_our_process(pid):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + STOP_TIMEOUT_S
            while self._is_our_process(pid) and time.monotonic() < deadline:
                if self._proc is not None and self._proc.poll() is not None:
                    break
                time.sleep(0.02)
            if self._is_our_process(pid) and (self._proc is None or self._proc.poll() is None):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if self._proc is not None:
            try:
                self._proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                pass
            self._proc = None
        self._pid = None
        self.pid_path.unlink(missing_ok=True)
        self.ready_path.unlink(missing_ok=True)

    def _pid_from_file(self) -> int | None:
        try:
            return int(self.pid_path.read_text().strip())
        except (OSError, ValueError):
            return None

    def alive(self) -> bool:
        """True while the emulation is in place (works from a fresh Link object too)."""
        if self.backend == "netem":
            if not self._ns_exists():
                return False
            p = self._ns(["tc", "qdisc", "show", "dev", self.if_b], check=False)
            return " netem " in f" {p.stdout} "
        if self._proc is not None:
            return self._proc.poll() is None
        pid = self._pid if self._pid is not None else self._pid_from_file()
        return pid is not None and self._is_our_process(pid)

    @property
    def pid(self) -> int | None:
        return self._pid if self._pid is not None else self._pid_from_file()

    def stats(self) -> dict:
        """The emulator's latest stats (nfqueue: linkem's stats file; netem: ``tc -s`` counters)."""
        if self.backend == "netem":
            return self._netem_stats()
        try:
            return json.loads(self.stats_path.read_text())
        except FileNotFoundError as e:
            raise LinkError(f"no stats for link {self.name}") from e

    def _netem_stats(self) -> dict:
        dirs = {}
        for label, dev in (("a_to_b", self.if_b), ("b_to_a", self.if_a)):
            p = self._ns(["tc", "-s", "qdisc", "show", "dev", dev], check=False)
            sent = pkts = dropped = None
            words = p.stdout.replace(",", " ").replace("(", " ").replace(")", " ").split()
            for i, w in enumerate(words):
                if w == "Sent" and i + 3 < len(words):
                    sent, pkts = int(words[i + 1]), int(words[i + 3])
                if w == "dropped" and i + 1 < len(words) and dropped is None:
                    dropped = int(words[i + 1])
            dirs[label] = {"packets": pkts, "bytes": sent, "drops_by_cause": {"all": dropped},
                           "lateness_ns": None, "tc": p.stdout}
        return {"schema": "dnscamp.linkem.stats/1", "backend": "netem", "name": self.name,
                "directions": dirs, "config": self.describe()}

    def describe(self) -> dict:
        d = {
            "name": self.name,
            "backend": self.backend,
            "router_ns": self.router_ns,
            "if_a": self.if_a,
            "if_b": self.if_b,
            "a_to_b": self.a_to_b,
            "b_to_a": self.b_to_a,
        }
        if self.backend == "nfqueue":
            d["queues"] = {"a_to_b": self.queues[0], "b_to_a": self.queues[1]}
            d["binary"] = str(binary_path())
            d["fail"] = "closed"
            d["ipv6_rules"] = self.ipv6
        else:
            d["netem"] = {"a_to_b": netem_argv(self.if_b, self.a_to_b), "b_to_a": netem_argv(self.if_a, self.b_to_a)}
        return d

    def __enter__(self) -> "Link":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
