"""Shipping a vantage's completed runs to the results bucket (`dnscamp agent ship`).

Each unit file of a completed run (``<spool>/<campaign>/<run>/<unit>.jsonl``, complete.json
present) is uploaded as ``results/<campaign>/<vantage>/<run>/<unit>.jsonl.gz`` with a
Content-MD5, so S3 refuses a body damaged on the way. The instance role may only PutObject
(no HEAD, no List, no Get): what was shipped is known from a local ledger, ``shipped.ndjson``
in the run directory, one line appended (and fsynced) per upload S3 confirmed. Nothing is
deleted: the spool file stays, so an unreachable S3 only grows the queue, shipped by a later
call, and no record is ever lost.

A run's HAR files (``artifacts/har/*.har``, which page_load records name by ``har_path``) follow
its unit files as ``results/<campaign>/<vantage>/<run>/artifacts/har/<name>.har.gz``, under the
same prefix (the instance role allows nothing else) and in the same ledger (``artifact`` lines).
The collector takes only ``*.jsonl(.gz)`` keys as records; a record's HAR is at its run's prefix
+ ``artifacts/`` + ``har_path`` + ``.gz``.

A crash between S3's answer and the ledger line uploads that unit again next time: the gzip is
deterministic (no name, mtime 0), so the same key gets the same bytes and the same ETag, and
the collector does not ingest it again (and would count its records as duplicates if it did).

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
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

LEDGER = "shipped.ndjson"  # in the run dir; not *.jsonl, which ingest would read as records
COMPLETE = "complete.json"
RETRY = {"mode": "standard", "max_attempts": 5}  # botocore's standard mode: backoff, throttling-aware


@dataclass
class ShipStats:
    shipped: int = 0  # unit files uploaded by this call
    artifacts_shipped: int = 0  # HAR files uploaded by this call (after their run's unit files)
    already: int = 0  # in the ledger before
    pending: int = 0  # not shipped (S3 unreachable or refused): the queue for the next call
    runs_incomplete: int = 0  # runs still going (or killed): shipped once complete
    errors: list[str] = field(default_factory=list)  # first line of each failure (no credentials in them)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


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


def read_ledger(run_dir: Path, field: str = "unit") -> set[str]:
    """The units (or, with field="artifact", the artifact paths) the ledger says were shipped."""
    p = run_dir / LEDGER
    if not p.exists():
        return set()
    out = set()
    for ln in p.read_text().splitlines():
        try:
            out.add(json.loads(ln)[field])
        except (json.JSONDecodeError, KeyError, TypeError):
            continue  # a line torn by a crash (or of the other field): shipped again, same bytes, same key
    return out


ARTIFACTS = ("har/*.har",)  # under <run>/artifacts: what records point to and researchers read


def artifact_files(run_dir: Path) -> list[Path]:
    base = run_dir / "artifacts"
    return sorted(p for pat in ARTIFACTS for p in base.glob(pat) if p.is_file()) if base.is_dir() else []


def _append_ledger(run_dir: Path, entry: dict[str, Any]) -> None:
    with open(run_dir / LEDGER, "a") as f:
        f.write(json.dumps(entry) + "\n")
        f.flush()
        os.fsync(f.fileno())


def _put(client, bucket: str, key: str, body: bytes, content_type: str) -> str:
    md5 = base64.b64encode(hashlib.md5(body).digest()).decode()
    resp = client.put_object(Bucket=bucket, Key=key, Body=body, ContentMD5=md5, ContentType=content_type)
    return resp.get("ETag", "").strip('"')


def _error_line(exc: BaseException) -> str:
    text = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), "")
    return f"{type(exc).__name__}: {text}"[:300]


def runs(spool_dir: Path, campaign: str | None = None) -> list[Path]:
    base = Path(spool_dir)
    camps = [base / campaign] if campaign else sorted(p for p in base.iterdir() if p.is_dir()) if base.is_dir() else []
    return [r for c in camps if c.is_dir() for r in sorted(p for p in c.iterdir() if p.is_dir())]


def ship(spool_dir: Path, bucket: str, vantage: str, *, campaign: str | None = None, client=None) -> ShipStats:
    """Upload every completed, not yet shipped unit file; stop at the first failure (S3 down:
    the rest wait for the next call, in order)."""
    client = client or s3_client()
    stats = ShipStats()
    failed = False
    for run_dir in runs(spool_dir, campaign):
        units = sorted(p for p in run_dir.glob("*.jsonl") if not p.name.startswith("."))
        if not (run_dir / COMPLETE).exists():
            stats.runs_incomplete += 1
            continue
        done = read_ledger(run_dir)
        for f in units:
            unit = f.name[: -len(".jsonl")]
            if unit in done:
                stats.already += 1
                continue
            if failed:
                stats.pending += 1
                continue
            key = object_key(run_dir.parent.name, vantage, run_dir.name, unit)
            body = gz(f.read_bytes())
            try:
                etag = _put(client, bucket, key, body, "application/gzip")
            except Exception as exc:  # botocore's errors (endpoint, client, retries exhausted)
                stats.errors.append(_error_line(exc))
                stats.pending += 1
                failed = True
                continue
            _append_ledger(run_dir, {"unit": unit, "key": key, "etag": etag, "bytes": len(body),
                                     "at": datetime.now(timezone.utc).isoformat()})  # fmt: skip
            stats.shipped += 1
        if failed:
            continue
        done = read_ledger(run_dir, "artifact")
        for f in artifact_files(run_dir):
            rel = f.relative_to(run_dir / "artifacts").as_posix()
            if rel in done:
                continue
            key = f"results/{run_dir.parent.name}/{vantage}/{run_dir.name}/artifacts/{rel}.gz"
            try:
                etag = _put(client, bucket, key, gz(f.read_bytes()), "application/gzip")
            except Exception as exc:
                stats.errors.append(_error_line(exc))
                stats.pending += 1
                failed = True
                break
            _append_ledger(run_dir, {"artifact": rel, "key": key, "etag": etag,
                                     "at": datetime.now(timezone.utc).isoformat()})  # fmt: skip
            stats.artifacts_shipped += 1
    return stats


def agent_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dnscamp")
    except PackageNotFoundError:
        return "unknown"


def status_key(vantage: str, region: str | None) -> str:
    """``status/<vantage>/<region>.json`` on a fleet instance (the instances of one vantage in
    several regions must not overwrite each other's), ``status/<vantage>.json`` without a region."""
    return f"status/{vantage}/{region}.json" if region else f"status/{vantage}.json"


def status(spool_dir: Path, vantage: str, stats: ShipStats, region: str | None = None) -> dict[str, Any]:
    """What `status/<vantage>.json` says: the last run, its status counts, the queue, the
    agent version and the free disk of the spool."""
    last, counts = None, {}
    done = [r for r in runs(spool_dir) if (r / COMPLETE).exists()]
    if done:
        last = max(done, key=lambda r: (r / COMPLETE).stat().st_mtime)
        try:
            meta = json.loads((last / COMPLETE).read_text())
            counts = meta.get("statuses") or {"timeout": meta.get("units_timeout", 0)}
        except (OSError, json.JSONDecodeError):
            pass
    Path(spool_dir).mkdir(parents=True, exist_ok=True)
    return {
        "vantage": vantage, "region": region, "at": datetime.now(timezone.utc).isoformat(), "agent_version": agent_version(),
        "last_run": None if last is None else {"campaign": last.parent.name, "run": last.name, "statuses": counts},
        "ship": {"shipped": stats.shipped, "pending": stats.pending, "runs_incomplete": stats.runs_incomplete,
                 "errors": stats.errors[:3]},
        "disk_free_bytes": shutil.disk_usage(spool_dir).free,
    }  # fmt: skip


def ship_and_report(spool_dir: Path, bucket: str, vantage: str, *, region: str | None = None,
                    client=None) -> dict[str, Any]:  # fmt: skip
    """ship(), then the status object (best effort: S3 down means no status, the queue waits)."""
    client = client or s3_client()
    stats = ship(spool_dir, bucket, vantage, client=client)
    out = stats.as_json()
    try:
        body = json.dumps(status(spool_dir, vantage, stats, region), indent=1).encode()
        key = status_key(vantage, region)
        _put(client, bucket, key, body, "application/json")
        out["status_object"] = key
    except Exception as exc:
        out["status_error"] = _error_line(exc)
    return out
