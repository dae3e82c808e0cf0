"""A run's manifest (``results/<campaign>/<vantage>/<run>/manifest.json``, shipped by the agent
after every unit file and artifact of the run): read and checked, schema 1.

```
{"schema": 1, "campaign": str, "vantage": str, "region": str|null, "instance_id": str|null, "run": str,
 "units_planned": [unit_id, ...],
 "objects": [{"unit": unit_id, "key": str, "sha256": hex of the uploaded (gzipped) body,
              "bytes": int, "records": int}, ...],
 "artifacts": [{"path": str, "key": str, "sha256": hex}, ...],
 "complete": {...the run's complete.json...}}
```

The object comes from the network: anything in it may be wrong. ``parse`` returns a Manifest
or raises ManifestError, whose text is one line naming the field (``objects[3].sha256: ...``);
no other exception leaves it, whatever the bytes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

SCHEMA = 1
NAME = "manifest.json"
MAX_BYTES = 16 << 20  # ~100,000 objects: a larger one is not a manifest an agent writes
_KEY = re.compile(r"(?:^|/)results/([^/]+)/([^/]+)/([^/]+)/manifest\.json$")
_HEX64 = re.compile(r"[0-9a-f]{64}")
RECORD_SUFFIXES = (".jsonl.gz", ".jsonl")


class ManifestError(ValueError):
    """One line: the field and what is wrong with it."""


@dataclass(frozen=True)
class ManifestObject:
    unit: str
    key: str
    sha256: str
    bytes: int
    records: int


@dataclass(frozen=True)
class Manifest:
    campaign: str
    vantage: str
    run: str
    region: str | None
    instance_id: str | None
    units_planned: tuple[str, ...]
    objects: tuple[ManifestObject, ...]
    body: dict[str, Any]


def run_of_key(key: str) -> tuple[str, str, str] | None:
    """(campaign, vantage, run) of a manifest's key, None for a key of another shape."""
    m = _KEY.search(key)
    return (m[1], m[2], m[3]) if m else None


def is_manifest_key(key: str) -> bool:
    return run_of_key(key) is not None


def _short(v: Any) -> str:
    text = json.dumps(v, ensure_ascii=True) if not isinstance(v, str) else repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _str(d: dict, field: str, where: str, *, null: bool = False) -> str | None:
    if field not in d:
        raise ManifestError(f"{where}{field}: missing")
    v = d[field]
    if v is None and null:
        return None
    if not isinstance(v, str) or not v:
        raise ManifestError(f"{where}{field}: {_short(v)} is not a{' non-empty' if isinstance(v, str) else ''} string")
    if "\x00" in v or "/" in v and field in ("unit", "campaign", "vantage", "run"):
        raise ManifestError(f"{where}{field}: {_short(v)} has a '/' or NUL")
    return v


def _count(d: dict, field: str, where: str) -> int:
    v = d.get(field)
    if field not in d:
        raise ManifestError(f"{where}{field}: missing")
    if isinstance(v, bool) or not isinstance(v, int) or v < 0 or v >= 1 << 62:
        raise ManifestError(f"{where}{field}: {_short(v)} is not a count (a whole number >= 0)")
    return v


def _list(d: dict, field: str) -> list:
    if field not in d:
        raise ManifestError(f"{field}: missing")
    v = d[field]
    if not isinstance(v, list):
        raise ManifestError(f"{field}: {_short(v)} is not a list")
    return v


def _storable(body: Any) -> None:
    """What jsonb cannot hold: NUL in a string, a lone surrogate (``\\ud800``), NaN or Infinity."""
    import math

    stack = [body]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, str):
            if "\x00" in v:
                raise ManifestError(f"body: a NUL character in {_short(v)}")
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                raise ManifestError(f"body: a lone surrogate in {_short(v)}") from None
        elif isinstance(v, float) and not math.isfinite(v):
            raise ManifestError(f"body: {v} is not a JSON number")


def parse(key: str, data: bytes) -> Manifest:
    """The manifest at ``key`` with body ``data``, checked against its key (the run it is
    shipped under) and schema 1."""
    run = run_of_key(key)
    if run is None:
        raise ManifestError("key: not results/<campaign>/<vantage>/<run>/manifest.json")
    if len(data) > MAX_BYTES:
        raise ManifestError(f"body: {len(data)} bytes, more than a manifest's {MAX_BYTES}")
    try:
        body = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ManifestError(f"body: not UTF-8 (byte {exc.start})") from None
    except (ValueError, RecursionError) as exc:
        raise ManifestError(f"body: invalid JSON ({str(exc).splitlines()[0][:80]})") from None
    if not isinstance(body, dict):
        raise ManifestError(f"body: a JSON {type(body).__name__}, not an object")
    _storable(body)
    if "schema" not in body:
        raise ManifestError("schema: missing")
    if isinstance(body["schema"], bool) or body["schema"] != SCHEMA:
        raise ManifestError(f"schema: {_short(body['schema'])}, this collector reads schema {SCHEMA}")
    for field, want in zip(("campaign", "vantage", "run"), run):
        got = _str(body, field, "")
        if got != want:
            raise ManifestError(f"{field}: {_short(got)}, but the manifest is shipped under {want!r}")
    region = _str(body, "region", "", null=True)
    instance_id = _str(body, "instance_id", "", null=True)
    planned = _list(body, "units_planned")
    for i, u in enumerate(planned):
        if not isinstance(u, str) or not u or "/" in u or "\x00" in u:
            raise ManifestError(f"units_planned[{i}]: {_short(u)} is not a unit id")
    if len(set(planned)) != len(planned):
        dup = next(u for i, u in enumerate(planned) if u in planned[:i])
        raise ManifestError(f"units_planned: {_short(dup)} twice")
    prefix = key[: -len(NAME)]
    objects, units, keys = [], set(), set()
    for i, o in enumerate(_list(body, "objects")):
        where = f"objects[{i}]."
        if not isinstance(o, dict):
            raise ManifestError(f"objects[{i}]: {_short(o)} is not an object")
        unit = _str(o, "unit", where)
        okey = _str(o, "key", where)
        if not okey.startswith(prefix) or not okey.endswith(RECORD_SUFFIXES) or "/" in okey[len(prefix):]:
            raise ManifestError(f"{where}key: {_short(okey)} is not a unit file of this run ({prefix}<unit>.jsonl.gz)")
        sha = _str(o, "sha256", where)
        if not _HEX64.fullmatch(sha):
            raise ManifestError(f"{where}sha256: {_short(sha)} is not 64 lowercase hex digits")
        n_bytes, records = _count(o, "bytes", where), _count(o, "records", where)
        if unit in units:
            raise ManifestError(f"{where}unit: {_short(unit)} twice")
        if okey in keys:
            raise ManifestError(f"{where}key: {_short(okey)} twice")
        units.add(unit)
        keys.add(okey)
        objects.append(ManifestObject(unit, okey, sha, n_bytes, records))
    for i, a in enumerate(_list(body, "artifacts")):
        if not isinstance(a, dict):
            raise ManifestError(f"artifacts[{i}]: {_short(a)} is not an object")
        for field in ("path", "key", "sha256"):
            _str(a, field, f"artifacts[{i}].")
        if not _HEX64.fullmatch(a["sha256"]):
            raise ManifestError(f"artifacts[{i}].sha256: {_short(a['sha256'])} is not 64 lowercase hex digits")
    if "complete" not in body:
        raise ManifestError("complete: missing")
    if not isinstance(body["complete"], dict):
        raise ManifestError(f"complete: {_short(body['complete'])} is not an object")
    return Manifest(run[0], run[1], run[2], region, instance_id, tuple(planned), tuple(objects), body)
