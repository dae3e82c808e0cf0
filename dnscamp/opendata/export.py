"""`dnscamp export`: a campaign as open data.

- ``jsonl``: ``records/<kind>.jsonl``, the records JSON-equal to what was ingested
  (db.records.iter_records), which `dnscamp ingest` takes back;
- ``parquet`` / ``csv``: one file per reader view that has a ``campaign`` column, read as the
  reader role (``<view>.parquet`` with its Arrow schema, or ``<view>.csv``; JSON and array
  columns are JSON text in CSV), and ``schema.json`` (columns, store type, Arrow type, unit);
- every format: ``README.md`` (what each file is, columns and units, the licence, the campaign
  spec, versions) and ``campaign.toml`` when the spec is known.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

import psycopg
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from dnscamp.opendata import pgarrow
from dnscamp.opendata.archive import view_columns

FORMATS = ("jsonl", "parquet", "csv")


class ExportError(Exception):
    """One line: what cannot be exported and why."""


def unit(column: str) -> str:
    """The unit of a view column, read from its name's conventions (docs/sql.md)."""
    c = column.lower()
    rules = (
        (c.endswith("_rtt_multiple"), "multiples of the access RTT"),
        (c.startswith("t_") and c[2:] in ("start", "connected", "tls_done", "query_sent", "response"),
         "ns (CLOCK_MONOTONIC of the measuring process)"),
        (c.endswith("_us_p50") or c.endswith("_us"), "µs"),
        (c.endswith("_ms") or "_ms_" in c, "ms"),
        (c.endswith("_s"), "s"),
        (c.endswith("_bytes") or c.startswith("bytes") or "_bytes_" in c or c == "response_size", "bytes"),
        (c.endswith("_packets") or "_packets_" in c, "packets"),
        (c in ("share", "loss", "failure_rate"), "fraction (0..1)"),
        (c in ("started_at", "timestamp", "ingested_at"), "UTC time"),
    )  # fmt: skip
    return next((u for cond, u in rules if cond), "")


def _campaign_filter(cols: list[str], campaign: str) -> tuple[str, tuple]:
    # Atlas tables label a campaign's measurements "<campaign>/<run>"
    if "campaign" not in cols:
        return "", ()
    return " WHERE campaign = %s OR campaign LIKE %s", (campaign, campaign.replace("%", r"\%") + "/%")


def _batches(conn: psycopg.Connection, view: str, cols: list[list[str]], campaign: str,
             csv: bool) -> Iterator[pa.RecordBatch]:  # fmt: skip
    names = [c for c, _ in cols]
    where, args = _campaign_filter(names, campaign)
    quoted = ", ".join('"' + c.replace('"', '""') + '"' for c in names)
    yield from pgarrow.batches(conn, f"SELECT {quoted} FROM {view}{where} ORDER BY 1", args, cols, flat=csv,
                               cursor=f"export_{view}")


def _schema(cols: list[list[str]], csv: bool) -> pa.Schema:
    return pgarrow.schema(cols, flat=csv)


def _versions(conn: psycopg.Connection, campaign: str) -> dict[str, Any]:
    """What measured: the tools' versions the records carry."""
    out: dict[str, Any] = {}
    q = {
        "dns_tools": "SELECT DISTINCT tool_versions::text FROM v_dns_query WHERE campaign = %s",
        "dns_engines": "SELECT DISTINCT engine_version FROM v_dns_query WHERE campaign = %s AND engine_version IS NOT NULL",
        "browsers": "SELECT DISTINCT browser || ' ' || COALESCE(browser_version, '?') FROM v_page_load WHERE campaign = %s",
        "link_backends": "SELECT DISTINCT link_backend FROM v_results WHERE campaign = %s AND link_backend IS NOT NULL",
    }
    for key, sql in q.items():
        try:
            with conn.transaction():
                vals = sorted(r[0] for r in conn.execute(sql, (campaign,)).fetchall() if r[0] is not None)
        except psycopg.Error:
            continue
        out[key] = [json.loads(v) for v in vals] if key == "dns_tools" else vals
    return out


def export(owner_url: str, reader_url: str, campaign: str, out: Path, fmt: str, *,
           licence: str = "CC-BY-4.0", spec: Path | None = None) -> dict[str, Any]:  # fmt: skip
    """Write the export; returns what README.md summarises (files, rows per file)."""
    import dnscamp
    from db.records import iter_records
    from dnscamp.opendata.archive import _store_revision
    from dnscamp.opendata.codec import dumps

    if fmt not in FORMATS:
        raise ExportError(f"--format: {fmt!r} is not one of {', '.join(FORMATS)}")
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise ExportError(f"{out}: not empty; export into a new directory")
    with psycopg.connect(reader_url) as rconn:
        counts = dict(rconn.execute("SELECT kind, count(*) FROM v_results WHERE campaign = %s GROUP BY 1 ORDER BY 1",
                                    (campaign,)).fetchall())  # fmt: skip
        if not counts:
            raise ExportError(f"campaign {campaign!r}: no records in the store")
        views = view_columns(rconn)
        versions = _versions(rconn, campaign)
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, int] = {}
    with psycopg.connect(owner_url) as oconn:
        revision = _store_revision(oconn)
        if fmt == "jsonl":
            (out / "records").mkdir()
            for kind in counts:
                n = 0
                with open(out / "records" / f"{kind}.jsonl", "wb") as fh:
                    for rec in iter_records(oconn, campaign=campaign, kind=kind):
                        fh.write(dumps(rec).encode() + b"\n")
                        n += 1
                files[f"records/{kind}.jsonl"] = n
    meta = {"campaign": campaign, "licence": licence, "format": fmt, "dnscamp_version": dnscamp.__version__,
            "store_revision": revision, "records_schema": "dnscamp.result/1",
            "exported_at": datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z"),
            "records": counts, "versions": versions}  # fmt: skip
    exported: dict[str, list[list[str]]] = {}
    if fmt != "jsonl":
        with psycopg.connect(reader_url) as rconn:
            for view, cols in sorted(views.items()):
                if "campaign" not in [c for c, _ in cols]:
                    continue  # a view without a campaign column is no campaign's data
                path = out / f"{view}.{fmt}"
                schema = _schema(cols, fmt == "csv")
                md = {b"dnscamp.view": view.encode(), b"dnscamp.campaign": campaign.encode(),
                      b"licence": licence.encode()}  # fmt: skip
                n = 0
                if fmt == "parquet":
                    with pq.ParquetWriter(path, schema.with_metadata(md), compression="zstd") as w:
                        for b in _batches(rconn, view, cols, campaign, False):
                            w.write_batch(b)
                            n += b.num_rows
                else:
                    with pacsv.CSVWriter(path, schema) as w:
                        for b in _batches(rconn, view, cols, campaign, True):
                            w.write_batch(b)
                            n += b.num_rows
                files[path.name] = n
                exported[view] = cols
        schema_doc = {view: [{"name": c, "store_type": t, "arrow_type": str(_schema([[c, t]], fmt == "csv")[0].type),
                              "unit": unit(c)} for c, t in cols] for view, cols in exported.items()}  # fmt: skip
        (out / "schema.json").write_text(json.dumps({**meta, "views": schema_doc}, indent=1, ensure_ascii=False))
    spec_text = None
    spec = spec or _default_spec(campaign)
    if spec and Path(spec).is_file():
        spec_text = Path(spec).read_text()
        (out / "campaign.toml").write_text(spec_text)
    (out / "README.md").write_text(readme(meta, files, exported, spec_text, spec))
    return {**meta, "files": files}


def _default_spec(campaign: str) -> Path | None:
    p = Path(__file__).resolve().parents[2] / "campaigns" / f"{campaign}.toml"
    return p if p.is_file() else None


def readme(meta: dict, files: dict[str, int], views: dict[str, list[list[str]]], spec_text: str | None,
           spec: Path | None) -> str:  # fmt: skip
    lines = [
        f"# dnscamp campaign `{meta['campaign']}`: open data ({meta['format']})",
        "",
        f"- licence: **{meta['licence']}**",
        f"- exported: {meta['exported_at']} by dnscamp {meta['dnscamp_version']} (store revision "
        f"{', '.join(meta['store_revision']) or 'unknown'}; records schema `{meta['records_schema']}`)",
        "- records: " + ", ".join(f"{k} {v:,}" for k, v in meta["records"].items()),
        "",
        "## Files",
        "",
        "| file | rows |",
        "|---|---|",
        *(f"| `{f}` | {n:,} |" for f, n in files.items()),
        "",
    ]
    if meta["format"] == "jsonl":
        lines += ["Each line is one result record (docs/records.md in dnscamp; JSON Schema `records.schema.json`),",
                  "exactly as the vantage agent wrote it (keys may be in another order; `started_at` in UTC).",
                  "`dnscamp ingest records/` loads them into another store.", ""]  # fmt: skip
    else:
        lines += ["One file per view of dnscamp's researchers' API (docs/sql.md), filtered to this campaign",
                  "(Atlas views: the campaign's measurements, labelled `<campaign>/<run>`). "
                  + ("Parquet files carry their Arrow schema; " if meta["format"] == "parquet" else
                     "CSV: JSON columns and arrays as JSON text, empty = NULL; ")
                  + "`schema.json` lists every column with its store type, Arrow type and unit.", "",
                  "Read with DuckDB: `SELECT * FROM read_" + ("parquet" if meta["format"] == "parquet" else "csv_auto")
                  + f"('v_dns_query.{meta['format']}')`; with pyarrow: `pyarrow."
                  + ("parquet.read_table" if meta["format"] == "parquet" else "csv.read_csv") + f"('v_dns_query.{meta['format']}')`.",
                  ""]  # fmt: skip
        for view, cols in views.items():
            lines += [f"### `{view}`", "", "| column | type | unit |", "|---|---|---|"]
            lines += [f"| `{c}` | {t} | {unit(c)} |" for c, t in cols]
            lines.append("")
    lines += ["## Versions", "", "```json", json.dumps(meta["versions"], indent=1, ensure_ascii=False), "```", ""]
    lines += ["## Campaign spec", ""]
    if spec_text is not None:
        lines += [f"`campaign.toml` (from `{spec.name if spec else ''}`):", "", "```toml", spec_text.rstrip(), "```", ""]
    else:
        lines += ["Not known to the exporter (pass `--spec FILE`).", ""]
    return "\n".join(lines)
