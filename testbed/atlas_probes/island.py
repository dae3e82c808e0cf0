"""The Atlas-like probes' island: the plan of probes (their ground truth), the namespaces, the
linkem links and the DNS servers (each ISP resolver and our authoritative server)."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import random
import selectors
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from testbed.atlas_probes.asndb import write_asn_db
from vantage_agent.stats import median

SERVER_ADDR = "10.90.0.10"
AUTH_ADDR = "10.90.0.53"
SERVER_ZONE = "qs.whoami.test"
SERVER_ASN = 64499
PROBE_ASN_BASE = 64500  # probe i's /24 is announced by AS 64500 + i
PUBLIC_ASN_BASE = 65000  # a "public" resolver's /28 of probe i by AS 65000 + i
CLONE_NEWNET = 0x40000000
MAX_PROBES = 99


class IslandError(RuntimeError):
    """The probes' island cannot be planned, built or torn down (the message says which)."""


# -- namespaces -----------------------------------------------------------------------------------
_libc = ctypes.CDLL(None, use_errno=True)


@contextlib.contextmanager
def in_netns(ns: str) -> Iterator[None]:
    """Run the calling thread inside namespace ``ns`` (sockets made here stay in it)."""
    here = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    there = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    try:
        if _libc.setns(there, CLONE_NEWNET) != 0:
            raise IslandError(f"setns {ns}: {os.strerror(ctypes.get_errno())}")
        try:
            yield
        finally:
            if _libc.setns(here, CLONE_NEWNET) != 0:  # pragma: no cover - would be fatal
                raise IslandError("setns back to the original namespace failed")
    finally:
        os.close(there)
        os.close(here)


@dataclass(frozen=True)
class ProbeTruth:
    prb_id: int
    probe_addr: str
    resolver: str  # configured resolver address (what the probe asks)
    egress: str  # address the resolver uses towards our authoritative server
    rtt_dns: float  # configured access-link RTT (ms)
    rtt_server: float  # configured backbone RTT (ms)
    public_as: bool  # resolver announced by another AS

    @property
    def rtt_direct(self) -> float:
        return self.rtt_dns + self.rtt_server


def plan_probes(n: int, seed: int = 1) -> list[ProbeTruth]:
    """Delays per probe: RTT_DNS 1-30 ms (access), RTT_Server 2-40 ms (resolver placement)."""
    if not 1 <= n <= MAX_PROBES:
        raise IslandError(f"probes: 1..{MAX_PROBES}, not {n}")
    rng = random.Random(seed)
    out = []
    for i in range(1, n + 1):
        out.append(ProbeTruth(
            prb_id=i,
            probe_addr=f"10.90.{i}.2",
            resolver=f"10.90.{i}.53",
            egress=f"10.90.{i}.54" if i % 2 == 0 else f"10.90.{i}.53",
            rtt_dns=round(rng.uniform(1, 30), 1),
            rtt_server=round(rng.uniform(2, 40), 1),
            public_as=(i % 5 == 0),
        ))
    return out


def asn_prefixes(probes: list[ProbeTruth]) -> dict[str, int]:
    """The island's routing table for the pyasn database: prefix → announcing AS."""
    prefixes = {"10.90.0.0/24": SERVER_ASN}
    for p in probes:
        prefixes[f"10.90.{p.prb_id}.0/24"] = PROBE_ASN_BASE + p.prb_id
        if p.public_as:
            prefixes[f"10.90.{p.prb_id}.48/28"] = PUBLIC_ASN_BASE + p.prb_id
    return prefixes


class Island:
    """The offline probes' namespaces, links and DNS servers. Use as a context manager."""

    def __init__(self, probes: list[ProbeTruth], run_dir: Path):
        self.probes = probes
        self.run_dir = Path(run_dir)
        self.tag = f"dc-ap-{os.getpid()}"
        self.links: list[Any] = []
        self.created: list[str] = []
        self.query_log = self.run_dir / "auth-queries.jsonl"
        self._dns: DnsServers | None = None

    def ns(self, role: str, i: int | None = None) -> str:
        return f"{self.tag}-{role}{'' if i is None else i}"

    # -- build --------------------------------------------------------------------------------
    def up(self) -> None:
        from testbed import netns

        if os.geteuid() != 0:
            raise IslandError("the offline Atlas mode needs root (network namespaces)")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        srv = self.ns("s")
        self._add(srv)
        netns.add_lo_addr(srv, f"{SERVER_ADDR}/32")
        netns.add_lo_addr(srv, f"{AUTH_ADDR}/32")
        for p in self.probes:
            i = p.prb_id
            pr, a, r, b = self.ns("p", i), self.ns("a", i), self.ns("r", i), self.ns("b", i)
            for x in (pr, a, r, b):
                self._add(x)
            # probe -- a -- r -- b -- server, /30 segments inside 10.90.i.0/28
            seg = [(pr, "p0", f"10.90.{i}.2", a, "a0", f"10.90.{i}.1"),
                   (a, "a1", f"10.90.{i}.5", r, "r0", f"10.90.{i}.6"),
                   (r, "r1", f"10.90.{i}.9", b, "b0", f"10.90.{i}.10"),
                   (b, "b1", f"10.90.{i}.13", srv, f"s{i}", f"10.90.{i}.14")]
            for ns_a, if_a, ad_a, ns_b, if_b, ad_b in seg:
                netns.add_veth(ns_a, if_a, ns_b, if_b)
                netns.configure_iface(ns_a, if_a, f"{ad_a}/30")
                netns.configure_iface(ns_b, if_b, f"{ad_b}/30")
            netns.add_lo_addr(r, f"{p.resolver}/32")
            if p.egress != p.resolver:
                netns.add_lo_addr(r, f"{p.egress}/32")
            netns.add_route(pr, "default", f"10.90.{i}.1")
            netns.add_route(a, "default", f"10.90.{i}.6")
            netns.add_route(r, f"10.90.{i}.0/30", f"10.90.{i}.5")
            netns.add_route(r, "default", f"10.90.{i}.10")
            netns.add_route(b, f"10.90.{i}.0/29", f"10.90.{i}.9")
            netns.add_route(b, f"10.90.{i}.48/28", f"10.90.{i}.9")
            netns.add_route(b, "default", f"10.90.{i}.14")
            netns.add_route(srv, f"10.90.{i}.0/24", f"10.90.{i}.13")
            self._link(f"ap{os.getpid()}a{i}", a, "a0", "a1", p.rtt_dns)
            self._link(f"ap{os.getpid()}b{i}", b, "b0", "b1", p.rtt_server)
        self.asn_db_path = write_asn_db(self.run_dir / "ipasn.dat", asn_prefixes(self.probes))
        self._dns = DnsServers(self)
        self._dns.start()

    def _add(self, ns: str) -> None:
        from testbed import netns

        netns.add_ns(ns)
        self.created.append(ns)

    def _link(self, name: str, router: str, if_a: str, if_b: str, rtt_ms: float) -> None:
        from testbed.linkem.driver import Link

        one_way = {"delay_ms": rtt_ms / 2}
        link = Link(name, router, if_a, if_b, one_way, one_way, self.run_dir / "links")
        self.links.append(link)
        link.start()

    def down(self) -> None:
        from testbed import netns

        problems = []
        if self._dns is not None:
            try:
                self._dns.stop()
            except Exception as exc:  # keep tearing down
                problems.append(f"dns servers: {exc}")
            self._dns = None
        for link in self.links:
            try:
                link.stop()
            except Exception as exc:  # keep tearing down
                problems.append(f"{link.name}: {exc}")
        for ns in reversed(self.created):
            try:
                netns.del_ns(ns)
            except Exception as exc:
                problems.append(f"{ns}: {exc}")
        self.created = []
        if problems:
            raise IslandError("teardown: " + "; ".join(problems))

    def __enter__(self) -> "Island":
        try:
            self.up()
        except BaseException:
            self.down()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.down()

    def lateness_ms(self) -> dict[str, float | None]:
        """The link emulator's own lateness over every direction of every link (ms): explains
        the RTT errors (the part the emulator added beyond the configured delay)."""
        p50s, p99s, maxs = [], [], []
        for link in self.links:
            try:
                dirs = link.stats().get("directions", {})
            except Exception:  # noqa: BLE001 - stats are diagnostics, never fatal
                continue
            for d in dirs.values():
                lat = (d or {}).get("lateness_ns") or {}
                if lat.get("count"):
                    p50s.append(lat["p50"] / 1e6)
                    p99s.append(lat["p99"] / 1e6)
                    maxs.append(lat["max"] / 1e6)
        if not p50s:
            return {"p50_median": None, "p99_max": None, "max": None}
        return {"p50_median": round(median(p50s), 3), "p99_max": round(max(p99s), 3),
                "max": round(max(maxs), 3)}

    def link_backend(self) -> str | None:
        return self.links[0].backend if self.links else None


class DnsServers(threading.Thread):
    """Every ISP resolver (a forwarder to our authoritative server) and the authoritative server,
    served by one thread with sockets that live in their namespaces."""

    def __init__(self, island: Island):
        super().__init__(daemon=True, name="atlas-offline-dns")
        self.island = island
        self.sel = selectors.DefaultSelector()
        self._halt = threading.Event()
        self.pending: dict[tuple[int, int], tuple[socket.socket, tuple]] = {}
        self.log = open(island.query_log, "a", buffering=1)
        with in_netns(island.ns("s")):
            self.auth = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self.auth.bind((AUTH_ADDR, 53))
        self.sel.register(self.auth, selectors.EVENT_READ, ("auth", None))
        for p in island.probes:
            with in_netns(island.ns("r", p.prb_id)):
                listen = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                listen.bind((p.resolver, 53))
                up = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                up.bind((p.egress, 0))
            self.sel.register(listen, selectors.EVENT_READ, ("listen", (p.prb_id, up)))
            self.sel.register(up, selectors.EVENT_READ, ("upstream", (p.prb_id, listen)))

    def run(self) -> None:
        import dns.flags
        import dns.message
        import dns.name
        import dns.rcode
        import dns.rdataclass
        import dns.rdatatype
        import dns.rrset

        while not self._halt.is_set():
            for keyobj, _ in self.sel.select(timeout=0.2):
                sock: socket.socket = keyobj.fileobj  # type: ignore[assignment]
                role, extra = keyobj.data
                try:
                    data, addr = sock.recvfrom(65535)
                except OSError:
                    continue
                if role == "listen":  # a probe asks its resolver: forward from the egress address
                    prb, up = extra
                    qid = int.from_bytes(data[:2], "big")
                    self.pending[(prb, qid)] = (sock, addr)
                    up.sendto(data, (AUTH_ADDR, 53))
                elif role == "upstream":
                    prb, listen = extra
                    qid = int.from_bytes(data[:2], "big")
                    client = self.pending.pop((prb, qid), None)
                    if client:
                        client[0].sendto(data, client[1])
                else:  # authoritative: log, answer with the asker's address (whoami)
                    try:
                        q = dns.message.from_wire(data)
                        qname = q.question[0].name
                    except Exception:  # noqa: BLE001 - garbage is ignored, like a real server
                        continue
                    self.log.write(json.dumps({"ts": time.time(), "src": addr[0], "qname": qname.to_text()}) + "\n")
                    r = dns.message.make_response(q)
                    r.flags |= dns.flags.AA
                    if qname.is_subdomain(dns.name.from_text(SERVER_ZONE)):
                        r.answer.append(dns.rrset.from_text(qname, 0, "IN", "A", addr[0]))
                    else:
                        r.set_rcode(dns.rcode.REFUSED)
                    sock.sendto(r.to_wire(), addr)

    def stop(self) -> None:
        self._halt.set()
        if self.is_alive():
            self.join(timeout=2)
        for key in list(self.sel.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
        self.sel.close()
        self.log.close()
