"""Ingest hardening: ``results.content_sha256`` (sha256 of the record's canonical
JSON, as ingest computes it) so that a different record under a stored id is told
apart from a duplicate (``id_conflict``); the writer may update and delete quarantine rows
(a line's row is refreshed when its reason changes and deleted when the line later ingests).

v_dns_query (0007's definition) selects ``r.*`` from results, which Postgres expands when the
view is created: it is created again here so that it is the same whether it was made before or
after this column (a downgrade from 0009 re-creates it at this revision), and the downgrade
drops it while it drops the column.

Rows stored before this revision get their hash computed here from the stored columns (the
hash is defined on the record as stored, so it is the same as ingest computes; the code is
frozen in db/migrations/frozen/m0008.py).

Revision ID: 0008_ingest_hardening
Revises: 0007_strict_records
"""

import sqlalchemy as sa
from alembic import op

from db.migrations.frozen.m0008 import canonical_json, content_hash, stored_envelope
from db.migrations.views import create_view

revision = "0008_ingest_hardening"
down_revision = "0007_strict_records"
branch_labels = None
depends_on = None

WRITER = "dnscamp_writer"
_ENVELOPE = "id, schema, kind, campaign, run, unit, vantage_id, provider, region, network_profile, started_at, status, error"


def _backfill(conn, batch: int = 5000) -> None:
    last = None
    while True:
        rows = conn.execute(
            sa.text(
                f"SELECT {_ENVELOPE}, env, body FROM results "
                "WHERE content_sha256 IS NULL AND (CAST(:last AS uuid) IS NULL OR id > CAST(:last AS uuid)) "
                "ORDER BY id LIMIT :n"
            ),
            {"last": last, "n": batch},
        ).all()
        if not rows:
            return
        hashes = [content_hash(stored_envelope(r), canonical_json(r[13]), canonical_json(r[14])) for r in rows]
        conn.execute(
            sa.text(
                "UPDATE results r SET content_sha256 = v.h FROM unnest(CAST(:ids AS uuid[]), CAST(:hs AS bytea[])) "
                "AS v(id, h) WHERE r.id = v.id"
            ),
            {"ids": [str(r[0]) for r in rows], "hs": hashes},
        )
        last = str(rows[-1][0])


def upgrade() -> None:
    op.add_column("results", sa.Column("content_sha256", sa.LargeBinary))
    create_view(op, "0007_strict_records", "v_dns_query")
    op.execute(f"GRANT UPDATE, DELETE ON quarantine TO {WRITER}")
    _backfill(op.get_bind())


def downgrade() -> None:
    op.execute(f"REVOKE UPDATE, DELETE ON quarantine FROM {WRITER}")
    op.execute("DROP VIEW v_dns_query")  # it may depend on the column (r.*, above)
    op.drop_column("results", "content_sha256")
    create_view(op, "0007_strict_records", "v_dns_query")
