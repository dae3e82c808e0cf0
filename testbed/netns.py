"""Network-namespace and veth helpers for the testbed island.

Everything here acts inside namespaces whose names carry ``testbed.plan.PREFIX`` (``dc-``).
Nothing is ever created in the root namespace: veth pairs are created directly inside their
two namespaces (``ip link add A netns X type veth peer name B netns Y``), and every other
command runs with ``ip -n NS`` or ``ip netns exec NS``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from testbed.plan import PREFIX

NETNS_DIR = Path("/run/netns")
IFNAMSIZ = 15  # usable characters of a Linux interface name


class NetnsError(RuntimeError):
    """A namespace command failed; the message carries the command and its stderr."""


def run(argv: list[str], check: bool = True, timeout: float = 30.0, input: str | None = None) -> subprocess.CompletedProcess:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, input=input)
    except FileNotFoundError as exc:
        raise NetnsError(f"{argv[0]}: not installed (install/35-testbed-tools.sh)") from exc
    except subprocess.TimeoutExpired as exc:
        raise NetnsError(f"{' '.join(argv)}: timed out after {timeout}s") from exc
    if check and p.returncode != 0:
        raise NetnsError(f"{' '.join(argv)}: exit {p.returncode}: {p.stderr.strip()}")
    return p


def is_root() -> bool:
    return os.geteuid() == 0


def check_ifname(name: str) -> str:
    if not name or len(name) > IFNAMSIZ or "/" in name or any(c.isspace() for c in name):
        raise NetnsError(f"bad interface name {name!r} (1-{IFNAMSIZ} characters, no '/' or spaces)")
    return name


def check_ns_name(ns: str) -> str:
    if not ns.startswith(PREFIX) or "/" in ns or any(c.isspace() for c in ns):
        raise NetnsError(f"namespace {ns!r} is not a testbed namespace (must start with {PREFIX!r})")
    return ns


# -- namespaces ------------------------------------------------------------------------------


def list_ns(prefix: str = PREFIX) -> list[str]:
    """Every namespace whose name starts with ``prefix`` (from /run/netns, like `ip netns list`)."""
    try:
        names = os.listdir(NETNS_DIR)
    except FileNotFoundError:
        return []
    return sorted(n for n in names if n.startswith(prefix))


def exists(ns: str) -> bool:
    return (NETNS_DIR / ns).exists()


def add_ns(ns: str) -> None:
    """Create ``ns``, bring its ``lo`` up and set the island's sysctls (forwarding on, IPv6 off on
    new interfaces, no reverse-path filter)."""
    check_ns_name(ns)
    run(["ip", "netns", "add", ns])
    run(["ip", "-n", ns, "link", "set", "lo", "up"])
    sysctls = {
        "net/ipv4/ip_forward": "1",
        "net/ipv4/conf/all/rp_filter": "0",
        "net/ipv4/conf/default/rp_filter": "0",
        # IPv4-only island: no IPv6 on the veths (no router solicitations or DAD through the
        # emulated links); lo keeps ::1 for browsers and drivers.
        "net/ipv6/conf/default/disable_ipv6": "1",
        "net/ipv6/conf/default/accept_ra": "0",
    }
    script = "; ".join(f"echo {v} > /proc/sys/{k}" for k, v in sysctls.items())
    run(["ip", "netns", "exec", ns, "sh", "-c", script])


def ns_pids(ns: str) -> list[int]:
    p = run(["ip", "netns", "pids", ns], check=False)
    out = []
    for tok in p.stdout.split():
        try:
            out.append(int(tok))
        except ValueError:
            pass
    return out


def kill_pids(pids: list[int], grace: float = 3.0) -> None:
    """SIGTERM, wait up to ``grace`` seconds, then SIGKILL; by PID only."""
    pids = [p for p in pids if p != os.getpid()]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(_running(p) for p in pids):
        time.sleep(0.05)
    for pid in pids:
        if _running(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(_running(p) for p in pids):
        time.sleep(0.05)


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # state is the field after the parenthesised command; Z (zombie) and X (dead) do not count
    state = stat.rsplit(")", 1)[-1].split()[0]
    return state not in ("Z", "X")


def del_ns(ns: str) -> None:
    """Kill every process in ``ns`` (they would keep it alive), then delete it. Idempotent."""
    check_ns_name(ns)
    if not exists(ns):
        return
    pids = ns_pids(ns)
    if pids:
        kill_pids(pids)
    p = run(["ip", "netns", "del", ns], check=False)
    if p.returncode != 0 and exists(ns):
        raise NetnsError(f"ip netns del {ns}: {p.stderr.strip()}")


# -- links and addresses ---------------------------------------------------------------------


def add_veth(ns_a: str, if_a: str, ns_b: str, if_b: str) -> None:
    """A veth pair created directly inside its two namespaces (never in the root namespace)."""
    check_ns_name(ns_a), check_ns_name(ns_b), check_ifname(if_a), check_ifname(if_b)
    run(["ip", "link", "add", if_a, "netns", ns_a, "type", "veth", "peer", "name", if_b, "netns", ns_b])


def configure_iface(ns: str, ifname: str, cidr: str, offloads_off: bool = True) -> None:
    """Address, up, and segmentation/receive offloads off.

    Offloads off so that every packet the link emulator sees is one wire-sized frame: with TSO/
    GSO a 64 KB super-packet would cross the emulator as one unit (rate, loss and the queue would
    act on 40 segments at once; TOOLCHAIN.md, NFQUEUE pitfalls)."""
    run(["ip", "-n", ns, "addr", "add", cidr, "dev", ifname])
    run(["ip", "-n", ns, "link", "set", ifname, "up"])
    if offloads_off:
        run(["ip", "netns", "exec", ns, "ethtool", "-K", ifname, "tso", "off", "gso", "off", "gro", "off"], check=False)


def add_lo_addr(ns: str, cidr: str) -> None:
    run(["ip", "-n", ns, "addr", "add", cidr, "dev", "lo"])


def add_route(ns: str, prefix: str, via: str) -> None:
    run(["ip", "-n", ns, "route", "replace", prefix, "via", via])


def exec_argv(ns: str, argv: list[str]) -> list[str]:
    return ["ip", "netns", "exec", ns, *argv]


def root_snapshot() -> dict[str, str]:
    """Addresses, routes and links of the root namespace (tests compare before/after)."""
    return {
        "addr": run(["ip", "-o", "addr"], check=False).stdout,
        "route": run(["ip", "route"], check=False).stdout,
        "link": "\n".join(
            line.split(":", 2)[1].strip() + " " + (line.split("link/", 1)[-1].split()[0] if "link/" in line else "")
            for line in run(["ip", "-o", "link"], check=False).stdout.splitlines()
            if ":" in line
        ),
    }
