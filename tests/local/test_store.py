"""The store: migrations, roles (reader sees views only), the embedded cluster."""

import psycopg
import pytest

from db import engine, migrate
from db.views import all_views

pytestmark = pytest.mark.local


def test_migrated_to_every_head(db_url):
    url = db_url.replace("postgresql://", "postgresql+psycopg://", 1)
    assert migrate.current_heads(url) == migrate.script_heads()


def test_every_view_file_exists_in_the_database(db_url):
    with psycopg.connect(db_url) as c:
        views = {r[0] for r in c.execute("SELECT table_name FROM information_schema.views WHERE table_schema='public'")}
    assert set(all_views()) <= views


def test_reader_reads_views_not_tables(empty_db):
    reader = empty_db.replace("postgres@", f"{engine.READER}@", 1)
    with psycopg.connect(reader) as c:
        assert c.execute("SELECT count(*) FROM v_results").fetchone()[0] == 0
    with psycopg.connect(reader) as c:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute("SELECT count(*) FROM results")
    with psycopg.connect(reader) as c:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute("INSERT INTO quarantine (source_file, line, reason, raw) VALUES ('x', 1, 'r', 'x')")


def test_writer_inserts_but_cannot_drop(empty_db):
    writer = empty_db.replace("postgres@", f"{engine.WRITER}@", 1)
    with psycopg.connect(writer) as c:
        c.execute("INSERT INTO quarantine (source_file, line, reason, raw) VALUES ('x', 1, 'r', 'x')")
        c.commit()
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute("DROP TABLE result_ids")


def test_indexes_for_the_obvious_queries(db_url):
    """Ids are unique across kinds and partitions (result_ids); the record tables are read by
    time (BRIN: a few pages per month partition, the store's bytes per record)."""
    with psycopg.connect(db_url) as c:
        idx = dict(c.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename IN "
                             "('result_ids', 'dns_queries', 'generic_results')").fetchall())
    assert "UNIQUE" in idx["result_ids_pkey"] and "(id)" in idx["result_ids_pkey"]
    assert "brin (started_at)" in idx["ix_dns_queries_started"] and "brin (started_at)" in idx["ix_generic_results_started"]


def test_embedded_listens_on_a_socket_only(db_url):
    if engine.external_url():
        pytest.fail("this test checks the embedded store; unset DNSCAMP_TEST_DATABASE_URL")
    with psycopg.connect(db_url) as c:
        assert c.execute("SHOW listen_addresses").fetchone()[0] == ""
