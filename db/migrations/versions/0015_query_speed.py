"""Query speed of the base views at scale, as their plans showed it on a
generated campaign (bench/store_bench.py, EXPLAIN (ANALYZE, BUFFERS)):

- ``v_dns_query``, ``v_results``, ``v_page_load`` LEFT JOIN their dimension rows (contexts,
  dns_shapes, environments, ingest_batches) on primary keys instead of JOINing them: every id
  exists, so the rows are the same, and the planner drops a join whose columns a query does
  not read (most questions never read ``tool_versions``, ``link_backend``, ``ingested_at`` or
  ``seed``; a per-transport question skips contexts too): one or two hash joins fewer per row.
- ``dnscamp_ns_ms(a, b)``: the phase durations of ``v_dns_query`` (total_ms, exchange_ms, ...)
  from two monotonic-ns timestamps, in bigint when both are >= 0 (records v1 refuse negative
  ones: no overflow) and in numeric otherwise, as before. The float8 is the same (the exact
  difference, rounded once); numeric arithmetic was a third of a scan's CPU.
- ``ix_generic_results_kind_started`` (btree on kind, started_at): the generic branch of
  ``v_dns_query`` (dns_query bodies that do not fit the typed columns, almost none) and the
  per-kind views were a sequential scan of every page_load, ping, ... row in the window;
  with the index they read only their kind's rows.

Revision ID: 0015_query_speed
Revises: 0014_atlas_probes
"""

from alembic import op

from db.migrations.views import create_view, restore_view

revision = "0015_query_speed"
down_revision = "0014_atlas_probes"
branch_labels = None
depends_on = None

VIEWS = ("v_dns_query", "v_results", "v_page_load")

FUNCTION_SQL = """
CREATE FUNCTION dnscamp_ns_ms(a bigint, b bigint) RETURNS float8 LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN a >= 0 AND b >= 0 THEN (a - b)::float8 / 1e6 ELSE (a::numeric - b)::float8 / 1e6 END
$$;
"""


def upgrade() -> None:
    op.execute(FUNCTION_SQL)
    op.execute("CREATE INDEX ix_generic_results_kind_started ON generic_results (kind, started_at)")
    for v in VIEWS:
        create_view(op, revision, v)  # CREATE OR REPLACE: same columns


def downgrade() -> None:
    for v in reversed(VIEWS):
        restore_view(op, "0012_compact_store", v)
    op.execute("DROP INDEX ix_generic_results_kind_started")
    op.execute("DROP FUNCTION dnscamp_ns_ms(bigint, bigint)")
