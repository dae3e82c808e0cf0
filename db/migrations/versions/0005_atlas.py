"""RIPE Atlas: raw results, parsed ping / DNS rows, measurement roles, resolver discovery,
and the views v_atlas_ping, v_atlas_dns, v_quicsocks_savings.

It follows 0003 (the history is one line; it used to branch off 0001).

Revision ID: 0005_atlas
Revises: 0003_page_load
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

from db.migrations.views import create_view, drop_view

revision = "0005_atlas"
down_revision = "0003_page_load"
branch_labels = None
depends_on = None

WRITER = "dnscamp_writer"
VIEWS = ("v_atlas_ping", "v_atlas_dns", "v_quicsocks_savings")


def _ts(name: str, **kw) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), **kw)


def upgrade() -> None:
    op.create_table(
        "atlas_measurements",  # what each measurement id is for (set by submit or the testbed run)
        sa.Column("msm_id", sa.BigInteger, primary_key=True),
        sa.Column("campaign", sa.Text, nullable=False),
        sa.Column("role", sa.Text, nullable=False),  # resolver_dns | probe_server | probe_resolver | server_resolver
        sa.Column("target", sa.Text),
        sa.Column("definition", JSONB),
        _ts("created_at", nullable=False, server_default=sa.func.now()),
    )
    op.create_table(
        "atlas_results_raw",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("campaign", sa.Text),
        sa.Column("msm_id", sa.BigInteger, nullable=False),
        sa.Column("prb_id", sa.Integer, nullable=False),
        _ts("timestamp", nullable=False),
        sa.Column("type", sa.Text, nullable=False),
        sa.Column("fw", sa.Integer),
        sa.Column("dst_key", sa.Text, nullable=False, server_default=""),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("error", sa.Text),
        sa.Column("raw", JSONB, nullable=False),
        sa.Column("source_file", sa.Text),
        sa.Column("source_line", sa.Integer),
        _ts("ingested_at", nullable=False, server_default=sa.func.now()),
        sa.UniqueConstraint("msm_id", "prb_id", "timestamp", "type", "dst_key", name="uq_atlas_raw_result"),
    )
    op.create_index("ix_atlas_raw_msm", "atlas_results_raw", ["msm_id", "prb_id"])
    op.create_table(
        "atlas_ping",
        sa.Column("raw_id", sa.BigInteger, sa.ForeignKey("atlas_results_raw.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("campaign", sa.Text),
        sa.Column("msm_id", sa.BigInteger, nullable=False),
        sa.Column("prb_id", sa.Integer, nullable=False),
        _ts("timestamp", nullable=False),
        sa.Column("fw", sa.Integer),
        sa.Column("af", sa.Integer),
        sa.Column("src_addr", sa.Text),
        sa.Column("from_addr", sa.Text),
        sa.Column("dst_addr", sa.Text),
        sa.Column("dst_name", sa.Text),
        sa.Column("sent", sa.Integer),
        sa.Column("received", sa.Integer),
        sa.Column("duplicates", sa.Integer),
        sa.Column("rtts_ms", ARRAY(sa.Float)),
        sa.Column("avg_ms", sa.Float),
        sa.Column("min_ms", sa.Float),
        sa.Column("max_ms", sa.Float),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("error", sa.Text),
    )
    op.create_index("ix_atlas_ping_msm_prb", "atlas_ping", ["msm_id", "prb_id"])
    op.create_table(
        "atlas_dns",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("raw_id", sa.BigInteger, sa.ForeignKey("atlas_results_raw.id", ondelete="CASCADE"), nullable=False),
        sa.Column("campaign", sa.Text),
        sa.Column("msm_id", sa.BigInteger, nullable=False),
        sa.Column("prb_id", sa.Integer, nullable=False),
        _ts("timestamp", nullable=False),
        sa.Column("fw", sa.Integer),
        sa.Column("subid", sa.Integer),
        sa.Column("af", sa.Integer),
        sa.Column("resolver", sa.Text),
        sa.Column("src_addr", sa.Text),
        sa.Column("from_addr", sa.Text),
        sa.Column("proto", sa.Text),
        sa.Column("rcode", sa.Text),
        sa.Column("qname", sa.Text),
        sa.Column("qtype", sa.Text),
        sa.Column("answers", JSONB, nullable=False, server_default="[]"),
        sa.Column("response_time_ms", sa.Float),
        sa.Column("response_size", sa.Integer),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("error", sa.Text),
    )
    op.create_index("ix_atlas_dns_msm_prb", "atlas_dns", ["msm_id", "prb_id"])
    op.create_table(
        "atlas_discovery",  # probe -> resolver that reached our authoritative server (§IV-B)
        sa.Column("campaign", sa.Text, nullable=False),
        sa.Column("prb_id", sa.Integer, nullable=False),
        sa.Column("probe_addr", sa.Text),
        sa.Column("resolver", sa.Text, nullable=False),
        sa.Column("configured_resolver", sa.Text),
        sa.Column("probe_asn", sa.BigInteger),
        sa.Column("resolver_asn", sa.BigInteger),
        sa.Column("method", sa.Text, nullable=False),  # query_log | whoami
        sa.Column("qname", sa.Text),
        _ts("discovered_at", nullable=False, server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("campaign", "prb_id", name="pk_atlas_discovery"),
    )
    tables = "atlas_measurements, atlas_results_raw, atlas_ping, atlas_dns, atlas_discovery"
    op.execute(f"GRANT SELECT, INSERT, UPDATE ON {tables} TO {WRITER}")
    op.execute(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {WRITER}")
    for v in VIEWS:
        create_view(op, revision, v)


def downgrade() -> None:
    for v in reversed(VIEWS):
        drop_view(op, v)
    for t in ("atlas_discovery", "atlas_dns", "atlas_ping", "atlas_results_raw", "atlas_measurements"):
        op.drop_table(t)
    # "ALL SEQUENCES" above also reached quarantine's (its identity needs no grant to insert)
    op.execute(f"REVOKE USAGE ON SEQUENCE quarantine_id_seq FROM {WRITER}")
