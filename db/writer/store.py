"""The writer's side of one ingest connection: dimension ids, month partitions, the records'
COPY into the compact store (migration 0012, docs/store.md "Layout") and their rollups.

A record is a row of ``result_ids`` (id, content hash, batch, line: what dedup probes) and a
row of ``dns_queries`` (dns_query records: typed per-record columns, the rest of the body in a
shared ``dns_shapes`` row) or of ``generic_results`` (every other kind, and a dns_query body
that does not fit the typed columns: the body as jsonb, with its shape too). The envelope's
repeated values (campaign, run, vantage...) are one ``contexts`` row, ``env`` one
``environments`` row; both and the shapes are keyed by the sha256 of their canonical JSON. A
parser encodes everything but the dimension ids (`db.writer.batch.Parsed`), which `Store`
fills in.
"""

from __future__ import annotations

import operator
import struct

import psycopg

from db.writer.batch import Parsed
from db.writer.encode import (DNS, DNS_COLUMNS, F4, GENERIC, GENERIC_COLUMNS, HASH_BYTES, NULL, REGISTRY_COLUMNS,
                              copy_rows, copy_sql)  # fmt: skip
from db.writer.rollups import SUM_TABLES, add_rollups

_COPY_REGISTRY = copy_sql("result_ids", REGISTRY_COLUMNS)
_COPY = {DNS: copy_sql("dns_queries", DNS_COLUMNS), GENERIC: copy_sql("generic_results", GENERIC_COLUMNS)}
_ROW_START = {t: struct.pack(">h", len(c)) for t, c in ((DNS, DNS_COLUMNS), (GENERIC, GENERIC_COLUMNS))}
_REG_START = struct.pack(">h", len(REGISTRY_COLUMNS))
# The batch's ids as one comma-joined text: psycopg's list dumper would check every element
# with a regex (a few us per record in the main process). A hash stored whole (32 bytes: a row
# inserted through the results view with the full sha256) compares by its first HASH_BYTES.
_PROBE = (
    f"SELECT r.id::text, substr(r.content_sha256, 1, {HASH_BYTES}), b.source_file, r.source_line FROM result_ids r "
    "JOIN ingest_batches b ON b.id = r.batch_id WHERE r.id = ANY(string_to_array(%s, ',')::uuid[])"
)
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


def _same(col: list) -> list:
    return col


class Store:
    """The writer on one connection for one ingest run: dimension ids by sha256 and the months
    whose partitions exist, cached for the run (dimension rows are content-addressed and
    committed before the batches that use them, so a rolled-back batch leaves no dangling id).
    The store is at the head revision (the CLI migrates before it ingests)."""

    def __init__(self, conn: psycopg.Connection):
        self.conn = conn
        self.ids: dict[str, dict[bytes, int]] = {t: {} for t in _DIM_SQL}
        self.fields: dict[str, dict[bytes, bytes]] = {t: {} for t in _DIM_SQL}  # sha256 -> the id's COPY field
        self.probed: set[str] = set()  # files with a stored id: their batches probe first (collectors.ingest)
        self.months: set[int] = set()
        self.sum_tables = False  # the session's temporary tables of the parsers' sums exist

    def prepare(self, p: Parsed) -> None:
        """Dimension rows and partitions the batch needs, each in its own short transaction."""
        if not self.sum_tables:
            with self.conn.transaction(), self.conn.cursor() as cur:
                cur.execute(SUM_TABLES)
            self.sum_tables = True
        need = {
            "contexts": {k: v for k, v in p.dims.contexts.items() if k not in self.ids["contexts"]},
            "environments": {k: v for k, v in p.dims.environments.items() if k not in self.ids["environments"]},
            "dns_shapes": {k: v for k, v in p.dims.shapes.items() if k not in self.ids["dns_shapes"]},
        }
        for table, new in need.items():
            if not new:
                continue
            keys = sorted(new)  # one order for every ingest: no deadlock between two
            if table == "contexts":
                cols = [list(c) for c in zip(*(new[k] for k in keys))]
            else:
                cols = [[new[k].decode() for k in keys]]
            with self.conn.transaction(), self.conn.cursor() as cur:
                cur.execute(_DIM_SQL[table], (keys, *cols))
                cur.execute(f"SELECT sha256, id FROM {table} WHERE sha256 = ANY(%b)", (keys,))
                got = [(bytes(s), i) for s, i in cur.fetchall()]
            self.ids[table].update(got)
            self.fields[table].update((s, F4(4, i)) for s, i in got)
        months = p.months - self.months
        for m in sorted(months):
            with self.conn.transaction():
                self.conn.execute("SELECT dnscamp_ensure_partitions(make_timestamptz(%s, %s, 1, 0, 0, 0, 'UTC'))",
                                  (m // 12, m % 12 + 1))
            self.months.add(m)

    @staticmethod
    def stored(cur: psycopg.Cursor, ids: list[str]) -> dict[str, tuple]:
        """The stored records among ``ids``: id -> (content hash (its first HASH_BYTES; None:
        stored before content hashes), source file, source line)."""
        return {r[0]: r[1:] for r in cur.execute(_PROBE, (",".join(ids),)).fetchall()}

    @staticmethod
    def new_batch(cur: psycopg.Cursor, source: str) -> int:
        """A new ``ingest_batches`` row for records from ``source``: its id."""
        return cur.execute("INSERT INTO ingest_batches (source_file) VALUES (%s) RETURNING id", (source,)).fetchone()[0]

    def copy(self, cur: psycopg.Cursor, p: Parsed, idx: list[int], batch: int, reparse=None) -> int:
        """COPY records ``idx`` of ``p`` into result_ids and their kind tables and add them to the
        rollups; the count COPY reports is checked. ``reparse``: see `add_rollups`."""
        b = F4(4, batch)
        ctx = self.ids["contexts"]
        f_ctx, f_env, f_shape = self.fields["contexts"], self.fields["environments"], self.fields["dns_shapes"]
        if len(idx) == len(p.ids):  # every record (idx holds distinct indices): no selection
            sel = _same
        else:
            sel = operator.itemgetter(*idx) if len(idx) > 1 else lambda col: (col[idx[0]],)
        rows: dict[int, list[bytes]] = {DNS: [], GENERIC: []}
        dns, gen = rows[DNS], rows[GENERIC]
        dns_head, gen_head = _ROW_START[DNS], _ROW_START[GENERIC]
        for c, e, sh, t, row in zip(map(f_ctx.__getitem__, sel(p.ctxs)), map(f_env.__getitem__, sel(p.envs)),
                                    sel(p.shapes), sel(p.tables), sel(p.rows)):  # fmt: skip
            if t == DNS:
                dns.append(b"".join((dns_head, c, e, b, f_shape[sh], row)))
            else:  # a generic row: another kind (no shape), or a dns_query stored whole
                gen.append(b"".join((gen_head, c, e, b, NULL if sh is None else f_shape[sh], row)))
        copy_rows(cur, _COPY_REGISTRY, list(map((_REG_START + b).__add__, sel(p.regs))))
        for table, data in rows.items():
            if data:
                copy_rows(cur, _COPY[table], data)
        add_rollups(cur, p, idx, ctx, reparse)
        return len(idx)
