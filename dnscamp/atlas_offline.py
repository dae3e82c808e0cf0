"""The offline Atlas run's measurement: the testbed's Atlas-like probes → RIPE Atlas JSON files
and their bundle (atlas/bundle.py), checked against the probes' ground truth; and the ``atlas``
kind, one such run as a campaign unit. Nothing here reaches the store.

The probes (testbed/atlas_probes) run phase 1 (DNS through each probe's resolver); discovery
(atlas.discovery) reads our authoritative server's query log and the whoami answers; the probes
run phase 2 (the three ping sets). ``measure`` leaves in its run directory the two result files
and the bundle's sidecar (the measurements' roles, the discovery, the probes' places), which
collectors/atlas_bundle.py stores: the campaign's ingest step does it for the kind's units,
dnscamp/atlas_run.py right after the measurement. ``report`` compares RTTs with the configured
link delays: the RTTs of the result files themselves (atlas.quicsocks.rtts_of_pings, what
v_quicsocks_savings gives once they are stored) or those read back from the store.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from pydantic import BaseModel, ConfigDict, Field

from atlas import bundle as atlas_bundle
from atlas.discovery import AsnDb, Discovered, discover, from_query_log, from_whoami, random_label
from atlas.dns import parse as parse_dns
from atlas.ping import PingRow
from atlas.probes import ProbeMeta, parse_probe
from atlas.quicsocks import ProbeRtts, format_summary, rtts_of_pings, summarize
from testbed.atlas_probes.island import SERVER_ADDR, SERVER_ZONE, Island, ProbeTruth, plan_probes
from testbed.atlas_probes.measure import PING_COUNT, dns_phase, ping_phase, write_results
from testbed.atlas_probes.sites import probe_objects
from vantage_agent.stats import median


def _errors(pairs: list[tuple[float, float]]) -> dict[str, float | None]:
    errs = [abs(m - t) for m, t in pairs]
    if not errs:
        return {"median": None, "max": None, "mean_signed": None, "n": 0}
    return {"median": round(median(errs), 3), "max": round(max(errs), 3),
            "mean_signed": round(statistics.fmean(m - t for m, t in pairs), 3), "n": len(errs)}


def atlas_like_probe_meta(prb_ids: Iterable[int]) -> list[ProbeMeta]:
    """The Atlas-like probes' places (source ``testbed``), read from the probe API objects they
    describe themselves with, as the API's are."""
    return [parse_probe(o, source="testbed") for o in probe_objects(prb_ids)]


@dataclass(frozen=True)
class OfflineRun:
    """What one measurement left and knows: its files (``bundle``: the sidecar) and the ground truth."""

    campaign: str
    n_probes: int
    seed: int
    probes: list[ProbeTruth]
    found: list[Discovered]
    whoami: dict[int, str]
    bundle: Path
    link_backend: str | None
    link_lateness_ms: Any
    run_dir: Path
    t_start: float  # time.monotonic() when it began

    def file_rtts(self) -> list[ProbeRtts]:
        """The probes' RTTs from the result files, as v_quicsocks_savings gives them once stored."""
        b = atlas_bundle.read(self.bundle)
        pings = [r for r in atlas_bundle.rows(atlas_bundle.result_paths(self.bundle, b)) if isinstance(r, PingRow)]
        return rtts_of_pings(pings, {m.msm_id: m.role for m in b.measurements}, b.discovery)

    def written(self) -> dict[str, Any]:
        """The Atlas results the run wrote (for the ingest that stores them), by type."""
        b = atlas_bundle.read(self.bundle)
        by_type: dict[str, int] = {"ping": 0, "dns": 0}
        for f in atlas_bundle.result_paths(self.bundle, b):
            for line in f.read_text().split("\n"):
                if line.strip():
                    t = json.loads(line)["type"]
                    by_type[t] = by_type.get(t, 0) + 1
        return {"written": sum(by_type.values()), "by_type": by_type}


def measure(*, n_probes: int, campaign: str, seed: int, keep: bool = False, run_dir: Path | None = None,
            probes: list[ProbeTruth] | None = None) -> OfflineRun:
    """Build the probes, run both phases and discovery, and leave the result files and the
    bundle in ``run_dir``. ``probes``: the probe population to build (default
    plan_probes(n_probes, seed)), e.g. one with the RTTs of a paper's table."""
    from vantage_agent.paths import testbed_dir

    t_start = time.monotonic()
    probes = probes if probes is not None else plan_probes(n_probes, seed)
    run_dir = Path(run_dir or testbed_dir() / "atlas" / f"{campaign}-{int(time.time())}")
    base = 900_000_000 + (int(time.time()) % 10_000_000) * 10
    msm = {"resolver_dns": base + 1, "probe_server": base + 2, "probe_resolver": base + 3, "server_resolver": base + 4}
    label = random_label()
    island = Island(probes, run_dir)
    try:
        island.up()
        dns_results = dns_phase(island, msm, label)
        dns_file = write_results(run_dir / "results-dns.jsonl", dns_results)
        # discovery: our authoritative server's query log (primary) and the whoami answers
        time.sleep(0.05)
        log_entries = from_query_log(island.query_log.read_text().splitlines(), SERVER_ZONE)
        whoami = from_whoami([row for r in dns_results for row in parse_dns(r)])
        asn = AsnDb(island.asn_db_path)
        found = discover(
            {p.prb_id: p.probe_addr for p in probes}, log_entries=log_entries, whoami=whoami,
            configured={p.prb_id: p.resolver for p in probes}, asn_db=asn)
        discovered = {d.prb_id: d.resolver for d in found}
        pings = ping_phase(island, msm, discovered)
        ping_file = write_results(run_dir / "results-ping.jsonl", pings)
        backend = island.link_backend()
        time.sleep(0.3)  # let the emulators write their stats
        lateness = island.lateness_ms()
    finally:
        if not keep:
            island.down()
    definition = {"offline": True, "packets": PING_COUNT, "label": label}
    sidecar = atlas_bundle.write(run_dir, atlas_bundle.Bundle(
        campaign=campaign, created=datetime.now(timezone.utc).isoformat(timespec="microseconds"),
        measurements=tuple(atlas_bundle.Measurement(mid, role, SERVER_ADDR if role == "probe_server" else None,
                                                    definition) for role, mid in msm.items()),
        discovery=tuple(found),
        # the probes' documented sites (testbed/atlas_probes/sites.json): the QuicSocks geomap's places
        probes=tuple(atlas_like_probe_meta(p.prb_id for p in probes)),
        result_files=(dns_file.name, ping_file.name)))
    return OfflineRun(campaign, n_probes, seed, list(probes), list(found), whoami, sidecar, backend, lateness, run_dir, t_start)


def report(run: OfflineRun, rtts: Iterable[ProbeRtts], ingest: dict[str, Any]) -> dict[str, Any]:
    """The run's report (summary, discovery check, RTT errors against the configured delays) for
    the probes' RTTs ``rtts`` (OfflineRun.file_rtts, or atlas_store.probe_rtts of the stored run);
    ``ingest``: the counts to report (of the store's ingest, or OfflineRun.written)."""
    rtts = {r.prb_id: r for r in rtts}
    truth = {p.prb_id: p for p in run.probes}
    n_probes = run.n_probes
    discovered = {d.prb_id: d.resolver for d in run.found}
    wrong = [p.prb_id for p in run.probes if discovered.get(p.prb_id) != p.egress]
    pairs: dict[str, list[tuple[float, float]]] = {"rtt_dns": [], "rtt_server": [], "rtt_direct": []}
    per_probe = []
    for prb, t in truth.items():
        m = rtts.get(prb)
        row = {**asdict(t), "rtt_direct": t.rtt_direct, "measured": None}
        if m and m.complete:
            row["measured"] = {"rtt_dns": round(m.rtt_dns, 3), "rtt_server": round(m.rtt_server, 3),
                               "rtt_direct": round(m.rtt_direct, 3), "isp_resolver": m.isp_resolver}
            pairs["rtt_dns"].append((m.rtt_dns, t.rtt_dns))
            pairs["rtt_server"].append((m.rtt_server, t.rtt_server))
            pairs["rtt_direct"].append((m.rtt_direct, t.rtt_direct))
        per_probe.append(row)
    errs = {k: _errors(v) for k, v in pairs.items()}
    summary = summarize(list(rtts.values()))
    isp_ok = all((not truth[p].public_as) == rtts[p].isp_resolver for p in rtts if p in truth)
    complete = all(r["measured"] for r in per_probe)
    ok = (not wrong and complete and isp_ok
          and all(e["median"] is not None and e["median"] <= 0.5 for e in errs.values()))
    return {
        "ok": ok,
        "campaign": run.campaign,
        "probes": n_probes,
        "seed": run.seed,
        "link_backend": run.link_backend,
        "discovery": {"correct": n_probes - len(wrong), "wrong": wrong,
                      "methods": sorted({d.method for d in run.found}),
                      "whoami_agrees": sum(1 for p, a in run.whoami.items() if discovered.get(p) == a)},
        "isp_filter_correct": isp_ok,
        "ingest": ingest,
        "errors_ms": errs,
        "link_lateness_ms": run.link_lateness_ms,
        "summary": {k: v for k, v in summary.items() if k != "cdf"},
        "per_probe": per_probe,
        "run_dir": str(run.run_dir),
        "duration_s": round(time.monotonic() - run.t_start, 1),
    }


def format_report(r: dict[str, Any]) -> str:
    e = r["errors_ms"]
    lines = [
        f"offline Atlas run: {r['probes']} probes, link backend {r['link_backend']}, {r['duration_s']} s",
        f"discovery: {r['discovery']['correct']}/{r['probes']} resolvers right "
        f"(methods {', '.join(r['discovery']['methods'])}); ISP filter {'right' if r['isp_filter_correct'] else 'WRONG'}",
        "RTT error vs configured delays (median / max ms): "
        + ", ".join(f"{k} {v['median']} / {v['max']}" for k, v in e.items()),
        f"link emulator lateness (ms): {json.dumps(r.get('link_lateness_ms'))}",
        f"ingest: {json.dumps(r['ingest'])}",
        "QuicSocks summary (ISP resolvers):",
        format_summary({**r["summary"], "cdf": {}}),
        "result: " + ("OK" if r["ok"] else "FAILED (see --json)"),
    ]
    return "\n".join(lines)


# -- the atlas kind ---------------------------------------------------------------------------------
class AtlasParams(BaseModel):
    """``[kinds.atlas]`` of a campaign spec."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    probes: int = Field(20, ge=1, le=99, description="Atlas-like probes on the testbed.")
    seed: int = Field(1, description="Seed of the probes' link delays.")


def _empty(unit, params: AtlasParams | None) -> dict:
    return {"atlas_campaign": f"{unit.campaign}/{unit.run}", "probes": params.probes if params else 0,
            "seed": params.seed if params else 0, "link_backend": None, "discovery_correct": 0,
            "discovery_wrong": [], "isp_filter_correct": False, "errors_ms": {}, "summary": {},
            "ingest": {}, "passed": False, "duration_s": 0.0}


class _AtlasKind:
    name = "atlas"
    params_model = AtlasParams
    where = "host"  # builds and removes its own probe namespaces
    per_profile = False  # its probes have their own access links: once per vantage, not per profile

    def targets(self, params: BaseModel) -> list[str]:
        return ["offline"]

    def run(self, unit, ctx) -> Iterable:
        from vantage_agent import errors
        from vantage_agent.kind import make_record, utcnow
        from vantage_agent.records.atlas import AtlasRunBody

        started = utcnow()
        params = None
        try:
            params = AtlasParams.model_validate(unit.params or {})
            if os.geteuid() != 0:
                raise errors.SetupError("the offline Atlas run needs root (network namespaces)")
            campaign = f"{unit.campaign}/{unit.run}"
            # the run's artifacts: the campaign's ingest step stores the bundle from there
            run = measure(n_probes=params.probes, campaign=campaign, seed=params.seed + unit.repetition,
                          run_dir=ctx.artifacts_dir / f"atlas-{unit.id}" if ctx and ctx.artifacts_dir else None)
            r = report(run, run.file_rtts(), run.written())
            body = AtlasRunBody(
                atlas_campaign=campaign, probes=r["probes"], seed=r["seed"], link_backend=r["link_backend"],
                discovery_correct=r["discovery"]["correct"], discovery_wrong=r["discovery"]["wrong"],
                isp_filter_correct=r["isp_filter_correct"], errors_ms=r["errors_ms"], summary=r["summary"],
                ingest=r["ingest"], passed=r["ok"], duration_s=r["duration_s"],
            )
            yield make_record(unit, started_at=started, body=body, env={"link_backend": r["link_backend"]})
        except errors.MeasurementError as exc:
            yield make_record(unit, started_at=started, body=_empty(unit, params), status=exc.status, error=exc.message)
        except Exception as exc:  # never escape: a record with a status
            yield make_record(unit, started_at=started, body=_empty(unit, params), status=errors.Other.status,
                              error=f"{type(exc).__name__}: {exc}"[:500])


KIND = _AtlasKind()
