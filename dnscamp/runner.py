"""The campaign runner: executes a plan's units through the kind registry.

- Units of "client" kinds run in a vantage agent subprocess (``python -m
  vantage_agent.agent``), inside the vantage's client namespace on the testbed
  (``ip netns exec dc-client-<profile>``); "host" kinds run in this process.
- Every unit's records land in the spool as one atomically written file named by the unit
  id, so an interrupted run resumes without redoing or losing finished units: a unit whose
  file exists is done.
- Units run one at a time, strictly in plan order (the seeded shuffle interleaves access
  profiles and kinds). Each client namespace has one agent, started on its first unit and
  kept until the run ends, so several may be alive at once; ``executed.ndjson`` in the run
  directory records each unit as it starts (id, plan order, start time, where).
- A crashed agent is a record too (status ``other``, with its exit code and stderr tail) and
  the run goes on with a fresh agent.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from dnscamp import kinds as registry
from dnscamp.planner import MAX_UNITS, Plan, plan as make_plan
from dnscamp.spec import CampaignSpec
from testbed import plan as tb_plan
from vantage_agent.agent import run_unit
from vantage_agent.kind import RunContext, Unit, make_record, utcnow
from vantage_agent.records import Vantage
from vantage_agent.spool import SpoolWriter, write_atomic

RUNNABLE_PROVIDERS = ("local", "testbed")
EXECUTED = "executed.ndjson"  # the start order of the units, in the run dir
PLANNED = "planned.json"  # the unit ids of the run that this machine runs (its manifest's units_planned)


@dataclass
class RunSummary:
    campaign: str
    run: str
    seed: int
    run_dir: Path
    units_total: int
    units_skipped: int = 0  # already done (resume)
    units_run: int = 0
    records: int = 0
    statuses: Counter = field(default_factory=Counter)
    resumed: bool = False

    def as_json(self) -> dict[str, Any]:
        return {
            "campaign": self.campaign, "run": self.run, "seed": self.seed, "run_dir": str(self.run_dir),
            "units_total": self.units_total, "units_skipped": self.units_skipped, "units_run": self.units_run,
            "records": self.records, "statuses": dict(self.statuses), "resumed": self.resumed,
        }  # fmt: skip


def new_run_id() -> str:
    """UTC time of the run; on a fleet instance also its region and a random tag, because every
    instance of a vantage ships under the same prefix (results/<campaign>/<vantage>/<run>/...) and
    two of them firing in the same second must not write the same object key."""
    t = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    me = fleet_identity()
    return t if me is None else f"{t}-{me[1] or 'any'}-{secrets.token_hex(3)}"


def fleet_identity() -> tuple[str, str | None] | None:
    """(vantage id, region) on a fleet instance: its user data writes DNSCAMP_VANTAGE and
    DNSCAMP_REGION (/etc/dnscamp/vantage.env, docs/fleet.md); None elsewhere."""
    vid = os.environ.get("DNSCAMP_VANTAGE")
    return (vid, os.environ.get("DNSCAMP_REGION") or None) if vid else None


def runs_here(v: Vantage) -> bool:
    """Whether this machine runs a vantage's units: on a fleet instance exactly its own vantage
    (whatever the provider, never the testbed); elsewhere the local and testbed vantages."""
    me = fleet_identity()
    if me is None:
        return v.provider in RUNNABLE_PROVIDERS
    return v.id == me[0] and v.provider != "testbed"


def as_run_here(u: Unit) -> Unit:
    """The unit as this machine runs it: a fleet instance records its own region (a vantage of
    several regions is planned once, with region None)."""
    me = fleet_identity()
    if me is None or me[1] is None or u.vantage.region == me[1]:
        return u
    return replace(u, vantage=u.vantage.model_copy(update={"region": me[1]}))


def find_resumable(spool_dir: Path, spec: CampaignSpec) -> str | None:
    """The latest unfinished run of this campaign made from the same spec text."""
    base = spool_dir / spec.campaign.name
    if not base.is_dir():
        return None
    for d in sorted((p for p in base.iterdir() if p.is_dir()), reverse=True):
        meta = d / "plan.json"
        if meta.exists() and not (d / "complete.json").exists():
            try:
                if json.loads(meta.read_text()).get("spec_sha256") == spec.sha256:
                    return d.name
            except (OSError, json.JSONDecodeError):
                continue
    return None


def _agent_argv(spool_dir: Path, namespace: str | None) -> list[str]:
    argv = [sys.executable, "-m", "vantage_agent.agent", "--spool", str(spool_dir)]
    if namespace:
        argv = ["ip", "netns", "exec", namespace, *argv]
    return argv


class _Agent:
    """One agent subprocess for one network namespace (None: this host's), alive for the run."""

    def __init__(self, spool_dir: Path, run_dir: Path, namespace: str | None):
        env = dict(os.environ, DNSCAMP_NETNS=namespace or "", PYTHONUNBUFFERED="1")
        self.errlog = open(run_dir / f".agent-{os.getpid()}-{namespace or 'local'}.stderr", "w+")
        self.proc = subprocess.Popen(
            _agent_argv(spool_dir, namespace), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.errlog, text=True, env=env, cwd=str(Path(__file__).resolve().parent.parent),
        )  # fmt: skip

    def run(self, request: dict[str, Any]) -> dict[str, Any] | None:
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except (BrokenPipeError, OSError):
            line = ""
        return json.loads(line) if line else None

    def failure_text(self) -> str:
        try:
            rc = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.errlog.seek(0)
        tail = " | ".join(self.errlog.read().strip().splitlines()[-3:])
        return f"vantage agent exited with code {rc}: {tail or 'no stderr'}"

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        name = self.errlog.name
        self.errlog.close()
        try:
            if os.path.getsize(name) == 0:
                os.unlink(name)
        except OSError:
            pass


def namespace_for(unit: Unit) -> str | None:
    return _namespace(unit.vantage)


def _namespace(vantage: Vantage) -> str | None:
    if vantage.provider == "testbed" and vantage.network_profile:
        return tb_plan.CLIENT_NS.format(profile=vantage.network_profile)
    return None


def _write_plan_json(path: Path, meta: dict[str, Any], order: Iterator[str]) -> None:
    """plan.json (meta + the unit ids in execution order), streamed: one id at a time, not
    a list of a million strings; atomic like every spool file (temp file, fsync, rename)."""
    head = json.dumps(meta, indent=1)[:-2]  # without the closing "\n}"
    _write_streamed(path, head + ',\n "order": ', order, indent="  ", close="\n}")


def write_planned(path: Path, ids: Iterator[str]) -> None:
    """planned.json, ``{"units": [...]}``: the unit ids of the run that this machine runs (the
    run's manifest names them as planned), streamed and atomic like plan.json."""
    _write_streamed(path, '{"units": ', ids, indent=" ", close="}\n")


def _write_streamed(path: Path, head: str, items: Iterator[str], *, indent: str, close: str) -> None:
    """``head``, the JSON list of ``items`` one per line, ``close``: streamed (a plan may hold a
    million unit ids) into a temp file, fsynced and renamed over ``path``."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(head + "[")
            first = sep = "\n" + indent
            for uid in items:
                f.write(sep + json.dumps(uid))
                sep = ",\n" + indent
            f.write(("]" if sep == first else "\n" + indent[:-1] + "]") + close)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def run(
    spec: CampaignSpec,
    *,
    spool_dir: Path,
    run_id: str | None = None,
    show_progress: bool = True,
    testbed_info: Callable[[], dict[str, Any] | None] | None = None,
    on_unit: Callable[[Unit, dict[str, Any]], None] | None = None,
    max_units: int | None = MAX_UNITS,
) -> RunSummary:
    """Run (or resume) a campaign. ``testbed_info`` returns the testbed description when the
    spec has testbed vantages (the caller brings the testbed up). Raises SpecError when the
    plan has more than ``max_units`` units."""
    resumed = False
    if run_id is None:
        run_id = find_resumable(spool_dir, spec)
        resumed = run_id is not None
    run_id = run_id or new_run_id()
    the_plan: Plan = make_plan(spec, run_id, max_units=max_units)
    run_dir = spool_dir / spec.campaign.name / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    if not (run_dir / "plan.json").exists():
        meta = {
            "campaign": spec.campaign.name, "run": run_id, "seed": the_plan.seed,
            "spec_source": spec.source, "spec_sha256": spec.sha256,
            "created": datetime.now(timezone.utc).isoformat(),
        }  # fmt: skip
        _write_plan_json(run_dir / "plan.json", meta, the_plan.ids())
    else:
        resumed = True
    if not (run_dir / PLANNED).exists():  # also for a run resumed from before planned.json
        here = {i for i, b in enumerate(the_plan.blocks) if runs_here(b.vantage)}
        write_planned(run_dir / PLANNED, (uid for b, uid in the_plan.cells(shuffled=True) if b in here))
    summary = RunSummary(spec.campaign.name, run_id, the_plan.seed, run_dir, the_plan.size, resumed=resumed)
    spool = SpoolWriter(spool_dir)
    # Done units: a unit's spool file (<run_dir>/<unit id>.jsonl) exists. Counted per block of
    # the matrix, so that the units themselves are only built as they are run.
    done = {e.name[: -len(".jsonl")] for e in os.scandir(run_dir) if e.name.endswith(".jsonl")}
    pending: Counter = Counter(b for b, uid in the_plan.cells() if uid not in done)
    summary.units_skipped = the_plan.size - sum(pending.values())
    blocks = the_plan.blocks
    todo = {b for b in pending if runs_here(blocks[b].vantage)}
    skipped_providers = sorted({blocks[b].vantage.provider for b in pending if b not in todo})
    if skipped_providers:
        sys.stderr.write(
            f"dnscamp: units of providers {', '.join(skipped_providers)} run on their own vantage agents "
            "(`dnscamp fleet apply SPEC` creates them, docs/fleet.md), not here; skipped\n"
        )
    tb = testbed_info() if testbed_info and any(blocks[b].vantage.provider == "testbed" for b in todo) else None
    if tb is None and os.environ.get("DNSCAMP_TESTBED_INFO"):
        # a machine that sits in a testbed without being one of its vantages (an instance of
        # `dnscamp fleet rehearse`) is told so by the description it is given: its units may
        # then use the testbed's resolvers and CA, as a testbed vantage's do
        try:
            tb = json.loads(Path(os.environ["DNSCAMP_TESTBED_INFO"]).read_text())
        except (OSError, ValueError) as exc:  # its units then fail as records (unknown resolver)
            sys.stderr.write(f"dnscamp: DNSCAMP_TESTBED_INFO={os.environ['DNSCAMP_TESTBED_INFO']}: unreadable "
                             f"testbed description ({type(exc).__name__}); running without it\n")

    # Units run strictly in plan order, one at a time: interleaving conditions (fiber, 4G, ...)
    # is the point of the shuffle, so that time-of-day and cache effects do not correlate with
    # them. Each client namespace keeps one agent, started on its first unit and kept for the
    # rest of the run (so several are alive at once); host kinds run here in their turn.
    where = {blocks[b].kind: registry.get(blocks[b].kind).where for b in todo}
    agents: dict[str | None, _Agent] = {}
    progress = Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        TextColumn("{task.fields[statuses]}"), disable=not show_progress, transient=False,
    )  # fmt: skip
    # executed.ndjson: one line per unit as it starts (unit id, plan order, start time, where),
    # appended across resumes; not *.jsonl, which the ingest would read as records.
    with progress, open(run_dir / EXECUTED, "a") as executed:
        task = progress.add_task(f"{spec.campaign.name}/{run_id}", total=sum(pending[b] for b in todo), statuses="")
        try:
            for u in the_plan.units(blocks=todo):
                if u.id in done:
                    continue
                u = as_run_here(u)
                ns = _namespace(u.vantage) if where[u.kind] == "client" else None
                executed.write(json.dumps({
                    "unit": u.id, "order": u.order, "started": utcnow().isoformat(),
                    "where": where[u.kind], "namespace": ns,
                }) + "\n")  # fmt: skip
                executed.flush()  # a killed run keeps the lines of the units it started
                if where[u.kind] != "client":
                    ctx = RunContext(spool_dir=spool_dir, artifacts_dir=run_dir / "artifacts", testbed=tb)
                    reply = run_unit(registry.get(u.kind), u, ctx, spool)
                else:
                    if ns not in agents:
                        agents[ns] = _Agent(spool_dir, run_dir, ns)
                    ctx_d = {"testbed": tb, "namespace": ns, "artifacts_dir": str(run_dir / "artifacts")}
                    reply = agents[ns].run({"unit": u.to_dict(), "kind": registry.KINDS[u.kind], "ctx": ctx_d})
                    if reply is None:  # the agent died: the unit is a record; the next unit gets a new agent
                        agent = agents.pop(ns)
                        rec = make_record(u, started_at=utcnow(), body={}, status="other", error=agent.failure_text())
                        path = spool.write([rec], name=u.id)
                        reply = {"unit": u.id, "file": str(path), "n": 1, "statuses": {"other": 1}}
                        agent.close()
                summary.units_run += 1
                summary.records += reply["n"]
                summary.statuses.update(reply["statuses"])
                if on_unit:
                    on_unit(u, reply)
                progress.update(
                    task, advance=1, statuses=" ".join(f"{k}={v}" for k, v in sorted(summary.statuses.items()))
                )
        finally:
            for agent in agents.values():
                agent.close()
    write_atomic(run_dir / "complete.json", json.dumps(summary.as_json(), indent=1).encode())
    return summary
