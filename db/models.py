"""SQLAlchemy 2 models of the store's tables. Migrations (db/migrations) are written by hand
from these; tests/local/test_migrations.py checks that the schema at the head migration matches
them (Alembic's compare_metadata; the views are not modelled, see db/views)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY, JSON, JSONB, UUID
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


# --- result records: the compact store (migration 0012_compact_store, docs/store.md) ---------
# A record is a result_ids row (what dedup probes) and a row of its kind's table, partitioned by
# month of started_at: dns_queries (typed per-query columns + a shared dns_shapes row) or
# generic_results (the body as jsonb). Repeated values are dimension rows keyed by the sha256
# of their canonical JSON (db/writer/store.py). The view ``results`` gives the records as
# the old table had them; db/records.py gives them back exactly.


class Context(Base):
    """The envelope values that a run repeats: one row per distinct (schema, kind, campaign, run,
    vantage); the unit is in the record's row."""

    __tablename__ = "contexts"

    id: Mapped[int] = mapped_column(sa.Integer, sa.Identity(always=False), primary_key=True)
    sha256: Mapped[bytes] = mapped_column(sa.LargeBinary, nullable=False)
    schema: Mapped[str] = mapped_column(sa.Text, nullable=False)
    kind: Mapped[str] = mapped_column(sa.Text, nullable=False)
    campaign: Mapped[str] = mapped_column(sa.Text, nullable=False)
    run: Mapped[str] = mapped_column(sa.Text, nullable=False)
    vantage_id: Mapped[str] = mapped_column(sa.Text, nullable=False)
    provider: Mapped[str] = mapped_column(sa.Text, nullable=False)
    region: Mapped[str | None] = mapped_column(sa.Text)
    network_profile: Mapped[str | None] = mapped_column(sa.Text)

    __table_args__ = (sa.UniqueConstraint("sha256", name="uq_contexts_sha256"),)


class Environment(Base):
    """A record's ``env``, once per distinct value: ``env`` its exact JSON text, ``envb`` the
    same as jsonb for the views."""

    __tablename__ = "environments"

    id: Mapped[int] = mapped_column(sa.Integer, sa.Identity(always=False), primary_key=True)
    sha256: Mapped[bytes] = mapped_column(sa.LargeBinary, nullable=False)
    env: Mapped[Any] = mapped_column(JSON, nullable=False)
    envb: Mapped[Any] = mapped_column(JSONB, sa.Computed("(env)::jsonb", persisted=True))

    __table_args__ = (sa.UniqueConstraint("sha256", name="uq_environments_sha256"),)


# dns_shapes' typed columns, read from the shape's JSON as v_dns_query reads a whole body
# (migration 0012 has the same list); "text!" is JSON_VALUE's text (NULL for a non-string)
SHAPE_COLUMNS = {
    "resolver": "text", "transport": "text", "address": "text", "port": "int", "tls_name": "text", "url": "text",
    "qname": "text", "qtype": "text", "policy": "text", "idle_timeout_s": "float8", "timeout_s": "float8",
    "max_attempts": "int", "attempts": "int", "connection_reused": "boolean", "resumed": "boolean",
    "early_data": "boolean", "tls_version": "text", "alpn": "text", "quic_version": "text", "http_version": "text",
    "http_method": "text", "http_status": "int", "rcode": "text", "wire_basis": "text", "access_rtt_ms": "float8",
    "cache_warmed": "boolean", "engine": "text!", "engine_version": "text!", "engine_run_time_ms": "float8",
}  # fmt: skip
_SA_TYPES = {"text": sa.Text, "text!": sa.Text, "int": sa.Integer, "float8": sa.Float(53), "boolean": sa.Boolean}


# Generated columns' expressions as Postgres prints them (type names spelled out, IN as = ANY):
# compare_metadata cannot alter such a column and only warns when the text differs, and
# tests/local/test_migrations.py fails on that warning.
_PG_TYPE_NAMES = {"int": "integer", "float8": "double precision", "text!": "text", "boolean": "boolean"}


def _shape_expr(name: str, typ: str) -> str:
    if typ == "text":
        return f"(body::jsonb ->> '{name}')"
    return f"JSON_VALUE(body::jsonb, '$.{name}' RETURNING {_PG_TYPE_NAMES[typ]})"


# The part of a dns_query body that is not per query (resolver, transport, qname, rcode, ...):
# its exact JSON text once per distinct value, and typed columns read from it.
dns_shapes = sa.Table(
    "dns_shapes", Base.metadata,
    sa.Column("id", sa.Integer, sa.Identity(always=False), primary_key=True),
    sa.Column("sha256", sa.LargeBinary, nullable=False),
    sa.Column("body", JSON, nullable=False),
    *(sa.Column(n, _SA_TYPES[t], sa.Computed(_shape_expr(n, t), persisted=True)) for n, t in SHAPE_COLUMNS.items()),
    sa.Column("hdr_bytes", sa.Integer, sa.Computed(
        "CASE WHEN body::jsonb ->> 'transport' = ANY (ARRAY['do53', 'doq', 'doh3']) THEN 28 ELSE 52 END", persisted=True)),
    sa.UniqueConstraint("sha256", name="uq_dns_shapes_sha256"),
)  # fmt: skip


class IngestBatch(Base):
    """One ingest transaction: the file its lines came from and when."""

    __tablename__ = "ingest_batches"

    id: Mapped[int] = mapped_column(sa.Integer, sa.Identity(always=False), primary_key=True)
    source_file: Mapped[str | None] = mapped_column(sa.Text)
    ingested_at: Mapped[datetime] = mapped_column(
        sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    )


class ResultId(Base):
    """Every stored record's id, unique across partitions and kinds."""

    __tablename__ = "result_ids"

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    # the first 16 bytes of the sha256 of the record's canonical JSON (collectors.parse.content_hash,
    # migration 0021): a different record under a stored id is an id_conflict, the same one a duplicate.
    content_sha256: Mapped[bytes | None] = mapped_column(sa.LargeBinary)
    batch_id: Mapped[int] = mapped_column(sa.Integer, nullable=False)
    source_line: Mapped[int | None] = mapped_column(sa.Integer)


def _ts_col(name: str) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=False)


DNS_INT8 = ("t_start", "t_connected", "t_tls_done", "t_query_sent", "t_response", "handshake_bytes_sent",
            "handshake_bytes_received", "query_bytes_sent", "query_bytes_received")  # fmt: skip
DNS_INT4 = ("sequence", "response_size", "handshake_packets_sent", "handshake_packets_received",
            "query_packets_sent", "query_packets_received")  # fmt: skip

# Partitioned tables (no primary key: result_ids holds the ids), as Core tables.
dns_queries = sa.Table(
    "dns_queries", Base.metadata,
    _ts_col("started_at"),
    *(sa.Column(c, sa.BigInteger) for c in DNS_INT8),
    sa.Column("id", UUID(as_uuid=True), nullable=False),
    *(sa.Column(c, sa.Integer, nullable=False) for c in ("ctx_id", "env_id", "batch_id", "shape_id")),
    *(sa.Column(c, sa.Integer) for c in DNS_INT4),
    sa.Column("unit", sa.Text),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("error", sa.Text),
    sa.Column("answers", JSON),
    sa.Index("ix_dns_queries_started", "started_at", postgresql_using="brin"),
    postgresql_partition_by="RANGE (started_at)",
)  # fmt: skip
generic_results = sa.Table(
    "generic_results", Base.metadata,
    _ts_col("started_at"),
    sa.Column("id", UUID(as_uuid=True), nullable=False),
    *(sa.Column(c, sa.Integer, nullable=False) for c in ("ctx_id", "env_id", "batch_id")),
    sa.Column("unit", sa.Text),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("error", sa.Text),
    sa.Column("body", JSONB, nullable=False),
    sa.Column("body_exact", JSON),
    # 0026_shaped_misfits: a dns_query stored whole has its shape too (dns_shapes.id; NULL for other kinds)
    sa.Column("shape_id", sa.Integer),
    # 0023_page_load_columns: a page load's keys and load time, stored by Postgres from the body
    # (v_page_load's url, browser, dns_mode, dns_transport, plt_ms); NULL on other kinds' rows
    *(sa.Column(f"pl_{key}", sa.Text, sa.Computed(
        f"CASE WHEN kind = 'page_load' THEN body ->> '{key}' ELSE NULL END", persisted=True))
      for key in ("url", "browser", "dns_mode", "dns_transport")),
    sa.Column("pl_plt_ms", sa.Float, sa.Computed(
        """CASE WHEN kind = 'page_load' THEN JSON_VALUE(body, '$."plt_ms"' RETURNING double precision) ELSE NULL END""",
        persisted=True)),
    sa.Index("ix_generic_results_started", "started_at", postgresql_using="brin"),
    sa.Index("ix_generic_results_kind_started", "kind", "started_at"),  # 0015: a kind's rows in a window
    postgresql_partition_by="RANGE (started_at)",
)  # fmt: skip


# --- rollups (migration 0013_rollups), maintained by ingest with each batch ------------------

# 0022_hourly_keys: dns_hourly keyed by (hour, key_id); the key's texts in dns_hourly_keys
dns_hourly_keys = sa.Table(
    "dns_hourly_keys", Base.metadata,
    sa.Column("id", sa.Integer, sa.Identity(always=False), primary_key=True),
    sa.Column("campaign", sa.Text, nullable=False),
    sa.Column("vantage_id", sa.Text, nullable=False),
    *(sa.Column(c, sa.Text) for c in ("network_profile", "resolver", "transport")),
    sa.UniqueConstraint("campaign", "vantage_id", "network_profile", "resolver", "transport", name="uq_dns_hourly_keys",
                        postgresql_nulls_not_distinct=True),
)  # fmt: skip
dns_hourly = sa.Table(
    "dns_hourly", Base.metadata,
    sa.Column("hour", sa.DateTime(timezone=True), primary_key=True),
    sa.Column("key_id", sa.Integer, primary_key=True),  # dns_hourly_keys.id (no foreign key: a probe per upsert)
    sa.Column("n", sa.Integer, nullable=False),
    sa.Column("failures", sa.Integer, nullable=False),
    # histogram of total_ms of the ok records: bucket numbers ascending and their counts
    sa.Column("buckets", ARRAY(sa.SmallInteger), nullable=False),
    sa.Column("counts", ARRAY(sa.Integer), nullable=False),
    sa.PrimaryKeyConstraint("hour", "key_id", name="pk_dns_hourly"),
)  # fmt: skip


# --- rollups of migration 0017_dashboard_rollups (docs/store.md "Rollups") -------------------

_HIST = lambda name: (sa.Column(f"{name}_buckets", ARRAY(sa.SmallInteger), nullable=False),  # noqa: E731
                      sa.Column(f"{name}_counts", ARRAY(sa.Integer), nullable=False))  # fmt: skip
dns_hourly_status = sa.Table(
    "dns_hourly_status", Base.metadata,
    sa.Column("hour", sa.DateTime(timezone=True), nullable=False),
    sa.Column("campaign", sa.Text, nullable=False),
    sa.Column("vantage_id", sa.Text, nullable=False),
    *(sa.Column(c, sa.Text) for c in ("network_profile", "resolver", "transport")),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("n", sa.BigInteger, nullable=False),
    sa.UniqueConstraint("hour", "campaign", "vantage_id", "network_profile", "resolver", "transport", "status",
                        name="uq_dns_hourly_status", postgresql_nulls_not_distinct=True),
)  # fmt: skip
dns_conn_daily = sa.Table(
    "dns_conn_daily", Base.metadata,
    sa.Column("day", sa.DateTime(timezone=True), nullable=False),
    sa.Column("campaign", sa.Text, nullable=False),
    sa.Column("vantage_id", sa.Text, nullable=False),
    *(sa.Column(c, sa.Text) for c in ("network_profile", "resolver", "transport")),
    sa.Column("connection", sa.Text, nullable=False),
    *(sa.Column(c, sa.BigInteger, nullable=False) for c in ("n", "failures", "total_packets")),
    *(c for m in ("total", "handshake", "exchange", "rtt", "ip_bytes") for c in _HIST(m)),
    sa.UniqueConstraint("day", "campaign", "vantage_id", "network_profile", "resolver", "transport", "connection",
                        name="uq_dns_conn_daily", postgresql_nulls_not_distinct=True),
)  # fmt: skip
page_load_daily = sa.Table(
    "page_load_daily", Base.metadata,
    sa.Column("day", sa.DateTime(timezone=True), nullable=False),
    sa.Column("campaign", sa.Text, nullable=False),
    sa.Column("vantage_id", sa.Text, nullable=False),
    *(sa.Column(c, sa.Text) for c in ("network_profile", "browser", "dns_mode", "dns_transport", "http")),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("n", sa.BigInteger, nullable=False),
    sa.Column("min_plt_ms", sa.Float(53)),
    sa.Column("max_plt_ms", sa.Float(53)),
    sa.Column("buckets", ARRAY(sa.SmallInteger), nullable=False),
    sa.Column("counts", ARRAY(sa.Integer), nullable=False),
    sa.UniqueConstraint("day", "campaign", "vantage_id", "network_profile", "browser", "dns_mode", "dns_transport",
                        "http", "status", name="uq_page_load_daily", postgresql_nulls_not_distinct=True),
)  # fmt: skip
# the latest successful ping per campaign, measurement, probe and destination (v_quicsocks_savings),
# kept by a trigger on atlas_ping
atlas_ping_latest = sa.Table(
    "atlas_ping_latest", Base.metadata,
    sa.Column("campaign", sa.Text),
    sa.Column("msm_id", sa.BigInteger, nullable=False),
    sa.Column("prb_id", sa.Integer, nullable=False),
    sa.Column("dst_addr", sa.Text),
    sa.Column("raw_id", sa.BigInteger, nullable=False),
    sa.Column("timestamp", sa.DateTime(timezone=True), nullable=False),
    sa.Column("avg_ms", sa.Float(53), nullable=False),
    sa.UniqueConstraint("campaign", "msm_id", "prb_id", "dst_addr", name="uq_atlas_ping_latest",
                        postgresql_nulls_not_distinct=True),
)  # fmt: skip

# --- rollups of migration 0018_health_rollups (docs/store.md "Rollups") ----------------------
# records per context, ingest batch and UTC day: counts, first / last started_at, ingest-lag histogram
ingest_daily = sa.Table(
    "ingest_daily", Base.metadata,
    sa.Column("day", sa.DateTime(timezone=True), nullable=False),
    sa.Column("ctx_id", sa.Integer, nullable=False),
    sa.Column("batch_id", sa.Integer, nullable=False),
    sa.Column("n", sa.Integer, nullable=False),
    sa.Column("failed", sa.Integer, nullable=False),
    sa.Column("first_started", sa.DateTime(timezone=True), nullable=False),
    sa.Column("last_started", sa.DateTime(timezone=True), nullable=False),
    *_HIST("lag"),
    sa.PrimaryKeyConstraint("day", "ctx_id", "batch_id", name="pk_ingest_daily"),
)  # fmt: skip
# per UTC day x campaign x vantage x region x kind: the planner units run and their records
unit_daily = sa.Table(
    "unit_daily", Base.metadata,
    sa.Column("day", sa.DateTime(timezone=True), nullable=False),
    sa.Column("campaign", sa.Text, nullable=False),
    sa.Column("vantage_id", sa.Text, nullable=False),
    sa.Column("region", sa.Text),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("units", ARRAY(sa.Text), nullable=False),
    sa.Column("unit_counts", ARRAY(sa.Integer), nullable=False),
    sa.UniqueConstraint("day", "campaign", "vantage_id", "region", "kind", name="uq_unit_daily",
                        postgresql_nulls_not_distinct=True),
)  # fmt: skip
# raw Atlas results per campaign label, measurement and type (v_atlas_credits), kept by triggers
atlas_credit_sums = sa.Table(
    "atlas_credit_sums", Base.metadata,
    sa.Column("campaign", sa.Text),
    sa.Column("msm_id", sa.BigInteger, nullable=False),
    sa.Column("type", sa.Text, nullable=False),
    sa.Column("results", sa.BigInteger, nullable=False),
    sa.Column("unit_credits", sa.Numeric, nullable=False),
    sa.Column("first_result", sa.DateTime(timezone=True), nullable=False),
    sa.Column("last_result", sa.DateTime(timezone=True), nullable=False),
    sa.UniqueConstraint("campaign", "msm_id", "type", name="uq_atlas_credit_sums", postgresql_nulls_not_distinct=True),
)  # fmt: skip

# --- rollups of migration 0019_name_page_rollups (docs/store.md "Rollups") -------------------
# DNS queries per UTC day x campaign x vantage x profile, as (name key, count) arrays
dns_name_keys = sa.Table(
    "dns_name_keys", Base.metadata,
    sa.Column("id", sa.Integer, sa.Identity(always=False), primary_key=True),
    *(sa.Column(c, sa.Text) for c in ("resolver", "transport", "qname")),
    sa.Column("status", sa.Text, nullable=False),
    sa.UniqueConstraint("resolver", "transport", "qname", "status", name="uq_dns_name_keys",
                        postgresql_nulls_not_distinct=True),
)  # fmt: skip
dns_name_daily = sa.Table(
    "dns_name_daily", Base.metadata,
    sa.Column("day", sa.DateTime(timezone=True), nullable=False),
    sa.Column("campaign", sa.Text, nullable=False),
    sa.Column("vantage_id", sa.Text, nullable=False),
    sa.Column("network_profile", sa.Text),
    sa.Column("keys", ARRAY(sa.Integer), nullable=False),
    sa.Column("counts", ARRAY(sa.Integer), nullable=False),
    sa.UniqueConstraint("day", "campaign", "vantage_id", "network_profile", name="uq_dns_name_daily",
                        postgresql_nulls_not_distinct=True),
)  # fmt: skip
# successful page loads per UTC day x campaign x vantage x profile, as (page key, plt bucket, count) arrays
page_load_url_keys = sa.Table(
    "page_load_url_keys", Base.metadata,
    sa.Column("id", sa.Integer, sa.Identity(always=False), primary_key=True),
    *(sa.Column(c, sa.Text) for c in ("browser", "dns_mode", "dns_transport", "http", "url")),
    sa.UniqueConstraint("browser", "dns_mode", "dns_transport", "http", "url", name="uq_page_load_url_keys",
                        postgresql_nulls_not_distinct=True),
)  # fmt: skip
page_load_url_daily = sa.Table(
    "page_load_url_daily", Base.metadata,
    sa.Column("day", sa.DateTime(timezone=True), nullable=False),
    sa.Column("campaign", sa.Text, nullable=False),
    sa.Column("vantage_id", sa.Text, nullable=False),
    sa.Column("network_profile", sa.Text),
    sa.Column("keys", ARRAY(sa.Integer), nullable=False),
    sa.Column("buckets", ARRAY(sa.SmallInteger), nullable=False),
    sa.Column("counts", ARRAY(sa.Integer), nullable=False),
    sa.UniqueConstraint("day", "campaign", "vantage_id", "network_profile", name="uq_page_load_url_daily",
                        postgresql_nulls_not_distinct=True),
)  # fmt: skip


class ResultCount(Base):
    """Records per context and status (v_failures)."""

    __tablename__ = "result_counts"

    ctx_id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=False)
    status: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    n: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)

    __table_args__ = (sa.PrimaryKeyConstraint("ctx_id", "status", name="pk_result_counts"),)


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
    sha256: Mapped[str | None] = mapped_column(sa.Text)  # of the bytes downloaded (0027); NULL before


class RunManifest(Base):
    """A run's manifest as the collector read it (migration 0027, collectors/s3.py): the run it
    names, the planned units and the body; a corrupt one keeps its one-line ``error``."""

    __tablename__ = "run_manifests"

    bucket: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    key: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    campaign: Mapped[str] = mapped_column(sa.Text, nullable=False)
    vantage: Mapped[str] = mapped_column(sa.Text, nullable=False)
    run: Mapped[str] = mapped_column(sa.Text, nullable=False)
    etag: Mapped[str] = mapped_column(sa.Text, nullable=False)
    region: Mapped[str | None] = mapped_column(sa.Text)
    instance_id: Mapped[str | None] = mapped_column(sa.Text)
    units_planned: Mapped[list[str] | None] = mapped_column(ARRAY(sa.Text))
    body: Mapped[Any] = mapped_column(JSONB, nullable=True)
    error: Mapped[str | None] = mapped_column(sa.Text)
    collected_at: Mapped[datetime] = mapped_column(
        sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    )

    __table_args__ = (sa.Index("ix_run_manifests_run", "campaign", "vantage", "run"),)


class RunManifestObject(Base):
    """One object a manifest lists: its unit, key, sha256 of the gzipped body, bytes, records."""

    __tablename__ = "run_manifest_objects"

    bucket: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    manifest_key: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    unit: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    key: Mapped[str] = mapped_column(sa.Text, nullable=False)
    sha256: Mapped[str] = mapped_column(sa.Text, nullable=False)
    bytes: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)
    records: Mapped[int] = mapped_column(sa.Integer, nullable=False)

    __table_args__ = (
        sa.ForeignKeyConstraint(["bucket", "manifest_key"], ["run_manifests.bucket", "run_manifests.key"],
                                name="fk_run_manifest_objects_manifest", ondelete="CASCADE"),
    )  # fmt: skip


class CollectWatermark(Base):
    """Per results/<campaign>/<vantage>/ prefix the greatest run id a listing saw (0027):
    collectors list from there back a lookback, not the whole prefix."""

    __tablename__ = "collect_watermarks"

    bucket: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    prefix: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    run: Mapped[str] = mapped_column(sa.Text, nullable=False)
    updated_at: Mapped[datetime] = mapped_column(
        sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    )


# RIPE Atlas (migration 0005_atlas; collectors/atlas_store.py writes them)
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


class AtlasProbe(Base):
    """Where each probe of a campaign stood (migration 0014_atlas_probes; collectors/atlas_store.py writes it)."""

    __tablename__ = "atlas_probes"

    campaign: Mapped[str] = mapped_column(sa.Text, nullable=False)
    prb_id: Mapped[int] = mapped_column(sa.Integer, nullable=False, autoincrement=False)
    country_code: Mapped[str | None] = mapped_column(sa.Text)
    asn_v4: Mapped[int | None] = mapped_column(sa.BigInteger)
    lat: Mapped[float | None] = mapped_column(sa.Float)
    lon: Mapped[float | None] = mapped_column(sa.Float)
    status: Mapped[str | None] = mapped_column(sa.Text)
    source: Mapped[str] = mapped_column(sa.Text, nullable=False)  # atlas_api | testbed
    fetched_at: Mapped[datetime] = _ts(nullable=False, server_default=sa.func.now())

    __table_args__ = (
        sa.PrimaryKeyConstraint("campaign", "prb_id", name="pk_atlas_probes"),
        sa.CheckConstraint("lat BETWEEN -90 AND 90 AND lon BETWEEN -180 AND 180", name="ck_atlas_probes_coords"),
        sa.CheckConstraint("source IN ('atlas_api', 'testbed')", name="ck_atlas_probes_source"),
    )
