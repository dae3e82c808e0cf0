"""Read stored result records back as the records that were ingested (lossless
round trip): ``iter_records`` yields each one as a JSON-ready dict, envelope + ``env`` +
``body`` reassembled from however the store keeps them (docs/store.md "Records").

JSON-equal means: every key and value the agent wrote, with the same JSON types (an integer
stays an integer, ``10.0`` stays a float), so that `collectors.parse.content_hash` of the
record given back equals the ``content_sha256`` ingest stored. Two things are given back in
their canonical form, as the envelope model defines them: ``started_at`` is the same instant
in UTC (``...Z``, microseconds shown when not zero, as the agents write it), and optional
envelope keys a line left out (``unit``, ``region``, ``network_profile``, ``error``, ``env``)
come back as their defaults (null, ``{}``).

Exporters (``dnscamp export --format jsonl``, the archive) build on this; its signature stays
while the storage underneath changes.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Iterator

import orjson

if TYPE_CHECKING:
    import psycopg

from db.writer.encode import DNS_INT4, DNS_INT8

ORDER = "started_at, id"
FETCH = 5000  # rows per round trip of the server-side cursor


def iso_utc(t: datetime) -> str:
    """``started_at`` as the agents write it (pydantic's form): UTC, ``Z``, microseconds only
    when not zero."""
    t = t.astimezone(timezone.utc).replace(tzinfo=None)
    return t.isoformat() + "Z"


# The compact store (migration 0012, docs/store.md): a record is a dns_queries row (typed
# per-query integers + its dns_shapes row's JSON) or a generic_results row (the body), with
# its contexts and environments rows. Read one month partition at a time, each sorted.
_TYPED = (*DNS_INT8, *DNS_INT4)
_NULLS = ", ".join(["NULL"] * len(_TYPED))
_MONTH_SQL = f"""
SELECT q.started_at, q.id, q.ctx_id, q.env_id, q.shape_id, q.unit, q.status, q.error, {", ".join(f"q.{c}" for c in _TYPED)},
       q.answers::text, NULL::text
FROM dns_queries q WHERE q.started_at >= %(lo)s AND q.started_at < %(hi)s AND q.ctx_id = ANY(%(ctx)s)
UNION ALL
SELECT r.started_at, r.id, r.ctx_id, r.env_id, NULL, r.unit, r.status, r.error, {_NULLS}, NULL, COALESCE(r.body_exact::text, r.body::text)
FROM generic_results r WHERE r.started_at >= %(lo)s AND r.started_at < %(hi)s AND r.ctx_id = ANY(%(ctx)s)
ORDER BY 1, 2
"""
_MONTHS_SQL = """
SELECT DISTINCT substring(c.relname FROM '_p([0-9]{4}_[0-9]{2})$') AS m FROM pg_inherits i
JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent IN ('dns_queries'::regclass, 'generic_results'::regclass) ORDER BY 1
"""
# orjson reads an integer beyond 64 bits as a float: a text with a run of 19+ digits is read
# by the stdlib (exact integers), as ingest does.
_DIGITS = str.maketrans("123456789", "000000000")
_LONG_DIGIT_RUN = "0" * 19


def loads(text: str) -> Any:
    if _LONG_DIGIT_RUN in text.translate(_DIGITS):
        return json.loads(text)
    return orjson.loads(text)


def _filters(campaign: str | None, kind: str | None, run: str | None) -> tuple[str, list[Any]]:
    where, args = [], []
    for col, val in (("campaign", campaign), ("kind", kind), ("run", run)):
        if val is not None:
            where.append(f"{col} = %s")
            args.append(val)
    return (" WHERE " + " AND ".join(where)) if where else "", args


def iter_records(
    conn: psycopg.Connection, *, campaign: str | None = None, kind: str | None = None, run: str | None = None
) -> Iterator[dict[str, Any]]:
    """Every stored result record (optionally of one campaign / kind / run), ordered by
    (started_at, id), each a dict JSON-equal to the line that was ingested. Streams through a
    server-side cursor (bounded memory at any size); ``conn`` (the owner's or the writer's)
    may be in autocommit mode."""
    where, args = _filters(campaign, kind, run)
    with conn.transaction():
        contexts = {r[0]: r[1:] for r in conn.execute(
            "SELECT id, schema, kind, campaign, run, vantage_id, provider, region, network_profile "
            f"FROM contexts{where}", args)}  # fmt: skip
        if not contexts:
            return
        envs = dict(conn.execute("SELECT id, env::text FROM environments").fetchall())
        shapes = dict(conn.execute("SELECT id, body::text FROM dns_shapes").fetchall())
        months = [r[0] for r in conn.execute(_MONTHS_SQL)]
        ctx_ids = list(contexts)
        with conn.cursor(name="dnscamp_iter_records") as cur:
            cur.itersize = FETCH
            for m in months:
                lo = datetime(int(m[:4]), int(m[5:]), 1, tzinfo=timezone.utc)
                hi = datetime(lo.year + lo.month // 12, lo.month % 12 + 1, 1, tzinfo=timezone.utc)
                cur.execute(_MONTH_SQL, {"lo": lo, "hi": hi, "ctx": ctx_ids})
                for r in cur:
                    yield _record(r, contexts[r[2]], envs, shapes)


def _record(r: tuple, ctx: tuple, envs: dict[int, str], shapes: dict[int, str]) -> dict[str, Any]:
    started, rid, _, env_id, shape_id, unit, status, error = r[:8]
    if shape_id is None:
        body = loads(r[-1])
    else:
        body = loads(shapes[shape_id])
        body.update(zip(_TYPED, r[8 : 8 + len(_TYPED)]))
        body["answers"] = loads(r[-2])
    schema, kind, campaign, run, vid, provider, region, profile = ctx
    return {
        "schema": schema, "kind": kind, "id": str(rid), "campaign": campaign, "run": run, "unit": unit,
        "vantage": {"id": vid, "provider": provider, "region": region, "network_profile": profile},
        "started_at": iso_utc(started), "status": status, "error": error, "env": loads(envs[env_id]), "body": body,
    }  # fmt: skip
