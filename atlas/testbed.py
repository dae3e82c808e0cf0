"""The offline mode: Atlas-like probes on the testbed, the whole pipeline without the Internet.

Topology (per probe i; every node a network namespace, every delay a linkem link):

    probe i ──[access link: RTT_DNS_i]── ISP node i (resolver) ──[backbone link: RTT_Server_i]── server

- the probe (10.90.i.2) uses its ISP resolver 10.90.i.53; the resolver asks our authoritative
  server from its egress address (10.90.i.53, or 10.90.i.54 for even i: the "configured address
  differs from the sending address" case of 001_3c494309ab66be23.txt §IV-B);
- every fifth probe's resolver addresses (10.90.i.48/28) are announced by another AS in the
  testbed's pyasn database: a "public" resolver that the ISP-resolver filter must drop;
- the server node holds 10.90.0.10 (ping target) and 10.90.0.53, authoritative for
  ``SERVER_ZONE``: it logs every query (source, name) and answers with the asker's address
  (so the whoami method works too).

Ground truth: RTT_DNS = access RTT, RTT_Server = backbone RTT, RTT_direct = their sum.

The probes run the same definitions as on RIPE Atlas (a DNS query through the probe's resolver
for ``<prb_id>-<ts>.<random>.<zone>`` as with ``prepend_probe_id``; five pings probe → server,
probe → discovered resolver, server → resolver) and emit RIPE Atlas JSON (atlas.emit); the run
then ingests those files, discovers resolvers from the query log, and analyses the store.

One process drives everything: sockets are opened inside the namespaces with setns(2) and
used from here, so no agent process runs per probe. Namespaces are named
``dc-ap-<pid>-<role><i>`` (``p`` probe, ``a`` access router, ``r`` ISP/resolver node, ``b``
backbone router, ``s`` server): the pid keeps them out of the main island's `testbed down`.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import random
import selectors
import socket
import statistics
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterator

from atlas import emit
from atlas.discovery import AsnDb, discover, from_query_log, from_whoami, random_label, write_asn_db
from atlas.parse import parse_dns
from atlas.quicsocks import summarize
from vantage_agent.stats import median

SERVER_ADDR = "10.90.0.10"
AUTH_ADDR = "10.90.0.53"
SERVER_ZONE = "qs.whoami.test"
SERVER_ASN = 64499
CLONE_NEWNET = 0x40000000
MAX_PROBES = 99
PING_COUNT = 5
PING_INTERVAL_MS = 100.0


class TestbedError(RuntimeError):
    pass


# -- namespaces -----------------------------------------------------------------------------------
_libc = ctypes.CDLL(None, use_errno=True)


@contextlib.contextmanager
def in_netns(ns: str) -> Iterator[None]:
    """Run the calling thread inside namespace ``ns`` (sockets made here stay in it)."""
    here = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    there = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    try:
        if _libc.setns(there, CLONE_NEWNET) != 0:
            raise TestbedError(f"setns {ns}: {os.strerror(ctypes.get_errno())}")
        try:
            yield
        finally:
            if _libc.setns(here, CLONE_NEWNET) != 0:  # pragma: no cover - would be fatal
                raise TestbedError("setns back to the original namespace failed")
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
        raise TestbedError(f"probes: 1..{MAX_PROBES}, not {n}")
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
            raise TestbedError("the offline Atlas mode needs root (network namespaces)")
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
        prefixes = {"10.90.0.0/24": SERVER_ASN}
        for p in self.probes:
            prefixes[f"10.90.{p.prb_id}.0/24"] = 64500 + p.prb_id
            if p.public_as:
                prefixes[f"10.90.{p.prb_id}.48/28"] = 65000 + p.prb_id
        self.asn_db_path = write_asn_db(self.run_dir / "ipasn.dat", prefixes)
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
            raise TestbedError("teardown: " + "; ".join(problems))

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


# -- measurements ----------------------------------------------------------------------------------
def _ping(ns: str, dst: str) -> list[float | None]:
    from vantage_agent.ping import PingParams, ping

    params = PingParams(targets=[dst], count=PING_COUNT, interval_ms=PING_INTERVAL_MS, timeout_ms=1000)
    with in_netns(ns):
        body = ping(params, dst)
    return list(body.rtts_ms)


def _dns_query(ns: str, src: str, resolver: str, qname: str, timeout: float = 3.0) -> tuple[bytes | None, float | None]:
    import dns.message

    q = dns.message.make_query(qname, "A")
    with in_netns(ns):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind((src, 0))
        s.settimeout(timeout)
        t0 = time.perf_counter_ns()
        s.sendto(q.to_wire(), (resolver, 53))
        while True:
            data = s.recv(65535)
            t1 = time.perf_counter_ns()
            if data[:2] == q.to_wire()[:2]:
                return data, (t1 - t0) / 1e6
    except (socket.timeout, OSError):
        return None, None
    finally:
        s.close()


def run_measurements(island: Island, msm: dict[str, int], label: str) -> dict[str, list[dict]]:
    """Phase 1: DNS via each probe's resolver + discovery; phase 2: the three ping sets."""
    out: dict[str, list[dict]] = {"dns": [], "ping": []}
    ts = int(time.time())
    for p in island.probes:
        qname = f"{p.prb_id}-{ts}.{label}.{SERVER_ZONE}."
        abuf, rt = _dns_query(island.ns("p", p.prb_id), p.probe_addr, p.resolver, qname)
        resp = emit.dns_response(dst_addr=p.resolver, src_addr=p.probe_addr, abuf=abuf, rt_ms=rt, timestamp=ts)
        out["dns"].append(emit.dns_result(msm_id=msm["resolver_dns"], prb_id=p.prb_id, timestamp=ts,
                                          from_addr=p.probe_addr, responses=[resp]))
    return out


def ping_phase(island: Island, msm: dict[str, int], discovered: dict[int, str]) -> list[dict]:
    rows: list[dict] = []
    for p in island.probes:
        pns = island.ns("p", p.prb_id)
        ts = int(time.time())
        rows.append(emit.ping_result(msm_id=msm["probe_server"], prb_id=p.prb_id, timestamp=ts,
                                     src_addr=p.probe_addr, dst_addr=SERVER_ADDR, rtts=_ping(pns, SERVER_ADDR)))
        res = discovered.get(p.prb_id)
        if res:
            rows.append(emit.ping_result(msm_id=msm["probe_resolver"], prb_id=p.prb_id, timestamp=ts,
                                         src_addr=p.probe_addr, dst_addr=res, rtts=_ping(pns, res)))
    for res in sorted(set(discovered.values())):  # our agent on the server: RTT_Server
        rows.append(emit.ping_result(msm_id=msm["server_resolver"], prb_id=0, timestamp=int(time.time()),
                                     src_addr=SERVER_ADDR, dst_addr=res, rtts=_ping(island.ns("s"), res)))
    return rows


def _errors(pairs: list[tuple[float, float]]) -> dict[str, float | None]:
    errs = [abs(m - t) for m, t in pairs]
    if not errs:
        return {"median": None, "max": None, "mean_signed": None, "n": 0}
    return {"median": round(median(errs), 3), "max": round(max(errs), 3),
            "mean_signed": round(statistics.fmean(m - t for m, t in pairs), 3), "n": len(errs)}


def run_offline(*, n_probes: int, campaign: str, seed: int, db_url: str, keep: bool = False,
                run_dir: Path | None = None, probes: list[ProbeTruth] | None = None) -> dict[str, Any]:
    """The whole pipeline offline; returns the report (summary, discovery check, RTT errors).
    ``probes``: the probe population to build (default plan_probes(n_probes, seed)), e.g. one
    with the RTTs of a paper's table."""
    import psycopg

    from atlas import probes as probe_meta
    from atlas import store
    from collectors.atlas_ingest import ingest_files
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
        meas = run_measurements(island, msm, label)
        dns_file = run_dir / "results-dns.jsonl"
        dns_file.write_text("".join(json.dumps(r) + "\n" for r in meas["dns"]))
        # discovery: our authoritative server's query log (primary) and the whoami answers
        time.sleep(0.05)
        log_entries = from_query_log(island.query_log.read_text().splitlines(), SERVER_ZONE)
        whoami = from_whoami([row for r in meas["dns"] for row in parse_dns(r)])
        asn = AsnDb(island.asn_db_path)
        found = discover(
            {p.prb_id: p.probe_addr for p in probes}, log_entries=log_entries, whoami=whoami,
            configured={p.prb_id: p.resolver for p in probes}, asn_db=asn)
        discovered = {d.prb_id: d.resolver for d in found}
        pings = ping_phase(island, msm, discovered)
        ping_file = run_dir / "results-ping.jsonl"
        ping_file.write_text("".join(json.dumps(r) + "\n" for r in pings))
        backend = island.link_backend()
        time.sleep(0.3)  # let the emulators write their stats
        lateness = island.lateness_ms()
    finally:
        if not keep:
            island.down()
    with psycopg.connect(db_url) as conn:
        for role, mid in msm.items():
            store.register_measurement(conn, mid, campaign=campaign, role=role,
                                       target=SERVER_ADDR if role == "probe_server" else None,
                                       definition={"offline": True, "packets": PING_COUNT, "label": label})
        conn.execute("DELETE FROM atlas_discovery WHERE campaign = %s", (campaign,))
        store.save_discovery(conn, campaign, found)
        # the probes' documented sites (atlas/testbed_sites.json): the QuicSocks geomap's places
        probe_meta.save_probes(conn, campaign, probe_meta.testbed_probes(p.prb_id for p in probes))
    stats = ingest_files([dns_file, ping_file], db_url, campaign=campaign)
    rtts = {r.prb_id: r for r in store.probe_rtts(db_url, campaign=campaign)}
    truth = {p.prb_id: p for p in probes}
    wrong = [p.prb_id for p in probes if discovered.get(p.prb_id) != p.egress]
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
        "campaign": campaign,
        "probes": n_probes,
        "seed": seed,
        "link_backend": backend,
        "discovery": {"correct": n_probes - len(wrong), "wrong": wrong,
                      "methods": sorted({d.method for d in found}),
                      "whoami_agrees": sum(1 for p, a in whoami.items() if discovered.get(p) == a)},
        "isp_filter_correct": isp_ok,
        "ingest": stats.as_json(),
        "errors_ms": errs,
        "link_lateness_ms": lateness,
        "summary": {k: v for k, v in summary.items() if k != "cdf"},
        "per_probe": per_probe,
        "run_dir": str(run_dir),
        "duration_s": round(time.monotonic() - t_start, 1),
    }


def format_report(r: dict[str, Any]) -> str:
    from atlas.quicsocks import format_summary

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
