"""SQLAlchemy 2 models of the store's tables. Migrations (db/migrations) are written by hand
from these; tests/local/test_migrations.py checks that the schema at the head migration matches
them (Alembic's compare_metadata; the views are not modelled, see db/views)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, UUID
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


class Result(Base):
    """Every result record, whatever its kind: envelope columns + the body as JSONB.

    Kind-specific typed columns are exposed by views (db/views/v_<kind>.sql)."""

    __tablename__ = "results"

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    schema: Mapped[str] = mapped_column(sa.Text, nullable=False)
    kind: Mapped[str] = mapped_column(sa.Text, nullable=False)
    campaign: Mapped[str] = mapped_column(sa.Text, nullable=False)
    run: Mapped[str] = mapped_column(sa.Text, nullable=False)
    unit: Mapped[str | None] = mapped_column(sa.Text)
    vantage_id: Mapped[str] = mapped_column(sa.Text, nullable=False)
    provider: Mapped[str] = mapped_column(sa.Text, nullable=False)
    region: Mapped[str | None] = mapped_column(sa.Text)
    network_profile: Mapped[str | None] = mapped_column(sa.Text)
    started_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True), nullable=False)
    status: Mapped[str] = mapped_column(sa.Text, nullable=False)
    error: Mapped[str | None] = mapped_column(sa.Text)
    env: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False)
    body: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False)
    source_file: Mapped[str | None] = mapped_column(sa.Text)
    source_line: Mapped[int | None] = mapped_column(sa.Integer)
    # sha256 of the record's canonical JSON (collectors.ingest.content_hash): a different
    # record under a stored id is an id_conflict, the same one a duplicate.
    content_sha256: Mapped[bytes | None] = mapped_column(sa.LargeBinary)
    ingested_at: Mapped[datetime] = mapped_column(
        sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    )

    __table_args__ = (
        sa.Index("ix_results_campaign_kind_started", "campaign", "kind", "started_at"),
        sa.Index("ix_results_kind_started", "kind", "started_at"),
        sa.Index("ix_results_vantage_started", "vantage_id", "started_at"),
        sa.Index("ix_results_started", "started_at"),
    )


class Quarantine(Base):
    """Lines that could not be stored: which file, which line, why, and the raw text. Open
    problems only: ingest deletes a line's row when the line later ingests (the writer may
    update and delete here, migration 0008)."""

    __tablename__ = "quarantine"

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(), primary_key=True)
    source_file: Mapped[str] = mapped_column(sa.Text, nullable=False)
    line: Mapped[int] = mapped_column(sa.Integer, nullable=False)
    reason: Mapped[str] = mapped_column(sa.Text, nullable=False)
    raw: Mapped[str] = mapped_column(sa.Text, nullable=False)
    quarantined_at: Mapped[datetime] = mapped_column(
        sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    )

    __table_args__ = (sa.UniqueConstraint("source_file", "line", name="uq_quarantine_file_line"),)


class CollectedObject(Base):
    """The S3 collector's ledger (migration 0010, collectors/s3.py): one row per object it
    ingested, with the ETag and size it saw and that ingest's counts; an unchanged ETag is
    not downloaded again."""

    __tablename__ = "collected_objects"

    bucket: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    key: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    etag: Mapped[str] = mapped_column(sa.Text, nullable=False)
    size: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)
    ingested: Mapped[int] = mapped_column(sa.Integer, nullable=False)
    duplicates: Mapped[int] = mapped_column(sa.Integer, nullable=False)
    quarantined: Mapped[int] = mapped_column(sa.Integer, nullable=False)
    collected_at: Mapped[datetime] = mapped_column(
        sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    )


# RIPE Atlas (migration 0005_atlas; atlas/store.py writes them)
def _ts(**kw: Any) -> Any:
    return mapped_column(sa.DateTime(timezone=True), **kw)


class AtlasMeasurement(Base):
    """What each measurement id is for (set by submit or the testbed run)."""

    __tablename__ = "atlas_measurements"

    msm_id: Mapped[int] = mapped_column(sa.BigInteger, primary_key=True, autoincrement=False)
    campaign: Mapped[str] = mapped_column(sa.Text, nullable=False)
    role: Mapped[str] = mapped_column(sa.Text, nullable=False)  # resolver_dns | probe_server | probe_resolver | server_resolver
    target: Mapped[str | None] = mapped_column(sa.Text)
    definition: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    created_at: Mapped[datetime] = _ts(nullable=False, server_default=sa.func.now())


class AtlasResultRaw(Base):
    __tablename__ = "atlas_results_raw"

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(), primary_key=True)
    campaign: Mapped[str | None] = mapped_column(sa.Text)
    msm_id: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)
    prb_id: Mapped[int] = mapped_column(sa.Integer, nullable=False)
    timestamp: Mapped[datetime] = _ts(nullable=False)
    type: Mapped[str] = mapped_column(sa.Text, nullable=False)
    fw: Mapped[int | None] = mapped_column(sa.Integer)
    dst_key: Mapped[str] = mapped_column(sa.Text, nullable=False, server_default="")
    status: Mapped[str] = mapped_column(sa.Text, nullable=False)
    error: Mapped[str | None] = mapped_column(sa.Text)
    raw: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False)
    source_file: Mapped[str | None] = mapped_column(sa.Text)
    source_line: Mapped[int | None] = mapped_column(sa.Integer)
    ingested_at: Mapped[datetime] = _ts(nullable=False, server_default=sa.func.now())

    __table_args__ = (
        sa.UniqueConstraint("msm_id", "prb_id", "timestamp", "type", "dst_key", name="uq_atlas_raw_result"),
        sa.Index("ix_atlas_raw_msm", "msm_id", "prb_id"),
    )


class AtlasPing(Base):
    __tablename__ = "atlas_ping"

    raw_id: Mapped[int] = mapped_column(
        sa.BigInteger, sa.ForeignKey("atlas_results_raw.id", ondelete="CASCADE"), primary_key=True, autoincrement=False
    )
    campaign: Mapped[str | None] = mapped_column(sa.Text)
    msm_id: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)
    prb_id: Mapped[int] = mapped_column(sa.Integer, nullable=False)
    timestamp: Mapped[datetime] = _ts(nullable=False)
    fw: Mapped[int | None] = mapped_column(sa.Integer)
    af: Mapped[int | None] = mapped_column(sa.Integer)
    src_addr: Mapped[str | None] = mapped_column(sa.Text)
    from_addr: Mapped[str | None] = mapped_column(sa.Text)
    dst_addr: Mapped[str | None] = mapped_column(sa.Text)
    dst_name: Mapped[str | None] = mapped_column(sa.Text)
    sent: Mapped[int | None] = mapped_column(sa.Integer)
    received: Mapped[int | None] = mapped_column(sa.Integer)
    duplicates: Mapped[int | None] = mapped_column(sa.Integer)
    rtts_ms: Mapped[list[float] | None] = mapped_column(ARRAY(sa.Float))
    avg_ms: Mapped[float | None] = mapped_column(sa.Float)
    min_ms: Mapped[float | None] = mapped_column(sa.Float)
    max_ms: Mapped[float | None] = mapped_column(sa.Float)
    status: Mapped[str] = mapped_column(sa.Text, nullable=False)
    error: Mapped[str | None] = mapped_column(sa.Text)

    __table_args__ = (sa.Index("ix_atlas_ping_msm_prb", "msm_id", "prb_id"),)


class AtlasDns(Base):
    __tablename__ = "atlas_dns"

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(), primary_key=True)
    raw_id: Mapped[int] = mapped_column(
        sa.BigInteger, sa.ForeignKey("atlas_results_raw.id", ondelete="CASCADE"), nullable=False
    )
    campaign: Mapped[str | None] = mapped_column(sa.Text)
    msm_id: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)
    prb_id: Mapped[int] = mapped_column(sa.Integer, nullable=False)
    timestamp: Mapped[datetime] = _ts(nullable=False)
    fw: Mapped[int | None] = mapped_column(sa.Integer)
    subid: Mapped[int | None] = mapped_column(sa.Integer)
    af: Mapped[int | None] = mapped_column(sa.Integer)
    resolver: Mapped[str | None] = mapped_column(sa.Text)
    src_addr: Mapped[str | None] = mapped_column(sa.Text)
    from_addr: Mapped[str | None] = mapped_column(sa.Text)
    proto: Mapped[str | None] = mapped_column(sa.Text)
    rcode: Mapped[str | None] = mapped_column(sa.Text)
    qname: Mapped[str | None] = mapped_column(sa.Text)
    qtype: Mapped[str | None] = mapped_column(sa.Text)
    answers: Mapped[list[Any]] = mapped_column(JSONB, nullable=False, server_default="[]")
    response_time_ms: Mapped[float | None] = mapped_column(sa.Float)
    response_size: Mapped[int | None] = mapped_column(sa.Integer)
    status: Mapped[str] = mapped_column(sa.Text, nullable=False)
    error: Mapped[str | None] = mapped_column(sa.Text)

    __table_args__ = (sa.Index("ix_atlas_dns_msm_prb", "msm_id", "prb_id"),)


class AtlasDiscovery(Base):
    """Probe -> the resolver that reached our authoritative server (§IV-B)."""

    __tablename__ = "atlas_discovery"

    campaign: Mapped[str] = mapped_column(sa.Text, nullable=False)
    prb_id: Mapped[int] = mapped_column(sa.Integer, nullable=False, autoincrement=False)
    probe_addr: Mapped[str | None] = mapped_column(sa.Text)
    resolver: Mapped[str] = mapped_column(sa.Text, nullable=False)
    configured_resolver: Mapped[str | None] = mapped_column(sa.Text)
    probe_asn: Mapped[int | None] = mapped_column(sa.BigInteger)
    resolver_asn: Mapped[int | None] = mapped_column(sa.BigInteger)
    method: Mapped[str] = mapped_column(sa.Text, nullable=False)  # query_log | whoami
    qname: Mapped[str | None] = mapped_column(sa.Text)
    discovered_at: Mapped[datetime] = _ts(nullable=False, server_default=sa.func.now())

    __table_args__ = (sa.PrimaryKeyConstraint("campaign", "prb_id", name="pk_atlas_discovery"),)
