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
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

import orjson
import psycopg
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from dnscamp.opendata import codec

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


def _sha256(fs: pafs.FileSystem, path: str) -> str:
    h = hashlib.sha256()
    with fs.open_input_stream(path) as f:
        while piece := f.read(1 << 20):
            h.update(piece)
    return h.hexdigest()


# --- write ------------------------------------------------------------------------------


@dataclass
class _Part:
    kind: str
    day: str
    path: str  # relative to the archive root
    writer: pq.ParquetWriter
    rows: int = 0


def view_columns(conn: psycopg.Connection) -> dict[str, list[list[str]]]:
    """The reader views' columns and types, as the store has them (information_schema)."""
    rows = conn.execute(
        "SELECT table_name, column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND table_name LIKE 'v\\_%' ORDER BY table_name, ordinal_position"
    ).fetchall()
    out: dict[str, list[list[str]]] = {}
    for view, col, typ in rows:
        out.setdefault(view, []).append([col, typ])
    return out


def _store_revision(conn: psycopg.Connection) -> list[str]:
    try:
        with conn.transaction():
            return sorted(r[0] for r in conn.execute("SELECT version_num FROM alembic_version").fetchall())
    except psycopg.Error:
        return []


def write(conn: psycopg.Connection, campaign: str, dest: str, *,
          progress: Callable[[str, int], None] | None = None) -> dict[str, Any]:  # fmt: skip
    """Archive ``campaign`` from the store (owner connection) to ``dest``; returns the manifest.
    Files are written into a local staging directory, checksummed, then copied to ``dest``;
    the manifest goes last."""
    from db.records import iter_records

    import dnscamp

    fs, root = filesystem(dest)
    info = fs.get_file_info(pafs.FileSelector(root, allow_not_found=True, recursive=False))
    if info:
        raise ArchiveError(f"{dest}: not empty; archive into a new directory or prefix")
    kinds = [r[0] for r in conn.execute("SELECT DISTINCT kind FROM v_results WHERE campaign = %s ORDER BY 1",
                                        (campaign,)).fetchall()]  # fmt: skip
    if not kinds:
        raise ArchiveError(f"campaign {campaign!r}: no records in the store")
    files: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="dnscamp-archive-") as tmp:
        stage = Path(tmp)
        for kind in kinds:
            batch = codec.Batch(kind)
            part: _Part | None = None

            def flush(p: _Part | None) -> None:
                if p is not None and len(batch):
                    t = batch.table()
                    p.writer.write_table(t, row_group_size=ROWS_PER_GROUP)
                    p.rows += t.num_rows
                    batch.clear()

            def close(p: _Part | None) -> None:
                if p is None:
                    return
                flush(p)
                p.writer.close()
                local = stage / p.path
                files.append({"path": p.path, "kind": p.kind, "day": p.day, "rows": p.rows,
                              "bytes": local.stat().st_size,
                              "sha256": hashlib.sha256(local.read_bytes()).hexdigest()})  # fmt: skip
                if progress:
                    progress(p.path, p.rows)

            for rec in iter_records(conn, campaign=campaign, kind=kind):
                day = rec["started_at"][:10]
                if part is None or part.day != day:
                    close(part)
                    rel = f"kind={kind}/day={day}/part-0000.parquet"
                    (stage / rel).parent.mkdir(parents=True, exist_ok=True)
                    writer = pq.ParquetWriter(stage / rel, codec._with_dict_env(batch.schema), compression=COMPRESSION,
                                              use_dictionary=True, write_statistics=True)  # fmt: skip
                    part = _Part(kind, day, rel, writer)
                batch.add(rec)
                if len(batch) >= ROWS_PER_GROUP:
                    flush(part)
            close(part)
        manifest = {
            "format": FORMAT,
            "records_schema": "dnscamp.result/1",
            "campaign": campaign,
            "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z"),
            "dnscamp_version": dnscamp.__version__,
            "store_revision": _store_revision(conn),
            "partitioning": "hive: kind=<kind>/day=<YYYY-MM-DD> (UTC day of started_at)",
            "compression": COMPRESSION,
            "kinds": {k: {"rows": sum(f["rows"] for f in files if f["kind"] == k),
                          "columns": [[f.name, str(f.type)] for f in codec.schema(k)]} for k in kinds},  # fmt: skip
            "rows": sum(f["rows"] for f in files),
            "files": files,
            "views": view_columns(conn),
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


def read_manifest(src: str) -> tuple[pafs.FileSystem, str, dict[str, Any]]:
    fs, root = filesystem(src)
    path = f"{root}/{MANIFEST}"
    try:
        with fs.open_input_stream(path) as f:
            manifest = orjson.loads(f.read())
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
    return fs, root, manifest


def _first_line(exc: BaseException) -> str:
    from vantage_agent.errors import first_line

    return first_line(exc)


def verify(src: str, *, checksums: bool = True) -> tuple[pafs.FileSystem, str, dict[str, Any]]:
    """The manifest and the files agree: every listed file present with its size (and sha256
    when ``checksums``), a readable Parquet footer with the listed rows, no unlisted file,
    per-kind totals. Raises ArchiveError with one line naming the first file that does not."""
    fs, root, manifest = read_manifest(src)
    listed = {f["path"]: f for f in manifest["files"]}
    present = {
        i.path[len(root) + 1:]: i
        for i in fs.get_file_info(pafs.FileSelector(root, recursive=True))
        if i.type == pafs.FileType.File and i.path[len(root) + 1:] != MANIFEST
    }  # fmt: skip
    for rel in sorted(listed):
        if rel not in present:
            raise ArchiveError(f"{src}/{rel}: missing (listed in {MANIFEST})")
    for rel in sorted(present):
        if rel not in listed:
            raise ArchiveError(f"{src}/{rel}: not listed in {MANIFEST} (a manifest of another archive?)")
    for k, meta in manifest["kinds"].items():
        n = sum(f["rows"] for f in manifest["files"] if f["kind"] == k)
        if n != meta["rows"]:
            raise ArchiveError(f"{src}/{MANIFEST}: kind {k}: {meta['rows']} rows, its files list {n}")
    for rel, f in sorted(listed.items()):
        path = f"{root}/{rel}"
        if present[rel].size != f["bytes"]:
            raise ArchiveError(f"{src}/{rel}: {present[rel].size} bytes, the manifest says {f['bytes']} (truncated or replaced)")
        if checksums and (got := _sha256(fs, path)) != f["sha256"]:
            raise ArchiveError(f"{src}/{rel}: sha256 {got[:16]}..., the manifest says {f['sha256'][:16]}... (corrupt)")
        try:
            with fs.open_input_file(path) as fh:
                rows = pq.ParquetFile(fh).metadata.num_rows
        except (pa.ArrowInvalid, OSError) as exc:
            raise ArchiveError(f"{src}/{rel}: not a readable Parquet file ({_first_line(exc)})") from None
        if rows != f["rows"]:
            raise ArchiveError(f"{src}/{rel}: {rows} rows, the manifest says {f['rows']}")
    return fs, root, manifest


def iter_archived(fs: pafs.FileSystem, root: str, manifest: dict[str, Any], src: str) -> Iterator[tuple[str, list[dict]]]:
    """(file, its records) for every file of an archive, in manifest order."""
    for f in manifest["files"]:
        try:
            with fs.open_input_file(f"{root}/{f['path']}") as fh:
                table = pq.read_table(fh)
            recs = list(codec.records(f["kind"], table))
        except (pa.ArrowException, OSError, KeyError, ValueError, TypeError) as exc:
            raise ArchiveError(f"{src}/{f['path']}: cannot be read back ({_first_line(exc)})") from None
        if len(recs) != f["rows"]:
            raise ArchiveError(f"{src}/{f['path']}: {len(recs)} records, the manifest says {f['rows']}")
        yield f["path"], recs


def restore(src: str, url: str, *, workers: int | None = None):
    """Load an archive back into the store at ``url`` (writer): verify the manifest and every
    file, convert every file into JSONL in a scratch directory (nothing is ingested until all
    of them converted), then ingest it with collectors.ingest. Returns its IngestStats."""
    from collectors.ingest import canonical_json, ingest

    fs, root, manifest = verify(src)
    scratch = Path(tempfile.mkdtemp(prefix="dnscamp-restore-"))
    try:
        for rel, recs in iter_archived(fs, root, manifest, src):
            out = scratch / (rel.replace("/", "__").removesuffix(".parquet") + ".jsonl")
            with open(out, "wb") as fh:
                for r in recs:
                    fh.write(canonical_json(r) + b"\n")
        return ingest([scratch], url, workers=workers)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
