"""The rollups' bytes on disk (<= 400 bytes per dns_query record at 1 M records;
docs/store.md "Footprint"): how the tables that ingest upserts are vacuumed.

Every batch of ingest updates the rollup rows of the days and hours its records fall in
(dns_conn_daily: every row of the batch's day, ~1,000 rows of ~410 bytes per batch of the
generated campaign). An update writes a new row version and leaves the old one dead; the
heap only takes the dead versions' space back after a VACUUM. Autovacuum's default trigger
(50 rows + 20 % of the table, looked at once a minute) let dns_conn_daily reach 124 MiB for
18 MB of live rows at 1 M records when ingest runs a month of records in two minutes (the
figure depended on whether an autovacuum happened to run: 76 MiB with one). Here:

- every rollup table is autovacuumed once 1,000 of its rows are dead, whatever its size
  (``autovacuum_vacuum_scale_factor = 0``), without cost-based sleeps (they are small);
- the writer may VACUUM them (``MAINTAIN``, PostgreSQL 17 and later; on an older external
  server a writer's VACUUM is skipped with a warning), so that ingest vacuums them every
  few batches (collectors/ingest.py, db/writer/rollups.py), as autovacuum would over the
  weeks the records took to come in. Measured at 1 M records: dns_conn_daily 28 MiB instead
  of 76-124 MiB.

Fillfactor 50 (room on each page for the new version: HOT updates, pages pruned by the next
batch, no VACUUM needed) was measured too and left out: a batch updates every row of its day,
so HOT needs half of each page free, and dns_conn_daily stayed at twice its live rows (41 MiB
against 28 MiB vacuumed every eight batches).

Nothing is rewritten: a store's existing free space is reused by later updates.

Revision ID: 0020_compact_rollups
Revises: 0019_name_page_rollups
"""

from alembic import op

from db.migrations.frozen.m0020 import IF_MAINTAIN, OPTIONS

revision = "0020_compact_rollups"
down_revision = "0019_name_page_rollups"
branch_labels = None
depends_on = None

WRITER = "dnscamp_writer"
# the tables whose rows are updated after they are inserted (upserts of the rollups)
ROLLUPS = ("dns_hourly", "result_counts", "dns_hourly_status", "dns_conn_daily", "page_load_daily",
           "atlas_ping_latest", "ingest_daily", "unit_daily", "atlas_credit_sums", "dns_name_daily",
           "page_load_url_daily")  # fmt: skip


def upgrade() -> None:
    options = ", ".join(f"{k} = {v}" for k, v in OPTIONS.items())
    for t in ROLLUPS:
        op.execute(f"ALTER TABLE {t} SET ({options})")
    op.execute(IF_MAINTAIN.format(f"GRANT MAINTAIN ON {', '.join(ROLLUPS)} TO {WRITER}"))


def downgrade() -> None:
    op.execute(IF_MAINTAIN.format(f"REVOKE MAINTAIN ON {', '.join(ROLLUPS)} FROM {WRITER}"))
    for t in ROLLUPS:
        op.execute(f"ALTER TABLE {t} RESET ({', '.join(OPTIONS)})")
