"""The roles docker-compose.yml gives its services, on a real store: the collector logs in as
dnscamp_writer (DNSCAMP_DATABASE_URL = the writer's login), so `dnscamp collect --watch`'s
schema check before collecting and its health check `dnscamp db status` must work as the
writer on a store the owner migrated (migration 0014 lets the writer read alembic_version),
and the writer must not be able to migrate a store that is behind."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

from db import engine, migrate
from tests.scaffolding.moto_s3 import s3_server

pytestmark = pytest.mark.local
V1 = Path(__file__).resolve().parents[1] / "fixtures" / "results" / "v1"


def _dbname(url: str) -> str:
    return url.split("/")[3].split("?")[0]


@pytest.fixture()
def as_writer(fresh_db, monkeypatch):
    """dnscamp configured like the compose collector: the store is external, its URL the writer's."""
    writer = engine.database_url("writer", dbname=_dbname(fresh_db))
    monkeypatch.setenv("DNSCAMP_DATABASE_URL", writer)
    monkeypatch.delenv("DNSCAMP_READER_URL", raising=False)
    return fresh_db


def _cli(*args: str):
    from dnscamp.cli import app

    return CliRunner().invoke(app, list(args))


def test_the_collector_collects_and_is_healthy_as_the_writer(as_writer, monkeypatch):
    with s3_server(monkeypatch, "results") as m:
        body = (V1 / "dns_query.jsonl").read_bytes()
        m.client.put_object(Bucket="results", Key="results/c/v/r1/u.jsonl.gz", Body=gzip.compress(body))
        r = _cli("collect", "s3://results/results/", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout.splitlines()[-1])["ingested"] == len(body.splitlines())
    r = _cli("db", "status", "--json")
    assert r.exit_code == 0, r.output
    st = json.loads(r.stdout)
    assert "warning" not in st and st["revision"] == st["latest"] and st["results"] == len(body.splitlines())
    with psycopg.connect(as_writer) as c:  # the owner's view: the writer changed no schema
        assert c.execute("SELECT version_num FROM alembic_version").fetchall() == [(migrate.script_heads()[0],)]


def test_the_writer_cannot_migrate_a_store_that_is_behind(as_writer):
    migrate.downgrade(as_writer.replace("postgresql://", "postgresql+psycopg://", 1), "0013_rollups")
    r = _cli("collect", "s3://results/results/")
    assert r.exit_code == 1 and r.exception is None or isinstance(r.exception, SystemExit), r.exception
    assert r.stderr.count("\n") == 1 and "run `dnscamp db migrate` as the store's owner" in r.stderr, r.stderr
    with psycopg.connect(as_writer) as c:
        assert c.execute("SELECT version_num FROM alembic_version").fetchall() == [("0013_rollups",)]
        assert c.execute("SELECT to_regclass('atlas_probes')").fetchone()[0] is None
