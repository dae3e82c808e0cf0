"""SQLAlchemy 2 models of the store. Migrations (db/migrations) are written by hand from
these; tests check that the migrated schema matches them."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB, UUID
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
