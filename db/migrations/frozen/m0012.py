"""Migration 0012_compact_store's data migration, frozen: every row of the one-table store
(``results_0011``) into the compact store's tables (contexts, environments, dns_shapes,
result_ids, dns_queries, generic_results at this revision: generic_results without a shape
column), as ingest split a record then, with its content hash, file, line and ingest time;
and the ``results`` compatibility view with its triggers (0026_shaped_misfits replaces the
insert trigger, starting from this text).

The rows come out as the live ingest code made them when it moved them (tests walk every
revision, so this module is what those stores hold): dimension rows keyed by the sha256 of
their canonical JSON, inserted per batch of rows in sha256 order; a dns_query body stored
whole gets its shape row too (read by no view before 0026).
"""

from __future__ import annotations

import hashlib
import json
import operator
import re
import struct
from collections import defaultdict
from datetime import datetime, timedelta, timezone
from typing import Any

import orjson
import sqlalchemy as sa

DNS_INT8 = ("t_start", "t_connected", "t_tls_done", "t_query_sent", "t_response", "handshake_bytes_sent",
            "handshake_bytes_received", "query_bytes_sent", "query_bytes_received")  # fmt: skip
DNS_INT4 = ("sequence", "response_size", "handshake_packets_sent", "handshake_packets_received",
            "query_packets_sent", "query_packets_received")  # fmt: skip
DNS_PER_RECORD = frozenset((*DNS_INT8, *DNS_INT4, "answers"))
ENVELOPE = "id, schema, kind, campaign, run, unit, vantage_id, provider, region, network_profile, started_at, status, error"

# results: the records as before (env and body as jsonb; a dns_query body is its shape plus
# its typed columns), for readers of the old table. INSERT stores the row whole in
# generic_results (its dimension rows keyed by the sha256 of their jsonb text); DELETE removes
# the record.
RESULTS_VIEW_SQL = f"""
CREATE VIEW results AS
SELECT x.id, c.schema, c.kind, c.campaign, c.run, x.unit, c.vantage_id, c.provider, c.region, c.network_profile,
       x.started_at, x.status, x.error, e.envb AS env, x.body, b.source_file, i.source_line, b.ingested_at,
       i.content_sha256
FROM (SELECT q.id, q.ctx_id, q.env_id, q.batch_id, q.started_at, q.unit, q.status, q.error,
             s.body::jsonb || jsonb_build_object({", ".join(f"'{c}', q.{c}" for c in (*DNS_INT8, *DNS_INT4))},
                                                 'answers', q.answers::jsonb) AS body
      FROM dns_queries q JOIN dns_shapes s ON s.id = q.shape_id
      UNION ALL
      SELECT id, ctx_id, env_id, batch_id, started_at, unit, status, error, body FROM generic_results) x
JOIN contexts c ON c.id = x.ctx_id
JOIN environments e ON e.id = x.env_id
JOIN ingest_batches b ON b.id = x.batch_id
JOIN result_ids i ON i.id = x.id;

CREATE FUNCTION dnscamp_results_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ctx_sha bytea := sha256(convert_to(jsonb_build_array(NEW.schema, NEW.kind, NEW.campaign, NEW.run,
        NEW.vantage_id, NEW.provider, NEW.region, NEW.network_profile)::text, 'UTF8'));
    env_sha bytea := sha256(convert_to(NEW.env::text, 'UTF8'));
    ctx int; env int; batch int;
BEGIN
    PERFORM dnscamp_ensure_partitions(NEW.started_at);
    INSERT INTO contexts (sha256, schema, kind, campaign, run, vantage_id, provider, region, network_profile)
    VALUES (ctx_sha, NEW.schema, NEW.kind, NEW.campaign, NEW.run, NEW.vantage_id, NEW.provider, NEW.region,
            NEW.network_profile) ON CONFLICT (sha256) DO NOTHING;
    SELECT id INTO ctx FROM contexts WHERE sha256 = ctx_sha;
    INSERT INTO environments (sha256, env) VALUES (env_sha, NEW.env::json) ON CONFLICT (sha256) DO NOTHING;
    SELECT id INTO env FROM environments WHERE sha256 = env_sha;
    INSERT INTO ingest_batches (source_file, ingested_at) VALUES (NEW.source_file, COALESCE(NEW.ingested_at, now()))
    RETURNING id INTO batch;
    INSERT INTO result_ids (id, content_sha256, batch_id, source_line)
    VALUES (NEW.id, NEW.content_sha256, batch, NEW.source_line);
    INSERT INTO generic_results (started_at, id, ctx_id, env_id, batch_id, unit, kind, status, error, body)
    VALUES (NEW.started_at, NEW.id, ctx, env, batch, NEW.unit, NEW.kind, NEW.status, NEW.error, NEW.body);
    RETURN NEW;
END $$;
CREATE FUNCTION dnscamp_results_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM dns_queries WHERE id = OLD.id AND started_at = OLD.started_at;
    DELETE FROM generic_results WHERE id = OLD.id AND started_at = OLD.started_at;
    DELETE FROM result_ids WHERE id = OLD.id;
    RETURN OLD;
END $$;
CREATE TRIGGER results_insert INSTEAD OF INSERT ON results FOR EACH ROW EXECUTE FUNCTION dnscamp_results_insert();
CREATE TRIGGER results_delete INSTEAD OF DELETE ON results FOR EACH ROW EXECUTE FUNCTION dnscamp_results_delete();
"""


# --- the rows' binary COPY format (PostgreSQL "Binary Format": per row a field count, then
# per field its length (-1 = NULL) and its bytes; a -1 field count ends the data)
COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
COPY_TRAILER = struct.pack(">h", -1)
NULL = struct.pack(">i", -1)
INT4 = struct.Struct(">i").pack
INT8 = struct.Struct(">q").pack
F8 = struct.Struct(">iq").pack
F4 = struct.Struct(">ii").pack
LEN16 = INT4(16)
JSONB_V1 = b"\x01"
PG_EPOCH = datetime(2000, 1, 1, tzinfo=timezone.utc)
US = timedelta(microseconds=1)
DNS, GENERIC = 0, 1
REGISTRY_COLUMNS = ("batch_id", "id", "content_sha256", "source_line")
DNS_COLUMNS = ("ctx_id", "env_id", "batch_id", "shape_id", "id", "started_at", "unit", "status", "error",
               *DNS_INT8, *DNS_INT4, "answers")  # fmt: skip
GENERIC_COLUMNS = ("ctx_id", "env_id", "batch_id", "id", "started_at", "unit", "kind", "status", "error", "body",
                   "body_exact")  # fmt: skip
_JSONB_LOSSY = re.compile(rb"-0\.0[,}\]]|[0-9]e\+?[0-9]")
_DNS_INT8_OF, _DNS_INT4_OF = operator.itemgetter(*DNS_INT8), operator.itemgetter(*DNS_INT4)


def _copy_sql(table: str, columns: tuple[str, ...]) -> str:
    return f"COPY {table} ({', '.join(columns)}) FROM STDIN (FORMAT BINARY)"


_COPY = {"reg": _copy_sql("result_ids", REGISTRY_COLUMNS), DNS: _copy_sql("dns_queries", DNS_COLUMNS),
         GENERIC: _copy_sql("generic_results", GENERIC_COLUMNS)}  # fmt: skip
_ROW_START = {"reg": struct.pack(">h", len(REGISTRY_COLUMNS)), DNS: struct.pack(">h", len(DNS_COLUMNS)),
              GENERIC: struct.pack(">h", len(GENERIC_COLUMNS))}  # fmt: skip
_DIM_SQL = {
    "contexts": (
        "INSERT INTO contexts (sha256, schema, kind, campaign, run, vantage_id, provider, region, network_profile) "
        "SELECT * FROM unnest(%b::bytea[], %b::text[], %b::text[], %b::text[], %b::text[], %b::text[], %b::text[], "
        "%b::text[], %b::text[]) ORDER BY 1 ON CONFLICT (sha256) DO NOTHING"
    ),
    "environments": "INSERT INTO environments (sha256, env) SELECT * FROM unnest(%b::bytea[], %b::json[]) ORDER BY 1 "
    "ON CONFLICT (sha256) DO NOTHING",
    "dns_shapes": "INSERT INTO dns_shapes (sha256, body) SELECT * FROM unnest(%b::bytea[], %b::json[]) ORDER BY 1 "
    "ON CONFLICT (sha256) DO NOTHING",
}


def canonical_json(value: Any) -> bytes:
    """Keys sorted, compact; integers beyond 64 bits (which orjson cannot write) by the stdlib."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _sha(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _canonical(value: Any) -> tuple[bytes, bytes]:
    data = canonical_json(value)
    return _sha(data), data


def _fields(values) -> bytes:
    parts = []
    for v in values:
        if v is None:
            parts.append(NULL)
            continue
        if v.__class__ is str:
            v = v.encode()
        parts += (INT4(len(v)), v)
    return b"".join(parts)


def _jsonb_lossy(data: bytes) -> bool:
    """jsonb keeps numbers as numeric (-0.0 comes back as 0.0, 1e16 as an integer): such a body
    also keeps its exact JSON text. The substring tests first, as ingest made them: a body they
    pass over (an exponent starting 4-9 without a sign) is not searched."""
    return (b"-0.0" in data or b"e1" in data or b"e2" in data or b"e3" in data or b"e+" in data) and \
        _JSONB_LOSSY.search(data) is not None


def _dns_split(body: dict) -> bytes | None:
    """A dns_query body's per-record COPY fields, or None when it does not fit the typed columns."""
    try:
        v8, v4, answers = _DNS_INT8_OF(body), _DNS_INT4_OF(body), body["answers"]
        fields = [NULL if v is None else F8(8, v) if v.__class__ is int else None for v in v8]
        fields += [NULL if v is None else F4(4, v) if v.__class__ is int else None for v in v4]
    except (KeyError, struct.error):
        return None
    if None in fields:
        return None
    answers = canonical_json(answers)
    fields += (INT4(len(answers)), answers)
    return b"".join(fields)


def _month(started_us: int) -> int:
    t = PG_EPOCH + timedelta(days=started_us // 86_400_000_000)
    return t.year * 12 + t.month - 1


class _Batch:
    """A batch of rows, split: per row its dimension hashes, kind table and COPY fields."""

    def __init__(self) -> None:
        self.contexts: dict[bytes, tuple] = {}
        self.environments: dict[bytes, bytes] = {}
        self.shapes: dict[bytes, bytes] = {}
        self.ctxs: list[bytes] = []
        self.envs: list[bytes] = []
        self.shape_of: list[bytes | None] = []
        self.tables: list[int] = []
        self.regs: list[bytes] = []
        self.rows: list[bytes] = []
        self.months: set[int] = set()

    def add(self, rid, envelope: list, env_json: bytes, body: Any, body_json: bytes, digest: bytes | None,
            lineno: int | None) -> None:  # fmt: skip
        started_us = envelope[10]
        ctx_values = (*envelope[1:5], *envelope[6:10])  # schema, kind, campaign, run, vantage (not unit)
        ctx, env = _sha(orjson.dumps(ctx_values)), _sha(env_json)
        self.contexts.setdefault(ctx, ctx_values)
        self.environments.setdefault(env, env_json)
        dns = envelope[2] == "dns_query"
        typed = dns and _dns_split(body)
        shape = None
        if typed:
            shape, shape_json = _canonical({k: v for k, v in body.items() if k not in DNS_PER_RECORD})
        elif dns and body.__class__ is dict:
            shape, shape_json = _canonical({k: v for k, v in body.items() if k not in DNS_PER_RECORD})
        if shape is not None:
            self.shapes.setdefault(shape, shape_json)
        if typed:
            row = b"".join((LEN16, rid.bytes, F8(8, started_us), _fields((envelope[5], envelope[11], envelope[12])),
                            typed))  # fmt: skip
        else:
            exact = body_json if _jsonb_lossy(body_json) else None
            row = _fields((rid.bytes, INT8(started_us), envelope[5], envelope[2], envelope[11], envelope[12],
                           JSONB_V1 + body_json, exact))  # fmt: skip
        self.ctxs.append(ctx)
        self.envs.append(env)
        self.shape_of.append(shape)
        self.tables.append(DNS if typed else GENERIC)
        self.regs.append(_fields((rid.bytes, digest, None if lineno is None else INT4(lineno))))
        self.rows.append(row)
        self.months.add(_month(started_us))


class _Writer:
    """Dimension ids by sha256 and the months whose partitions exist, kept over the batches."""

    def __init__(self, pg) -> None:
        self.pg = pg
        self.ids: dict[str, dict[bytes, bytes]] = {t: {} for t in _DIM_SQL}  # sha256 -> the id's COPY field
        self.months: set[int] = set()

    def prepare(self, b: _Batch) -> None:
        for table, values in (("contexts", b.contexts), ("environments", b.environments), ("dns_shapes", b.shapes)):
            new = {k: v for k, v in values.items() if k not in self.ids[table]}
            if not new:
                continue
            keys = sorted(new)
            if table == "contexts":
                cols = [list(c) for c in zip(*(new[k] for k in keys))]
            else:
                cols = [[new[k].decode() for k in keys]]
            with self.pg.transaction(), self.pg.cursor() as cur:
                cur.execute(_DIM_SQL[table], (keys, *cols))
                cur.execute(f"SELECT sha256, id FROM {table} WHERE sha256 = ANY(%b)", (keys,))
                self.ids[table].update((bytes(s), F4(4, i)) for s, i in cur.fetchall())
        for m in sorted(b.months - self.months):
            with self.pg.transaction():
                self.pg.execute("SELECT dnscamp_ensure_partitions(make_timestamptz(%s, %s, 1, 0, 0, 0, 'UTC'))",
                                (m // 12, m % 12 + 1))
            self.months.add(m)

    def copy(self, cur, b: _Batch, idx: list[int], batch: int) -> None:
        f = F4(4, batch)
        ctx, env, shape = self.ids["contexts"], self.ids["environments"], self.ids["dns_shapes"]
        rows: dict[int, list[bytes]] = {DNS: [], GENERIC: []}
        for i in idx:
            head = (_ROW_START[b.tables[i]], ctx[b.ctxs[i]], env[b.envs[i]], f)
            if b.tables[i] == DNS:
                rows[DNS].append(b"".join((*head, shape[b.shape_of[i]], b.rows[i])))
            else:
                rows[GENERIC].append(b"".join((*head, b.rows[i])))
        _copy(cur, _COPY["reg"], [_ROW_START["reg"] + f + b.regs[i] for i in idx])
        for table, data in rows.items():
            if data:
                _copy(cur, _COPY[table], data)


def _copy(cur, sql: str, rows: list[bytes]) -> None:
    with cur.copy(sql) as copy:
        copy.write(b"".join((COPY_HEADER, *rows, COPY_TRAILER)))
    if cur.rowcount != len(rows):
        raise RuntimeError(f"COPY stored {cur.rowcount} rows of {len(rows)} sent")


def move_rows(conn, batch: int = 5000) -> None:
    """Every row of ``results_0011`` into the new tables: the stored values as they are, with
    their content hash, file, line and ingest time (``conn``: SQLAlchemy's, in the migration's
    transaction)."""
    pg = conn.connection.driver_connection
    writer = _Writer(pg)
    batches = {}
    for bid, source, at in conn.execute(sa.text(
        "INSERT INTO ingest_batches (source_file, ingested_at) SELECT DISTINCT source_file, ingested_at "
        "FROM results_0011 RETURNING id, source_file, ingested_at"
    )):  # fmt: skip
        batches[(source, at)] = bid
    last = None
    while True:
        rows = conn.execute(sa.text(
            f"SELECT {ENVELOPE}, env::text, body::text, content_sha256, source_file, source_line, ingested_at "
            "FROM results_0011 WHERE CAST(:last AS uuid) IS NULL OR id > CAST(:last AS uuid) ORDER BY id LIMIT :n"
        ), {"last": last, "n": batch}).all()  # fmt: skip
        if not rows:
            return
        b = _Batch()
        by_batch = defaultdict(list)
        for r in rows:
            envelope = [str(r[0]), *r[1:10], (r[10] - PG_EPOCH) // US, *r[11:13]]
            env, body = json.loads(r[13]), json.loads(r[14])  # json: exact integers
            by_batch[batches[(r[16], r[18])]].append(len(b.rows))
            b.add(r[0], envelope, canonical_json(env), body, canonical_json(body),
                  None if r[15] is None else bytes(r[15]), r[17])  # fmt: skip
        writer.prepare(b)
        with pg.cursor() as cur:
            for bid, idx in by_batch.items():
                writer.copy(cur, b, idx, bid)
        last = str(rows[-1][0])
