"""Resolver discovery: which resolver address serves each probe, and in which AS it is.

Method of 001_3c494309ab66be23.txt §IV-B: each probe asks its own resolver for a random
subdomain of a zone we are authoritative for; the source address of the query that reaches our
authoritative server for that name is the probe's resolver. To tell the probes apart, the DNS
measurement uses Atlas's ``prepend_probe_id`` (each probe prepends ``<prb_id>-<timestamp>.`` to
the query name), so one query-log line names both the probe and the resolver. Alternative: a
"whoami" name whose answer is the address of the asking resolver (e.g. Akamai's
whoami.akamai.net, or whoami.test on the testbed).

ISP-resolver filter (§IV-B): "an ISP-provided DNS resolver uses an IP address from the same
autonomous system as the node does" — ASNs come from pyasn with a DB file given in config.
"""

from __future__ import annotations

import ipaddress
import json
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from atlas.dns import DnsRow
from atlas.spec import AtlasSpec


@dataclass(frozen=True)
class Discovered:
    prb_id: int
    probe_addr: str | None
    resolver: str  # the address that reached our authoritative server (or that whoami names)
    configured_resolver: str | None  # the address the probe sent its query to, if known
    probe_asn: int | None
    resolver_asn: int | None
    method: str  # "query_log" | "whoami"
    qname: str | None = None

    @property
    def isp_resolver(self) -> bool:
        return self.probe_asn is not None and self.probe_asn == self.resolver_asn


def random_label(nbytes: int = 6) -> str:
    """A fresh random label, so that no resolver can answer from its cache."""
    return "r" + secrets.token_hex(nbytes)


def probe_qname(prb_id: int, timestamp: int, argument: str) -> str:
    """The name a probe asks with ``prepend_probe_id``: ``<prb_id>-<timestamp>.<argument>``."""
    return f"{prb_id}-{int(timestamp)}.{argument.rstrip('.')}."


_PREFIX = re.compile(r"^(\d+)-(\d+)\.")
_ADDR_PORT = re.compile(
    r"(?P<addr>\[[0-9a-fA-F:.]+\]|\d{1,3}(?:\.\d{1,3}){3}|[0-9a-fA-F]*:[0-9a-fA-F:.]+)(?:[:#](?P<port>\d+))?"
)
_QNAME = re.compile(r"(?P<qname>(?:[A-Za-z0-9_\-]+\.)+[A-Za-z0-9_\-]*\.?)")


@dataclass(frozen=True)
class LogEntry:
    src: str
    qname: str


def _valid_ip(s: str) -> str | None:
    s = s.strip("[]")
    try:
        return str(ipaddress.ip_address(s))
    except ValueError:
        return None


def parse_query_log_line(line: str, zone: str) -> LogEntry | None:
    """One query of our authoritative server's log, in any of these formats:

    - JSON lines ``{"src": "10.90.1.53", "qname": "12-1700000000.rab.whoami.test."}``;
    - CoreDNS ``log`` plugin: ``[INFO] 10.90.1.53:41235 - 4242 "A IN 12-17....whoami.test. udp 60 false 1232" ...``;
    - BIND querylog: ``client @0x.. 10.90.1.53#41235 (name): query: name IN A -E(0)``;
    - plain ``<src> <qname>``.

    Returns None for lines that are not a query for a name under ``zone``.
    """
    zone = zone.rstrip(".").lower()
    line = line.strip()
    if not line:
        return None
    if line.startswith("{"):
        try:
            d = json.loads(line)
        except json.JSONDecodeError:
            return None
        src, qname = _valid_ip(str(d.get("src", ""))), str(d.get("qname", "")).lower()
        if src and (qname.rstrip(".").endswith("." + zone) or qname.rstrip(".") == zone):
            return LogEntry(src, qname if qname.endswith(".") else qname + ".")
        return None
    qname = None
    for m in _QNAME.finditer(line):
        q = m.group("qname").lower()
        if q.rstrip(".").endswith("." + zone):
            qname = q if q.endswith(".") else q + "."
            break
    if qname is None:
        return None
    for m in _ADDR_PORT.finditer(line):
        ip = _valid_ip(m.group("addr"))
        if ip and ip not in qname:
            return LogEntry(ip, qname)
    return None


def from_query_log(lines: Iterable[str], zone: str) -> dict[int, LogEntry]:
    """prb_id → the (last) query of that probe that reached our authoritative server."""
    out: dict[int, LogEntry] = {}
    for line in lines:
        e = parse_query_log_line(line, zone)
        if e is None:
            continue
        m = _PREFIX.match(e.qname)
        if m:
            out[int(m.group(1))] = e
    return out


def from_whoami(rows: Iterable[DnsRow]) -> dict[int, str]:
    """prb_id → resolver address named in a whoami answer (A/AAAA address, or an address in TXT)."""
    out: dict[int, str] = {}
    for r in rows:
        if r.status != "ok":
            continue
        for a in r.answers:
            data = a.get("data", {})
            cand = data.get("Address")
            if cand is None and a.get("type") == "TXT":
                for d in data.get("Data", []) if isinstance(data.get("Data"), list) else [data.get("Data", "")]:
                    for tok in re.split(r"[\s\"']+", str(d)):
                        if _valid_ip(tok):
                            cand = tok
                            break
            ip = _valid_ip(str(cand)) if cand else None
            if ip:
                out[r.prb_id] = ip
                break
    return out


class AsnDb:
    """ASN lookups with pyasn; ``path`` is an IPASN data file (text ``prefix<TAB>asn`` lines,
    as written by pyasn_util_convert.py or by the testbed)."""

    def __init__(self, path: str | Path):
        import pyasn

        self.path = Path(path)
        if not self.path.exists():
            raise FileNotFoundError(f"{self.path}: no pyasn database (set asn_db in the spec)")
        self._db = pyasn.pyasn(str(self.path))

    def asn(self, addr: str | None) -> int | None:
        if not addr:
            return None
        try:
            asn, _ = self._db.lookup(addr)
        except ValueError:
            return None
        return int(asn) if asn is not None else None


def discover(
    probes: dict[int, str | None],
    *,
    log_entries: dict[int, LogEntry] | None = None,
    whoami: dict[int, str] | None = None,
    configured: dict[int, str] | None = None,
    asn_db: AsnDb | None = None,
) -> list[Discovered]:
    """Combine query-log (preferred) and whoami evidence into one row per probe found.

    ``probes``: prb_id → the probe's public address (Atlas's ``from``), used for its ASN.
    """
    out: list[Discovered] = []
    for prb_id, addr in sorted(probes.items()):
        method, resolver, qname = None, None, None
        if log_entries and prb_id in log_entries:
            method, resolver, qname = "query_log", log_entries[prb_id].src, log_entries[prb_id].qname
        elif whoami and prb_id in whoami:
            method, resolver = "whoami", whoami[prb_id]
        if resolver is None:
            continue
        out.append(
            Discovered(
                prb_id=prb_id,
                probe_addr=addr,
                resolver=resolver,
                configured_resolver=(configured or {}).get(prb_id),
                probe_asn=asn_db.asn(addr) if asn_db else None,
                resolver_asn=asn_db.asn(resolver) if asn_db else None,
                method=method,  # type: ignore[arg-type]
                qname=qname,
            )
        )
    return out


def discover_campaign(spec: AtlasSpec, rows: Iterable[DnsRow], *, query_log: Path | None = None) -> list[Discovered]:
    """Discovery of a real campaign from its resolver_dns rows: the probes are those with a
    result, their public address is Atlas's ``from``. Evidence: the query log (zone mode) or the
    whoami answers."""
    rows = list(rows)
    probes: dict[int, str | None] = {}
    configured: dict[int, str] = {}
    for r in rows:
        probes[r.prb_id] = r.from_addr or probes.get(r.prb_id)
        if r.resolver:
            configured.setdefault(r.prb_id, r.resolver)
    entries = None
    log = query_log or (Path(spec.zone.query_log) if spec.zone.query_log else None)
    if spec.zone.name and log is not None:
        with open(log, errors="replace") as fh:
            entries = from_query_log(fh, spec.zone.name)
    whoami = from_whoami(rows) if spec.zone.whoami else None
    asn = AsnDb(spec.asn_db) if spec.asn_db else None
    return discover(probes, log_entries=entries, whoami=whoami, configured=configured, asn_db=asn)
