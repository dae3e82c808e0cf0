"""What the fleet's agents say about themselves, read from the results bucket and judged
(`dnscamp fleet status`, and `fleet destroy`'s drain through ``pending_total``).

Every agent writes ``status/<campaign>/<vantage>/<region>/<instance_id>.json`` after each
firing (and its bootstrap writes one when a step fails), so one object per instance, never
shared. ``read_statuses`` returns them parsed; ``flags`` says what an operator must look at:

- ``no_status``: a live instance launched more than ``launch_grace_min`` ago has written none
  (its bootstrap died before it could say so, or it cannot reach the bucket);
- ``stale``: the newest status is older than two schedule intervals plus the longest run
  (``stale_minutes``), so at least one firing came and went without a word;
- ``skipped_firings``: firings found the previous one still running (the count, and when);
- ``low_disk``: free disk of the spool below the agents' floor;
- ``clock_skew``: the agent's clock is more than ``max_skew_s`` off S3's ``Date``;
- ``bootstrap_error`` (the failing step and the last log lines) and ``disk_floor`` (the agent
  stopped measuring to keep its queue);
- ``corrupt``: a status object that is not the schema's JSON (one line saying why);
- ``ended_but_running``: the agent says the campaign ended but EC2 still runs, and bills, it.

Ages are measured on S3's clock (the object's LastModified), not the agent's, so a skewed
agent is flagged for its skew and not also as stale or fresh by mistake."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Iterable

SCHEMA = 1
PHASES = ("bootstrap", "bootstrap_error", "measuring", "disk_floor", "ended")
STATUS_MAX_BYTES = 64 * 1024  # a status object is a small JSON document: never read more
LOG_TAIL_SHOWN = 5
MIB = 1024 * 1024
DEFAULT_DISK_FLOOR_MIB = 1024  # the agents' default ([fleet] disk_floor_mib)
DEFAULT_STALE_MIN = 180.0  # without a schedule to derive it from
LIVE_STATES = ("pending", "running")  # EC2 states that bill (and should measure)
GONE_STATES = ("shutting-down", "terminated", "stopping", "stopped")

# Fields and their JSON types; None is allowed for every one marked nullable.
_FIELDS: dict[str, tuple[tuple[type, ...], bool]] = {
    "schema": ((int,), False), "campaign": ((str,), False), "vantage": ((str,), False), "region": ((str,), False),
    "instance_id": ((str,), False), "at": ((str,), True), "agent_version": ((str,), True), "phase": ((str,), False),
    "launched_at": ((str,), True), "last_firing": ((dict,), True), "firings": ((int,), True),
    "skipped_firings": ((int,), True), "last_skipped_at": ((str,), True), "pending_units": ((int,), True),
    "runs_incomplete": ((int,), True), "disk_free_bytes": ((int,), True), "clock_offset_s": ((int, float), True),
    "error": ((dict,), True), "ship": ((dict,), True),
}


@dataclass(frozen=True)
class Flag:
    instance_id: str
    vantage: str
    region: str
    what: str  # no_status, stale, skipped_firings, low_disk, clock_skew, ship_errors, bootstrap_error, disk_floor, corrupt, ended_but_running
    detail: str

    def as_json(self) -> dict[str, str]:
        return asdict(self)

    def line(self) -> str:
        return f"{self.vantage} @ {self.region} {self.instance_id}: {self.what}: {self.detail}"


def status_prefix(campaign: str) -> str:
    return f"status/{campaign}/"


def key_parts(key: str, campaign: str) -> tuple[str, str, str] | None:
    """(vantage, region, instance_id) of ``status/<campaign>/<vantage>/<region>/<instance_id>.json``."""
    rest = key[len(status_prefix(campaign)):] if key.startswith(status_prefix(campaign)) else ""
    parts = rest.split("/")
    if len(parts) != 3 or not parts[2].endswith(".json") or not all(parts[:2]) or parts[2] == ".json":
        return None
    return parts[0], parts[1], parts[2][: -len(".json")]


def _iso(v: Any) -> datetime | None:
    if not isinstance(v, str):
        return None
    try:
        t = datetime.fromisoformat(v.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def parse(key: str, body: bytes, campaign: str) -> dict[str, Any]:
    """One status object's body -> its dict, or ``{"corrupt": "<one line>", ...}`` naming the key
    and the field at fault. The key's (vantage, region, instance_id) are kept either way, so a
    corrupt object is still attributed to its instance."""
    where = key_parts(key, campaign)
    vantage, region, iid = where or ("?", "?", "?")
    base = {"key": key, "vantage": vantage, "region": region, "instance_id": iid}

    def bad(why: str) -> dict[str, Any]:
        return base | {"corrupt": f"{key}: {why}"[:300]}

    if where is None:
        return bad(f"not a status key (want {status_prefix(campaign)}<vantage>/<region>/<instance_id>.json)")
    if len(body) > STATUS_MAX_BYTES:
        return bad(f"larger than {STATUS_MAX_BYTES} bytes")
    try:
        doc = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError:
        return bad("not UTF-8")
    except ValueError as exc:
        return bad(f"not JSON ({exc})")
    if not isinstance(doc, dict):
        return bad(f"not a JSON object but {type(doc).__name__}")
    for name, (types, nullable) in _FIELDS.items():
        if name not in doc:
            return bad(f"{name}: missing")
        v = doc[name]
        if v is None and nullable:
            continue
        if isinstance(v, bool) or not isinstance(v, types):
            return bad(f"{name}: {type(v).__name__} where {'/'.join(t.__name__ for t in types)} is wanted")
        if isinstance(v, float) and not math.isfinite(v):
            return bad(f"{name}: not a finite number")
    if doc["schema"] != SCHEMA:
        return bad(f"schema: {doc['schema']} (this dnscamp reads schema {SCHEMA})")
    if doc["phase"] not in PHASES:
        return bad(f"phase: {str(doc['phase'])[:40]!r} is none of {', '.join(PHASES)}")
    for name, got in (("campaign", campaign), ("vantage", vantage), ("region", region), ("instance_id", iid)):
        if doc[name] != got:
            return bad(f"{name}: {str(doc[name])[:60]!r} but the key says {got!r}")
    for name in ("firings", "skipped_firings", "pending_units", "runs_incomplete", "disk_free_bytes"):
        if doc[name] is not None and doc[name] < 0:
            return bad(f"{name}: negative")
    if doc["error"] is not None:
        if not isinstance(doc["error"].get("step"), str):
            return bad("error.step: missing or not a string")
        tail = doc["error"].get("log_tail")
        if tail is not None and not (isinstance(tail, list) and all(isinstance(x, str) for x in tail)):
            return bad("error.log_tail: not a list of strings")
    return doc | {"key": key}


def read_statuses(s3, bucket: str, campaign: str) -> list[dict[str, Any]]:
    """Every status object of the campaign, parsed (``parse``), each with ``key`` and
    ``last_modified`` (S3's time of the write, a datetime) added; sorted by key."""
    out: list[dict[str, Any]] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=status_prefix(campaign)):
        for entry in page.get("Contents", []):
            o = s3.get_object(Bucket=bucket, Key=entry["Key"], Range=f"bytes=0-{STATUS_MAX_BYTES}")
            body = o["Body"].read(STATUS_MAX_BYTES + 1)
            st = parse(entry["Key"], body, campaign)
            st["last_modified"] = entry["LastModified"]
            out.append(st)
    return sorted(out, key=lambda s: s["key"])


def stale_minutes(schedule) -> float:
    """How long a silent agent is still fine: two of the schedule's longest gaps between firings
    (a firing may run long and the next may be skipped), plus the longest run and the jitter
    before it; DEFAULT_STALE_MIN without a schedule."""
    if schedule is None:
        return DEFAULT_STALE_MIN
    from croniter import croniter

    # the longest gap over two weeks of firings from a fixed start (cron repeats at most yearly;
    # two weeks cover every hourly/daily/weekly pattern the specs use)
    it = croniter(schedule.cron, datetime(2026, 1, 1, tzinfo=timezone.utc))
    prev = it.get_next(datetime)
    end = prev + timedelta(days=14)
    gap = 0.0
    while True:
        nxt = it.get_next(datetime)
        gap = max(gap, (nxt - prev).total_seconds())
        if nxt > end:
            break
        prev = nxt
    return (2 * gap + schedule.max_runtime_s + schedule.jitter_s) / 60


def _ago(now: datetime, t: datetime) -> str:
    m = (now - t).total_seconds() / 60
    return f"{m:.0f} min" if m < 120 else f"{m / 60:.1f} h"


def _get(inst: Any, name: str) -> Any:
    return inst.get(name) if isinstance(inst, dict) else getattr(inst, name, None)


def is_agent(inst: Any) -> bool:
    """Whether an instance runs an agent: the vantage module tags it ``vantage``; the whoami
    server (tag role=whoami-dns) carries the campaign's tag but writes no status."""
    tags = _get(inst, "tags")
    return not isinstance(tags, dict) or "vantage" in tags


def flags(statuses: list[dict[str, Any]], instances: Iterable[Any] | None, now: datetime, *,
          launch_grace_min: float = 20, stale_min: float = DEFAULT_STALE_MIN,
          disk_floor_bytes: int = DEFAULT_DISK_FLOOR_MIB * MIB, max_skew_s: float = 1.0,
          skipped_seen: dict[str, int] | None = None) -> list[Flag]:
    """What needs an operator, per instance. ``instances``: EC2's view (aws.Instance or dicts
    with id, state, vantage, region, launched, and optionally tags: instances whose tags lack
    ``vantage`` run no agent and are left out); a status of an instance EC2 lists as gone
    (terminated, stopped, or absent from the list) is history and raises only ``corrupt``.
    ``instances=None`` means there is no EC2 to ask (the rehearsal): every status is live.
    ``skipped_seen``: instance id -> skipped firings already reported; only more raise the flag
    (None: any skipped firing does)."""
    now = now if now.tzinfo else now.replace(tzinfo=timezone.utc)
    ec2 = {str(_get(i, "id")): i for i in instances if is_agent(i)} if instances is not None else None
    out: list[Flag] = []
    newest: dict[str, dict[str, Any]] = {}
    for st in statuses:
        iid = st.get("instance_id", "?")
        if st.get("corrupt"):
            out.append(Flag(iid, st.get("vantage", "?"), st.get("region", "?"), "corrupt", st["corrupt"]))
            continue
        newest[iid] = st
    if ec2 is not None:
        for iid, inst in sorted(ec2.items()):
            if _get(inst, "state") not in LIVE_STATES or iid in newest:
                continue
            if any(f.instance_id == iid for f in out):
                continue  # its only status is corrupt: said above
            launched = _get(inst, "launched")
            launched = launched if launched is None or launched.tzinfo else launched.replace(tzinfo=timezone.utc)
            if launched is None or now - launched > timedelta(minutes=launch_grace_min):
                since = f"launched {_ago(now, launched)} ago" if launched else "launch time unknown"
                out.append(Flag(iid, str(_get(inst, "vantage")), str(_get(inst, "region")), "no_status",
                                f"no status object, {since} (grace {launch_grace_min:g} min): its bootstrap may "
                                f"have died before it could write one; `dnscamp fleet ssh` opens a shell"))
    for iid, st in sorted(newest.items()):
        inst = ec2.get(iid) if ec2 is not None else None
        state = _get(inst, "state") if inst is not None else None
        live = ec2 is None or state in LIVE_STATES
        v, r = st["vantage"], st["region"]

        def flag(what: str, detail: str) -> None:
            out.append(Flag(iid, v, r, what, detail))

        if not live:
            continue
        phase = st["phase"]
        if phase == "ended":
            if inst is not None:
                flag("ended_but_running", f"the agent ended the campaign at {st.get('at')} but EC2 says {state}: "
                                          "still billing (`dnscamp fleet destroy`)")
            continue
        seen = st.get("last_modified") or _iso(st.get("at"))
        if isinstance(seen, datetime):
            seen = seen if seen.tzinfo else seen.replace(tzinfo=timezone.utc)
            if now - seen > timedelta(minutes=stale_min):
                flag("stale", f"last status {_ago(now, seen)} ago (at {seen.isoformat()}), "
                              f"more than {stale_min:g} min: firings are not running or not shipping")
        skipped = st.get("skipped_firings") or 0
        before = (skipped_seen or {}).get(iid, 0) if skipped_seen is not None else 0
        if skipped > before:
            new = f"{skipped - before} new, " if skipped_seen is not None else ""
            flag("skipped_firings", f"{new}{skipped} firing(s) skipped in all, the last at {st.get('last_skipped_at')}: "
                                    "a firing was still running when the next came (raise the interval or max_runtime_s)")
        disk = st.get("disk_free_bytes")
        if disk is not None and disk < disk_floor_bytes:
            flag("low_disk", f"{disk / MIB:,.0f} MiB free, below the floor of {disk_floor_bytes / MIB:,.0f} MiB")
        off = st.get("clock_offset_s")
        if off is not None and abs(off) > max_skew_s:
            flag("clock_skew", f"agent clock {off:+.3f} s off S3's (more than {max_skew_s:g} s): timings' "
                               "timestamps are off by as much (check chrony on the instance)")
        ship_errors = [str(e) for e in ((st.get("ship") or {}).get("errors") or [])]
        if ship_errors:
            flag("ship_errors", f"{len(ship_errors)} failed upload(s) since the previous status reached S3, the last: "
                                f"{ship_errors[-1][:200]} (the queue waits on the instance's disk)")
        err = st.get("error") or {}
        if phase == "bootstrap_error":
            tail = [str(x) for x in (err.get("log_tail") or [])][-LOG_TAIL_SHOWN:]
            flag("bootstrap_error", f"step {err.get('step')!r} failed" + (": " + " | ".join(tail) if tail else ""))
        elif phase == "disk_floor":
            flag("disk_floor", "stopped measuring below the free-disk floor"
                               + (f" ({disk / MIB:,.0f} MiB free)" if disk is not None else "")
                               + "; shipping and pruning continue")
    return out


def pending_total(statuses: list[dict[str, Any]], instance_ids: Iterable[str] | None = None) -> int:
    """Units not yet shipped, over the newest status of every instance (only those of
    ``instance_ids`` when given). A corrupt status, or one whose count is null, adds 1: its
    queue is unknown, so a drain cannot call it empty."""
    only = set(instance_ids) if instance_ids is not None else None
    total = 0
    for st in statuses:
        if only is not None and st.get("instance_id") not in only:
            continue
        n = None if st.get("corrupt") else st.get("pending_units")
        total += n if isinstance(n, int) and not isinstance(n, bool) else 1
    return total


def summary(st: dict[str, Any]) -> str:
    """One line of a status for the table."""
    if st.get("corrupt"):
        return "corrupt"
    lf = st.get("last_firing") or {}
    disk = st.get("disk_free_bytes")
    off = st.get("clock_offset_s")
    return (f"{st['phase']}, firings {st.get('firings')}, skipped {st.get('skipped_firings')}, "
            f"pending {st.get('pending_units')}, last run {lf.get('run', '-')}, "
            f"disk {f'{disk / MIB:,.0f} MiB' if disk is not None else '-'}, "
            f"clock {f'{off:+.2f} s' if off is not None else '-'}, agent {st.get('agent_version')}")
