"""Read stored result records back as the records that were ingested (issue 19, lossless
round trip): ``iter_records`` yields each one as a JSON-ready dict, envelope + ``env`` +
``body`` reassembled from however the store keeps them (docs/store.md "Records").

JSON-equal means: every key and value the agent wrote, with the same JSON types (an integer
stays an integer, ``10.0`` stays a float), so that `collectors.ingest.content_hash` of the
record given back equals the ``content_sha256`` ingest stored. Two things are given back in
their canonical form, as the envelope model defines them: ``started_at`` is the same instant
in UTC (``...Z``, microseconds shown when not zero, as the agents write it), and optional
envelope keys a line left out (``unit``, ``region``, ``network_profile``, ``error``, ``env``)
come back as their defaults (null, ``{}``).

Exporters (``dnscamp export --format jsonl``, the archive) build on this; its signature stays
while the storage underneath changes.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Iterator

import psycopg

ORDER = "started_at, id"
FETCH = 5000  # rows per round trip of the server-side cursor


def iso_utc(t: datetime) -> str:
    """``started_at`` as the agents write it (pydantic's form): UTC, ``Z``, microseconds only
    when not zero."""
    t = t.astimezone(timezone.utc).replace(tzinfo=None)
    return t.isoformat() + "Z"


def _filters(campaign: str | None, kind: str | None, run: str | None) -> tuple[str, list[Any]]:
    where, args = [], []
    for col, val in (("campaign", campaign), ("kind", kind), ("run", run)):
        if val is not None:
            where.append(f"{col} = %s")
            args.append(val)
    return (" WHERE " + " AND ".join(where)) if where else "", args


def _record(r: tuple) -> dict[str, Any]:
    (rid, schema, kind, campaign, run, unit, vid, provider, region, profile, started, status, error, env, body) = r
    return {
        "schema": schema, "kind": kind, "id": str(rid), "campaign": campaign, "run": run, "unit": unit,
        "vantage": {"id": vid, "provider": provider, "region": region, "network_profile": profile},
        "started_at": iso_utc(started), "status": status, "error": error, "env": env, "body": body,
    }  # fmt: skip


SELECT = (
    "SELECT id, schema, kind, campaign, run, unit, vantage_id, provider, region, network_profile, "
    "started_at, status, error, env, body FROM results"
)


def iter_records(
    conn: psycopg.Connection, *, campaign: str | None = None, kind: str | None = None, run: str | None = None
) -> Iterator[dict[str, Any]]:
    """Every stored result record (optionally of one campaign / kind / run), ordered by
    (started_at, id), each a dict JSON-equal to the line that was ingested. Streams through a
    server-side cursor (bounded memory at any size); ``conn`` may be in autocommit mode."""
    where, args = _filters(campaign, kind, run)
    with conn.transaction(), conn.cursor(name="dnscamp_iter_records") as cur:
        cur.itersize = FETCH
        cur.execute(f"{SELECT}{where} ORDER BY {ORDER}", args)
        for r in cur:
            yield _record(r)
