"""What a scheduled agent remembers between firings, and who it is.

The state of one campaign on this machine is a small JSON file, ``<home>/state/<campaign>.json``:
when the agent was launched (its end of life counts from there), how many firings ran and how
many found the previous one still holding the lock, the last firing, and the last clock offset
to S3. It is replaced atomically (temp file, fsync, rename) under a lock of its own, because a
skipped firing updates it while the firing that holds the schedule's lock updates it too.

The instance's identity: ``DNSCAMP_INSTANCE_ID`` when set (the rehearsal, tests), else EC2's
instance id from IMDSv2 (token PUT, then the metadata GET, 1 s timeouts each), else the host
name. The region is ``DNSCAMP_REGION`` (the user data writes it) or ``local``.

This module runs on the vantages: it imports neither dnscamp nor testbed.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import urllib.request
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

from vantage_agent.spool import write_atomic

IMDS = "http://169.254.169.254"
IMDS_TIMEOUT_S = 1.0
# every key the state file may hold, with its value before the first firing
DEFAULTS: dict[str, Any] = {"launched_at": None, "firings": 0, "skipped_firings": 0, "last_skipped_at": None,
                            "last_firing": None, "clock_offset_s": None, "ended_at": None,
                            # failures (ship or status PUT) no status object has reported yet: an S3
                            # outage is told by the first status that gets through after it
                            "unreported_errors": []}  # fmt: skip


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def parse_iso(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        t = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def state_path(home: Path, campaign: str) -> Path:
    return Path(home) / "state" / f"{campaign}.json"


def read(home: Path, campaign: str) -> dict[str, Any]:
    """The campaign's state (the defaults for what the file lacks; a torn or corrupt file
    counts as none: the agent goes on, it only forgets its counters)."""
    out = dict(DEFAULTS)
    try:
        data = json.loads(state_path(home, campaign).read_text())
    except (OSError, ValueError):
        return out
    if isinstance(data, dict):
        out.update({k: data[k] for k in DEFAULTS if k in data})
    return out


@contextmanager
def updating(home: Path, campaign: str) -> Iterator[dict[str, Any]]:
    """Read, change (the caller edits the dict it is given) and replace the state, under an
    exclusive lock so that a skipped firing's update and the running firing's do not race."""
    path = state_path(home, campaign)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        state = read(home, campaign)
        yield state
        write_atomic(path, (json.dumps(state, indent=1) + "\n").encode())


def ensure_launched(home: Path, campaign: str, at: str | None = None) -> str:
    """launched_at of this campaign's agent, set now (or to ``at``) the first time."""
    with updating(home, campaign) as st:
        if not st["launched_at"]:
            st["launched_at"] = at or now_iso()
        return st["launched_at"]


def imds_instance_id(timeout: float = IMDS_TIMEOUT_S) -> str | None:
    """EC2's instance id through IMDSv2, or None off EC2 (or when IMDS does not answer)."""
    try:
        req = urllib.request.Request(f"{IMDS}/latest/api/token", method="PUT",
                                     headers={"X-aws-ec2-metadata-token-ttl-seconds": "60"})  # fmt: skip
        with urllib.request.urlopen(req, timeout=timeout) as r:
            token = r.read().decode()
        req = urllib.request.Request(f"{IMDS}/latest/meta-data/instance-id", headers={"X-aws-ec2-metadata-token": token})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            iid = r.read().decode().strip()
    except (OSError, ValueError):  # URLError and timeouts are OSErrors
        return None
    return iid or None


_instance_id: str | None = None


def instance_id() -> str:
    """This instance's id (asked once per process)."""
    global _instance_id
    if os.environ.get("DNSCAMP_INSTANCE_ID"):
        return os.environ["DNSCAMP_INSTANCE_ID"]
    if _instance_id is None:
        _instance_id = imds_instance_id() or socket.gethostname()
    return _instance_id


def region() -> str:
    return os.environ.get("DNSCAMP_REGION") or "local"
