"""The content hash in 16 bytes (docs/store.md "Footprint"): ``result_ids.content_sha256``
keeps the first 16 bytes of the record's sha256 (collectors.parse.content_hash), 17 bytes less
per record (32 bytes + a 1-byte varlena header -> 16 + 1, and the row's alignment). The hash only
tells a repeat of a stored record (a duplicate) from a different record under the same id (an
id_conflict); two different records of one id colliding in 128 bits is out of reach (2^-128 per
pair; a random collision among all hashes needs ~2^64 records).

Upgrade: the table is rewritten (``ALTER COLUMN ... TYPE bytea USING substr(...)``: an
expression forces the rewrite, so the stored rows shrink at once; an UPDATE would leave every
old row version dead until a VACUUM FULL). PostgreSQL refuses to retype a column a view reads,
so the ``results`` view (0012) is dropped and created again exactly as it was, with its
INSTEAD OF triggers (0012, 0013, 0017, 0018) and grants, read from the catalog.

Downgrade: the full sha256 cannot be had back from 16 bytes. The code of 0020 compares 32-byte
hashes, so a 16-byte one would make every re-ingest of a stored record an id_conflict. The
hashes are set to NULL instead, which that code reads as "stored before content hashes" (0008):
a re-ingest of those records is a duplicate, as it should be, but a different record under one
of their ids is then taken as a duplicate too (skipped, not quarantined). Records ingested after
the downgrade get full hashes again.

Revision ID: 0021_short_content_hash
Revises: 0020_compact_rollups
"""

from alembic import op
from sqlalchemy import text

revision = "0021_short_content_hash"
down_revision = "0020_compact_rollups"
branch_labels = None
depends_on = None

HASH_BYTES = 16  # collectors.parse.content_hash


def _retype(using: str) -> None:
    """``ALTER TABLE result_ids ALTER COLUMN content_sha256 TYPE bytea USING <using>``, with the
    results view (which reads the column) dropped and made again as the catalog says it was."""
    conn = op.get_bind()
    view = conn.execute(text("SELECT pg_get_viewdef('results'::regclass, false)")).scalar_one()
    triggers = conn.execute(text(
        "SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = 'results'::regclass AND NOT tgisinternal "
        "ORDER BY tgname"
    )).scalars().all()  # fmt: skip
    grants = conn.execute(text(
        "SELECT a.grantee::regrole::text, a.privilege_type, a.is_grantable FROM pg_class c, aclexplode(c.relacl) a "
        "WHERE c.oid = 'results'::regclass AND a.grantee <> c.relowner ORDER BY 1, 2"
    )).all()  # fmt: skip
    op.execute("DROP VIEW results")  # no CASCADE: a view built on results stops the migration
    op.execute(f"ALTER TABLE result_ids ALTER COLUMN content_sha256 TYPE bytea USING {using}")
    op.execute(f"CREATE VIEW results AS {view}")
    for t in triggers:
        op.execute(t)
    for grantee, privilege, grantable in grants:
        op.execute(f"GRANT {privilege} ON results TO {grantee}" + (" WITH GRANT OPTION" if grantable else ""))


def upgrade() -> None:
    _retype(f"substr(content_sha256, 1, {HASH_BYTES})")


def downgrade() -> None:
    # NULL: "stored before content hashes" for the code of 0020 (see the docstring)
    _retype("NULL::bytea")
