"""`dnscamp archive`: Parquet (zstd, kind=/day=) + manifest, to a directory and to moto's S3;
restore gives back the same records, idempotently; a corrupt or partial archive is refused
whole, naming the file, before anything is ingested."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import psycopg
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from db.records import iter_records
from dnscamp.cli import app
from dnscamp.opendata import archive as arc
from tests.scaffolding.demo_data import CAMPAIGN, RECORDS, load_demo

pytestmark = pytest.mark.local
runner = CliRunner()


@pytest.fixture()
def demo_db(empty_db, monkeypatch) -> str:
    load_demo(empty_db)
    monkeypatch.setenv("DNSCAMP_DATABASE_NAME", psycopg.conninfo.conninfo_to_dict(empty_db)["dbname"])
    return empty_db


def stored(url: str) -> dict[str, dict]:
    with psycopg.connect(url) as c:
        return {r["id"]: r for r in iter_records(c, campaign=CAMPAIGN)}


ATLAS = ("atlas_ping", "atlas_dns", "atlas_results_raw", "atlas_discovery", "atlas_probes", "atlas_measurements")


def drop_campaign(url: str) -> None:
    with psycopg.connect(url) as c:
        c.execute("DELETE FROM results WHERE campaign = %s", (CAMPAIGN,))
        for t in ATLAS:  # the demo's Atlas measurements are labelled "default/<run>"
            c.execute(f"DELETE FROM {t} WHERE campaign LIKE %s", (CAMPAIGN + "/%",))


def atlas_rows(url: str) -> dict[str, list]:
    """What the Atlas views show (raw ids are the store's own: left out)."""
    with psycopg.connect(url) as c:
        return {
            "ping": c.execute("SELECT campaign, role, msm_id, prb_id, timestamp, dst_addr, rtts_ms, avg_ms, status "
                              "FROM v_atlas_ping ORDER BY msm_id, prb_id, timestamp, dst_addr").fetchall(),
            "dns": c.execute("SELECT campaign, msm_id, prb_id, timestamp, resolver, rcode, answers, response_time_ms "
                             "FROM v_atlas_dns ORDER BY msm_id, prb_id, timestamp, resolver").fetchall(),
            "savings": c.execute("SELECT * FROM v_quicsocks_savings ORDER BY campaign, prb_id").fetchall(),
            "probes": c.execute("SELECT * FROM v_atlas_probes ORDER BY campaign, prb_id").fetchall(),
        }  # fmt: skip


def cli(*args: str):
    r = runner.invoke(app, list(args))
    return r.exit_code, r.stdout, r.stderr


def test_archive_layout_manifest_and_restore_round_trip(demo_db, tmp_path):
    before = stored(demo_db)
    assert len(before) == RECORDS
    dest = tmp_path / "arch"
    code, out, err = cli("archive", "--campaign", CAMPAIGN, str(dest), "--json")
    assert code == 0, err
    assert json.loads(out)["rows"] == RECORDS
    m = json.loads((dest / "manifest.json").read_text())
    assert m["format"] == arc.FORMAT and m["records_schema"] == "dnscamp.result/1" and m["store_revision"]
    assert {k: v["rows"] for k, v in m["kinds"].items()} == {"dns_query": 60, "page_load": 48, "ping": 4, "atlas": 1}
    assert {k: v["rows"] for k, v in m["tables"].items()} == {"atlas_measurements": 4, "atlas_discovery": 20,
                                                              "atlas_probes": 20, "atlas_results_raw": 80, "atlas_ping": 60, "atlas_dns": 20}
    assert set(m["view_defs"]) >= {"v_atlas_ping", "v_atlas_dns", "v_quicsocks_savings", "v_atlas_probes"}
    for f in m["files"]:
        p = dest / f["path"]
        assert p.parts[-3] == f"kind={f['kind']}" and p.parts[-2] == f"day={f['day']}"
        meta = pq.ParquetFile(p).metadata
        assert meta.num_rows == f["rows"] and meta.row_group(0).column(0).compression == "ZSTD"
        if f["kind"] == "dns_query":  # clocks as differences
            col = meta.row_group(0).column(meta.schema.names.index("t_start"))
            assert "DELTA_BINARY_PACKED" in col.encodings
    assert "v_dns_query" in m["views"] and ["total_ms", "double precision"] in m["views"]["v_dns_query"]
    assert cli("archive", "verify", str(dest))[0] == 0

    atlas_before = atlas_rows(demo_db)
    assert all(atlas_before.values())
    drop_campaign(demo_db)
    assert stored(demo_db) == {} and not any(atlas_rows(demo_db).values())
    code, out, err = cli("archive", "restore", str(dest), "--json")
    assert code == 0, err
    got = json.loads(out)
    assert {k: got[k] for k in ("ingested", "duplicates", "quarantined")} == {"ingested": RECORDS, "duplicates": 0, "quarantined": 0}
    assert got["atlas"]["ingested"] == 80 and got["atlas"]["quarantined"] == 0
    assert stored(demo_db) == before  # JSON-equal, every kind
    assert atlas_rows(demo_db) == atlas_before  # Atlas measurements, discovery and results too
    with psycopg.connect(demo_db) as c:  # and the content hashes are ingest's (dedup holds)
        assert c.execute("SELECT count(*) FROM results WHERE content_sha256 IS NULL").fetchone()[0] == 0
    code, out, _ = cli("archive", "restore", str(dest), "--json")  # idempotent
    got = json.loads(out)
    assert code == 0 and {k: got[k] for k in ("ingested", "duplicates", "quarantined")} == {"ingested": 0, "duplicates": RECORDS, "quarantined": 0}
    assert got["atlas"]["ingested"] == 0 and got["atlas"]["duplicates"] == 80
    assert stored(demo_db) == before and atlas_rows(demo_db) == atlas_before


def test_archive_refuses_a_destination_that_is_not_empty_and_an_unknown_campaign(demo_db, tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "old.txt").write_text("x")
    code, _, err = cli("archive", "--campaign", CAMPAIGN, str(tmp_path / "x"))
    assert code == 2 and "not empty" in err and len(err.strip().splitlines()) == 1
    code, _, err = cli("archive", "--campaign", "nope", str(tmp_path / "y"))
    assert code == 2 and "'nope'" in err


def _truncate(dest: Path, m: dict) -> str:
    rel = m["files"][0]["path"]
    p = dest / rel
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])
    return rel


def _remove(dest: Path, m: dict) -> str:
    rel = m["files"][-1]["path"]
    (dest / rel).unlink()
    return rel


def _flip(dest: Path, m: dict) -> str:  # same size, other bytes: only the checksum sees it
    rel = m["files"][1]["path"]
    p = dest / rel
    b = bytearray(p.read_bytes())
    b[8] ^= 0xFF  # inside the first page, far from the footer
    p.write_bytes(bytes(b))
    return rel


def _rows(dest: Path, m: dict) -> str:  # a manifest that does not match its files
    m["files"][0]["rows"] += 1
    (dest / "manifest.json").write_text(json.dumps(m))
    return "manifest.json"


def _file_rows(dest: Path, m: dict) -> str:  # the totals agree, the file's footer does not
    f = m["files"][0]
    f["rows"] += 1
    {**m["kinds"], **m["tables"]}[f["kind"]]["rows"] += 1
    (dest / "manifest.json").write_text(json.dumps(m))
    return f["path"]


def _format(dest: Path, m: dict) -> str:  # an archive of another format version
    m["format"] = "dnscamp.archive/2"
    (dest / "manifest.json").write_text(json.dumps(m))
    return "manifest.json"


def _extra(dest: Path, m: dict) -> str:
    rel = "kind=dns_query/day=2001-01-01/part-0000.parquet"
    (dest / rel).parent.mkdir(parents=True)
    shutil.copy(dest / m["files"][0]["path"], dest / rel)
    return rel


def _no_manifest(dest: Path, m: dict) -> str:
    (dest / "manifest.json").unlink()
    return "manifest.json"


@pytest.mark.parametrize("damage,says", [(_truncate, "bytes"), (_remove, "missing"), (_flip, "sha256"),
                                         (_rows, "rows"), (_file_rows, "rows, the manifest says"),
                                         (_format, "format 'dnscamp.archive/2'"), (_extra, "not listed"),
                                         (_no_manifest, "missing")])  # fmt: skip
def test_corrupt_or_partial_archive_is_refused_naming_the_file_and_nothing_is_restored(demo_db, tmp_path, damage, says):
    dest = tmp_path / "arch"
    assert cli("archive", "--campaign", CAMPAIGN, str(dest))[0] == 0
    m = json.loads((dest / "manifest.json").read_text())
    drop_campaign(demo_db)
    rel = damage(dest, m)
    for cmd in (("archive", "verify", str(dest)), ("archive", "restore", str(dest)),
                ("sql", "--archive", str(dest), "SELECT count(*) FROM v_results")):  # fmt: skip
        code, _, err = cli(*cmd)
        assert code == 2, (cmd, err)
        assert rel in err and says in err and len(err.strip().splitlines()) == 1, err
    assert stored(demo_db) == {} and not any(atlas_rows(demo_db).values())  # never half-applied


def test_truncated_parquet_with_a_matching_manifest_is_refused_by_its_footer(demo_db, tmp_path):
    """A file cut short whose manifest entry was rewritten to match (size and sha256) is still
    refused: its Parquet footer does not read."""
    import hashlib

    dest = tmp_path / "arch"
    assert cli("archive", "--campaign", CAMPAIGN, str(dest))[0] == 0
    m = json.loads((dest / "manifest.json").read_text())
    rel = _truncate(dest, m)
    data = (dest / rel).read_bytes()
    m["files"][0].update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest())
    (dest / "manifest.json").write_text(json.dumps(m))
    for cmd in (("archive", "verify", str(dest)), ("archive", "restore", str(dest)),
                ("sql", "--archive", str(dest), "SELECT count(*) FROM v_results"),
                ("sql", "--archive", str(dest), "--quick", "SELECT 1")):  # fmt: skip
        code, _, err = cli(*cmd)
        assert code == 2 and f"{rel}: not a readable Parquet file (" in err, (cmd, err)
        assert len(err.strip().splitlines()) == 1, err


# --- S3 (moto server mode) ----------------------------------------------------------------


@pytest.fixture()
def moto_s3(monkeypatch):
    from tests.scaffolding.moto_s3 import s3_server

    with s3_server(monkeypatch, "archive-test") as m:
        yield m


def test_archive_to_s3_restore_from_it_and_duckdb_reads_the_bucket(demo_db, moto_s3):
    from dnscamp.opendata import duck

    uri = "s3://archive-test/campaigns/default"
    code, out, err = cli("archive", "--campaign", CAMPAIGN, uri, "--json")
    assert code == 0, err
    keys = {o["Key"] for o in moto_s3.client.list_objects_v2(Bucket="archive-test")["Contents"]}
    m = json.loads(moto_s3.client.get_object(Bucket="archive-test", Key="campaigns/default/manifest.json")["Body"].read())
    assert keys == {"campaigns/default/manifest.json"} | {f"campaigns/default/{f['path']}" for f in m["files"]}
    # DuckDB straight from the bucket (Arrow's S3 client under DuckDB's scan)
    con = duck.connect(uri, checksums=True)
    got = dict(con.execute("SELECT transport, count(*) FROM v_dns_query GROUP BY 1").fetchall())
    assert got == {"do53": 12, "dot": 12, "doh": 12, "doh3": 12, "doq": 12}
    assert dict(duck.run(uri, "SELECT transport, count(*) FROM v_dns_query GROUP BY 1")[1]) == got  # its views only
    # docs/archive.md's snippet: DuckDB over an Arrow dataset of the bucket, no dnscamp involved
    import duckdb
    import pyarrow.dataset as ds
    import pyarrow.fs as pafs

    s3 = pafs.S3FileSystem(region="us-east-1", endpoint_override=moto_s3.url.removeprefix("http://"), scheme="http")
    dns = ds.dataset("archive-test/campaigns/default/kind=dns_query", filesystem=s3, format="parquet", partitioning="hive")
    assert dict(duckdb.sql("SELECT transport, count(*) FROM dns GROUP BY 1").fetchall()) == got
    assert duckdb.sql("SELECT DISTINCT day FROM dns").fetchall() == [("2026-11-23",)]
    before = stored(demo_db)
    drop_campaign(demo_db)
    code, out, err = cli("archive", "restore", uri, "--json")
    assert code == 0 and json.loads(out)["ingested"] == RECORDS and json.loads(out)["atlas"]["ingested"] == 80, err
    assert stored(demo_db) == before
    moto_s3.client.delete_object(Bucket="archive-test", Key="campaigns/default/" + m["files"][0]["path"])
    code, _, err = cli("archive", "restore", uri)
    assert code == 2 and m["files"][0]["path"] in err and "missing" in err


def test_archive_writes_nothing_into_the_store_role_it_does_not_need(demo_db, tmp_path):
    """Archiving reads; the store's row count is the same after it."""
    with psycopg.connect(demo_db) as c:
        n = c.execute("SELECT count(*) FROM results").fetchone()[0]
    assert cli("archive", "--campaign", CAMPAIGN, str(tmp_path / "a"))[0] == 0
    with psycopg.connect(demo_db) as c:
        assert c.execute("SELECT count(*) FROM results").fetchone()[0] == n
    assert os.listdir(tmp_path / "a")


def test_an_unreachable_store_is_one_line_and_exit_1(demo_db, tmp_path, monkeypatch):
    dest = tmp_path / "a"
    assert cli("archive", "--campaign", CAMPAIGN, str(dest))[0] == 0
    down = "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2"
    monkeypatch.setenv("DNSCAMP_DATABASE_URL", down)
    monkeypatch.setenv("DNSCAMP_READER_URL", down)
    for cmd in (("archive", "restore", str(dest)), ("archive", "--campaign", CAMPAIGN, str(tmp_path / "b")),
                ("sql", "SELECT 1"), ("export", "--campaign", CAMPAIGN, str(tmp_path / "c"))):  # fmt: skip
        code, _, err = cli(*cmd)
        assert code == 1, (cmd, err)
        assert "cannot reach the store" in err and len(err.strip().splitlines()) == 1, (cmd, err)
    assert cli("sql", "--archive", str(dest), "SELECT count(*) FROM v_results")[0] == 0  # the archive needs no store
