"""The spool: JSONL result files written atomically, one file per planner unit (or batch).

A file appears under its final name only when complete (write to a temp file in the same
directory, fsync, rename), so a collector never reads half a file, and a killed run leaves
either the whole unit or nothing.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Iterable

from vantage_agent.records import Envelope


def write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def encode(records: Iterable[Envelope]) -> bytes:
    return b"".join(r.to_json().encode() + b"\n" for r in records)


class SpoolWriter:
    """Writes records under ``<spool>/<campaign>/<run>/``."""

    def __init__(self, spool_dir: Path):
        self.spool_dir = Path(spool_dir)

    def path_for(self, campaign: str, run: str, name: str) -> Path:
        return self.spool_dir / campaign / run / f"{name}.jsonl"

    def write(self, records: list[Envelope], name: str | None = None) -> Path | None:
        """Write ``records`` (all of one campaign/run) as one file; returns its path."""
        if not records:
            return None
        first = records[0]
        name = name or str(first.id)
        path = self.path_for(first.campaign, first.run, name)
        write_atomic(path, encode(records))
        return path
