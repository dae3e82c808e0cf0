"""The experiments' analyses read the store through one helper (`common.fetch_rows`): on the
demo campaign's records the DNS analyses find rows, and a run the store does not hold gets the
one "no records" line, naming it."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from collectors.ingest import ingest
from dnscamp.experiments import bytes as bytes_exp
from dnscamp.experiments import common, hol, www20

pytestmark = pytest.mark.local

DEMO = Path(__file__).resolve().parents[1] / "fixtures" / "demo" / "records"


def test_fetch_rows_and_the_no_records_line(empty_db):
    ingest([DEMO], empty_db)
    with psycopg.connect(empty_db) as conn:
        campaign, run = conn.execute("SELECT campaign, run FROM v_dns_query LIMIT 1").fetchone()
        n = conn.execute("SELECT count(*) FROM v_dns_query WHERE campaign = %s AND run = %s", (campaign, run)).fetchone()[0]
        rows = common.fetch_rows(conn, "SELECT * FROM v_dns_query WHERE campaign = %s AND run = %s", {campaign: run})
        assert len(rows) == n > 0 and rows[0]["campaign"] == campaign  # dict rows, every one
        assert common.fetch_rows(conn, "SELECT * FROM v_dns_query WHERE campaign = %s AND run = %s", {campaign: "nope"}) == []
        missing = {campaign: "no-such-run"}
        assert hol.analyse(conn, missing) == f"hol: no dns_query records in {campaign}/no-such-run"
        assert bytes_exp.analyse(conn, missing) == f"bytes: no successful dns_query records in {campaign}/no-such-run"
        assert www20.analyse(conn, missing) == f"www20: no page_load records in {campaign}/no-such-run"
        assert "no successful dns_query records" not in bytes_exp.analyse(conn, {campaign: run})
