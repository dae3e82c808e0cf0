"""The real-campaign steps after phase 1 (library behind `dnscamp atlas discover`,
`plan/submit --phase 2` and `server-ping`): discovery from the store + our query log,
phase-2 requests from the discovery, and the server's own pings to every resolver."""

from __future__ import annotations

import time
from pathlib import Path

import psycopg

from atlas import emit
from atlas.discovery import AsnDb, Discovered, discover, from_query_log, from_whoami
from atlas.parse import DnsRow
from atlas.spec import AtlasSpec


def _dns_rows(conn: psycopg.Connection, campaign: str) -> list[DnsRow]:
    rows = conn.execute(
        "SELECT msm_id, prb_id, \"timestamp\", fw, subid, af, resolver, src_addr, from_addr, proto, rcode, qname, "
        "qtype, answers, response_time_ms, response_size, status, error FROM v_atlas_dns "
        "WHERE campaign = %s AND role = 'resolver_dns' ORDER BY \"timestamp\"", (campaign,)).fetchall()
    return [DnsRow(*r) for r in rows]


def discover_from_store(url: str, spec: AtlasSpec, *, query_log: Path | None = None) -> list[Discovered]:
    """Probes = those with a result of the campaign's resolver_dns measurement; their public
    address is Atlas's ``from``. Evidence: the query log (zone mode) or the whoami answers."""
    with psycopg.connect(url) as conn:
        rows = _dns_rows(conn, spec.name)
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


def discovered_resolvers(url: str, campaign: str) -> dict[int, str]:
    with psycopg.connect(url) as conn:
        return dict(conn.execute("SELECT prb_id, resolver FROM atlas_discovery WHERE campaign = %s",
                                 (campaign,)).fetchall())


def server_pings(spec: AtlasSpec, resolvers: list[str], *, src_addr: str, msm_id: int) -> list[dict]:
    """RTT_Server: five pings from this host (our server) to each resolver, as Atlas JSON."""
    from vantage_agent import errors
    from vantage_agent.ping import PingParams, ping

    out = []
    params = PingParams(targets=resolvers or ["127.0.0.1"], count=spec.ping.packets, interval_ms=200, timeout_ms=2000)
    for res in resolvers:
        try:
            rtts = list(ping(params, res).rtts_ms)
        except errors.MeasurementError:
            rtts = [None] * spec.ping.packets  # stored as a timeout result, never dropped
        out.append(emit.ping_result(msm_id=msm_id, prb_id=0, timestamp=int(time.time()), src_addr=src_addr,
                                    dst_addr=res, rtts=rtts, fw=0))
    return out
