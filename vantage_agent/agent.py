"""The vantage agent: runs planner units and writes their records to the spool.

``python -m vantage_agent.agent --spool DIR`` reads one JSON request per line on stdin
(``{"unit": {...}, "kind": "module:KIND", "ctx": {...}}``), runs the unit with its kind, writes
the unit's records atomically as ``<spool>/<campaign>/<run>/<unit>.jsonl`` and answers one
JSON line per unit on stdout (``{"unit": id, "file": path, "n": N, "statuses": {...}}``).
The runner starts it inside the vantage's network namespace (``ip netns exec``) on the
testbed, or directly on a real vantage. It never imports dnscamp/ (the layering rule).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

from vantage_agent import errors
from vantage_agent.kind import RunContext, Unit, make_record, utcnow
from vantage_agent.spool import SpoolWriter


def load_kind(ref: str) -> Any:
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


def run_unit(kind: Any, unit: Unit, ctx: RunContext, spool: SpoolWriter) -> dict[str, Any]:
    """Run one unit to completion; whatever happens, the unit ends with at least one record."""
    started = utcnow()
    try:
        records = list(kind.run(unit, ctx))
        if not records:
            raise errors.Other(f"kind {unit.kind!r} produced no record for target {unit.target!r}")
    except errors.MeasurementError as exc:
        records = [_failure(unit, started, exc.status, exc.message)]
    except Exception as exc:  # noqa: BLE001 - a bug in a kind is still a record, with its trace
        tb = traceback.format_exc(limit=3).strip().splitlines()[-1]
        records = [_failure(unit, started, "other", f"{type(exc).__name__}: {exc} ({tb})")]
    path = spool.write(records, name=unit.id)
    return {"unit": unit.id, "file": str(path), "n": len(records), "statuses": dict(Counter(r.status for r in records))}


def _failure(unit: Unit, started, status: str, message: str):
    return make_record(unit, started_at=started, body={}, status=status, error=message)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="vantage_agent.agent")
    ap.add_argument("--spool", required=True, type=Path)
    args = ap.parse_args(argv)
    spool = SpoolWriter(args.spool)
    kinds: dict[str, Any] = {}
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        unit = Unit.from_dict(req["unit"])
        c = req.get("ctx", {})
        ctx = RunContext(
            spool_dir=args.spool,
            artifacts_dir=Path(c.get("artifacts_dir") or args.spool / unit.campaign / unit.run / "artifacts"),
            testbed=c.get("testbed"),
            namespace=c.get("namespace"),
            extra=c.get("extra", {}),
        )
        ref = req["kind"]
        if ref not in kinds:
            kinds[ref] = load_kind(ref)
        reply = run_unit(kinds[ref], unit, ctx, spool)
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
