"""Probe metadata (atlas/probes.py, collectors/atlas_store.py, migration 0014_atlas_probes): the
real cousteau client against the fake Atlas API of test_atlas_cousteau (recorded-shape pages in
tests/fixtures/atlas/api/), `dnscamp atlas probes` into the store, the roles on atlas_probes,
and the QuicSocks geomap's query on the demo campaign."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

import dashboards
from atlas import bundle, client, probes
from collectors import atlas_store
from dashboards.expand import expand, resolve
from db import engine
from dnscamp.atlas_offline import atlas_like_probe_meta
from testbed.atlas_probes import sites as tb_sites
from tests.local.test_atlas_cousteau import API, FIX, NO_WAIT, fake  # noqa: F401 - the fake API fixture
from tests.local.test_dashboards_sql import DEMO_RANGE, reader_url
from tests.scaffolding.demo_data import ATLAS_CAMPAIGN, DEMO, load_demo

pytestmark = pytest.mark.local
PAGES = [(200, API / "probes_page1.json"), (200, API / "probes_page2.json")]
WANT = [probes.ProbeMeta(165, "DE", 3320, 52.5235, 13.4115, "Connected", "atlas_api"),
        probes.ProbeMeta(202, "AT", 6830, 48.2085, 16.3725, "Connected", "atlas_api"),
        probes.ProbeMeta(270, "DE", 3209, 50.9375, 6.9575, "Disconnected", "atlas_api"),
        probes.ProbeMeta(677, "NL", 1136, None, None, "Abandoned", "atlas_api")]


def test_fetch_asks_for_the_ids_retries_and_follows_the_next_page(fake):
    fake.script[("GET", "/api/v2/probes/")] = [(429, API / "error_429.json"), *PAGES]
    got = probes.fetch_probes([1216, 165, 202, 270, 677, 165], server=fake.server, verify=str(fake.cert),
                              policy=NO_WAIT, sleep=lambda s: None)
    assert got == WANT  # 1216: unknown to the API, not returned
    first, _, page2 = (s["path"] for s in fake.seen)
    assert "id__in=165,202,270,677,1216&" in first and "fields=id,country_code,asn_v4,geometry,status" in first
    assert page2.startswith("/api/v2/probes/?") and page2.endswith("&page=2")  # the next link, on our server


def test_fetch_says_what_it_got_when_the_answer_is_not_a_page(fake):
    fake.script[("GET", "/api/v2/probes/")] = [(200, [1, 2])]
    with pytest.raises(client.AtlasApiError, match="probes: expected an object with a results array"):
        probes.fetch_probes([1], server=fake.server, verify=str(fake.cert), policy=NO_WAIT, sleep=lambda s: None)


def _ingest_sagan_pings(url: str, campaign: str) -> None:
    from collectors.atlas_ingest import ingest_files

    st = ingest_files([FIX / "sagan_ping.jsonl"], url, campaign=campaign)
    assert st.ingested == 8


def test_cli_stores_the_campaigns_probes_and_the_reader_sees_them(fake, empty_db, monkeypatch):
    from dnscamp.cli import app

    _ingest_sagan_pings(empty_db, "geo")  # probes 165, 202, 270, 677, 1216
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(fake.cert))
    monkeypatch.setenv("DNSCAMP_DATABASE_NAME", empty_db.split("/")[3].split("?")[0])
    fake.script[("GET", "/api/v2/probes/")] = PAGES
    r = CliRunner().invoke(app, ["atlas", "probes", "--campaign", "geo", "--server", fake.server, "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == {"campaign": "geo", "probes": 5, "stored": 4, "unknown": [1216]}
    with psycopg.connect(reader_url(empty_db)) as c:
        rows = c.execute("SELECT prb_id, country_code, asn_v4, lat, lon, status, source FROM v_atlas_probes"
                         " WHERE campaign = 'geo' ORDER BY prb_id").fetchall()
    assert [probes.ProbeMeta(*row) for row in rows] == WANT
    # no results in a campaign: one line, nothing asked of the API
    n = len(fake.seen)
    r = CliRunner().invoke(app, ["atlas", "probes", "--campaign", "nothing-here", "--server", fake.server])
    assert r.exit_code == 2 and "no Atlas results ingested" in r.stderr and len(fake.seen) == n


def test_a_refetch_replaces_and_the_roles_hold(empty_db):
    with psycopg.connect(engine.database_url("writer", dbname=empty_db.split("/")[3].split("?")[0])) as w:
        atlas_store.save_probes(w, "c", WANT[:1])
        atlas_store.save_probes(w, "c", [probes.ProbeMeta(165, "DE", 3320, 52.0, 13.0, "Disconnected", "atlas_api")])
        assert w.execute("SELECT lat, lon, status FROM atlas_probes").fetchall() == [(52.0, 13.0, "Disconnected")]
        with pytest.raises(psycopg.errors.CheckViolation):  # latitude and longitude swapped: off the globe
            atlas_store.save_probes(w, "c", [probes.ProbeMeta(166, None, None, 152.5, 13.4, None, "atlas_api")])
    with psycopg.connect(reader_url(empty_db)) as r:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            r.execute("SELECT * FROM atlas_probes")  # readers read views only


def _geomap(url: str) -> tuple[list[str], list[tuple]]:
    data = dashboards.build()["dnscamp-quicsocks.json"]
    panel = next(p for p in dashboards.panel_list(data) if p["type"] == "geomap")
    with psycopg.connect(reader_url(url)) as c:
        cur = c.execute(expand(panel["targets"][0]["rawSql"], resolve(c, data, {"atlas_campaign": (ATLAS_CAMPAIGN,)},
                                                                       *DEMO_RANGE), *DEMO_RANGE))
        return [d.name for d in cur.description], cur.fetchall()


def test_the_geomap_places_each_analysed_demo_probe_at_its_site_with_its_saving(empty_db):
    load_demo(empty_db)
    cols, rows = _geomap(empty_db)
    assert len(rows) == 16  # the demo's probes behind an ISP resolver (the Table I panel's 16)
    sites = tb_sites.sites()
    with psycopg.connect(empty_db) as c:
        saving = dict(c.execute("SELECT prb_id, saving_ms FROM v_quicsocks_savings WHERE campaign = %s",
                                (ATLAS_CAMPAIGN,)).fetchall())
    for row in rows:
        r = dict(zip(cols, row))
        site = sites[(r["prb_id"] - 1) % len(sites)]
        assert (r["lat"], r["lon"], r["country_code"]) == (site["lat"], site["lon"], "DE")
        assert r["saving_ms"] == saving[r["prb_id"]]


def test_the_geomap_is_empty_without_probe_metadata_and_skips_unplaced_probes(empty_db):
    load_demo(empty_db)
    with psycopg.connect(empty_db) as c:
        c.execute("UPDATE atlas_probes SET lat = NULL, lon = NULL WHERE prb_id = 1")
    cols, rows = _geomap(empty_db)
    assert len(rows) == 15 and 1 not in {r[cols.index("prb_id")] for r in rows}
    with psycopg.connect(empty_db) as c:
        c.execute("DELETE FROM atlas_probes")
    assert _geomap(empty_db)[1] == []


def test_the_demo_bundle_holds_the_sites_the_offline_run_stores():
    b = bundle.read(DEMO / "atlas" / bundle.NAME)
    assert list(b.probes) == atlas_like_probe_meta(d.prb_id for d in b.discovery)
