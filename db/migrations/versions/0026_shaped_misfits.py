"""Every dns_query record has a ``dns_shapes`` row, and ``v_dns_query`` is one union of single
tables with the joins above it (exact questions over the base view at 10 M).

A dns_query whose per-record values do not fit the typed columns of ``dns_queries`` is stored
whole in ``generic_results``; until now the view read its resolver, transport, ... from that
body in a second UNION ALL branch, each branch joining ``contexts`` (and ``dns_shapes``) itself.
Postgres pulls a UNION ALL member up into the query reading the view only when the member reads
one table and has no WHERE of its own, so every query over the view ran a subquery scan of each
member's whole projection (~60 ms of each process's ~600 ms for a failure rate over 7 days).

Now ``generic_results.shape_id`` gives such a record its shape too (its body without the
per-record keys, as ingest makes a typed record's): the union's members read one
table each, the filter on kind sits above the union, and ``contexts``, ``dns_shapes`` and
``environments`` are joined once above it. The view's columns, rows and values are unchanged
(tested against 0025's definition). The rows stored whole before this revision get their
shapes here (from the body as stored, exact JSON text when kept); the ``results`` view's insert
trigger gives a dns_query row its shape from then on. At 10 M records, 0024's definition and
this one alternating (median of 3, two rounds), the failure rate per resolver × transport took
448 / 475 instead of 641 / 737 ms over 7 days and 1,714 / 1,770 instead of 2,604 / 2,344 ms over
30 (docs/benchmarks.md, "Store queries at 10,000,000 records").

Revision ID: 0026_shaped_misfits
Revises: 0025_results_kind
"""

import sqlalchemy as sa
from alembic import op

from db.migrations.frozen.m0012 import DNS_PER_RECORD, RESULTS_VIEW_SQL
from db.migrations.frozen.m0026 import dns_shape, loads
from db.migrations.views import create_view

revision = "0026_shaped_misfits"
down_revision = "0025_results_kind"
branch_labels = None
depends_on = None

# the results view's insert trigger as 0012 wrote it, and with the shape of a dns_query body:
# the body (jsonb) without the per-record keys, keyed like the other dimension rows this
# trigger writes (the sha256 of its jsonb text)
_OLD_INSERT = RESULTS_VIEW_SQL[
    RESULTS_VIEW_SQL.index("CREATE FUNCTION dnscamp_results_insert()") :
    RESULTS_VIEW_SQL.index("CREATE FUNCTION dnscamp_results_delete()")
].replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION")  # fmt: skip


def _per_record_keys() -> str:
    return "ARRAY[" + ", ".join(f"'{k}'" for k in sorted(DNS_PER_RECORD)) + "]"


def _new_insert() -> str:
    sql = _OLD_INSERT
    sql = sql.replace(
        "    ctx int; env int; batch int;\n",
        "    shape jsonb := CASE WHEN NEW.kind = 'dns_query' AND jsonb_typeof(NEW.body) = 'object'\n"
        f"                        THEN NEW.body - {_per_record_keys()} END;\n"
        "    shape_sha bytea := sha256(convert_to(shape::text, 'UTF8'));\n"
        "    ctx int; env int; batch int; shp int;\n",
    )
    sql = sql.replace(
        "    INSERT INTO ingest_batches",
        "    IF shape IS NOT NULL THEN\n"
        "        INSERT INTO dns_shapes (sha256, body) VALUES (shape_sha, shape::json) ON CONFLICT (sha256) DO NOTHING;\n"
        "        SELECT id INTO shp FROM dns_shapes WHERE sha256 = shape_sha;\n"
        "    END IF;\n"
        "    INSERT INTO ingest_batches",
    )
    sql = sql.replace(
        "INSERT INTO generic_results (started_at, id, ctx_id, env_id, batch_id, unit, kind, status, error, body)\n"
        "    VALUES (NEW.started_at, NEW.id, ctx, env, batch, NEW.unit, NEW.kind, NEW.status, NEW.error, NEW.body);",
        "INSERT INTO generic_results (started_at, id, ctx_id, env_id, batch_id, shape_id, unit, kind, status, error, body)\n"
        "    VALUES (NEW.started_at, NEW.id, ctx, env, batch, shp, NEW.unit, NEW.kind, NEW.status, NEW.error, NEW.body);",
    )
    assert "shp, NEW.unit" in sql and "shape_sha bytea" in sql and "INSERT INTO dns_shapes" in sql, "0012's trigger changed"
    return sql


def _shape_stored_bodies(conn, batch: int = 5000) -> None:
    """A shape for every dns_query stored whole: the shape of its body as stored (frozen/m0026.py)."""
    last = None
    while True:
        rows = conn.execute(sa.text(
            "SELECT id, started_at, COALESCE(body_exact::text, body::text) FROM generic_results "
            "WHERE kind = 'dns_query' AND shape_id IS NULL AND jsonb_typeof(body) = 'object' "
            "AND (CAST(:last AS uuid) IS NULL OR id > CAST(:last AS uuid)) ORDER BY id LIMIT :n"
        ), {"last": last, "n": batch}).all()  # fmt: skip
        if not rows:
            return
        shapes, row_shapes = {}, []
        for rid, started_at, text in rows:
            sha, data = dns_shape(loads(text))
            shapes.setdefault(sha, data)
            row_shapes.append(sha)
        conn.execute(sa.text(
            "INSERT INTO dns_shapes (sha256, body) SELECT * FROM unnest(CAST(:s AS bytea[]), CAST(:b AS json[])) "
            "ORDER BY 1 ON CONFLICT (sha256) DO NOTHING"
        ), {"s": list(shapes), "b": [d.decode() for d in shapes.values()]})  # fmt: skip
        ids = dict(conn.execute(sa.text("SELECT sha256, id FROM dns_shapes WHERE sha256 = ANY(:s)"),
                                {"s": list(shapes)}).all())  # fmt: skip
        params = [{"id": rid, "at": started_at, "shape": ids[sha]} for (rid, started_at, _), sha in zip(rows, row_shapes)]
        conn.execute(sa.text("UPDATE generic_results SET shape_id = :shape WHERE id = :id AND started_at = :at"), params)
        last = str(rows[-1][0])


def upgrade() -> None:
    op.execute("ALTER TABLE generic_results ADD COLUMN shape_id int")
    _shape_stored_bodies(op.get_bind())
    op.execute(_new_insert())
    create_view(op, revision, "v_dns_query")  # same columns: CREATE OR REPLACE


def downgrade() -> None:
    create_view(op, "0024_flat_dns_query", "v_dns_query")  # same columns: CREATE OR REPLACE
    op.execute(_OLD_INSERT)
    op.execute("ALTER TABLE generic_results DROP COLUMN shape_id")
    # the shapes made for bodies stored whole stay: dimension rows, read by no view without a record
