"""`dnscamp export`: jsonl gives back records JSON-equal to what was ingested (every kind, the
fixtures and the accepted lines of the hostile corpus: re-ingesting the export stores nothing
new and conflicts with nothing); parquet and csv give one file per view, readable by DuckDB and
by pyarrow (pandas-free), with a README and schema.json."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import duckdb
import orjson
import psycopg
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from collectors.ingest import ingest
from dnscamp.cli import app
from tests.scaffolding.demo_data import CAMPAIGN, DEMO, RECORDS, load_demo

pytestmark = pytest.mark.local
runner = CliRunner()
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "results"


@pytest.fixture()
def demo_db(empty_db, monkeypatch) -> str:
    load_demo(empty_db)
    monkeypatch.setenv("DNSCAMP_DATABASE_NAME", psycopg.conninfo.conninfo_to_dict(empty_db)["dbname"])
    return empty_db


def export(*args: str):
    r = runner.invoke(app, ["export", *args])
    return r.exit_code, r.stdout, r.stderr


def _normal(rec: dict) -> dict:
    """A record as the envelope model defines it: the instant of started_at, defaults filled."""
    rec = dict(rec, vantage={"region": None, "network_profile": None, **rec["vantage"]})
    rec["started_at"] = datetime.fromisoformat(rec["started_at"].replace("Z", "+00:00")).timestamp()
    for k, default in (("unit", None), ("error", None), ("env", {})):
        rec.setdefault(k, default)
    return rec


def test_jsonl_export_is_json_equal_to_the_ingested_lines(demo_db, tmp_path):
    code, out, err = export("--format", "jsonl", "--campaign", CAMPAIGN, str(tmp_path / "x"), "--json")
    assert code == 0, err
    files = json.loads(out)
    assert sum(files.values()) == RECORDS and set(files) == {f"records/{k}.jsonl" for k in ("atlas", "dns_query", "page_load", "ping")}
    got = {r["id"]: r for f in (tmp_path / "x" / "records").glob("*.jsonl") for r in map(orjson.loads, f.read_bytes().splitlines())}
    want = {r["id"]: r for f in (DEMO / "records").glob("*.jsonl") for r in map(orjson.loads, f.read_bytes().splitlines())}
    assert {i: _normal(r) for i, r in got.items()} == {i: _normal(r) for i, r in want.items()}
    readme = (tmp_path / "x" / "README.md").read_text()
    assert "licence: **CC-BY-4.0**" in readme and "campaign.toml" in readme and (tmp_path / "x" / "campaign.toml").is_file()


def _reexport(empty_db, monkeypatch, tmp_path, files: list[Path]) -> list[str]:
    """Ingest ``files``, export every campaign as jsonl, ingest the exports again: the reasons
    of whatever was not a duplicate (an id_conflict: a record that did not come back equal)."""
    first = ingest(files, empty_db, workers=1)
    assert first.ingested > 10
    monkeypatch.setenv("DNSCAMP_DATABASE_NAME", psycopg.conninfo.conninfo_to_dict(empty_db)["dbname"])
    with psycopg.connect(empty_db) as c:
        campaigns = [r[0] for r in c.execute("SELECT DISTINCT campaign FROM results ORDER BY 1")]
    total, reasons = 0, []
    for i, camp in enumerate(campaigns):
        code, out, err = export("--format", "jsonl", "--campaign", camp, str(tmp_path / f"e{i}"), "--json")
        assert code == 0, err
        total += sum(json.loads(out).values())
        again = ingest([tmp_path / f"e{i}" / "records"], empty_db, workers=1)
        assert again.ingested == 0
        reasons += again.reasons
    assert total == first.ingested
    return reasons


def test_jsonl_export_of_every_kinds_fixtures_reingests_as_duplicates(empty_db, monkeypatch, tmp_path):
    """Every kind's v1 fixtures exported and ingested again: each a duplicate (same id and
    content hash), none an id_conflict."""
    assert _reexport(empty_db, monkeypatch, tmp_path, sorted((FIXTURES / "v1").glob("*.jsonl"))) == []


def test_jsonl_export_of_the_hostile_corpus_reingests_as_duplicates(empty_db, monkeypatch, tmp_path):
    """The adversarial corpora (every accepted line: -0.0, 1.7e308, huge
    navigation numbers, every code point class) come back exactly (failed before the compact
    store of migration 0012: jsonb's numeric turned -0.0 into 0.0 and 1.7e308 into an integer)."""
    assert _reexport(empty_db, monkeypatch, tmp_path, sorted((FIXTURES / "hostile").glob("*.jsonl"))) == []


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_view_files_readable_by_duckdb_and_pyarrow(demo_db, tmp_path, fmt):
    out = tmp_path / fmt
    code, stdout, err = export("--format", fmt, "--campaign", CAMPAIGN, str(out), "--licence", "CC0-1.0", "--json")
    assert code == 0, err
    files = json.loads(stdout)
    schema = json.loads((out / "schema.json").read_text())
    assert schema["licence"] == "CC0-1.0" and schema["campaign"] == CAMPAIGN
    for view in ("v_results", "v_dns_query", "v_page_load", "v_ping", "v_atlas_ping", "v_atlas_dns", "v_quicsocks_savings"):
        assert f"{view}.{fmt}" in files, files
    assert files[f"v_dns_query.{fmt}"] == 60 and files[f"v_results.{fmt}"] == RECORDS
    assert files["v_atlas_ping." + fmt] == 60 and files["v_quicsocks_savings." + fmt] > 0
    units = {c["name"]: c["unit"] for c in schema["views"]["v_dns_query"]}
    assert units["total_ms"] == "ms" and units["t_start"].startswith("ns") and units["total_bytes"] == "bytes"
    con = duckdb.connect()
    for name, n in files.items():
        path = str(out / name)
        if fmt == "parquet":
            t = pq.read_table(path)  # pyarrow alone, no pandas
            assert t.schema.metadata[b"licence"] == b"CC0-1.0"
            cols = [c["name"] for c in schema["views"][name.removesuffix(".parquet")]]
            assert t.column_names == cols
            assert con.execute(f"SELECT count(*) FROM read_parquet('{path}')").fetchone()[0] == n
        else:
            t = pacsv.read_csv(path)
            assert con.execute(f"SELECT count(*) FROM read_csv_auto('{path}')").fetchone()[0] == n
        assert t.num_rows == n
    q = f"SELECT transport, count(*) FROM read_{'parquet' if fmt == 'parquet' else 'csv_auto'}('{out}/v_dns_query.{fmt}') GROUP BY 1"
    assert dict(con.execute(q).fetchall()) == {"do53": 12, "dot": 12, "doh": 12, "doh3": 12, "doq": 12}
    readme = (out / "README.md").read_text()
    assert "CC0-1.0" in readme and "| `total_ms` | double precision | ms |" in readme and "## Versions" in readme


def test_export_errors_are_one_line(demo_db, tmp_path):
    code, _, err = export("--format", "xml", "--campaign", CAMPAIGN, str(tmp_path / "a"))
    assert code == 2 and "--format" in err and len(err.strip().splitlines()) == 1
    code, _, err = export("--campaign", "nope", str(tmp_path / "b"))
    assert code == 2 and "'nope'" in err
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "f").write_text("x")
    code, _, err = export("--campaign", CAMPAIGN, str(tmp_path / "c"))
    assert code == 2 and "not empty" in err
