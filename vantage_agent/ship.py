"""Shipping a vantage's completed runs to the results bucket (`dnscamp agent ship`), and what
the agent tells the operator (its status object).

Each unit file of a completed run (``<spool>/<campaign>/<run>/<unit>.jsonl``, complete.json
present) is uploaded as ``results/<campaign>/<vantage>/<run>/<unit>.jsonl.gz`` with a
Content-MD5, so S3 refuses a body damaged on the way. The instance role may only PutObject
(no HEAD, no List, no Get): what was shipped is known from a local ledger, ``shipped.ndjson``
in the run directory, one line appended (and fsynced) per upload S3 confirmed, with the sha256
of the uploaded body and, for a unit, its record count. An unreachable S3 only grows the queue,
shipped by a later call, and no record is ever lost.

A run's HAR files (``artifacts/har/*.har``, which page_load records name by ``har_path``) follow
its unit files as ``results/<campaign>/<vantage>/<run>/artifacts/har/<name>.har.gz``, under the
same prefix (the instance role allows nothing else) and in the same ledger (``artifact`` lines).
The collector takes only ``*.jsonl(.gz)`` keys as records; a record's HAR is at its run's prefix
+ ``artifacts/`` + ``har_path`` + ``.gz``.

Last, once every unit file and artifact of the run is in the ledger, the run's manifest goes to
``results/<campaign>/<vantage>/<run>/manifest.json`` (once: a ``manifest`` ledger line): the units
the run planned on this vantage (``planned.json``, written by the runner at the run's start),
each object's key, sha256, bytes and records, the artifacts, and complete.json. The collector
reconciles it with what it found, so a lost object or a run that never finished shipping is
named, not guessed.

A crash between S3's answer and the ledger line uploads that unit again next time: the gzip is
deterministic (no name, mtime 0), so the same key gets the same bytes and the same ETag, and
the collector does not ingest it again (and would count its records as duplicates if it did).

Spool files are deleted only when their run is confirmed shipped whole (every unit, artifact
and the manifest in the ledger) for ``prune_shipped_after_days``; the ledger, planned.json and
complete.json stay, so nothing is shipped again and the run stays known as complete.

Credentials come only from boto3's default chain (the instance role on EC2); nothing here
reads or logs them. The endpoint is boto3's too (AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL for an
S3-compatible server). This module runs on the vantages: it imports neither dnscamp nor testbed.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

from vantage_agent import agent_state

LEDGER = "shipped.ndjson"  # in the run dir; not *.jsonl, which ingest would read as records
COMPLETE = "complete.json"
PLANNED = "planned.json"  # {"units": [unit id, ...]}: what the run planned to run on this vantage
MANIFEST = "manifest.json"
STATUS_SCHEMA = MANIFEST_SCHEMA = 1
PHASES = ("bootstrap", "bootstrap_error", "measuring", "disk_floor", "ended")
RETRY = {"mode": "standard", "max_attempts": 5}  # botocore's standard mode: backoff, throttling-aware


@dataclass
class ShipStats:
    shipped: int = 0  # unit files uploaded by this call
    artifacts_shipped: int = 0  # HAR files uploaded by this call (after their run's unit files)
    manifests_shipped: int = 0  # run manifests uploaded by this call (each after its run's objects)
    already: int = 0  # in the ledger before
    pending: int = 0  # objects not shipped (S3 unreachable or refused): the queue for the next call
    runs_incomplete: int = 0  # runs still going (or killed): shipped once complete
    errors: list[str] = field(default_factory=list)  # first line of each failure (no credentials in them)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


class ClockProbe:
    """The agent's clock minus S3's, from the ``Date`` header of PUT responses.

    The header has a one-second resolution, so one response says: S3's clock read some time
    in [D, D+1) while this request was in flight, between the local times t0 (sent) and t1
    (answered). The offset then lies in (t0 - D - 1, t1 - D]; its estimate is the middle of
    that interval, the request's midpoint minus D + 0.5 s. Several responses of one call (the
    clock does not move meanwhile) are intersected, which narrows the interval below a second;
    if they disagree (the clock was stepped), the last response alone counts."""

    def __init__(self) -> None:
        self.lo: float | None = None
        self.hi: float | None = None

    def sample(self, t0: float, t1: float, date_header: str | None) -> None:
        try:
            d = parsedate_to_datetime(date_header).timestamp() if date_header else None
        except (TypeError, ValueError, IndexError, OverflowError, OSError):
            d = None
        if d is None:
            return
        lo, hi = t0 - d - 1.0, t1 - d
        if self.lo is not None and max(lo, self.lo) <= min(hi, self.hi):
            lo, hi = max(lo, self.lo), min(hi, self.hi)
        self.lo, self.hi = lo, hi

    @property
    def offset_s(self) -> float | None:
        return None if self.lo is None else round((self.lo + self.hi) / 2, 3)


def s3_client(connect_timeout: float = 5, read_timeout: float = 30):
    import boto3
    from botocore.config import Config

    cfg = Config(retries=RETRY, connect_timeout=connect_timeout, read_timeout=read_timeout)
    return boto3.client("s3", config=cfg)


def gz(data: bytes) -> bytes:
    """Deterministic gzip (no file name, mtime 0): a re-upload is byte-identical."""
    return gzip.compress(data, compresslevel=6, mtime=0)


def object_key(campaign: str, vantage: str, run: str, unit: str) -> str:
    return f"results/{campaign}/{vantage}/{run}/{unit}.jsonl.gz"


def manifest_key(campaign: str, vantage: str, run: str) -> str:
    return f"results/{campaign}/{vantage}/{run}/{MANIFEST}"


def status_key(campaign: str, vantage: str, region: str, instance_id: str) -> str:
    """One object per instance: the instances of a vantage (in one region or several) never
    overwrite each other's status."""
    return f"status/{campaign}/{vantage}/{region}/{instance_id}.json"


def count_records(data: bytes) -> int:
    """Records in a unit file: one JSON object per line (a last line without its newline counts)."""
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def ledger_entries(run_dir: Path) -> list[dict[str, Any]]:
    """The ledger's lines (a line torn by a crash is skipped: that object goes again, same bytes)."""
    p = run_dir / LEDGER
    if not p.exists():
        return []
    out = []
    for ln in p.read_text().splitlines():
        try:
            e = json.loads(ln)
        except json.JSONDecodeError:
            continue
        if isinstance(e, dict):
            out.append(e)
    return out


def read_ledger(run_dir: Path, field: str = "unit") -> set[str]:
    """The units (or, with field="artifact" / "manifest", the artifact paths / manifest keys)
    the ledger says were shipped."""
    return {e[field] for e in ledger_entries(run_dir) if isinstance(e.get(field), str)}


ARTIFACTS = ("har/*.har",)  # under <run>/artifacts: what records point to and researchers read


def artifact_files(run_dir: Path) -> list[Path]:
    base = run_dir / "artifacts"
    return sorted(p for pat in ARTIFACTS for p in base.glob(pat) if p.is_file()) if base.is_dir() else []


def unit_files(run_dir: Path) -> list[Path]:
    return sorted(p for p in run_dir.glob("*.jsonl") if not p.name.startswith("."))


def _append_ledger(run_dir: Path, entry: dict[str, Any]) -> None:
    with open(run_dir / LEDGER, "a") as f:
        f.write(json.dumps(entry) + "\n")
        f.flush()
        os.fsync(f.fileno())


def wall_clock() -> float:
    """The agent's clock as it is (not monotonic: its offset to S3's is what the status reports)."""
    return time.time()


def _put(client, bucket: str, key: str, body: bytes, content_type: str, clock: ClockProbe | None = None) -> str:
    md5 = base64.b64encode(hashlib.md5(body).digest()).decode()
    t0 = wall_clock()
    resp = client.put_object(Bucket=bucket, Key=key, Body=body, ContentMD5=md5, ContentType=content_type)
    if clock is not None:
        clock.sample(t0, wall_clock(), resp.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date"))
    return resp.get("ETag", "").strip('"')


def _error_line(exc: BaseException) -> str:
    text = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), "")
    return f"{type(exc).__name__}: {text}"[:300]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


def runs(spool_dir: Path, campaign: str | None = None) -> list[Path]:
    base = Path(spool_dir)
    camps = [base / campaign] if campaign else sorted(p for p in base.iterdir() if p.is_dir()) if base.is_dir() else []
    return [r for c in camps if c.is_dir() for r in sorted(p for p in c.iterdir() if p.is_dir())]


def planned_units(run_dir: Path) -> list[str] | None:
    """The run's planned unit ids on this vantage (planned.json), None when it has none (a run
    made before the runner wrote it) or it cannot be read."""
    try:
        units = json.loads((run_dir / PLANNED).read_text())["units"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return [u for u in units if isinstance(u, str)] if isinstance(units, list) else None


def build_manifest(run_dir: Path, vantage: str, region: str | None = None, instance_id: str | None = None) -> dict[str, Any]:
    """The run's manifest from its ledger (every unit file and artifact already shipped). A
    ledger line of an older agent without sha256 or records gets them from the spool file,
    whose deterministic gzip is the body that was uploaded."""
    campaign, run = run_dir.parent.name, run_dir.name
    units: dict[str, dict[str, Any]] = {}
    arts: dict[str, dict[str, Any]] = {}
    for e in ledger_entries(run_dir):
        if isinstance(e.get("unit"), str):
            units[e["unit"]] = e
        elif isinstance(e.get("artifact"), str):
            arts[e["artifact"]] = e
    objects = []
    for unit, e in sorted(units.items()):
        if not all(isinstance(e.get(k), int) for k in ("records", "bytes")) or not isinstance(e.get("sha256"), str):
            data = (run_dir / f"{unit}.jsonl").read_bytes()
            body = gz(data)
            e = {**e, "sha256": hashlib.sha256(body).hexdigest(), "bytes": len(body), "records": count_records(data)}
        objects.append({"unit": unit, "key": e.get("key") or object_key(campaign, vantage, run, unit),
                        "sha256": e["sha256"], "bytes": e["bytes"], "records": e["records"]})  # fmt: skip
    artifacts = []
    for rel, e in sorted(arts.items()):
        sha = e.get("sha256")
        if not isinstance(sha, str):
            sha = hashlib.sha256(gz((run_dir / "artifacts" / rel).read_bytes())).hexdigest()
        artifacts.append({"path": rel, "key": e.get("key"), "sha256": sha})
    try:
        complete = json.loads((run_dir / COMPLETE).read_text())
    except (OSError, ValueError):
        complete = {}
    planned = planned_units(run_dir)
    return {"schema": MANIFEST_SCHEMA, "campaign": campaign, "vantage": vantage, "region": region,
            "instance_id": instance_id, "run": run,
            "units_planned": planned if planned is not None else sorted(units),
            "objects": objects, "artifacts": artifacts,
            "complete": complete if isinstance(complete, dict) else {}}  # fmt: skip


def ship(spool_dir: Path, bucket: str, vantage: str, *, campaign: str | None = None, client=None,
         region: str | None = None, instance_id: str | None = None, clock: ClockProbe | None = None) -> ShipStats:  # fmt: skip
    """Upload every completed, not yet shipped unit file, then the run's artifacts, then its
    manifest; stop at the first failure (S3 down: the rest wait for the next call, in order)."""
    client = client or s3_client()
    stats = ShipStats()
    failed = False
    for run_dir in runs(spool_dir, campaign):
        if not (run_dir / COMPLETE).exists():
            stats.runs_incomplete += 1
            continue
        camp, run = run_dir.parent.name, run_dir.name
        done = read_ledger(run_dir)
        for f in unit_files(run_dir):
            unit = f.name[: -len(".jsonl")]
            if unit in done:
                stats.already += 1
                continue
            if failed:
                stats.pending += 1
                continue
            key = object_key(camp, vantage, run, unit)
            data = f.read_bytes()
            body = gz(data)
            try:
                etag = _put(client, bucket, key, body, "application/gzip", clock)
            except Exception as exc:  # botocore's errors (endpoint, client, retries exhausted)
                stats.errors.append(_error_line(exc))
                stats.pending += 1
                failed = True
                continue
            _append_ledger(run_dir, {"unit": unit, "key": key, "etag": etag, "bytes": len(body),
                                     "sha256": hashlib.sha256(body).hexdigest(), "records": count_records(data),
                                     "at": _now()})  # fmt: skip
            stats.shipped += 1
        done = read_ledger(run_dir, "artifact")
        for f in artifact_files(run_dir):
            rel = f.relative_to(run_dir / "artifacts").as_posix()
            if rel in done:
                continue
            if failed:
                stats.pending += 1
                continue
            key = f"results/{camp}/{vantage}/{run}/artifacts/{rel}.gz"
            body = gz(f.read_bytes())
            try:
                etag = _put(client, bucket, key, body, "application/gzip", clock)
            except Exception as exc:
                stats.errors.append(_error_line(exc))
                stats.pending += 1
                failed = True
                continue
            _append_ledger(run_dir, {"artifact": rel, "key": key, "etag": etag, "sha256": hashlib.sha256(body).hexdigest(),
                                     "at": _now()})  # fmt: skip
            stats.artifacts_shipped += 1
        key = manifest_key(camp, vantage, run)
        if key in read_ledger(run_dir, "manifest"):
            continue
        if failed:
            stats.pending += 1
            continue
        body = (json.dumps(build_manifest(run_dir, vantage, region, instance_id), indent=1) + "\n").encode()
        try:
            etag = _put(client, bucket, key, body, "application/json", clock)
        except Exception as exc:
            stats.errors.append(_error_line(exc))
            stats.pending += 1
            failed = True
            continue
        _append_ledger(run_dir, {"manifest": key, "etag": etag, "sha256": hashlib.sha256(body).hexdigest(),
                                 "bytes": len(body), "at": _now()})  # fmt: skip
        stats.manifests_shipped += 1
    return stats


def _shipped_whole(run_dir: Path) -> dict[str, Any] | None:
    """The manifest's ledger line of a run whose unit files, artifacts and manifest are all
    shipped; None otherwise."""
    if not (run_dir / COMPLETE).exists():
        return None
    entries = ledger_entries(run_dir)
    man = next((e for e in entries if isinstance(e.get("manifest"), str)), None)
    if man is None:
        return None
    units = {e["unit"] for e in entries if isinstance(e.get("unit"), str)}
    arts = {e["artifact"] for e in entries if isinstance(e.get("artifact"), str)}
    if any(f.name[: -len(".jsonl")] not in units for f in unit_files(run_dir)):
        return None
    if any(f.relative_to(run_dir / "artifacts").as_posix() not in arts for f in artifact_files(run_dir)):
        return None
    return man


def prune(spool_dir: Path, campaign: str | None, after_days: float, now: datetime | None = None) -> dict[str, int]:
    """Delete the unit files and artifacts of runs shipped whole more than ``after_days`` ago
    (by the manifest's ledger line). The run directory, its ledger, planned.json and
    complete.json stay: the run is known complete and nothing of it is shipped again."""
    now = now or datetime.now(timezone.utc)
    out = {"runs": 0, "files": 0, "bytes": 0}
    for run_dir in runs(spool_dir, campaign):
        man = _shipped_whole(run_dir)
        at = agent_state.parse_iso(man.get("at")) if man else None
        if at is None or now - at < timedelta(days=after_days):
            continue
        files = unit_files(run_dir) + artifact_files(run_dir)
        if not files:
            continue
        for f in files:
            out["bytes"] += f.stat().st_size
            f.unlink()
            out["files"] += 1
        out["runs"] += 1
    return out


def backlog(spool_dir: Path, campaign: str | None = None) -> tuple[int, int]:
    """(pending_units, runs_incomplete): what a drain waits for. Pending are the unit files of
    completed runs not shipped yet, every planned unit of a run not complete yet, and each
    artifact or manifest of a completed run not shipped yet."""
    pending = incomplete = 0
    for run_dir in runs(spool_dir, campaign):
        if not (run_dir / COMPLETE).exists():
            incomplete += 1
            planned = planned_units(run_dir)
            pending += max(len(planned or ()), len(unit_files(run_dir)))
            continue
        entries = ledger_entries(run_dir)
        units = {e["unit"] for e in entries if isinstance(e.get("unit"), str)}
        arts = {e["artifact"] for e in entries if isinstance(e.get("artifact"), str)}
        pending += sum(1 for f in unit_files(run_dir) if f.name[: -len(".jsonl")] not in units)
        pending += sum(1 for f in artifact_files(run_dir) if f.relative_to(run_dir / "artifacts").as_posix() not in arts)
        pending += 0 if any(isinstance(e.get("manifest"), str) for e in entries) else 1
    return pending, incomplete


def disk_free(path: Path) -> int:
    """Free bytes on the filesystem of ``path`` (the spool's), for the status and the disk floor."""
    return shutil.disk_usage(path).free


def agent_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dnscamp")
    except PackageNotFoundError:
        return "unknown"


def status_body(*, campaign: str, vantage: str, region: str, instance_id: str, phase: str, state: dict[str, Any],
                pending_units: int, runs_incomplete: int, disk_free_bytes: int, clock_offset_s: float | None,
                ship_stats: dict[str, Any] | None = None, error: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    """The status object (schema 1): every field always present, null when unknown."""
    if phase not in PHASES:
        raise ValueError(f"phase {phase!r}: not one of {', '.join(PHASES)}")
    ss = ship_stats or {}
    return {
        "schema": STATUS_SCHEMA, "campaign": campaign, "vantage": vantage, "region": region, "instance_id": instance_id,
        "at": agent_state.now_iso(), "agent_version": agent_version(), "phase": phase,
        "launched_at": state.get("launched_at"), "last_firing": state.get("last_firing"),
        "firings": int(state.get("firings") or 0), "skipped_firings": int(state.get("skipped_firings") or 0),
        "last_skipped_at": state.get("last_skipped_at"),
        "pending_units": pending_units, "runs_incomplete": runs_incomplete, "disk_free_bytes": disk_free_bytes,
        "clock_offset_s": clock_offset_s, "error": error,
        "ship": {"shipped": int(ss.get("shipped", 0)) + int(ss.get("artifacts_shipped", 0)) + int(ss.get("manifests_shipped", 0)),
                 "pending": int(ss.get("pending", 0)), "errors": list(ss.get("errors", []))[:3]},
    }  # fmt: skip


def put_status(client, bucket: str, spool_dir: Path, *, home: Path, campaign: str, vantage: str, region: str | None = None,
               instance_id: str | None = None, phase: str = "measuring", ship_stats: dict[str, Any] | None = None,
               error: dict[str, Any] | None = None, clock: ClockProbe | None = None) -> str:  # fmt: skip
    """PUT this instance's status object; returns its key. The clock offset is this call's
    (the PUTs of the ship before it), else the one the previous status PUT measured; the
    status PUT's own response then updates the state for the next one."""
    region = region or agent_state.region()
    instance_id = instance_id or agent_state.instance_id()
    clock = clock or ClockProbe()
    state = agent_state.read(home, campaign)
    pending, incomplete = backlog(spool_dir, campaign)
    Path(spool_dir).mkdir(parents=True, exist_ok=True)
    body = status_body(campaign=campaign, vantage=vantage, region=region, instance_id=instance_id, phase=phase,
                       state=state, pending_units=pending, runs_incomplete=incomplete,
                       disk_free_bytes=disk_free(spool_dir),
                       clock_offset_s=clock.offset_s if clock.offset_s is not None else state.get("clock_offset_s"),
                       ship_stats=ship_stats, error=error)  # fmt: skip
    key = status_key(campaign, vantage, region, instance_id)
    _put(client, bucket, key, (json.dumps(body, indent=1) + "\n").encode(), "application/json", clock)
    if clock.offset_s is not None:
        with agent_state.updating(home, campaign) as st:
            st["clock_offset_s"] = clock.offset_s
    return key


def ship_and_report(spool_dir: Path, bucket: str, vantage: str, *, campaign: str | None = None, region: str | None = None,
                    client=None, home: Path | None = None, phase: str = "measuring",
                    error: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    """ship(), then the status object of each campaign shipped (best effort: S3 down means no
    status, the queue waits). ``campaign`` None: every campaign in the spool."""
    from vantage_agent import paths

    client = client or s3_client()
    home = Path(home) if home else paths.home()
    region = region or agent_state.region()
    iid = agent_state.instance_id()
    clock = ClockProbe()
    stats = ship(spool_dir, bucket, vantage, campaign=campaign, client=client, region=region, instance_id=iid, clock=clock)
    out = stats.as_json()
    base = Path(spool_dir)
    camps = [campaign] if campaign else sorted(p.name for p in base.iterdir() if p.is_dir()) if base.is_dir() else []
    out["status_objects"] = []
    now_errors = [f"{agent_state.now_iso()} {e}" for e in stats.errors]
    for camp in camps:
        prior = [str(e) for e in agent_state.read(home, camp).get("unreported_errors") or []]
        try:
            key = put_status(client, bucket, spool_dir, home=home, campaign=camp, vantage=vantage, region=region,
                             instance_id=iid, phase=phase, ship_stats={**out, "errors": (prior + now_errors)[-3:]},
                             error=error, clock=clock)  # fmt: skip
            out["status_objects"].append(key)
            with agent_state.updating(home, camp) as st:
                st["unreported_errors"] = []
        except Exception as exc:
            out["status_error"] = _error_line(exc)
            with agent_state.updating(home, camp) as st:  # told by the next status that gets through
                st["unreported_errors"] = (prior + now_errors + [f"{agent_state.now_iso()} status: {out['status_error']}"])[-5:]
            break  # S3 is not taking objects: the other campaigns' statuses would fail the same way
    if out["status_objects"]:
        out["status_object"] = out["status_objects"][0]
    return out
