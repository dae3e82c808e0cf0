"""The demo fixture loads through the normal ingest paths and every view sees it: what the
dashboards, SQL examples and report tests build on."""

import psycopg
import pytest

from tests.scaffolding.demo_data import ATLAS_CAMPAIGN, CAMPAIGN, RECORDS, load_demo

pytestmark = pytest.mark.local


def test_demo_loads_into_every_view(empty_db):
    load_demo(empty_db)
    with psycopg.connect(empty_db) as c:
        n = dict(c.execute("SELECT kind, count(*) FROM v_results WHERE campaign = %s GROUP BY 1", (CAMPAIGN,)).fetchall())
        assert sum(n.values()) == RECORDS and n["dns_query"] == 60 and n["page_load"] == 48
        assert c.execute("SELECT count(*) FROM v_dns_query WHERE campaign = %s", (CAMPAIGN,)).fetchone()[0] == 60
        assert c.execute("SELECT count(*) FROM v_page_load WHERE campaign = %s", (CAMPAIGN,)).fetchone()[0] == 48
        saved = c.execute("SELECT count(*) FROM v_quicsocks_savings WHERE campaign = %s", (ATLAS_CAMPAIGN,)).fetchone()[0]
        assert saved >= 16  # the 16 probes behind an ISP resolver the demo analysed
    load_demo(empty_db)  # idempotent: a second load stores nothing new
    with psycopg.connect(empty_db) as c:
        assert c.execute("SELECT count(*) FROM v_results WHERE campaign = %s", (CAMPAIGN,)).fetchone()[0] == RECORDS
