"""A testbed access profile on a real host's interface (``dnscamp link``).

The testbed shapes a link inside a router namespace (driver.Link: FORWARD). A cloud vantage has
no router: the profile goes on the host's own egress interface, both directions, so that the
round trip, loss and rates are the ones the testbed gives. Same profiles (testbed/profiles.toml),
same netem parameters (driver.netem_argv), same user-space emulator (driver.Link); only where
the packets are caught differs:

- ``netem``: egress = root ``prio`` qdisc (handle ``1dc:``, every priority to band 2) whose
  band 2 is netem (``1dd:``, the profile's ``up``); excluded destinations go to band 1
  (plain FIFO) by u32 filters. Ingress = the ``ingress`` qdisc redirects every packet (u32
  filters with prefs in 0xdc00-0xdcff; excluded sources match first, with no action: the
  first match ends classification and the packet goes on, so no act_gact is needed) to an ifb device
  ``dcifb-<dev>`` whose root is netem (``1de:``, the profile's ``down``).
- ``linkem`` (driver backend ``nfqueue``): chains ``DNSCAMP-LINK-OUT``/``-IN`` (excluded
  CIDRs ``RETURN``, the rest NFQUEUE) reached from ``OUTPUT -o dev`` / ``INPUT -i dev``; the
  linkem process runs detached. Fail closed, like the testbed: if it dies, the shaped traffic
  stops rather than flowing unshaped.

Both backends turn TSO/GSO/GRO off on the device (as the testbed does on its veths) so loss
and rate act on wire-size packets, not 64 KB aggregates; ``clear`` puts the previous values
back. What was applied is recorded in ``state_path()`` (under /run: a reboot removes the shaping
and the record together), one file per network namespace.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import subprocess
from datetime import datetime, timezone
from pathlib import Path

from testbed.linkem import driver
from testbed.linkem.driver import LinkError
from testbed.profiles import Profile

ROOT_HANDLE, UP_HANDLE, DOWN_HANDLE = "1dc:", "1dd:", "1de:"
PREF_BASE, PREF_REDIRECT = 0xDC00, 0xDCFF  # our ingress filters' prefs (clear removes only these)
CHAINS = {"out": "DNSCAMP-LINK-OUT", "in": "DNSCAMP-LINK-IN"}
# The instance metadata service (IMDSv2 tokens, instance-role credentials for the S3 upload)
# over IPv4 and IPv6. Not the whole link-local /16: 169.254.169.253 is the Amazon resolver,
# the campaign's "ISP" resolver, which must be measured through the profile.
DEFAULT_EXCLUDES = ("169.254.169.254/32", "fd00:ec2::254/128")
OFFLOADS = {"tso": "tcp-segmentation-offload", "gso": "generic-segmentation-offload",
            "gro": "generic-receive-offload"}
BACKENDS = ("netem", "linkem")


class HostLinkError(LinkError):
    """Bad input or a missing prerequisite: one line naming it (the CLI exits 2)."""


def _run(argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
    return driver._run(argv, check=check)


def _ifb_name(dev: str) -> str:
    return f"dcifb-{dev}"[:15]


# Where the state lives is the agent's definition (records read it as env.link).
from vantage_agent.link_state import netns_id as _netns_id, state_dir, state_path  # noqa: E402,F401


# --------------------------------------------------------------------------------------------
# inputs
# --------------------------------------------------------------------------------------------


def default_dev() -> str:
    """The interface of the default route (IPv4 first, then IPv6)."""
    for fam in ("-4", "-6"):
        p = _run(["ip", "-j", fam, "route", "show", "default"], check=False)
        for r in json.loads(p.stdout or "[]"):
            if r.get("dev"):
                return r["dev"]
    raise HostLinkError("no default route: name the interface with --dev")


def parse_excludes(cidrs: list[str]) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    out = []
    for c in cidrs:
        try:
            out.append(ipaddress.ip_network(c, strict=False))
        except ValueError:
            raise HostLinkError(f"--exclude {c!r}: not an IPv4/IPv6 address or CIDR") from None
    return out


def check_tools(backend: str) -> None:
    for tool in ("ip", "tc") + (("iptables",) if backend == "linkem" else ()):
        if not shutil.which(tool):
            pkg = "iptables" if tool == "iptables" else "iproute2"
            raise HostLinkError(f"{tool} not found on PATH (apt-get install {pkg})")
    if backend == "linkem" and not driver.binary_path().exists():
        raise HostLinkError(f"linkem binary {driver.binary_path()} missing: run install/30-linkem.sh")


def resolve_backend(backend: str) -> str:
    """``auto`` -> netem where the kernel has sch_netem, else linkem; ``netem`` refused without it."""
    if backend not in ("auto", *BACKENDS):
        raise HostLinkError(f"--backend {backend!r}: expected auto, netem or linkem")
    if backend == "linkem":
        return backend
    if not shutil.which("tc"):
        raise HostLinkError("tc not found on PATH (apt-get install iproute2)")
    has_netem = driver.detect_backend() == "netem"
    if backend == "netem" and not has_netem:
        raise HostLinkError("sch_netem is not available in this kernel (tc: 'Specified qdisc kind is "
                            "unknown'): use --backend linkem")
    return "netem" if has_netem else "linkem"


# --------------------------------------------------------------------------------------------
# the netem plan (pure: unit-tested)
# --------------------------------------------------------------------------------------------


def netem_params(cfg: dict) -> list[str]:
    """The netem options of one direction: driver.netem_argv's, without its ``tc qdisc ...`` head."""
    argv = driver.netem_argv("X", cfg)
    assert argv[:7] == ["tc", "qdisc", "replace", "dev", "X", "root", "netem"], argv
    return argv[7:]


def netem_plan(dev: str, profile: Profile, excludes: list) -> list[list[str]]:
    """tc/ip commands that put ``profile`` on ``dev`` (up on egress, down on ingress via ifb)."""
    up, down = profile.link_config()
    ifb = _ifb_name(dev)
    cmds = [
        ["tc", "qdisc", "replace", "dev", dev, "root", "handle", ROOT_HANDLE, "prio", "bands", "2",
         "priomap", *["1"] * 16],
        ["tc", "qdisc", "replace", "dev", dev, "parent", ROOT_HANDLE + "2", "handle", UP_HANDLE, "netem",
         *netem_params(up)],
    ]
    for i, net in enumerate(excludes):
        proto, match = ("ip", "ip") if net.version == 4 else ("ipv6", "ip6")
        cmds.append(["tc", "filter", "add", "dev", dev, "parent", ROOT_HANDLE, "protocol", proto, "pref",
                     str(i + 1), "u32", "match", match, "dst", str(net), "flowid", ROOT_HANDLE + "1"])
    cmds += [
        ["ip", "link", "add", ifb, "type", "ifb"],
        ["ip", "link", "set", ifb, "up"],
        ["tc", "qdisc", "replace", "dev", ifb, "root", "handle", DOWN_HANDLE, "netem", *netem_params(down)],
        ["tc", "qdisc", "replace", "dev", dev, "handle", "ffff:", "ingress"],
    ]
    for i, net in enumerate(excludes):
        proto, match = ("ip", "ip") if net.version == 4 else ("ipv6", "ip6")
        cmds.append(["tc", "filter", "add", "dev", dev, "parent", "ffff:", "protocol", proto, "pref",
                     str(PREF_BASE + i + 1), "u32", "match", match, "src", str(net), "flowid", "ffff:1"])
    cmds.append(["tc", "filter", "add", "dev", dev, "parent", "ffff:", "protocol", "all", "pref", str(PREF_REDIRECT),
                 "u32", "match", "u32", "0", "0", "action", "mirred", "egress", "redirect", "dev", ifb])
    return cmds


def iptables_chain_rules(chain: str, excludes: list, version: int, queue: int) -> list[list[str]]:
    """The rules of one of our chains: excluded CIDRs return (unshaped), the rest go to linkem."""
    key = "-d" if chain == CHAINS["out"] else "-s"
    rules = [["-A", chain, key, str(n), "-j", "RETURN"] for n in excludes if n.version == version]
    return rules + [["-A", chain, "-j", "NFQUEUE", "--queue-num", str(queue)]]


# --------------------------------------------------------------------------------------------
# linkem on the host: driver.Link with host rules instead of the router's FORWARD rules
# --------------------------------------------------------------------------------------------


class HostLink(driver.Link):
    """driver.Link's process handling, caught on the host: OUTPUT -o dev (up), INPUT -i dev (down)."""

    def __init__(self, dev: str, up: dict, down: dict, run_dir: Path, excludes: list):
        # Link runs linkem with `ip netns exec <name>`: this namespace gets a name (`ip netns
        # attach`; not dc-*, which the testbed owns). linkem exits when the name goes (clear).
        super().__init__(f"{_netns_id()}-{dev}", f"dnscamp-link-{_netns_id()}", dev, dev, up, down, run_dir,
                         backend="nfqueue")
        self.dev, self.excludes = dev, excludes

    def _ns(self, argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
        return _run(argv, check=check)

    def _rule_specs(self) -> list[list[str]]:
        comment = driver.RULE_COMMENT_PREFIX + self.name
        return [[hook, flag, self.dev, "-m", "comment", "--comment", comment, "-j", CHAINS[d]]
                for hook, flag, d in (("OUTPUT", "-o", "out"), ("INPUT", "-i", "in"))]

    def start(self) -> None:
        # Our chains first (not reached until Link's jump rules go in, after linkem is ready).
        for tool, version in (("iptables", 4), ("ip6tables", 6)):
            for d, q in (("out", self.queues[0]), ("in", self.queues[1])):
                if not shutil.which(tool):
                    continue
                if _run([tool, "-w", "-N", CHAINS[d]], check=False).returncode != 0:  # left over: reuse
                    _run([tool, "-w", "-F", CHAINS[d]], check=version == 4)
                for rule in iptables_chain_rules(CHAINS[d], self.excludes, version, q):
                    _run([tool, "-w", *rule], check=version == 4)
        if not self._ns_exists():
            _run(["ip", "netns", "attach", self.router_ns, str(os.getpid())])
        super().start()

    def stop(self) -> None:
        super().stop()
        if self._ns_exists():
            _run(["ip", "netns", "del", self.router_ns], check=False)  # the name only (attach)


def _drop_chains() -> None:
    for tool in ("iptables", "ip6tables"):
        if not shutil.which(tool):
            continue
        rules = _run([tool, "-w", "-S"], check=False).stdout.splitlines()
        for line in rules:  # jumps to our chains, whatever link name put them there
            words = line.split()
            if words[:1] == ["-A"] and any(c in words[-1:] for c in CHAINS.values()):
                _run([tool, "-w", "-D", *line.split()[1:]], check=False)
        for chain in CHAINS.values():
            _run([tool, "-w", "-F", chain], check=False)
            _run([tool, "-w", "-X", chain], check=False)


# --------------------------------------------------------------------------------------------
# offloads
# --------------------------------------------------------------------------------------------


def _offloads(dev: str) -> dict[str, str]:
    if not shutil.which("ethtool"):
        return {}
    text = _run(["ethtool", "-k", dev], check=False).stdout
    out = {}
    for short, long in OFFLOADS.items():
        for line in text.splitlines():
            if line.startswith(long + ":"):
                out[short] = line.split(":", 1)[1].split()[0]
    return out


def _set_offloads(dev: str, values: dict[str, str]) -> None:
    if values and shutil.which("ethtool"):
        _run(["ethtool", "-K", dev, *[w for k, v in values.items() for w in (k, v)]], check=False)


# --------------------------------------------------------------------------------------------
# apply / show / clear
# --------------------------------------------------------------------------------------------


def read_state() -> dict | None:
    try:
        return json.loads(state_path().read_text())
    except FileNotFoundError:
        return None


def _tc_json(*args: str) -> list[dict]:
    p = _run(["tc", "-j", *args], check=False)
    try:
        return json.loads(p.stdout or "[]")
    except json.JSONDecodeError:
        return []


def _our_root(dev: str) -> bool:
    return any(q.get("root") and q.get("handle") == ROOT_HANDLE for q in _tc_json("qdisc", "show", "dev", dev))


def _in_place(st: dict) -> bool:
    if st["profile"]["name"] == "none":
        return True
    if st["backend"] == "netem":
        return _our_root(st["dev"])
    return HostLink(st["dev"], {}, {}, state_dir(), []).alive()


def apply(profile: Profile, backend: str, dev: str, excludes: list) -> tuple[dict, bool]:
    """Put ``profile`` on ``dev``; (state, changed). Same request already in place: no change."""
    up, down = profile.link_config()
    want = {"profile": profile.summary(), "backend": backend, "dev": dev,
            "excludes": [str(n) for n in excludes], "up": up, "down": down}
    st = read_state()
    if st and {k: st.get(k) for k in want} == want and _in_place(st):
        return st, False
    if backend == "netem":
        for cfg in (up, down):
            if cfg.get("trace_file"):
                raise HostLinkError(f"profile {profile.name!r}: the netem backend cannot replay a trace_file")
    clear()
    state_dir().mkdir(parents=True, exist_ok=True)
    offloads = _offloads(dev)
    st = {**want, "applied_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
          "netns": _netns_id(), "offloads_before": offloads, "ifb": None, "commands": []}
    state_path().write_text(json.dumps(st, indent=2))  # written first: clear() can undo a partial apply
    if profile.is_null:
        return st, True
    _set_offloads(dev, {k: "off" for k in offloads})
    try:
        if backend == "netem":
            st["ifb"] = _ifb_name(dev)
            for argv in netem_plan(dev, profile, excludes):
                _run(argv)
                st["commands"].append(argv)
        else:
            link = HostLink(dev, up, down, state_dir(), excludes)
            link.start()
            st["linkem"] = {"pid": link.pid, "config": str(link.config_path), "ipv6_rules": link.ipv6,
                            "queues": list(link.queues)}
    except Exception:
        clear()
        raise
    state_path().write_text(json.dumps(st, indent=2))
    return st, True


def clear() -> list[str]:
    """Remove what ``apply`` installed (identified by handle, pref, chain and ifb name); idempotent."""
    st = read_state() or {}
    done = []
    devs = {st["dev"]} if st.get("dev") else set()
    devs |= {q["dev"] for q in _tc_json("qdisc", "show") if q.get("handle") == ROOT_HANDLE and q.get("dev")}
    prefix = f"{_netns_id()}-"  # a linkem pid file without a record (record lost): its device
    devs |= {p.name[len(prefix):-len(".pid")] for p in state_dir().glob(prefix + "*.pid")}
    for dev in sorted(devs):
        if _our_root(dev):
            _run(["tc", "qdisc", "del", "dev", dev, "root"])
            done.append(f"{dev}: root prio {ROOT_HANDLE} + netem {UP_HANDLE}")
        filters = _tc_json("filter", "show", "dev", dev, "parent", "ffff:")
        ours = sorted({f["pref"] for f in filters if PREF_BASE <= f.get("pref", 0) <= PREF_REDIRECT})
        for pref in ours:
            _run(["tc", "filter", "del", "dev", dev, "parent", "ffff:", "pref", str(pref)], check=False)
        if ours:
            done.append(f"{dev}: ingress filters (prefs {', '.join(hex(p) for p in ours)})")
            if not _tc_json("filter", "show", "dev", dev, "parent", "ffff:"):
                _run(["tc", "qdisc", "del", "dev", dev, "ingress"], check=False)
        ifb = _ifb_name(dev)
        if Path("/sys/class/net", ifb).exists():
            _run(["ip", "link", "del", ifb])
            done.append(f"{ifb}: ifb + netem {DOWN_HANDLE}")
        link = HostLink(dev, {}, {}, state_dir(), [])
        if link.pid is not None or link._ns_exists():
            link.stop()
            done.append(f"{dev}: linkem process")
            for p in (link.config_path, link.stats_path, link.log_path):
                p.unlink(missing_ok=True)
    if shutil.which("iptables") and any(c in _run(["iptables", "-w", "-S"], check=False).stdout for c in CHAINS.values()):
        _drop_chains()
        done.append("iptables chains " + ", ".join(CHAINS.values()))
    if st.get("offloads_before"):
        _set_offloads(st["dev"], st["offloads_before"])
    state_path().unlink(missing_ok=True)
    return done


def show() -> dict:
    """The record of what was applied and what tc / iptables / the process say now."""
    st = read_state()
    out: dict = {"state_file": str(state_path()), "applied": st}
    dev = st["dev"] if st else default_dev()
    live = {"dev": dev, "qdiscs": _run(["tc", "qdisc", "show", "dev", dev], check=False).stdout.strip(),
            "ingress_filters": _run(["tc", "filter", "show", "dev", dev, "parent", "ffff:"], check=False).stdout.strip()}
    ifb = _ifb_name(dev)
    if Path("/sys/class/net", ifb).exists():
        live["ifb"] = {ifb: _run(["tc", "qdisc", "show", "dev", ifb], check=False).stdout.strip()}
    if shutil.which("iptables"):
        live["iptables"] = [ln for c in CHAINS.values()
                            for ln in _run(["iptables", "-w", "-S", c], check=False).stdout.splitlines()]
    link = HostLink(dev, {}, {}, state_dir(), [])
    live["linkem_alive"] = link.alive() if link.pid is not None else False
    out["live"] = live
    out["in_place"] = bool(st) and _in_place(st)
    return out

