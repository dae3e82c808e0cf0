"""The few store operations of the Atlas pipeline (tables of migration 0005_atlas).

Writers: measurement roles (what each msm_id is for) and discovery rows. Reader: the probes'
RTTs from the view ``v_quicsocks_savings`` (what `dnscamp atlas quicsocks` analyses).
"""

from __future__ import annotations

from typing import Any, Iterable

import psycopg
from psycopg.types.json import Jsonb

from atlas.quicsocks import ProbeRtts

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


def save_discovery(conn: psycopg.Connection, campaign: str, rows: Iterable[Any]) -> int:
    """Upsert discovery rows (atlas.discovery.Discovered)."""
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
