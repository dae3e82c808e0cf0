"""The archive tier: a campaign's records as Parquet (zstd), Hive-partitioned, with a manifest.

Layout (a directory or ``s3://bucket/prefix``)::

    manifest.json
    kind=dns_query/day=2026-11-01/part-0000.parquet
    kind=page_load/day=2026-11-01/part-0000.parquet
    ...

One file per kind and UTC day of ``started_at``; rows in (started_at, id) order; columns as
``codec`` describes. ``manifest.json`` is written last (an archive without it is incomplete)
and lists every file with its rows, bytes and sha256, the row counts per kind, the records'
schema version, the store's revision and the reader views' columns (``duck`` builds the DuckDB
views from them).

``verify`` refuses a corrupt or partial archive with one line naming the file (missing,
unlisted, size or checksum mismatch, not Parquet, row count); ``restore`` verifies the
manifest and every file, converts every file back into records, and only then ingests them
through collectors.ingest (dedup by id and content hash: a second restore adds nothing).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

import orjson

if TYPE_CHECKING:
    import duckdb
    import psycopg
    import pyarrow as pa
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

# pyarrow (and numpy under it) is imported where files are written, restored or read on S3:
# `dnscamp sql --archive` on a local archive verifies it with the standard library and DuckDB.

FORMAT = "dnscamp.archive/1"
MANIFEST = "manifest.json"
ROWS_PER_GROUP = 100_000
COMPRESSION = "zstd"


class ArchiveError(Exception):
    """An archive that cannot be written or read: one line, naming the file."""


# --- where archives live ----------------------------------------------------------------


def filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    """(pyarrow filesystem, root path) for a directory or ``s3://bucket/prefix``. S3 takes
    boto3's environment: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_DEFAULT_REGION and an
    endpoint from AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL (an S3-compatible server, moto)."""
    import pyarrow.fs as pafs

    if uri.startswith("s3://"):
        bucket_prefix = uri[len("s3://"):].strip("/")
        if not bucket_prefix:
            raise ArchiveError(f"{uri}: not an s3://bucket/prefix URI")
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        kw: dict[str, Any] = {"region": os.environ.get("AWS_DEFAULT_REGION") or os.environ.get("AWS_REGION") or "us-east-1"}
        if endpoint:
            scheme, _, host = endpoint.partition("://")
            kw.update(endpoint_override=host or scheme, scheme=scheme if host else "https")
        return pafs.S3FileSystem(**kw), bucket_prefix
    return pafs.LocalFileSystem(), str(Path(uri).resolve())


# --- write ------------------------------------------------------------------------------


# Atlas tables of a campaign (measurements labelled "<campaign>" or "<campaign>/<run>"), and the
# column their files are partitioned by day on (None: one partition, day=all).
ATLAS_TABLES = {"atlas_measurements": None, "atlas_discovery": None, "atlas_probes": None,
                "atlas_results_raw": "timestamp", "atlas_ping": "timestamp", "atlas_dns": "timestamp"}  # fmt: skip


def _delta_columns(schema: pa.Schema) -> list[str]:
    """Clocks stored as differences (DELTA_BINARY_PACKED): ``started_at`` and the monotonic
    ``t_*`` phase timestamps advance with the rows, and their 64 bits of which only the last
    few change compress to about half (1,000,000 dns_query records: 66 -> 51 B/record)."""
    import pyarrow as pa

    return [f.name for f in schema if (f.name == "started_at" and pa.types.is_timestamp(f.type))
            or (f.name.startswith("t_") and pa.types.is_int64(f.type))]  # fmt: skip


class _Parts:
    """Parquet files kind=<kind>/day=<day>/part-0000.parquet in a staging directory, one open
    at a time (rows come in day order), each checksummed when closed."""

    def __init__(self, stage: Path, progress: Callable[[str, int], None] | None):
        self.stage, self.progress = stage, progress
        self.files: list[dict[str, Any]] = []
        self.cur: tuple[str, str] | None = None
        self.writer: pq.ParquetWriter | None = None
        self.rows = 0

    def write(self, kind: str, day: str, table: pa.Table) -> None:
        import pyarrow.parquet as pq

        if self.cur != (kind, day):
            self.close()
            rel = f"kind={kind}/day={day}/part-0000.parquet"
            (self.stage / rel).parent.mkdir(parents=True, exist_ok=True)
            delta = _delta_columns(table.schema)
            self.writer = pq.ParquetWriter(
                self.stage / rel, table.schema, compression=COMPRESSION, write_statistics=True,
                use_dictionary=[c for c in table.schema.names if c not in delta] if delta else True,
                column_encoding={c: "DELTA_BINARY_PACKED" for c in delta} or None,
            )
            self.cur, self.rows = (kind, day), 0
        self.writer.write_table(table, row_group_size=ROWS_PER_GROUP)
        self.rows += table.num_rows

    def close(self) -> None:
        if self.writer is None:
            return
        self.writer.close()
        kind, day = self.cur
        rel = f"kind={kind}/day={day}/part-0000.parquet"
        local = self.stage / rel
        self.files.append({"path": rel, "kind": kind, "day": day, "rows": self.rows, "bytes": local.stat().st_size,
                           "sha256": hashlib.sha256(local.read_bytes()).hexdigest()})  # fmt: skip
        if self.progress:
            self.progress(rel, self.rows)
        self.writer, self.cur = None, None


def view_columns(conn: psycopg.Connection) -> dict[str, list[list[str]]]:
    """The reader views' columns and types, as the store has them (information_schema)."""
    from dnscamp.opendata import pgarrow

    return pgarrow.columns(conn, "v\\_%")


def _atlas_view_defs(conn: psycopg.Connection) -> dict[str, str]:
    """The store's definitions of the views that read Atlas tables only: DuckDB runs them
    as they are over the archived tables."""
    rows = conn.execute(
        "SELECT view_name, array_agg(table_name::text) FROM information_schema.view_table_usage "
        "WHERE view_schema = current_schema() AND view_name LIKE 'v\\_%' GROUP BY 1"
    ).fetchall()
    return {v: conn.execute("SELECT pg_get_viewdef(%s::regclass, true)", (v,)).fetchone()[0]
            for v, tables in rows if set(tables) <= {*ATLAS_TABLES, "atlas_ping_latest"}}  # fmt: skip


def _store_revision(conn: psycopg.Connection) -> list[str]:
    import psycopg

    try:
        with conn.transaction():
            return sorted(r[0] for r in conn.execute("SELECT version_num FROM alembic_version").fetchall())
    except psycopg.Error:
        return []


def _write_atlas(conn: psycopg.Connection, campaign: str, parts: _Parts) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.compute as pc

    from dnscamp.opendata import pgarrow

    tables = pgarrow.columns(conn, "atlas\\_%")
    out: dict[str, Any] = {}
    for table, tcol in ATLAS_TABLES.items():
        cols = tables.get(table)
        if not cols:
            continue
        names = [c for c, _ in cols]
        label = "(x.campaign = %s OR x.campaign LIKE %s)"
        if "msm_id" in names and table != "atlas_measurements":  # results may carry no label: their measurement's
            label = ("(COALESCE(x.campaign, (SELECT m.campaign FROM atlas_measurements m WHERE m.msm_id = x.msm_id)) "
                     "= %s OR COALESCE(x.campaign, (SELECT m.campaign FROM atlas_measurements m "
                     "WHERE m.msm_id = x.msm_id)) LIKE %s)")  # fmt: skip
        quoted = ", ".join(f'x."{c}"' for c in names)
        order = f'x."{tcol}", 1' if tcol else "1"
        sql = f"SELECT {quoted} FROM {table} x WHERE {label} ORDER BY {order}"
        rows = 0
        for b in pgarrow.batches(conn, sql, (campaign, campaign.replace("%", r"\%") + "/%"), cols, cursor=f"arc_{table}"):
            t = pa.Table.from_batches([b])
            rows += t.num_rows
            if not tcol:
                parts.write(table, "all", t)
                continue
            days = pc.strftime(t.column(tcol), format="%Y-%m-%d").to_pylist()
            start = 0
            for i in range(1, len(days) + 1):
                if i == len(days) or days[i] != days[start]:
                    parts.write(table, days[start], t.slice(start, i - start))
                    start = i
        parts.close()
        out[table] = {"rows": rows, "columns": cols}
    return out


def write(conn: psycopg.Connection, campaign: str, dest: str, *,
          progress: Callable[[str, int], None] | None = None) -> dict[str, Any]:  # fmt: skip
    """Archive ``campaign`` from the store (owner connection) to ``dest``; returns the manifest.
    Files are written into a local staging directory, checksummed, then copied to ``dest``;
    the manifest goes last."""
    import pyarrow.fs as pafs

    from db.records import iter_records

    import dnscamp
    from dnscamp.opendata import codec

    fs, root = filesystem(dest)
    info = fs.get_file_info(pafs.FileSelector(root, allow_not_found=True, recursive=False))
    if info:
        raise ArchiveError(f"{dest}: not empty; archive into a new directory or prefix")
    kinds = [r[0] for r in conn.execute("SELECT DISTINCT kind FROM v_results WHERE campaign = %s ORDER BY 1",
                                        (campaign,)).fetchall()]  # fmt: skip
    if not kinds:
        raise ArchiveError(f"campaign {campaign!r}: no records in the store")
    with tempfile.TemporaryDirectory(prefix="dnscamp-archive-") as tmp:
        stage = Path(tmp)
        parts = _Parts(stage, progress)
        for kind in kinds:
            batch = codec.Batch(kind)
            day = None
            for rec in iter_records(conn, campaign=campaign, kind=kind):
                d = rec["started_at"][:10]
                if (d != day and len(batch)) or len(batch) >= ROWS_PER_GROUP:
                    parts.write(kind, day, batch.table())
                    batch.clear()
                day = d
                batch.add(rec)
            if len(batch):
                parts.write(kind, day, batch.table())
            parts.close()
        atlas = _write_atlas(conn, campaign, parts)
        files = parts.files
        manifest = {
            "format": FORMAT,
            "records_schema": "dnscamp.result/1",
            "campaign": campaign,
            "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z"),
            "dnscamp_version": dnscamp.__version__,
            "store_revision": _store_revision(conn),
            "partitioning": "hive: kind=<kind or Atlas table>/day=<YYYY-MM-DD> (UTC day of started_at / timestamp; "
                            "all: not by day)",
            "compression": COMPRESSION,
            "kinds": {k: {"rows": sum(f["rows"] for f in files if f["kind"] == k),
                          "columns": [[f.name, str(f.type)] for f in codec.schema(k)]} for k in kinds},  # fmt: skip
            "tables": atlas,
            "rows": sum(f["rows"] for f in files if f["kind"] in kinds),
            "files": files,
            "views": view_columns(conn),
            "view_defs": _atlas_view_defs(conn),
        }
        (stage / MANIFEST).write_text(json.dumps(manifest, indent=1))
        local = isinstance(fs, pafs.LocalFileSystem)  # S3 has no directories (no marker objects)
        for f in files:  # data first, manifest last: a copy that breaks off has no manifest
            dst = f"{root}/{f['path']}"
            if local:
                fs.create_dir(dst.rsplit("/", 1)[0], recursive=True)
            pafs.copy_files(str(stage / f["path"]), dst, destination_filesystem=fs)
        pafs.copy_files(str(stage / MANIFEST), f"{root}/{MANIFEST}", destination_filesystem=fs)
    return manifest


# --- read / verify ----------------------------------------------------------------------


class Source:
    """Where an archive's files are read: a local directory through the standard library (its
    Parquet footers through DuckDB), or S3 through Arrow's filesystem (``fs``, which restore and
    DuckDB's scans of S3 use; for a local archive it is made only when asked for)."""

    def __init__(self, uri: str):
        self.uri = uri
        self.local = not uri.startswith("s3://")
        self._fs: pafs.FileSystem | None = None
        self._con: duckdb.DuckDBPyConnection | None = None
        if self.local:
            self.root = str(Path(uri).resolve())
        else:
            self._fs, self.root = filesystem(uri)

    @property
    def fs(self) -> pafs.FileSystem:
        if self._fs is None:
            self._fs, _ = filesystem(self.uri)
        return self._fs

    def read(self, rel: str) -> bytes:
        if self.local:
            return Path(self.root, rel).read_bytes()
        with self.fs.open_input_stream(f"{self.root}/{rel}") as f:
            return f.read()

    def sizes(self) -> dict[str, int]:
        """{path under the root: size} of every file but the manifest."""
        if self.local:
            out = {}
            for d, _, names in os.walk(self.root):
                for n in names:
                    path = os.path.join(d, n)
                    try:
                        out[path[len(self.root) + 1:]] = os.stat(path).st_size
                    except FileNotFoundError:  # a dangling link: no file, as Arrow's listing has it
                        continue
        else:
            import pyarrow.fs as pafs

            out = {i.path[len(self.root) + 1:]: i.size
                   for i in self.fs.get_file_info(pafs.FileSelector(self.root, recursive=True))
                   if i.type == pafs.FileType.File}  # fmt: skip
        out.pop(MANIFEST, None)
        return out

    def sha256(self, rel: str) -> str:
        h = hashlib.sha256()
        with open(Path(self.root, rel), "rb") if self.local else self.fs.open_input_stream(f"{self.root}/{rel}") as f:
            while piece := f.read(1 << 20):
                h.update(piece)
        return h.hexdigest()

    def footer_rows(self, rel: str, con: duckdb.DuckDBPyConnection | None) -> int:
        """The row count in the file's Parquet footer (which is read whole); ArchiveError when
        it does not read."""
        if self.local:
            import duckdb

            con = self._con = con or self._con or duckdb.connect()  # one for all the files
            try:
                return con.execute("SELECT num_rows FROM parquet_file_metadata(?)", [f"{self.root}/{rel}"]).fetchone()[0]
            except duckdb.Error as exc:
                raise ArchiveError(f"{self.uri}/{rel}: not a readable Parquet file ({_first_line(exc)})") from None
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            with self.fs.open_input_file(f"{self.root}/{rel}") as fh:
                return pq.ParquetFile(fh).metadata.num_rows
        except (pa.ArrowInvalid, OSError) as exc:
            raise ArchiveError(f"{self.uri}/{rel}: not a readable Parquet file ({_first_line(exc)})") from None


def _manifest(source: Source) -> dict[str, Any]:
    src = source.uri
    try:
        manifest = orjson.loads(source.read(MANIFEST))
    except FileNotFoundError:
        raise ArchiveError(f"{src}/{MANIFEST}: missing (not an archive, or an incomplete one)") from None
    except OSError as exc:
        raise ArchiveError(f"{src}/{MANIFEST}: cannot be read: {_first_line(exc)}") from None
    except orjson.JSONDecodeError as exc:
        raise ArchiveError(f"{src}/{MANIFEST}: not JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        got = manifest.get("format") if isinstance(manifest, dict) else type(manifest).__name__
        raise ArchiveError(f"{src}/{MANIFEST}: format {got!r}, expected {FORMAT!r}")
    for key in ("files", "kinds", "campaign"):
        if key not in manifest:
            raise ArchiveError(f"{src}/{MANIFEST}: no {key!r}")
    return manifest


def read_manifest(src: str) -> tuple[pafs.FileSystem, str, dict[str, Any]]:
    source = Source(src)
    return source.fs, source.root, _manifest(source)


def _first_line(exc: BaseException) -> str:
    from vantage_agent.errors import first_line

    return first_line(exc)


def verified(src: str, *, checksums: bool = True,
             con: duckdb.DuckDBPyConnection | None = None) -> tuple[Source, dict[str, Any]]:  # fmt: skip
    """The manifest and the files agree: every listed file present with its size (and sha256
    when ``checksums``), a readable Parquet footer with the listed rows, no unlisted file,
    per-kind totals. Raises ArchiveError with one line naming the first file that does not.
    A local archive's footers are read with ``con`` (DuckDB) when given."""
    source = Source(src)
    manifest = _manifest(source)
    listed = {f["path"]: f for f in manifest["files"]}
    present = source.sizes()
    for rel in sorted(listed):
        if rel not in present:
            raise ArchiveError(f"{src}/{rel}: missing (listed in {MANIFEST})")
    for rel in sorted(present):
        if rel not in listed:
            raise ArchiveError(f"{src}/{rel}: not listed in {MANIFEST} (a manifest of another archive?)")
    for k, meta in {**manifest["kinds"], **manifest.get("tables", {})}.items():
        n = sum(f["rows"] for f in manifest["files"] if f["kind"] == k)
        if n != meta["rows"]:
            raise ArchiveError(f"{src}/{MANIFEST}: kind {k}: {meta['rows']} rows, its files list {n}")
    for rel, f in sorted(listed.items()):
        if present[rel] != f["bytes"]:
            raise ArchiveError(f"{src}/{rel}: {present[rel]} bytes, the manifest says {f['bytes']} (truncated or replaced)")
        if checksums and (got := source.sha256(rel)) != f["sha256"]:
            raise ArchiveError(f"{src}/{rel}: sha256 {got[:16]}..., the manifest says {f['sha256'][:16]}... (corrupt)")
        rows = source.footer_rows(rel, con)
        if rows != f["rows"]:
            raise ArchiveError(f"{src}/{rel}: {rows} rows, the manifest says {f['rows']}")
    return source, manifest


def verify(src: str, *, checksums: bool = True) -> tuple[pafs.FileSystem, str, dict[str, Any]]:
    """``verified``, giving Arrow's filesystem of the archive (what restore reads it with)."""
    source, manifest = verified(src, checksums=checksums)
    return source.fs, source.root, manifest


def iter_archived(fs: pafs.FileSystem, root: str, manifest: dict[str, Any], src: str) -> Iterator[tuple[str, list[dict]]]:
    """(file, its records) for every file of an archive, in manifest order."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dnscamp.opendata import codec

    for f in manifest["files"]:
        if f["kind"] not in manifest["kinds"]:
            continue  # an Atlas table: restore_atlas reads it
        try:
            with fs.open_input_file(f"{root}/{f['path']}") as fh:
                table = pq.read_table(fh)
            recs = list(codec.records(f["kind"], table))
        except (pa.ArrowException, OSError, KeyError, ValueError, TypeError) as exc:
            raise ArchiveError(f"{src}/{f['path']}: cannot be read back ({_first_line(exc)})") from None
        if len(recs) != f["rows"]:
            raise ArchiveError(f"{src}/{f['path']}: {len(recs)} records, the manifest says {f['rows']}")
        yield f["path"], recs


def restore(src: str, url: str, *, owner_url: str | None = None, workers: int | None = None):
    """Load an archive back into the store: verify the manifest and every file, convert every
    file (records into JSONL, Atlas raw results into JSON lines per campaign label) in a scratch
    directory -- nothing is stored until all of them converted -- then ingest the records with
    collectors.ingest at ``url`` (the writer) and the Atlas measurements, discovery and raw
    results with collectors.atlas_store / collectors.atlas_ingest at ``owner_url`` (Atlas tables are the
    owner's). Returns (records' IngestStats, Atlas stats or None)."""
    from collectors.ingest import ingest
    from db.writer.encode import canonical_json

    fs, root, manifest = verify(src)
    scratch = Path(tempfile.mkdtemp(prefix="dnscamp-restore-"))
    try:
        (scratch / "records").mkdir()
        for rel, recs in iter_archived(fs, root, manifest, src):
            out = scratch / "records" / (rel.replace("/", "__").removesuffix(".parquet") + ".jsonl")
            with open(out, "wb") as fh:
                for r in recs:
                    fh.write(canonical_json(r) + b"\n")
        atlas = _atlas_tables(fs, root, manifest, src)
        raw_files: dict[str, Path] = {}
        for i, row in enumerate(atlas.get("atlas_results_raw", [])):
            label = row["campaign"] or ""
            if label not in raw_files:
                raw_files[label] = scratch / f"atlas-{len(raw_files):04d}.jsonl"
            with open(raw_files[label], "ab") as fh:
                fh.write(row["raw"].encode() + b"\n")
        stats = ingest([scratch / "records"], url, workers=workers)
        astats = None
        if atlas:
            astats = _restore_atlas(owner_url or url, atlas, raw_files)
        return stats, astats
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _atlas_tables(fs: pafs.FileSystem, root: str, manifest: dict[str, Any], src: str) -> dict[str, list[dict]]:
    """The rows restore needs of the archived Atlas tables (measurements, discovery, raw)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out: dict[str, list[dict]] = {}
    for f in manifest["files"]:
        if f["kind"] not in ("atlas_measurements", "atlas_discovery", "atlas_probes", "atlas_results_raw"):
            continue
        try:
            with fs.open_input_file(f"{root}/{f['path']}") as fh:
                out.setdefault(f["kind"], []).extend(pq.read_table(fh).to_pylist())
        except (pa.ArrowException, OSError) as exc:
            raise ArchiveError(f"{src}/{f['path']}: cannot be read back ({_first_line(exc)})") from None
    return out


def _restore_atlas(url: str, atlas: dict[str, list[dict]], raw_files: dict[str, Path]):
    """Measurement roles and discovery upserted, probe places inserted where missing, raw results through collectors.atlas_ingest
    (sagan parses them again; a result already stored is a duplicate)."""
    import psycopg

    from atlas.discovery import Discovered
    from collectors import atlas_store
    from collectors.atlas_ingest import AtlasIngestStats, ingest_files

    with psycopg.connect(url) as conn:
        for m in atlas.get("atlas_measurements", []):
            atlas_store.register_measurement(conn, m["msm_id"], campaign=m["campaign"], role=m["role"], target=m["target"],
                                             definition=orjson.loads(m["definition"]) if m["definition"] else None)  # fmt: skip
        by_label: dict[str, list] = {}
        for d in atlas.get("atlas_discovery", []):
            by_label.setdefault(d["campaign"], []).append(
                Discovered(**{k: d[k] for k in ("prb_id", "probe_addr", "resolver", "configured_resolver",
                                                "probe_asn", "resolver_asn", "method", "qname")}))  # fmt: skip
        for label, rows in by_label.items():
            atlas_store.save_discovery(conn, label, rows)
        # the probes' places as they were fetched (fetched_at kept: collectors.atlas_store.save_probes stamps now())
        cols = ("campaign", "prb_id", "country_code", "asn_v4", "lat", "lon", "status", "source", "fetched_at")
        with conn.cursor() as cur:
            cur.executemany(
                f"INSERT INTO atlas_probes ({', '.join(cols)}) VALUES ({', '.join(['%s'] * len(cols))})"
                " ON CONFLICT ON CONSTRAINT pk_atlas_probes DO NOTHING",
                [tuple(p[c] for c in cols) for p in atlas.get("atlas_probes", [])])
    total = AtlasIngestStats()
    for label, path in raw_files.items():
        st = ingest_files([path], url, campaign=label or None)
        total.ingested += st.ingested
        total.duplicates += st.duplicates
        total.quarantined += st.quarantined
        total.reasons += st.reasons
    return total
