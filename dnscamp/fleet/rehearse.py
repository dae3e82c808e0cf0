"""`dnscamp fleet rehearse SPEC`: a spec's cloud fleet rehearsed on the testbed.

Each (ec2 vantage, region) of the spec becomes an *instance*: a namespace of the testbed
(``dc-fleet-<tag>i<k>``) behind its own emulated link whose round trip is that region's RTT to
the spec's ``[fleet] home_region`` (dnscamp/fleet/region_rtt.toml, with its source), where the
testbed's resolvers, sites and results bucket stand. An instance is set up the way its user data
sets up an EC2 machine (infra/modules/vantage/user_data.yaml.tftpl): the same vantage.env (made
from the template's own lines), ``dnscamp link apply`` of its network profile, ``dnscamp schedule
install``, and then a real cron daemon (Debian's ``cron``) of its own fires the installed line.
The firings ship to an S3 server inside the island (moto in server mode, in
``dc-fleet-<tag>s3``), and ``dnscamp collect --watch`` on the host fills Postgres.

The host reaches the island's S3 server through socat: one socat in the S3 namespace serves a
Unix socket (a file: no interface, no route), one on the host serves it on 127.0.0.1 to the
collector. No testbed interface or route is added to the root namespace.

With faults (``fleet rehearse --faults``, :class:`Faults`) the rehearsal also does to the fleet
what a month on AWS will: the first instance's first firing is killed mid-run (SIGKILL, by PID:
the next firing resumes the run) and its jobs run with a clock two minutes ahead (libfaketime,
Debian's ``faketime``, preloaded by the instance's cron.d file); the last instance's spool is a
small tmpfs of its own, filled below the spec's disk floor after its first shipped run; and once
every instance shipped a run, the S3 server drops every packet for a while (an iptables rule in
its own namespace, removed after). The report then says what each fault did and how each one
showed in the instances' status objects, and the collected runs' completeness.

A cron daemon in a namespace: ``ip netns exec`` gives each process its own mount namespace
(slave of the root's, so nothing propagates back), in which the instance's cron.d directory is
bound over /etc/cron.d, an empty file over /etc/crontab and an empty directory over the user
crontabs (the machine's own jobs must not run once per instance), and a tmpfs over /run (each
daemon's crond.pid). Jobs inherit the daemon's network namespace: the installed line runs
exactly as cron would run it on the instance.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

RTT_TABLE = Path(__file__).with_name("region_rtt.toml")
TEMPLATE = Path(__file__).resolve().parents[2] / "infra" / "modules" / "vantage" / "user_data.yaml.tftpl"
S3_PORT = 9000
FIRING_SLACK_S = 30.0  # beyond a firing's own jitter + max_runtime: start-up, shipping
FAKETIME_LIB = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")  # Debian's faketime package
SPOOL_TMPFS_MIB = 64  # the disk-fill instance's spool: its own small filesystem


@dataclass(frozen=True)
class Faults:
    """What ``fleet rehearse --faults`` does to the rehearsed fleet (docs/pipeline.md)."""

    s3_outage_s: float = 40.0  # the S3 server unreachable for this long, once every instance shipped a run
    kill_firing: bool = True  # the first instance's first firing: SIGKILL mid-run
    clock_offset_s: float = 120.0  # the first instance's jobs run with their clock this far ahead
    disk_fill: bool = True  # the last instance's spool filled below [fleet] disk_floor_mib after its first run


class RehearsalError(RuntimeError):
    """The rehearsal cannot run (not root, no cron, no ec2 vantage...); one line."""


# --- the region RTT table --------------------------------------------------------------------


@dataclass(frozen=True)
class RttTable:
    source: str
    same_region_ms: float
    pairs: dict[frozenset, float]

    def rtt(self, a: str, b: str) -> float:
        if a == b:
            return self.same_region_ms
        try:
            return self.pairs[frozenset((a, b))]
        except KeyError:
            raise RehearsalError(f"{RTT_TABLE.name}: no round trip for {a} <-> {b} (add it, or pass --rtt {a}=MS)") from None


def load_rtt_table(path: Path = RTT_TABLE) -> RttTable:
    d = tomllib.loads(path.read_text())
    pairs = {}
    for k, v in d["rtt_ms"].items():
        a, _, b = k.partition("/")
        if not b or not isinstance(v, (int, float)) or not 0 <= v < 1000:
            raise RehearsalError(f"{path}: rtt_ms.{k!r}: want \"region-a/region-b\" = milliseconds")
        pairs[frozenset((a, b))] = float(v)
    return RttTable(d["source"], float(d["same_region_ms"]), pairs)


# --- the instances ---------------------------------------------------------------------------


@dataclass
class Instance:
    k: int
    vantage: str
    region: str
    profile: str | None
    rtt_ms: float  # region -> home region (the added link's round trip)
    ns: str = ""
    address: str = ""
    home: Path = Path()


def plan_instances(spec, table: RttTable, *, vantages: list[str] | None = None, regions: list[str] | None = None,
                   rtt_override: dict[str, float] | None = None) -> list[Instance]:  # fmt: skip
    """The (vantage, region) pairs of the spec's ec2 vantages to rehearse, in spec order."""
    if spec.fleet is None:
        raise RehearsalError(f"{spec.source}: no [fleet] section (home_region, results_bucket)")
    if spec.campaign.schedule is None:
        raise RehearsalError(f"{spec.source}: campaign.schedule: missing: the rehearsal fires the spec's schedule")
    ec2 = [v for v in spec.vantages if v.provider == "ec2"]
    for name, chosen, known in (("--vantages", vantages, {v.id for v in ec2}),
                                ("--regions", regions, {r for v in ec2 for r in v.all_regions})):
        unknown = sorted(set(chosen or ()) - known)
        if unknown:
            raise RehearsalError(f"{name}: {', '.join(unknown)} not among the spec's ec2 {name[2:]} ({', '.join(sorted(known))})")
    out: list[Instance] = []
    for v in ec2:
        if vantages and v.id not in vantages:
            continue
        for r in v.all_regions:
            if regions and r not in regions:
                continue
            rtt = (rtt_override or {}).get(r)
            rtt = table.rtt(r, spec.fleet.home_region) if rtt is None else rtt
            out.append(Instance(len(out) + 1, v.id, r, v.network_profiles[0], rtt))
    if not out:
        raise RehearsalError(f"{spec.source}: no ec2 vantage (in the chosen regions) to rehearse")
    if len(out) > 200:
        raise RehearsalError(f"{len(out)} instances: at most 200 in one rehearsal (10.91.<k>.0/29 each)")
    return out


def vantage_env(template: str, values: dict[str, str]) -> list[str]:
    """The lines of /etc/dnscamp/vantage.env exactly as the vantage module's user data writes
    them (its own template lines, with ${...} filled in), so the rehearsal cannot drift from it."""
    m = re.search(r"- path: /etc/dnscamp/vantage\.env\n(?:.*\n)*?\s+content: \|\n((?:\s{6}.*\n)+)", template)
    if not m:
        raise RehearsalError(f"{TEMPLATE}: no vantage.env block")
    lines = [ln.strip() for ln in m.group(1).splitlines() if ln.strip()]

    def fill(ln: str) -> str:
        def sub(x: re.Match) -> str:
            if x.group(1) not in values:
                raise RehearsalError(f"{TEMPLATE}: vantage.env uses ${{{x.group(1)}}}, which the rehearsal does not know")
            return values[x.group(1)]

        return re.sub(r"\$\{(\w+)\}", sub, ln)

    return [fill(ln) for ln in lines]


# the install steps of the user data's bootstrap, after the venv (the same commands; a unit
# test checks that the template still runs them)
LINK_APPLY = ["link", "apply", "{profile}", "--backend", "auto", "--spec", "{spec}"]
SCHEDULE_INSTALL = ["schedule", "install", "{spec}"]


def _fill(argv: list[str], **kw: str) -> list[str]:
    return [a.format(**kw) for a in argv]


def cron_script(home: Path) -> str:
    """The shell that starts an instance's cron daemon in its private mount namespace."""
    h = str(home)
    return (f"set -e; mount --bind {h}/cron.d /etc/cron.d; mount --bind {h}/crontab /etc/crontab; "
            f"if [ -d /var/spool/cron/crontabs ]; then mount --bind {h}/crontabs /var/spool/cron/crontabs; fi; "
            f"mount -t tmpfs -o mode=0755 dnscamp-cron-run /run; exec cron -f")


# --- the rehearsal ---------------------------------------------------------------------------


@dataclass
class Report:
    campaign: str
    tag: str
    out_dir: str
    home_region: str
    rtt_source: str
    firings_wanted: int
    instances: list[dict[str, Any]] = field(default_factory=list)
    collected: dict[str, Any] = field(default_factory=dict)
    regions: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    faults: dict[str, Any] = field(default_factory=dict)  # what each fault did and how it showed
    completeness: list[dict[str, Any]] = field(default_factory=list)  # per (vantage, run), from the store
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(pred: Callable[[], bool], timeout: float, what: str, step: float = 0.5) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise RehearsalError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(step)


NETNS_DIR = Path("/run/netns")


def _link_netns_name(ns: str) -> str | None:
    """The name `dnscamp link apply` gives an instance's namespace (vantage_agent.link_state.netns_id)."""
    try:
        return f"dnscamp-link-net-{os.stat(NETNS_DIR / ns).st_ino}"
    except OSError:
        return None


def _stop_pid(proc: subprocess.Popen | None, grace: float = 10.0) -> None:
    """SIGTERM a child of ours (then SIGKILL), by its PID."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class Rehearsal:
    def __init__(self, spec_path: Path, *, out_dir: Path, firings: int = 2, vantages: list[str] | None = None,
                 regions: list[str] | None = None, rtt_override: dict[str, float] | None = None,
                 interval_s: float = 5.0, faults: Faults | None = None,
                 log: Callable[[str], None] = lambda m: None):  # fmt: skip
        from dnscamp.spec import load

        self.spec_path = Path(spec_path).resolve()
        self.spec = load(self.spec_path)
        self.table = load_rtt_table()
        self.instances = plan_instances(self.spec, self.table, vantages=vantages, regions=regions,
                                        rtt_override=rtt_override)
        self.firings = firings
        self.interval_s = interval_s
        self.faults = faults
        if faults and len(self.instances) < 2:
            raise RehearsalError("--faults needs at least two instances (the first is killed and skewed, "
                                 "the last one's disk fills)")
        self.mounts: list[Path] = []
        self.outage_rule: list[str] | None = None
        self.observed: dict[str, dict[str, Any]] = {}  # status objects seen, by instance id: first and last of each phase
        self.flags_seen: dict[tuple[str, str], str] = {}  # (instance id, flag) -> its detail when first raised
        self.log = log
        self.tag = secrets.token_hex(2)
        self.out_dir = Path(out_dir) / f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{self.tag}"
        self.bucket = self.spec.fleet.results_bucket
        self.s3_ns = f"dc-fleet-{self.tag}s3"
        self.nodes: list[str] = []
        self.supervised: list[str] = []
        self.relay: subprocess.Popen | None = None
        self.collector: subprocess.Popen | None = None
        self.endpoint = ""
        self.env_base = {
            # moto takes any credentials; these name the rehearsal, they open nothing
            "AWS_ACCESS_KEY_ID": "dnscamp-rehearsal", "AWS_SECRET_ACCESS_KEY": "dnscamp-rehearsal",
            "AWS_DEFAULT_REGION": self.spec.fleet.home_region,
        }  # fmt: skip

    # -- checks -------------------------------------------------------------------------------
    @staticmethod
    def preflight() -> None:
        if os.geteuid() != 0:
            raise RehearsalError("fleet rehearse needs root (network namespaces, a cron daemon per instance)")
        for tool in ("cron", "socat", "flock", "mount"):
            if shutil.which(tool, path="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin") is None:
                raise RehearsalError(f"{tool} not found: install it (`make deps` installs cron and socat)")

    # -- the island side ------------------------------------------------------------------------
    def _supervisor(self):
        from testbed.supervisor import Supervisor
        from vantage_agent.paths import testbed_dir

        return Supervisor(testbed_dir())

    def _add_node(self, ns: str, k: int, rtt_ms: float, region: str) -> str:
        import ipaddress

        from testbed import plan, topology
        from testbed.profiles import Direction, Profile
        from vantage_agent.paths import testbed_dir

        base = ipaddress.ip_network(plan.FLEET_SUBNET)
        sub = f"{ipaddress.ip_address(int(base.network_address) + 256 * k)}/29"
        half = Direction(delay_ms=rtt_ms / 2)
        prof = Profile(name=f"rtt-{region}-{rtt_ms:g}ms", source=f"dnscamp/fleet/region_rtt.toml: {self.table.source}",
                       description=f"{region} -> {self.spec.fleet.home_region}", up=half, down=half)  # fmt: skip
        node = topology.add_edge_node(testbed_dir(), ns, parent_ns=plan.CORE_NS, profile=prof, base=sub, role="fleet")
        self.nodes.append(ns)
        return node.address

    def _start_s3(self) -> None:
        from testbed import netns

        sup = self._supervisor()
        addr = self._add_node(self.s3_ns, 0, 0.0, self.spec.fleet.home_region)
        self.s3_address = addr
        sock = self.out_dir / "s3.sock"
        name = f"fleet-{self.tag}-s3"
        sup.start(name, self.s3_ns, [str(Path(sys.executable).parent / "moto_server"), "-H", "0.0.0.0", "-p", str(S3_PORT)],
                  ready=lambda: netns.run(netns.exec_argv(self.s3_ns, ["bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{S3_PORT}"]),
                                          check=False).returncode == 0, timeout=30)  # fmt: skip
        self.supervised.append(name)
        name = f"fleet-{self.tag}-s3relay"
        sup.start(name, self.s3_ns, ["socat", f"UNIX-LISTEN:{sock},fork,mode=600", f"TCP:127.0.0.1:{S3_PORT}"],
                  ready=sock.exists)
        self.supervised.append(name)
        port = _free_port()
        self.relay = subprocess.Popen(["socat", f"TCP-LISTEN:{port},bind=127.0.0.1,fork,reuseaddr", f"UNIX-CONNECT:{sock}"],
                                      stdout=subprocess.DEVNULL, stderr=open(self.out_dir / "s3-host-relay.log", "ab"))  # fmt: skip
        self.endpoint = f"http://127.0.0.1:{port}"
        import boto3

        s3 = boto3.client("s3", endpoint_url=self.endpoint, region_name=self.spec.fleet.home_region,
                          aws_access_key_id=self.env_base["AWS_ACCESS_KEY_ID"],
                          aws_secret_access_key=self.env_base["AWS_SECRET_ACCESS_KEY"])  # fmt: skip

        def bucket() -> bool:
            try:
                kw = {} if self.spec.fleet.home_region == "us-east-1" else {
                    "CreateBucketConfiguration": {"LocationConstraint": self.spec.fleet.home_region}}
                s3.create_bucket(Bucket=self.bucket, **kw)
                return True
            except s3.exceptions.BucketAlreadyOwnedByYou:
                return True
            except Exception:  # noqa: BLE001 - the relay may not be listening yet
                return False

        _wait(bucket, 30, f"the S3 server in {self.s3_ns} (through {self.endpoint})")
        self.log(f"S3 server: moto in {self.s3_ns} at {addr}:{S3_PORT}; host relay {self.endpoint}; bucket {self.bucket}")

    def _install(self, inst: Instance, info_file: Path) -> None:
        """The user data's steps, in the instance's namespace and home."""
        from testbed import netns
        from vantage_agent.ship import agent_version

        inst.ns = f"dc-fleet-{self.tag}i{inst.k}"
        inst.address = self._add_node(inst.ns, inst.k, inst.rtt_ms, inst.region)
        inst.home = self.out_dir / "instances" / f"{inst.vantage}-{inst.region}"
        for d in ("cron.d", "crontabs", "link", "etc"):
            (inst.home / d).mkdir(parents=True, exist_ok=True)
        (inst.home / "crontab").write_text("# the rehearsed instance's /etc/crontab: empty\n")
        spec_file = inst.home / "etc" / "campaign.toml"
        spec_file.write_text(self.spec_path.read_text())
        values = {"campaign": self.spec.campaign.name, "vantage": inst.vantage, "region": inst.region,
                  "results_bucket": self.bucket, "network_profile": inst.profile or "", "agent_version": agent_version()}  # fmt: skip
        env_lines = vantage_env(TEMPLATE.read_text(), values)
        # what differs from EC2: where S3 is, moto's credentials (EC2 has its instance role), the
        # testbed description (the resolvers' addresses and CA) and a link state per instance
        extra = {**self.env_base, "AWS_ENDPOINT_URL_S3": f"http://{self.s3_address}:{S3_PORT}",
                 "DNSCAMP_TESTBED_INFO": str(info_file), "DNSCAMP_LINK_STATE_DIR": str(inst.home / "link"),
                 "DNSCAMP_INSTANCE_ID": self.instance_id(inst)}  # EC2's comes from IMDS  # fmt: skip
        if self.faults and self.faults.disk_fill and inst is self.instances[-1]:
            spool = inst.home / "spool"
            spool.mkdir(parents=True, exist_ok=True)
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SPOOL_TMPFS_MIB}m,mode=0755", "dnscamp-rehearsal-spool",
                            str(spool)], check=True, capture_output=True)  # fmt: skip
            self.mounts.append(spool)
        (inst.home / "vantage.env").write_text("\n".join(env_lines + [f"{k}={v}" for k, v in extra.items()]) + "\n")
        env = {**os.environ, **extra, "DNSCAMP_HOME": str(inst.home), "DNSCAMP_CRON_D": str(inst.home / "cron.d")}
        for k in ("DNSCAMP_VANTAGE", "DNSCAMP_REGION", "DNSCAMP_SPOOL", "DNSCAMP_DATABASE_URL"):
            env.pop(k, None)
        dc = [str(Path(sys.executable).parent / "dnscamp")]
        steps = [SCHEDULE_INSTALL] if not inst.profile else [LINK_APPLY, SCHEDULE_INSTALL]
        for step in steps:
            argv = netns.exec_argv(inst.ns, dc + _fill(step, profile=inst.profile or "", spec=str(spec_file)))
            p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
            (inst.home / "install.log").open("a").write(f"$ {' '.join(argv)}\n{p.stdout}{p.stderr}exit {p.returncode}\n")
            if p.returncode != 0:
                raise RehearsalError(f"{inst.ns}: `dnscamp {' '.join(step[:2])}` failed (exit {p.returncode}): "
                                     f"{(p.stderr or p.stdout).strip().splitlines()[-1:]} (see {inst.home}/install.log)")
        if self.faults and self.faults.clock_offset_s and inst is self.instances[0]:
            self._skew_clock(inst, self.faults.clock_offset_s)
        name = f"fleet-{self.tag}-cron{inst.k}"
        sup = self._supervisor()
        sup.start(name, inst.ns, ["sh", "-c", cron_script(inst.home)], timeout=5, ready=lambda: True)
        self.supervised.append(name)
        time.sleep(0.5)  # a mount that fails ends the shell at once: say so now, not at the wait's end
        if not sup.alive(name):
            tail = sup.log_path(name).read_text(errors="replace").strip().splitlines()[-2:]
            raise RehearsalError(f"{inst.ns}: the cron daemon did not start: {' | '.join(tail)}")
        self.log(f"{inst.ns}: {inst.vantage} in {inst.region} ({inst.rtt_ms:g} ms to {self.spec.fleet.home_region}), "
                 f"profile {inst.profile or 'none'}, cron started")  # fmt: skip

    def instance_id(self, inst: Instance) -> str:
        return f"i-rehearsal{self.tag}{inst.k:03d}"

    def _skew_clock(self, inst: Instance, offset_s: float) -> None:
        """The instance's jobs see a clock ``offset_s`` ahead: libfaketime preloaded by variable
        lines of its cron.d file (cron passes them to the jobs below them). Every clock moves by
        the same constant, so durations are measured as before; the wall clock (the records' and
        the status objects' times, the S3 signatures) is off. (libfaketime 0.9.10's
        DONT_FAKE_MONOTONIC=1 makes Python's time.sleep fail with EINVAL: not used.)"""
        from vantage_agent.spool import write_atomic

        if not FAKETIME_LIB.exists():
            raise RehearsalError(f"{FAKETIME_LIB} not found: install Debian's faketime (`make deps` does)")
        f = next((inst.home / "cron.d").glob("dnscamp-*"), None)
        if f is None:
            raise RehearsalError(f"{inst.ns}: no cron.d file after `schedule install`")
        lines = f.read_text().splitlines()
        env = [f"LD_PRELOAD={FAKETIME_LIB}", f"FAKETIME={offset_s:+g}"]
        at = next(i for i, ln in enumerate(lines) if ln.startswith("# BEGIN"))
        write_atomic(f, ("\n".join(lines[:at] + env + lines[at:]) + "\n").encode())
        f.chmod(0o644)

    # -- faults -------------------------------------------------------------------------------
    def _s3_client(self):
        import boto3
        from botocore.config import Config

        # The rehearsal's own look at the status objects gives up at once while S3 is cut: with
        # botocore's defaults (60 s connect timeout, retries) one look blocked the fault loop for
        # minutes, and the 40 s outage lasted three.
        quick = Config(connect_timeout=2, read_timeout=10, retries={"max_attempts": 1, "mode": "standard"})
        return boto3.client("s3", endpoint_url=self.endpoint, region_name=self.spec.fleet.home_region,
                            aws_access_key_id=self.env_base["AWS_ACCESS_KEY_ID"],
                            aws_secret_access_key=self.env_base["AWS_SECRET_ACCESS_KEY"], config=quick)  # fmt: skip

    def _observe(self, s3) -> None:
        """Read every status object of the campaign (as `fleet status` does) and keep, per
        instance, the first status of each phase, the largest clock offset, the ship errors and
        every status that counted skipped firings."""
        from datetime import datetime, timezone

        from dnscamp.fleet.status import flags, read_statuses

        try:
            sts = read_statuses(s3, self.bucket, self.spec.campaign.name)
        except Exception as exc:  # noqa: BLE001 - the S3 outage: nothing to read now
            self.observed.setdefault("_read_errors", {}).setdefault(type(exc).__name__, 0)
            self.observed["_read_errors"][type(exc).__name__] += 1
            return
        for st in sts:
            iid = st.get("instance_id") or "?"
            o = self.observed.setdefault(iid, {"phases": {}, "max_abs_clock_offset_s": None, "ship_errors": [],
                                               "pending_max": 0, "runs": set(), "statuses": 0, "corrupt": 0})  # fmt: skip
            if st.get("corrupt"):
                o["corrupt"] += 1
                continue
            o["statuses"] += 1
            o["phases"].setdefault(st.get("phase"), st.get("at"))
            off = st.get("clock_offset_s")
            if isinstance(off, (int, float)) and (o["max_abs_clock_offset_s"] is None or abs(off) > o["max_abs_clock_offset_s"]):
                o["max_abs_clock_offset_s"] = abs(off)
            for e in (st.get("ship") or {}).get("errors") or []:
                if e not in o["ship_errors"]:
                    o["ship_errors"].append(e)
            o["pending_max"] = max(o["pending_max"], st.get("pending_units") or 0)
            if st.get("last_firing"):
                o["runs"].add(st["last_firing"].get("run"))
        # what `fleet status --no-ec2` would flag now (no EC2 in a rehearsal): first time seen
        sched = self.spec.campaign.schedule
        floor = int(getattr(self.spec.fleet, "disk_floor_mib", 1024)) << 20
        from dnscamp.fleet.status import stale_minutes

        for fl in flags(sts, None, datetime.now(timezone.utc), stale_min=stale_minutes(sched), disk_floor_bytes=floor):
            self.flags_seen.setdefault((fl.instance_id, fl.what), fl.detail)

    def _fire_pids(self, inst: Instance) -> list[int]:
        """PIDs of `dnscamp schedule fire` processes of this instance (its spec's path names it)."""
        spec = str((inst.home / "etc" / "campaign.toml").resolve()).encode()
        out = []
        for p in Path("/proc").iterdir():
            if not p.name.isdigit():
                continue
            try:
                argv = (p / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if spec in argv and b"fire" in argv and b"schedule" in argv and b"flock" not in argv[0]:
                out.append(int(p.name))
        return out

    def _kill_mid_firing(self, inst: Instance) -> dict[str, Any] | None:
        """SIGKILL the instance's firing once its run has written a unit and is not complete."""
        for run in self._runs(inst):
            units = [p for p in run.glob("*.jsonl") if not p.name.startswith(".")]
            if units and not (run / "complete.json").exists():
                pids = self._fire_pids(inst)
                if not pids:
                    return None
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                return {"instance": inst.ns, "instance_id": self.instance_id(inst), "run": run.name,
                        "units_done_at_kill": len(units), "pids": pids, "at": time.time()}  # fmt: skip
        return None

    def _fill_disk(self, inst: Instance) -> dict[str, Any]:
        floor = int(getattr(self.spec.fleet, "disk_floor_mib", 1024)) << 20
        spool = inst.home / "spool"
        free = shutil.disk_usage(spool).free
        size = max(0, free - floor // 2)
        with open(spool / ".rehearsal-fill", "wb") as f:
            os.posix_fallocate(f.fileno(), 0, size)
        return {"instance": inst.ns, "instance_id": self.instance_id(inst), "floor_bytes": floor,
                "free_before": free, "free_after": shutil.disk_usage(spool).free, "at": time.time()}  # fmt: skip

    def _s3_rule(self, action: str) -> None:
        from testbed import netns

        argv = ["iptables", action, "INPUT", "-p", "tcp", "--dport", str(S3_PORT), "-j", "DROP"]
        netns.run(netns.exec_argv(self.s3_ns, argv), check=True)
        self.outage_rule = argv if action == "-I" else None

    def _drive_faults(self, rep: Report, budget: float) -> None:
        """The rehearsal with faults, in order: kill the first instance's first firing mid-run and
        cut S3 for ``s3_outage_s`` at once, so the other instances' first firing ships into the
        outage (and retries after it); once every instance shipped a run, fill the last one's
        disk; then wait for the firings every instance can still make (the full disk's instance
        makes none) and for its disk_floor status."""
        f = self.faults
        assert f is not None
        s3 = self._s3_client()
        first, last = self.instances[0], self.instances[-1]
        killed = None if f.kill_firing else {}
        filled = None if f.disk_fill else {}
        outage: dict[str, Any] | None = None if f.s3_outage_s > 0 else {}
        deadline = time.monotonic() + budget
        next_look = 0.0

        def finished() -> bool:
            full = [last] if f.disk_fill else []
            ok = all(self._done(i) >= self.firings for i in self.instances if i not in full)
            if f.disk_fill:
                ok = ok and "disk_floor" in self.observed.get(self.instance_id(last), {}).get("phases", {})
            return ok and killed is not None and filled is not None and outage is not None and "ended" in outage

        while True:
            if time.monotonic() >= next_look:
                self._observe(s3)
                next_look = time.monotonic() + 3
            if killed is None:
                killed = self._kill_mid_firing(first)
                if killed:
                    self.log(f"fault: killed the firing of {first.ns} mid-run {killed['run']} "
                             f"({killed['units_done_at_kill']} unit(s) done)")  # fmt: skip
            elif outage is None:
                self._s3_rule("-I")
                outage = {"seconds": f.s3_outage_s, "started": time.time(), "until": time.monotonic() + f.s3_outage_s}
                self.log(f"fault: S3 unreachable for {f.s3_outage_s:g} s")
            elif outage and "until" in outage and "ended" not in outage and time.monotonic() >= outage["until"]:
                self._s3_rule("-D")
                outage["ended"] = time.time()
                outage.pop("until")
                self.log("fault: S3 reachable again")
            elif filled is None and (not outage or "ended" in outage) and all(self._done(i) >= 1 for i in self.instances):
                filled = self._fill_disk(last)
                self.log(f"fault: {last.ns}'s spool filled: {filled['free_after'] >> 20} MiB free "
                         f"(floor {filled['floor_bytes'] >> 20} MiB)")  # fmt: skip
            if finished():
                break
            if time.monotonic() > deadline:
                raise RehearsalError(f"timed out after {budget:g} s waiting for the fleet under faults "
                                     f"(killed {bool(killed)}, disk filled {bool(filled)}, outage {outage})")  # fmt: skip
            time.sleep(0.2)
        self._observe(s3)
        rep.faults = {"kill": killed, "disk_fill": filled, "s3_outage": outage,
                      "clock_offset_s": f.clock_offset_s, "clock_instance_id": self.instance_id(first)}  # fmt: skip

    # -- progress -----------------------------------------------------------------------------
    def _runs(self, inst: Instance) -> list[Path]:
        base = inst.home / "spool" / self.spec.campaign.name
        return sorted(p for p in base.iterdir() if p.is_dir()) if base.is_dir() else []

    @staticmethod
    def _shipped_all(run: Path) -> bool:
        """A run is through the agent's side: complete, and every unit file in its ledger."""
        from vantage_agent.ship import read_ledger

        units = {p.name[: -len(".jsonl")] for p in run.glob("*.jsonl") if not p.name.startswith(".")}
        return (run / "complete.json").exists() and units <= read_ledger(run)

    def _done(self, inst: Instance) -> int:
        return sum(1 for r in self._runs(inst) if self._shipped_all(r))

    def _collect_once(self, url: str | None = None) -> dict[str, Any]:
        env = {**os.environ, **self.env_base}
        p = subprocess.run([str(Path(sys.executable).parent / "dnscamp"), "collect", f"s3://{self.bucket}/results/",
                            "--endpoint-url", self.endpoint, "--json"], env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
        lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
        if p.returncode not in (0, 3) or not lines:
            raise RehearsalError(f"dnscamp collect failed (exit {p.returncode}): {p.stderr.strip()[-300:]}")
        return json.loads(lines[-1])

    # -- the run ------------------------------------------------------------------------------
    def run(self) -> Report:
        from testbed import lifecycle

        t0 = time.monotonic()
        self.preflight()
        sched = self.spec.campaign.schedule
        rep = Report(self.spec.campaign.name, self.tag, str(self.out_dir), self.spec.fleet.home_region,
                     self.table.source, self.firings)  # fmt: skip
        self.out_dir.mkdir(parents=True)
        info = lifecycle.describe()
        if not info.get("up"):
            self.log("bringing the testbed up (fiber)")
            info = lifecycle.ensure_up(["fiber"], log=self.log)
        info_file = self.out_dir / "testbed-info.json"
        try:
            self._start_s3()
            info_file.write_text(json.dumps(lifecycle.describe()))
            for inst in self.instances:
                self._install(inst, info_file)
            env = {**os.environ, **self.env_base}
            self.collector = subprocess.Popen(
                [str(Path(sys.executable).parent / "dnscamp"), "collect", f"s3://{self.bucket}/results/", "--watch",
                 "--interval", str(self.interval_s), "--endpoint-url", self.endpoint, "--json"],
                env=env, stdout=open(self.out_dir / "collect-watch.ndjson", "ab"),
                stderr=open(self.out_dir / "collect-watch.log", "ab"))  # fmt: skip
            self.log(f"collector: dnscamp collect s3://{self.bucket}/results/ --watch (pid {self.collector.pid})")
            per_firing = sched.jitter_s + sched.max_runtime_s + FIRING_SLACK_S
            budget = 60.0 * self.firings + per_firing * self.firings + 60.0
            self.log(f"waiting for {self.firings} firings of `{sched.cron}` on {len(self.instances)} instances "
                     f"(at most {budget:.0f} s)")  # fmt: skip
            if self.faults:
                self._drive_faults(rep, budget + 2 * per_firing + self.faults.s3_outage_s)
            else:
                _wait(lambda: all(self._done(i) >= self.firings for i in self.instances), budget,
                      f"{self.firings} shipped firings on every instance", step=2)  # fmt: skip
        except BaseException:
            self.stop()
            raise
        # no new firing from here; a firing already going finishes (and ships) under its lock
        for name in [n for n in self.supervised if "-cron" in n]:
            self._supervisor().stop(name)
        for inst in self.instances:
            lock = inst.home / "locks" / f"{self.spec.campaign.name}.lock"
            subprocess.run(["flock", "-w", str(int(sched.jitter_s + sched.max_runtime_s + FIRING_SLACK_S)), str(lock), "true"],
                           check=False)  # fmt: skip
        try:
            time.sleep(self.interval_s + 1)  # one more --watch pass sees the last objects
            _stop_pid(self.collector)
            rep.collected = self._collect_once()  # and a last pass by hand: nothing may be left
            self._verify(rep)
            self._completeness(rep)
            if self.faults:
                self._judge_faults(rep)
        finally:
            self.stop()
        rep.seconds = round(time.monotonic() - t0, 1)
        return rep

    def _verify(self, rep: Report) -> None:
        """Every record each instance made (in a complete, shipped run) is in Postgres exactly
        once, under the instance's vantage and region; then the per-region RTT table."""
        import psycopg

        from db import engine

        from vantage_agent.ship import backlog

        made: dict[str, tuple[str, str]] = {}
        for inst in self.instances:
            # nothing left behind: the last firing was waited for, so every run is complete and
            # shipped whole (its manifest too); a queue here is what a teardown would lose
            pending, incomplete = backlog(inst.home / "spool", self.spec.campaign.name)
            if pending or incomplete:
                rep.problems.append(f"{inst.ns}: {pending} object(s) never shipped, {incomplete} run(s) never completed")
            runs = [r for r in self._runs(inst) if self._shipped_all(r)]
            n = 0
            for run in runs:
                for f in run.glob("*.jsonl"):
                    for ln in f.read_text().splitlines():
                        if ln.strip():
                            rec = json.loads(ln)
                            if rec["id"] in made:
                                rep.problems.append(f"record {rec['id']} made twice ({inst.ns})")
                            made[rec["id"]] = (inst.vantage, inst.region)
                            n += 1
            rep.instances.append({**{k: v for k, v in asdict(inst).items() if k != "home"}, "home": str(inst.home),
                                  "runs": [r.name for r in runs], "records": n})  # fmt: skip
        with psycopg.connect(engine.database_url("owner")) as c:
            rows = c.execute("SELECT id::text, vantage_id, region FROM results WHERE campaign = %s AND id::text = ANY(%s)",
                             (self.spec.campaign.name, list(made))).fetchall()  # fmt: skip
            stored = {}
            for rid, vid, reg in rows:
                if rid in stored:
                    rep.problems.append(f"record {rid} stored twice")
                stored[rid] = (vid, reg)
            missing = sorted(set(made) - set(stored))
            if missing:
                rep.problems.append(f"{len(missing)} of {len(made)} records not in Postgres (e.g. {missing[0]})")
            wrong = [i for i in stored if stored[i] != made[i]]
            if wrong:
                rep.problems.append(f"{len(wrong)} records stored under another vantage/region (e.g. {wrong[0]})")
            runs = [r for i in rep.instances for r in i["runs"]]
            rep.regions = [dict(zip(("vantage", "region", "ping_records", "ping_rtt_median_ms", "do53_records",
                                     "do53_total_median_ms"), row))
                           for row in c.execute(REGION_SQL, {"campaign": self.spec.campaign.name, "runs": runs}).fetchall()]  # fmt: skip
        for r in rep.regions:
            inst = next(i for i in self.instances if (i.vantage, i.region) == (r["vantage"], r["region"]))
            r["configured_rtt_ms"] = inst.rtt_ms
        rep.collected["records_made"] = len(made)
        rep.collected["records_stored"] = len(stored)

    def _completeness(self, rep: Report) -> None:
        """The store's completeness of every run the instances shipped (dnscamp campaign
        completeness): each must have its manifest and every planned unit collected."""
        from dataclasses import asdict as dc_asdict, is_dataclass

        from db import engine
        from dnscamp.completeness import report

        ours = {r for i in rep.instances for r in i["runs"]}
        rows = [dc_asdict(r) if is_dataclass(r) else dict(r) for r in report(engine.database_url("owner"), self.spec.campaign.name)]
        rep.completeness = [r for r in rows if r.get("run") in ours]
        seen = {r["run"] for r in rep.completeness}
        for run in sorted(ours - seen):
            rep.problems.append(f"completeness: run {run} shipped but unknown to the store")
        for r in rep.completeness:
            if not r.get("manifest") or r.get("units_missing") or r.get("units_collected") != r.get("units_planned"):
                rep.problems.append(f"completeness: {r.get('vantage')} run {r['run']}: {r.get('units_collected')} of "
                                    f"{r.get('units_planned')} units collected, manifest {r.get('manifest')}, "
                                    f"missing {r.get('missing_objects')}")  # fmt: skip

    def _judge_faults(self, rep: Report) -> None:
        """Each fault must have happened and shown where an operator looks: the status objects."""
        fl = rep.faults
        first, last = self.instances[0], self.instances[-1]
        kill = fl.get("kill")
        if kill:
            runs = next(i["runs"] for i in rep.instances if i["ns"] == first.ns)
            fl["kill"]["resumed_and_shipped"] = kill["run"] in runs
            if kill["run"] not in runs:
                rep.problems.append(f"fault kill: the killed run {kill['run']} was not resumed and shipped ({runs})")
        off = self.observed.get(self.instance_id(first), {}).get("max_abs_clock_offset_s")
        fl["clock_offset_seen_s"] = off
        if self.faults and self.faults.clock_offset_s and (off is None or abs(off - self.faults.clock_offset_s) > 5):
            rep.problems.append(f"fault clock: status clock_offset_s {off} for a clock {self.faults.clock_offset_s:g} s ahead")
        if fl.get("disk_fill"):
            ph = self.observed.get(self.instance_id(last), {}).get("phases", {})
            fl["disk_fill"]["disk_floor_status_at"] = ph.get("disk_floor")
        fl["flags"] = [f"{iid} {what}: {detail}" for (iid, what), detail in sorted(self.flags_seen.items())]
        want = []
        if self.faults and self.faults.clock_offset_s:
            want.append((self.instance_id(first), "clock_skew"))
        if fl.get("disk_fill"):
            want.append((self.instance_id(last), "disk_floor"))
        for iid, what in want:
            if (iid, what) not in self.flags_seen:
                rep.problems.append(f"fault not shown by fleet status: no {what} flag for {iid}")
        fl["observed"] = {k: {**v, "runs": sorted(v["runs"])} if isinstance(v.get("runs"), set) else v
                          for k, v in self.observed.items()}  # fmt: skip
        log = (self.out_dir / "collect-watch.log")
        fl["collector_log_lines"] = log.read_text(errors="replace").splitlines()[-20:] if log.exists() else []

    def stop(self) -> None:
        """Stop what the rehearsal started (by PID) and remove its namespaces; idempotent."""
        from testbed import topology
        from vantage_agent.paths import testbed_dir

        if self.outage_rule is not None:
            try:
                self._s3_rule("-D")
            except Exception as exc:  # noqa: BLE001 - the namespace goes below anyway
                self.log(f"S3 outage rule: {exc}")
        _stop_pid(self.collector)
        _stop_pid(self.relay)
        sup = self._supervisor()
        for name in reversed(self.supervised):
            try:
                sup.stop(name)
            except Exception as exc:  # noqa: BLE001 - keep removing the rest
                self.log(f"stop {name}: {exc}")
        self.supervised.clear()
        for ns in reversed(self.nodes):
            link_name = _link_netns_name(ns)
            try:
                topology.remove_edge_node(testbed_dir(), ns)
            except Exception as exc:  # noqa: BLE001
                self.log(f"remove {ns}: {exc}")
            if link_name and (NETNS_DIR / link_name).exists():
                # `link apply` in the instance named its namespace for linkem (testbed/linkem/host.py);
                # it ran inside `ip netns exec`'s private mounts, so the name outlives the instance
                # as a dead file in /run/netns ("Peer netns reference is invalid"): ours, removed.
                subprocess.run(["ip", "netns", "del", link_name], capture_output=True, check=False)
        self.nodes.clear()
        for m in reversed(self.mounts):  # after the cron daemons: nothing writes there any more
            subprocess.run(["umount", "-l", str(m)], capture_output=True, check=False)
        self.mounts.clear()


def describe_faults(rep: Report) -> list[str]:
    """One line per fault: what was done, and what the status objects and the collector showed."""
    fl, out = rep.faults, []
    k = fl.get("kill")
    if k:
        out.append(f"firing killed mid-run on {k['instance_id']} (run {k['run']}, {k['units_done_at_kill']} unit(s) "
                   f"done): resumed and shipped by the next firing: {k.get('resumed_and_shipped')}")
    if fl.get("clock_offset_s"):
        out.append(f"clock {fl['clock_offset_s']:+g} s on {fl.get('clock_instance_id')}: status clock_offset_s "
                   f"{fl.get('clock_offset_seen_s')}")
    d = fl.get("disk_fill")
    if d:
        out.append(f"disk filled on {d['instance_id']} ({d['free_after'] >> 20} MiB free, floor {d['floor_bytes'] >> 20} "
                   f"MiB): status phase disk_floor at {d.get('disk_floor_status_at')}")
    o = fl.get("s3_outage")
    if o:
        seen = {iid: v.get("ship_errors", [])[:1] for iid, v in (fl.get("observed") or {}).items() if not iid.startswith("_")}
        out.append(f"S3 unreachable {o['seconds']:g} s: ship errors in status objects {seen}; "
                   f"status reads failed meanwhile {fl.get('observed', {}).get('_read_errors', {})}")
    for flag in fl.get("flags", []):
        out.append(f"fleet status flag: {flag}")
    return out


# The per-region view of the rehearsal's records: what a researcher would look at first.
REGION_SQL = """
SELECT v.vantage_id, v.region, p.n, p.rtt, d.n, d.total
FROM (SELECT DISTINCT vantage_id, region FROM v_results WHERE campaign = %(campaign)s AND run = ANY(%(runs)s)) v
LEFT JOIN LATERAL (
    SELECT count(*) AS n, round((percentile_cont(0.5) WITHIN GROUP (ORDER BY rtt_median_ms))::numeric, 2)::float8 AS rtt
    FROM v_ping WHERE campaign = %(campaign)s AND run = ANY(%(runs)s) AND vantage_id = v.vantage_id AND region = v.region
) p ON true
LEFT JOIN LATERAL (
    SELECT count(*) AS n, round((percentile_cont(0.5) WITHIN GROUP (ORDER BY total_ms))::numeric, 2)::float8 AS total
    FROM v_dns_query WHERE campaign = %(campaign)s AND run = ANY(%(runs)s) AND vantage_id = v.vantage_id
      AND region = v.region AND transport = 'do53' AND status = 'ok'
) d ON true
ORDER BY 1, 2
"""
