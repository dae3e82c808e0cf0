"""Is a campaign complete? Per vantage and run, what the run's manifest says was planned and
shipped against what the collector took (``v_run_completeness``, migration 0027): units
planned, collected, missing and quarantined, the missing objects by key, and the runs whose
manifest never arrived or could not be read. `dnscamp campaign completeness CAMPAIGN` prints
it; fleet tooling and the rehearsal call ``report``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

_COLUMNS = ("campaign", "vantage_id", "run", "bucket", "manifest", "manifest_error", "region", "instance_id",
            "units_planned", "units_collected", "units_missing", "units_quarantined", "missing_units",
            "missing_objects")  # fmt: skip


@dataclass
class RunCompleteness:
    campaign: str
    vantage: str
    run: str
    bucket: str
    manifest: bool  # shipped and read
    manifest_error: str | None  # a corrupt manifest's one line
    region: str | None
    instance_id: str | None
    units_planned: int | None  # None without a readable manifest
    units_collected: int
    units_missing: int
    units_quarantined: int
    missing_units: list[str] = field(default_factory=list)
    missing_objects: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return self.manifest and self.units_missing == 0

    def problems(self) -> list[str]:
        """One line per thing that keeps this run from being complete (none: complete)."""
        where = f"{self.vantage}/{self.run}"
        if self.manifest_error:
            return [f"{where}: {self.manifest_error} ({self.units_collected} units' records collected)"]
        if not self.manifest:
            return [f"{where}: no manifest (never shipped, or not collected yet); "
                    f"{self.units_collected} units' records collected"]  # fmt: skip
        out = []
        for u in self.missing_units:  # the agent ships unit U as <run prefix>/U.jsonl.gz
            key = next((k for k in self.missing_objects if k.rsplit("/", 1)[-1] in (f"{u}.jsonl.gz", f"{u}.jsonl")), None)
            out.append(f"{where}: unit {u} missing: " + (f"s3://{self.bucket}/{key} not collected" if key
                                                          else "planned, not among the manifest's objects"))  # fmt: skip
        named = {ln.split("s3://", 1)[-1] for ln in out}
        out += [f"{where}: s3://{self.bucket}/{k} not collected" for k in self.missing_objects
                if f"{self.bucket}/{k} not collected" not in named]  # fmt: skip
        return out

    def as_json(self) -> dict[str, Any]:
        return asdict(self) | {"complete": self.complete}


class CompletenessError(Exception):
    """The store cannot answer (one line)."""


def report(url: str, campaign: str) -> list[RunCompleteness]:
    """Every run of ``campaign`` the store knows (from a manifest or a collected object), by
    vantage and run, read from ``v_run_completeness`` at libpq ``url`` (the reader suffices)."""
    import psycopg

    try:
        with psycopg.connect(url) as conn:
            rows = conn.execute(
                f"SELECT {', '.join(_COLUMNS)} FROM v_run_completeness WHERE campaign = %s "  # noqa: S608
                "ORDER BY vantage_id, run, bucket", (campaign,)).fetchall()  # fmt: skip
    except psycopg.errors.UndefinedTable:
        raise CompletenessError("the store has no v_run_completeness: run `dnscamp db migrate` as its owner") from None
    return [RunCompleteness(r[0], *r[1:12], list(r[12]), list(r[13])) for r in rows]


def summary(runs: list[RunCompleteness]) -> dict[str, Any]:
    planned = sum(r.units_planned or 0 for r in runs)
    collected_of_planned = sum(r.units_collected for r in runs if r.manifest)
    return {
        "runs": len(runs),
        "runs_complete": sum(r.complete for r in runs),
        "runs_without_manifest": sum(not r.manifest for r in runs),
        "units_planned": planned,
        "units_collected": sum(r.units_collected for r in runs),
        "units_missing": sum(r.units_missing for r in runs),
        "units_quarantined": sum(r.units_quarantined for r in runs),
        "collected_pct": round(100.0 * collected_of_planned / planned, 2) if planned else None,
    }
