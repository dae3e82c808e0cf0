"""DuckDB over an archive: views of the same names and columns as the store's reader views, so
a documented query runs unchanged on either (`dnscamp sql --archive SRC`).

How a view is built (``views``): its columns and their types are the store's, read from the
archive's manifest (``views``, from information_schema when it was written). Each column is
- the envelope or body column of the same name in the kind's Parquet files (a body value that
  did not fit its typed column is read from ``_body_extra`` the way the store's JSON_VALUE
  reads it), or
- one of the few computed columns below (durations, totals, counts, JSON members), written
  once in DuckDB's SQL (``DERIVED``),
cast to the store's type (TRY_CAST: a value out of the type's range is NULL, as in the store).
Only the aggregate view ``v_failures`` is SQL written for DuckDB as a whole. The views over
Atlas tables (v_atlas_ping, v_atlas_dns, v_quicsocks_savings) are the store's own definitions
(pg_get_viewdef, in the manifest) run over the archived Atlas tables; the store's
``atlas_ping_latest`` (0017), which v_quicsocks_savings reads, is derived here from the pings. Views over what an
archive does not hold (the S3 ledger, the quarantine, credits) are not created.

A local archive is read without Arrow (verified by ``archive.verified`` with DuckDB, scanned by
read_parquet, a kind or table not archived a typed relation of no rows); one on S3 through
Arrow's S3 filesystem. ``run`` creates only the relations its query reaches.
"""

from __future__ import annotations

import re
from typing import Any, Callable

import duckdb

from dnscamp.opendata import archive, columns

KIND_OF_VIEW = {"v_dns_query": "dns_query", "v_page_load": "page_load", "v_ping": "ping"}
PG_TO_DUCK = {
    "text": "VARCHAR", "character varying": "VARCHAR", "uuid": "UUID", "integer": "INTEGER", "smallint": "SMALLINT",
    "bigint": "BIGINT", "double precision": "DOUBLE", "real": "FLOAT", "numeric": "DOUBLE", "boolean": "BOOLEAN",
    "jsonb": "JSON", "json": "JSON", "timestamp with time zone": "TIMESTAMPTZ",
    "timestamp without time zone": "TIMESTAMP", "date": "DATE",
    "ARRAY": "DOUBLE[]",  # the views' arrays are float8[] (v_atlas_ping.rtts_ms)
    "text[]": "VARCHAR[]",  # but v_run_completeness's (opendata.pgarrow.columns names them so)
}  # fmt: skip
_NS_MS = "::HUGEINT - {b})::DOUBLE / 1e6"
DERIVED: dict[str, dict[str, str]] = {
    "v_results": {
        "ok": "status = 'ok'",
        "link_backend": "json_extract_string(env, '$.link_backend')",
        "ingested_at": "NULL",  # when a row reached the store: not archived
    },
    "v_dns_query": {
        "answer_count": "COALESCE(json_array_length(answers), 0)",
        "connect_ms": "(t_connected" + _NS_MS.format(b="t_start"),
        "handshake_ms": "(t_tls_done" + _NS_MS.format(b="COALESCE(t_connected, t_start)"),
        "exchange_ms": "(t_response" + _NS_MS.format(b="t_query_sent"),
        "total_ms": "(t_response" + _NS_MS.format(b="t_start"),
        "exchange_rtt_multiple": "(t_response" + _NS_MS.format(b="t_query_sent") + " / _rtt_divisor",
        "total_rtt_multiple": "(t_response" + _NS_MS.format(b="t_start") + " / _rtt_divisor",
        "total_bytes": "_bytes_n",
        "total_packets": "_packets_n",
        "total_ip_bytes": "_bytes_n + _hdr_bytes * _packets_n",
        "tool_versions": "json_extract(env, '$.dns')",
    },
    "v_page_load": {
        "dom_content_loaded_ms": "jnum(navigation, '$.domContentLoadedEventStart')",
        "ttfb_ms": "jnum(navigation, '$.responseStart')",
        "doc_dns_ms": "jnum(navigation, '$.domainLookupEnd') - jnum(navigation, '$.domainLookupStart')",
        "doc_connect_ms": "jnum(navigation, '$.connectEnd') - jnum(navigation, '$.connectStart')",
        "doc_tls_ms": "CASE WHEN jnum(navigation, '$.secureConnectionStart') > 0 "
                      "THEN jnum(navigation, '$.connectEnd') - jnum(navigation, '$.secureConnectionStart') END",
        "resources": "COALESCE(json_array_length(resources), 0)",
        "stub_queries": "jint(stub, '$.queries')",
        "stub_overhead_us_p50": "jnum(stub, '$.overhead_us_p50')",
        "load_order": '"order"',
        "seed": "json_extract_string(env, '$.seed')",
        "warm_origin": "COALESCE(json_type(warm_origin) = 'OBJECT', false)",
        "request_in_0rtt": "CASE WHEN json_type(warm_origin, '$.zero_rtt.request_in_0rtt') = 'BOOLEAN' "
                           "THEN json_extract(warm_origin, '$.zero_rtt.request_in_0rtt')::BOOLEAN END",
    },
    "v_ping": {
        "loss": "CASE WHEN sent > 0 THEN 1.0 - received::DOUBLE / sent END",
        "rtt_min_ms": "list_min(_rtts)",
        "rtt_avg_ms": "list_avg(_rtts)",
        "rtt_median_ms": "list_aggregate(_rtts, 'median')",
        "rtt_max_ms": "list_max(_rtts)",
    },
}  # fmt: skip
# Helper columns a view's computed columns use (not part of the view).
HELPERS = {
    "v_dns_query": (
        "CASE WHEN transport IN ('do53', 'doq', 'doh3') THEN 28 ELSE 52 END AS _hdr_bytes",
        "TRY_CAST(COALESCE(handshake_bytes_sent, 0)::HUGEINT + COALESCE(handshake_bytes_received, 0) "
        "+ query_bytes_sent + query_bytes_received AS BIGINT) AS _bytes_n",
        "TRY_CAST(COALESCE(handshake_packets_sent, 0)::HUGEINT + COALESCE(handshake_packets_received, 0) "
        "+ query_packets_sent + query_packets_received AS INTEGER) AS _packets_n",
        "CASE WHEN access_rtt_ms >= 0.001 THEN access_rtt_ms END AS _rtt_divisor",
    ),
    "v_ping": ("list_filter(TRY_CAST(rtts_ms AS DOUBLE[]), lambda x: x IS NOT NULL) AS _rtts",),
}
V_FAILURES = """
CREATE OR REPLACE VIEW v_failures AS
SELECT campaign, kind, vantage_id, network_profile, status,
       count(*) AS n,
       count(*)::DOUBLE / sum(count(*)) OVER (PARTITION BY campaign, kind, vantage_id, network_profile) AS share
FROM v_results
GROUP BY campaign, kind, vantage_id, network_profile, status
"""
MACROS = (
    # JSON_VALUE(j, path RETURNING float8 / int): the number, NULL for another JSON type
    "CREATE OR REPLACE MACRO jnum(j, p) AS CASE WHEN json_type(j, p) IN ('DOUBLE', 'BIGINT', 'UBIGINT') "
    "THEN TRY_CAST(json_extract(j, p) AS DOUBLE) END",
    "CREATE OR REPLACE MACRO jint(j, p) AS CASE WHEN json_type(j, p) IN ('BIGINT', 'UBIGINT') "
    "THEN TRY_CAST(json_extract(j, p) AS INTEGER) END",
)


def _median_ci_rank_macro() -> str:
    """The store's ``dnscamp_median_ci_rank(n)`` (migration 0028) for DuckDB, made from its
    definition, ``vantage_agent.stats.median_ci_rank``: its exact ranks as a list literal up to
    EXACT_RANKS_UP_TO, the same closed form beyond (DuckDB has no loops in a macro)."""
    from vantage_agent.stats import EXACT_RANKS_UP_TO, Z95, median_ci_rank

    ranks = ", ".join(str(median_ci_rank(n) or "NULL") for n in range(EXACT_RANKS_UP_TO + 1))
    return (f"CREATE OR REPLACE MACRO dnscamp_median_ci_rank(n) AS CASE WHEN n < 6 THEN NULL "
            f"WHEN n <= {EXACT_RANKS_UP_TO} THEN ([{ranks}]::BIGINT[])[n + 1] "
            f"ELSE greatest(1, floor((n + 1 - {Z95!r} * sqrt(n)) / 2))::BIGINT END")


MACROS = (*MACROS, _median_ci_rank_macro())
_FALLBACK = {  # a body value kept in _body_extra, read as the store's JSON_VALUE / ->> would
    int: "CASE WHEN json_type(_body_extra, '$.\"{k}\"') IN ('BIGINT', 'UBIGINT') "
         "THEN TRY_CAST(json_extract(_body_extra, '$.\"{k}\"') AS BIGINT) END",
    float: "jnum(_body_extra, '$.\"{k}\"')",
    bool: "CASE WHEN json_type(_body_extra, '$.\"{k}\"') = 'BOOLEAN' "
          "THEN json_extract(_body_extra, '$.\"{k}\"')::BOOLEAN END",
    str: "json_extract_string(_body_extra, '$.\"{k}\"')",
    columns.JSON: "json_extract(_body_extra, '$.\"{k}\"')",
}  # fmt: skip


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _kind_select(kind: str, source: str) -> str:
    """SELECT of one kind's archived rows with body columns under their body names, typed."""
    cols = [f"{_q(c)}" for c in columns.ENVELOPE if c not in ("env",)]
    cols.append("CAST(env AS JSON) AS env")
    cols.append(f"'{kind}' AS kind")
    for key, col, t in columns.body_fields(kind):
        base = f"CAST({_q(col)} AS JSON)" if t is columns.JSON else _q(col)
        cols.append(f"COALESCE({base}, {_FALLBACK[t].format(k=key)}) AS {_q(key)}")
    cols.append(columns.EXTRA)
    return f"SELECT {', '.join(cols)} FROM {source}"


def _dataset(files: list[str], fs):
    """Parquet files on S3 as one Arrow dataset. pyarrow.dataset loads pyarrow.compute (~0.1 s),
    which a local archive (read by DuckDB's read_parquet) does not need."""
    import pyarrow.dataset as ds

    return ds.dataset(files, filesystem=fs, format="parquet")


def _empty(cols: list[tuple[str, str]]) -> str:
    """A relation of no rows with these (column, DuckDB type)s: a kind or table not archived."""
    return "(SELECT " + ", ".join(f"CAST(NULL AS {t}) AS {_q(c)}" for c, t in cols) + " LIMIT 0)"


def _scan(con: duckdb.DuckDBPyConnection, source: archive.Source, name: str, files: list[str],
          cols: list[tuple[str, str]]) -> str:  # fmt: skip
    """What a view reads a kind's or table's files from: DuckDB's read_parquet for a local
    archive, an Arrow dataset registered with ``con`` on S3 (through Arrow's S3 client), a typed
    relation of no rows (``cols``) when none was archived."""
    if not files:
        return _empty(cols)
    if source.local:
        lst = ", ".join("'" + p.replace("'", "''") + "'" for p in files)
        return f"read_parquet([{lst}], hive_partitioning = false)"
    con.register(f"_arrow_{name}", _dataset(files, source.fs))
    return f"_arrow_{name}"


class _Relation:
    """One view of the archive's DuckDB: its CREATE statement (run by ``create``), and the
    relations it reads, which must exist first."""

    def __init__(self, name: str, reads: set[str], create: Callable[[duckdb.DuckDBPyConnection], None]):
        self.name, self.reads, self.create = name, reads, create


def _relations(source: archive.Source, manifest: dict[str, Any]) -> list[_Relation]:
    """Every relation the archive's DuckDB offers, in an order in which each one's reads come first."""
    out: list[_Relation] = []

    def stmt(sql: str) -> Callable[[duckdb.DuckDBPyConnection], None]:
        return lambda con: con.execute(sql)

    kinds = sorted(set(manifest["kinds"]) | set(KIND_OF_VIEW.values()))
    for kind in kinds:
        files = [f"{source.root}/{f['path']}" for f in manifest["files"] if f["kind"] == kind]

        def create(con, kind=kind, files=files):
            scan = _scan(con, source, kind, files, columns.kind_duck_types(kind))
            con.execute(f"CREATE OR REPLACE VIEW _k_{kind} AS {_kind_select(kind, scan)}")

        out.append(_Relation(f"_k_{kind}", set(), create))
    for name, sql in view_sql(manifest, kinds).items():
        reads = {f"_k_{k}" for k in kinds} if name == "v_results" else {f"_k_{KIND_OF_VIEW[name]}"}
        out.append(_Relation(name, reads, stmt(sql)))
    out.append(_Relation("v_failures", {"v_results"}, stmt(V_FAILURES)))
    out.extend(_atlas(source, manifest, {r.name for r in out}))
    return out


def _atlas(source: archive.Source, manifest: dict[str, Any], names: set[str]) -> list[_Relation]:
    """The archived Atlas tables under their store names (JSON columns as JSON), then the
    store's own definitions of the views over them (pg_get_viewdef, run as they are)."""
    out: list[_Relation] = []
    tables = manifest.get("tables", {})
    for table, meta in tables.items():
        files = [f"{source.root}/{f['path']}" for f in manifest["files"] if f["kind"] == table]
        cols = meta["columns"]
        sel = ", ".join(f"CAST({_q(c)} AS JSON) AS {_q(c)}" if t in columns.JSONISH else _q(c) for c, t in cols)

        def create(con, table=table, files=files, cols=cols, sel=sel):
            scan = _scan(con, source, table, files, columns.store_duck_types(cols))
            con.execute(f"CREATE OR REPLACE VIEW {table} AS SELECT {sel} FROM {scan}")

        out.append(_Relation(table, set(), create))
    defs = dict(manifest.get("view_defs", {}))
    if "atlas_ping" in tables:
        out.append(_Relation("atlas_ping_latest", {"atlas_ping"}, lambda con: con.execute(ATLAS_PING_LATEST)))
        if "v_quicsocks_savings" not in defs:  # 0017's reads atlas_ping_latest, which archives leave out
            from db.views import view_sql as store_view

            defs["v_quicsocks_savings"] = store_view("v_quicsocks_savings").split("VIEW v_quicsocks_savings AS\n", 1)[1]
    known = names | {r.name for r in out}
    for view, definition in defs.items():
        if view not in manifest.get("views", {}):
            continue
        sql = create_view(view, manifest["views"][view], f"({definition.rstrip().rstrip(';')})")

        def create(con, sql=sql):
            try:
                con.execute(sql)
            except duckdb.Error:  # Postgres-only SQL (v_atlas_credits' JSON_VALUE ... RETURNING): not offered
                pass

        out.append(_Relation(view, (_words(definition) & known) - {view}, create))
        known.add(view)
    return out


_WORD = re.compile(r"\w+")
# Words of a query that can reach a relation without naming it (the catalog's listings,
# queries built from strings, EXPORT DATABASE): such a query gets every relation.
_CATALOG_WORDS = {"information_schema", "query", "query_table", "show", "describe", "summarize", "pragma", "export",
                  "copy", "attach", "database", "databases", "tables", "views", "table_info"}  # fmt: skip
_CATALOG_PREFIXES = ("duckdb_", "pg_", "pragma_", "sqlite_")


def _words(sql: str) -> set[str]:
    return set(_WORD.findall(sql.lower()))


def reached(relations: list[_Relation], query: str | None) -> set[str] | None:
    """The relations ``query`` can read: those it names (DuckDB's names are case-insensitive)
    and, transitively, what they read; None (all of them) for no query or one that can reach
    relations without naming them."""
    if query is None:
        return None
    words = _words(query)
    if words & _CATALOG_WORDS or any(w.startswith(_CATALOG_PREFIXES) for w in words):
        return None
    by_name = {r.name: r for r in relations}
    todo = [w for w in words if w in by_name]
    out: set[str] = set()
    while todo:
        name = todo.pop()
        if name not in out:
            out.add(name)
            todo.extend(by_name[name].reads)
    return out


def _build(con: duckdb.DuckDBPyConnection, relations: list[_Relation], only: set[str] | None) -> None:
    for m in MACROS:
        con.execute(m)
    for r in relations:
        if only is None or r.name in only:
            r.create(con)


def connect(src: str, *, checksums: bool = False) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with the archive's views. The manifest and the files' sizes, row
    counts and footers are verified first (``checksums`` adds every file's sha256)."""
    con = duckdb.connect()
    source, manifest = archive.verified(src, checksums=checksums, con=con)
    _build(con, _relations(source, manifest), None)
    return con


def run(src: str, query: str, *, checksums: bool = False) -> tuple[list[str], list[tuple]]:
    """(column names, rows) of ``query`` over the archive, verified as ``connect`` does. Only the
    relations the query reaches are created (creating the ~20 views is most of a small query's
    time); a query that then fails on a name DuckDB does not know runs again with all of them,
    so its error (DuckDB's "did you mean" names the closest relation) is the one it gets when
    every relation exists."""
    con = duckdb.connect()
    source, manifest = archive.verified(src, checksums=checksums, con=con)
    relations = _relations(source, manifest)
    only = reached(relations, query)
    _build(con, relations, only)
    try:
        cur = con.execute(query)
    except duckdb.CatalogException:
        if only is None:
            raise
        con = duckdb.connect()
        _build(con, relations, None)
        cur = con.execute(query)
    return [d[0] for d in cur.description or []], cur.fetchall()


# The store's atlas_ping_latest (migration 0017: the latest successful ping per campaign,
# measurement, probe and destination, kept by a trigger) is derived, not archived: the same
# rows from the archived pings.
ATLAS_PING_LATEST = """
CREATE OR REPLACE VIEW atlas_ping_latest AS
SELECT campaign, msm_id, prb_id, dst_addr, raw_id, "timestamp", avg_ms FROM atlas_ping
WHERE status = 'ok' AND avg_ms IS NOT NULL
QUALIFY row_number() OVER (PARTITION BY campaign, msm_id, prb_id, dst_addr ORDER BY "timestamp" DESC, raw_id DESC) = 1
"""


def view_sql(manifest: dict[str, Any], kinds: list[str]) -> dict[str, str]:
    """CREATE VIEW statements for the views the archive can answer, in the store's columns."""
    views = manifest.get("views", {})
    out: dict[str, str] = {}
    for name, cols in views.items():
        if name == "v_results":
            env_cols = ", ".join(_q(c) for c in (*columns.ENVELOPE, "kind"))
            source = "(" + " UNION ALL ".join(f"SELECT {env_cols} FROM _k_{k}" for k in kinds) + ")"
        elif name in KIND_OF_VIEW:
            source = f"_k_{KIND_OF_VIEW[name]}"
        else:
            continue
        out[name] = create_view(name, cols, source)
    return out


def create_view(name: str, cols: list[list[str]], source: str) -> str:
    derived = DERIVED.get(name, {})
    sel = []
    for col, pgtype in cols:
        expr = derived.get(col, _q(col))
        sel.append(f"TRY_CAST({expr} AS {PG_TO_DUCK.get(pgtype, 'VARCHAR')}) AS {_q(col)}")
    helpers = HELPERS.get(name, ())
    inner = f"(SELECT *{''.join(', ' + h for h in helpers)} FROM {source})" if helpers else source
    return f"CREATE OR REPLACE VIEW {name} AS SELECT {', '.join(sel)} FROM {inner} AS d"


def unresolved(manifest: dict[str, Any]) -> dict[str, list[str]]:
    """View columns the archive cannot give (neither archived nor derived): for the tests."""
    out: dict[str, list[str]] = {}
    for name, cols in manifest.get("views", {}).items():
        if name == "v_results":
            have = set(columns.ENVELOPE) | {"kind"}
        elif name in KIND_OF_VIEW:
            have = set(columns.ENVELOPE) | {k for k, _, _ in columns.body_fields(KIND_OF_VIEW[name])}
        else:
            continue
        missing = [c for c, _ in cols if c not in have and c not in DERIVED.get(name, {})]
        if missing:
            out[name] = missing
    return out
