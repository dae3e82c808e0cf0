"""The store side of the Atlas pipeline (tables of migrations 0005_atlas and 0014_atlas_probes).

Writers: measurement roles (what each msm_id is for), discovery rows and probe places (from
RIPE Atlas's probe API or the testbed's Atlas-like probes). Readers: a campaign's resolver_dns
rows (what discovery starts from), the discovered resolvers, the probes with results, and the
probes' RTTs from the view ``v_quicsocks_savings`` (what `dnscamp atlas quicsocks` analyses).
The results themselves are ingested by collectors/atlas_ingest.py. The store is migrated by its
caller (`dnscamp db up`, the command), never here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

import psycopg
from psycopg.types.json import Jsonb

from atlas.discovery import Discovered, discover_campaign
from atlas.dns import DnsRow
from atlas.probes import ProbeMeta
from atlas.quicsocks import ProbeRtts
from atlas.spec import AtlasSpec

ROLES = ("resolver_dns", "probe_server", "probe_resolver", "server_resolver")


def register_measurement(conn: psycopg.Connection, msm_id: int, *, campaign: str, role: str,
                         target: str | None = None, definition: dict[str, Any] | None = None) -> None:
    if role not in ROLES:
        raise ValueError(f"role: unknown {role!r} (known: {', '.join(ROLES)})")
    conn.execute(
        "INSERT INTO atlas_measurements (msm_id, campaign, role, target, definition) VALUES (%s, %s, %s, %s, %s) "
        "ON CONFLICT (msm_id) DO UPDATE SET campaign = EXCLUDED.campaign, role = EXCLUDED.role, "
        "target = EXCLUDED.target, definition = EXCLUDED.definition",
        (msm_id, campaign, role, target, Jsonb(definition) if definition is not None else None),
    )


def save_discovery(conn: psycopg.Connection, campaign: str, rows: Iterable[Discovered]) -> int:
    """Upsert discovery rows."""
    n = 0
    for d in rows:
        conn.execute(
            "INSERT INTO atlas_discovery (campaign, prb_id, probe_addr, resolver, configured_resolver, probe_asn, "
            "resolver_asn, method, qname) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT ON CONSTRAINT pk_atlas_discovery DO UPDATE SET probe_addr = EXCLUDED.probe_addr, "
            "resolver = EXCLUDED.resolver, configured_resolver = EXCLUDED.configured_resolver, "
            "probe_asn = EXCLUDED.probe_asn, resolver_asn = EXCLUDED.resolver_asn, method = EXCLUDED.method, "
            "qname = EXCLUDED.qname, discovered_at = now()",
            (campaign, d.prb_id, d.probe_addr, d.resolver, d.configured_resolver, d.probe_asn, d.resolver_asn,
             d.method, d.qname),
        )
        n += 1
    return n


def probe_rtts(url: str, *, campaign: str | None = None) -> list[ProbeRtts]:
    sql = (
        "SELECT prb_id, rtt_dns_ms, rtt_server_ms, rtt_direct_ms, resolver, probe_asn, resolver_asn "
        "FROM v_quicsocks_savings"
    )
    params: tuple = ()
    if campaign:
        sql += " WHERE campaign = %s"
        params = (campaign,)
    sql += " ORDER BY campaign, prb_id"
    with psycopg.connect(url) as conn:
        rows = conn.execute(sql, params).fetchall()
    return [ProbeRtts(int(r[0]), r[1], r[2], r[3], r[4], r[5], r[6]) for r in rows]


def save_probes(conn: psycopg.Connection, campaign: str, probes: Iterable[ProbeMeta]) -> int:
    """Upsert the campaign's probe rows (a later fetch replaces an earlier one)."""
    rows = [(campaign, p.prb_id, p.country_code, p.asn_v4, p.lat, p.lon, p.status, p.source) for p in probes]
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO atlas_probes (campaign, prb_id, country_code, asn_v4, lat, lon, status, source)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT ON CONSTRAINT pk_atlas_probes DO UPDATE SET"
            " country_code = EXCLUDED.country_code, asn_v4 = EXCLUDED.asn_v4, lat = EXCLUDED.lat, lon = EXCLUDED.lon,"
            " status = EXCLUDED.status, source = EXCLUDED.source, fetched_at = now()", rows)
    return len(rows)


def campaign_probe_ids(conn: psycopg.Connection, campaign: str) -> list[int]:
    """Probes with results in the campaign (prb_id 0 is our server's own pings, not a probe)."""
    return [r[0] for r in conn.execute(
        "SELECT DISTINCT r.prb_id FROM atlas_results_raw r LEFT JOIN atlas_measurements m ON m.msm_id = r.msm_id"
        " WHERE COALESCE(r.campaign, m.campaign) = %s AND r.prb_id <> 0 ORDER BY 1", (campaign,))]


def resolver_dns_rows(conn: psycopg.Connection, campaign: str) -> list[DnsRow]:
    """The campaign's resolver_dns responses (v_atlas_dns), oldest first: what discovery reads."""
    rows = conn.execute(
        "SELECT msm_id, prb_id, \"timestamp\", fw, subid, af, resolver, src_addr, from_addr, proto, rcode, qname, "
        "qtype, answers, response_time_ms, response_size, status, error FROM v_atlas_dns "
        "WHERE campaign = %s AND role = 'resolver_dns' ORDER BY \"timestamp\"", (campaign,)).fetchall()
    return [DnsRow(*r) for r in rows]


def discover_from_store(url: str, spec: AtlasSpec, *, query_log: Path | None = None) -> list[Discovered]:
    """Discovery of the campaign ``spec`` from its resolver_dns results in the store (and our
    query log, zone mode): atlas.discovery.discover_campaign over resolver_dns_rows."""
    with psycopg.connect(url) as conn:
        rows = resolver_dns_rows(conn, spec.name)
    return discover_campaign(spec, rows, query_log=query_log)


def discovered_resolvers(url: str, campaign: str) -> dict[int, str]:
    with psycopg.connect(url) as conn:
        return dict(conn.execute("SELECT prb_id, resolver FROM atlas_discovery WHERE campaign = %s",
                                 (campaign,)).fetchall())
