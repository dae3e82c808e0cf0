"""An Atlas run kept as files: its result files (RIPE Atlas JSON, one result a line) and a sidecar,
``atlas-bundle.json``, with what the store needs beside them: each measurement's role, target
and definition (atlas_measurements), the discovery (``atlas.discovery.Discovered``:
atlas_discovery) and the probes' places (``atlas.probes.ProbeMeta``: atlas_probes).

A run that does not reach the store writes one (the ``atlas`` campaign kind, in its unit's
artifacts directory); collectors/atlas_bundle.py stores it. The sidecar holds the dataclasses'
own fields, nothing else; the result files beside it are read as any Atlas results are.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # sagan and cousteau load when a bundle is read, not when an ingest looks for one
    from atlas.discovery import Discovered
    from atlas.probes import ProbeMeta

SCHEMA = "dnscamp.atlas_bundle/1"
NAME = "atlas-bundle.json"


class BundleError(ValueError):
    """A sidecar that cannot be read as a bundle (the message names the file and what is wrong)."""


@dataclass(frozen=True)
class Measurement:
    """One measurement of the run: what its msm_id is for (collectors.atlas_store.ROLES)."""

    msm_id: int
    role: str
    target: str | None = None
    definition: dict[str, Any] | None = None


@dataclass(frozen=True)
class Bundle:
    campaign: str
    created: str  # UTC, RFC 3339: bundles of one campaign are stored oldest first (the latest discovery wins)
    measurements: tuple[Measurement, ...]
    discovery: tuple[Discovered, ...]
    probes: tuple[ProbeMeta, ...]
    result_files: tuple[str, ...]  # names of the result files, beside the sidecar

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "campaign": self.campaign, "created": self.created,
                "measurements": [asdict(m) for m in self.measurements],
                "discovery": [asdict(d) for d in self.discovery],
                "probes": [asdict(p) for p in self.probes],
                "result_files": list(self.result_files)}

    @classmethod
    def from_json(cls, d: Any) -> Bundle:
        if not isinstance(d, dict):
            raise BundleError("not a JSON object")
        if d.get("schema") != SCHEMA:
            raise BundleError(f"schema {d.get('schema')!r} (this version reads {SCHEMA!r})")
        from atlas.discovery import Discovered
        from atlas.probes import ProbeMeta

        try:
            return cls(campaign=str(d["campaign"]), created=str(d["created"]),
                       measurements=tuple(_of(Measurement, x) for x in d["measurements"]),
                       discovery=tuple(_of(Discovered, x) for x in d["discovery"]),
                       probes=tuple(_of(ProbeMeta, x) for x in d["probes"]),
                       result_files=tuple(_file_name(x) for x in d["result_files"]))
        except (KeyError, TypeError) as exc:
            raise BundleError(f"missing or malformed field ({type(exc).__name__}: {exc})") from None


def _of(cls: type, d: Any) -> Any:
    """cls from exactly its fields (an unknown or a missing one is an error, not a guess)."""
    names = {f.name for f in fields(cls)}
    if not isinstance(d, dict) or not set(d) <= names:
        raise TypeError(f"{cls.__name__}: fields {sorted(d) if isinstance(d, dict) else d!r}")
    return cls(**d)


def _file_name(x: Any) -> str:
    """A result file is named beside the sidecar: a plain name, never a path elsewhere."""
    if not isinstance(x, str) or not x or x != Path(x).name or x in (".", ".."):
        raise TypeError(f"result file {x!r}: not a file name")
    return x


def write(directory: Path, bundle: Bundle) -> Path:
    """The sidecar in ``directory`` (written whole or not at all); its path."""
    path = Path(directory) / NAME
    tmp = path.with_name(f".{NAME}.tmp")
    tmp.write_text(json.dumps(bundle.to_json(), indent=1) + "\n")
    os.replace(tmp, path)
    return path


def read(path: Path) -> Bundle:
    try:
        return Bundle.from_json(json.loads(Path(path).read_text()))
    except (OSError, json.JSONDecodeError, BundleError) as exc:
        raise BundleError(f"{path}: {exc}") from None


def result_paths(path: Path, bundle: Bundle) -> list[Path]:
    """The bundle's result files (``path``: its sidecar)."""
    return [Path(path).parent / name for name in bundle.result_files]


def rows(files: list[Path]) -> list:
    """The typed rows (atlas.ping.PingRow, atlas.dns.DnsRow) of the results in ``files``, in
    file order. These are files a run wrote itself: a line that is no Atlas result raises
    (atlas.result.NotAnAtlasResult), where an ingest of foreign files would quarantine it."""
    from atlas import measurement_types
    from atlas import result as atlas_result

    out: list = []
    for f in files:
        for line in Path(f).read_text().split("\n"):
            if line.strip():
                out.extend(measurement_types.parse(atlas_result.load(json.loads(line))))
    return out
