"""Public dashboards of one campaign (dashboards/publish.py, `dnscamp dashboards publish`,
`list`, `revoke`) on a real store holding two campaigns, against a fake Grafana 11 that serves
the documented dashboards and public-dashboards APIs and answers a public link's panel queries
from the store as the reader (tests/local/grafanafake.py)."""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from datetime import datetime, timezone
from pathlib import Path

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg.conninfo import conninfo_to_dict
from typer.testing import CliRunner

import dashboards
from collectors.ingest import ingest
from dashboards import publish
from dashboards.expand import expand
from dashboards.validate import errors, public_errors
from db import engine
from dnscamp.cli import app
from tests.local.grafanafake import FakeGrafana
from tests.scaffolding.demo_data import ATLAS_CAMPAIGN, CAMPAIGN, DEMO, load_demo

pytestmark = pytest.mark.local
RIVAL = "rival's"  # a quote in the name: the literal must be quoted as Grafana's sqlstring does
TOKEN = "glsa_test_service_account_token"


def reader_url(owner_url: str) -> str:
    url = owner_url.replace("postgres@", f"{engine.READER}@", 1)
    assert url != owner_url
    return url


def ingest_rival(owner_url: str, tmp: Path) -> None:
    """The demo's records again as campaign RIVAL: same vantage, same times, new ids. Its
    public dashboards must show exactly what the demo's show, and neither any of the other's."""
    out = tmp / "rival.jsonl"
    with out.open("w") as f:
        for path in sorted((DEMO / "records").glob("*.jsonl")):
            for line in path.read_text().splitlines():
                r = json.loads(line)
                r["campaign"], r["id"] = RIVAL, str(uuid.uuid5(uuid.NAMESPACE_URL, r["id"]))
                f.write(json.dumps(r) + "\n")
    ingest([out], owner_url, workers=1)


def base(uid: str) -> str:
    return uid.rsplit("-public-", 1)[0]


def panel_rows(conn, data: dict) -> dict[str, list]:
    """{panel title: rows} of a public copy, each panel's SQL with Grafana's macros over the
    copy's own time range (it has no variables left)."""
    start = datetime.fromisoformat(data["time"]["from"].replace("Z", "+00:00"))
    end = datetime.fromisoformat(data["time"]["to"].replace("Z", "+00:00"))
    return {p["title"]: conn.execute(expand(p["targets"][0]["rawSql"], {}, start, end)).fetchall()
            for p in dashboards.panel_list(data)}


@pytest.fixture()
def demo_db(empty_db):
    load_demo(empty_db)
    return empty_db


@pytest.fixture()
def cli_store(demo_db, monkeypatch):
    """The CLI's embedded-store URLs point at the test's database."""
    monkeypatch.delenv("DNSCAMP_DATABASE_URL", raising=False)
    monkeypatch.setenv("DNSCAMP_DATABASE_NAME", conninfo_to_dict(demo_db)["dbname"])
    for k in ("DNSCAMP_GRAFANA_API_TOKEN", "DNSCAMP_GRAFANA_API_USER", "DNSCAMP_GRAFANA_API_PASSWORD", "DNSCAMP_GRAFANA_API_URL"):
        monkeypatch.delenv(k, raising=False)
    return demo_db


def test_a_public_copy_shows_its_campaign_only_and_the_same_with_another_in_the_store(demo_db, tmp_path):
    with psycopg.connect(reader_url(demo_db)) as c:
        alone, notes = publish.build_public(c, CAMPAIGN)
        before = {base(d["uid"]): panel_rows(c, d) for d in alone}
    assert notes == [] and len(alone) == len(dashboards.PUBLISHED)
    ingest_rival(demo_db, tmp_path)
    with psycopg.connect(reader_url(demo_db)) as c:
        beside, _ = publish.build_public(c, CAMPAIGN)
        rival, rival_notes = publish.build_public(c, RIVAL)
        after = {base(d["uid"]): panel_rows(c, d) for d in beside}
        rival_rows = {d["uid"]: panel_rows(c, d) for d in rival}
        first = c.execute("SELECT min(started_at), max(started_at) FROM v_results WHERE campaign = %s",
                          (CAMPAIGN,)).fetchone()
    assert beside == alone and after == before  # the other campaign changed nothing
    assert sum(len(rows) for d in before.values() for rows in d.values()) > 50
    # RIVAL holds the demo's records (no Atlas results): its copies show the same rows
    assert rival_notes == [f"dnscamp-quicsocks: no atlas_campaign of {RIVAL!r} in the store, not published"]
    for d in rival:
        assert d["uid"] == publish.public_uid(base(d["uid"]), RIVAL) != publish.public_uid(base(d["uid"]), CAMPAIGN)
        assert rival_rows[d["uid"]] == before[base(d["uid"])], d["uid"]
    for d in beside:
        assert d["templating"]["list"] == [] and "public" in d["tags"] and errors(d, d["uid"]) == []
        assert public_errors(publish.share_config(d), d["uid"]) == []
        sql = "\n".join(p["targets"][0]["rawSql"] for p in dashboards.panel_list(d))
        assert "rival" not in sql and "${" not in sql and "[[" not in sql
        cvar = "'default'" if "quicsocks" not in d["uid"] else f"'{ATLAS_CAMPAIGN}'"
        assert all(cvar in p["targets"][0]["rawSql"] for p in dashboards.panel_list(d))
    for d in rival:
        assert all("'rival''s'" in p["targets"][0]["rawSql"] for p in dashboards.panel_list(d))
    # the time range: from the hour of the campaign's first record to the minute after its last
    dns = next(d for d in beside if d["uid"].startswith("dnscamp-dns-"))
    frm, to = (datetime.fromisoformat(dns["time"][k].replace("Z", "+00:00")) for k in ("from", "to"))
    assert frm == first[0].astimezone(timezone.utc).replace(minute=0, second=0, microsecond=0)
    assert frm <= first[0] and first[1] < to and (to - first[1]).total_seconds() <= 60
    # the time picker where panels filter by time; QuicSocks (the latest pings) has none
    quicsocks = next(d for d in beside if d["uid"].startswith("dnscamp-quicsocks-"))
    assert dns["timepicker"]["hidden"] is False and publish.share_config(dns)["timeSelectionEnabled"]
    assert quicsocks["timepicker"]["hidden"] is True and not publish.share_config(quicsocks)["timeSelectionEnabled"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(["$__timeFilter(x)", "${campaign}", "[[campaign]]", "a\\'b", "$__interval"]) | st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=30))
def test_any_campaign_name_is_one_quoted_literal_in_every_panel(demo_db, name):
    """Whatever a campaign is called, its name is one literal in the SQL that Grafana's
    variables and macros leave alone (a name like `$__timeFilter(x)` included): every panel of
    every copy still parses and plans, and the literal is the name."""
    with psycopg.connect(reader_url(demo_db)) as c:
        window = publish.campaign_window(c, CAMPAIGN)
        start, end = window.time_range()
        for data in (d for d in dashboards.build().values() if d["uid"] in dashboards.PUBLISHED):
            variables = publish.resolve_variables(c, data, CAMPAIGN, window)
            cvar = publish._campaign_variable(data)
            variables[cvar] = publish.Variable((name,), (name,))
            copy_ = publish.public_copy(data, name, variables, window)
            literal = publish.sql_literal(name)
            for p in dashboards.panel_list(copy_):
                sql = expand(p["targets"][0]["rawSql"], {}, start, end)
                assert literal in sql
                c.execute("EXPLAIN " + sql)
            assert c.execute(expand(f"SELECT ARRAY[{literal}]::text[]", {}, start, end)).fetchone()[0] == [name]


def test_publish_list_and_revoke_through_grafanas_api(cli_store, monkeypatch, tmp_path):
    conn = psycopg.connect(reader_url(cli_store), autocommit=True)

    def run_sql(sql):
        cur = conn.execute(sql)
        return [d.name for d in cur.description], cur.fetchall()

    with FakeGrafana(token=TOKEN, run_sql=run_sql) as g:
        monkeypatch.setenv("DNSCAMP_GRAFANA_API_URL", g.url)
        monkeypatch.setenv("DNSCAMP_GRAFANA_API_TOKEN", TOKEN)
        res = CliRunner().invoke(app, ["dashboards", "publish", CAMPAIGN, "--out", str(tmp_path / "copies")])
        assert res.exit_code == 0, res.output
        assert len(g.dashboards) == len(g.shares) == len(dashboards.PUBLISHED)
        tokens = {u: s["accessToken"] for u, s in g.shares.items()}
        for uid, token in tokens.items():
            assert re.fullmatch(r"[0-9a-f]{32}", token)
            assert token not in res.output and token[-4:] in res.output  # masked
            assert token != hashlib.md5(uid.encode()).hexdigest() and token != hashlib.md5(
                uid.rsplit("-public-")[0].encode()).hexdigest()
        assert len(set(tokens.values())) == len(tokens)
        assert sorted(p.stem for p in (tmp_path / "copies").glob("*.json")) == sorted(g.dashboards)
        assert all(not g.dashboards[u]["templating"]["list"] for u in g.dashboards)
        assert TOKEN not in res.output and all(h.get("Authorization") == f"Bearer {TOKEN}" for _, _, h, _ in g.requests)
        # what a visitor of a public link gets: the dashboard, and each panel's rows from the store
        dns_uid = publish.public_uid("dnscamp-dns", CAMPAIGN)
        pub = g._route("GET", f"/api/public/dashboards/{tokens[dns_uid]}", {}, {}, None)
        assert pub[0] == 200 and pub[1]["dashboard"]["uid"] == dns_uid
        panel = dashboards.panel_list(pub[1]["dashboard"])[0]
        import urllib.request

        req = urllib.request.Request(f"{g.url}api/public/dashboards/{tokens[dns_uid]}/panels/{panel['id']}/query",
                                     data=b"{}", method="POST", headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req) as r:
            frame = json.loads(r.read())["results"]["A"]["frames"][0]
        assert frame["data"]["values"] and len(frame["data"]["values"][0]) > 0
        # publishing again keeps each link (the same token), and the copy is overwritten
        res = CliRunner().invoke(app, ["dashboards", "publish", CAMPAIGN, "--show-links"])
        assert res.exit_code == 0 and {u: s["accessToken"] for u, s in g.shares.items()} == tokens
        assert f"{g.url.rstrip('/')}/public-dashboards/{tokens[dns_uid]}" in res.output
        assert g.dashboards[dns_uid]["version"] == 2
        # list, masked unless asked
        res = CliRunner().invoke(app, ["dashboards", "list"])
        assert res.exit_code == 0 and dns_uid in res.output and tokens[dns_uid] not in res.output
        # revoke one: its link is dead at once, the others live
        res = CliRunner().invoke(app, ["dashboards", "revoke", dns_uid])
        assert res.exit_code == 0 and f"{dns_uid}: revoked" in res.output
        assert g._route("GET", f"/api/public/dashboards/{tokens[dns_uid]}", {}, {}, None)[0] == 404
        assert len(g.shares) == len(dashboards.PUBLISHED) - 1 and dns_uid in g.dashboards
        # a new publish makes a new token for it, never the old one
        assert CliRunner().invoke(app, ["dashboards", "publish", CAMPAIGN]).exit_code == 0
        assert g.shares[dns_uid]["accessToken"] not in (tokens[dns_uid], "")
        # revoke the campaign: every link dead
        res = CliRunner().invoke(app, ["dashboards", "revoke", "--campaign", CAMPAIGN])
        assert res.exit_code == 0 and g.shares == {}
        # revoking what is not shared: one line, exit 2
        res = CliRunner().invoke(app, ["dashboards", "revoke", dns_uid])
        assert res.exit_code == 2 and res.output.count("\n") == 1 and "is not a shared dashboard" in res.output
        # wrong credentials: one line, exit 1, the token not in it
        monkeypatch.setenv("DNSCAMP_GRAFANA_API_TOKEN", "wrong-secret")
        res = CliRunner().invoke(app, ["dashboards", "list"])
        assert res.exit_code == 1 and "HTTP 401" in res.output and "wrong-secret" not in res.output
    conn.close()


def test_bad_input_is_one_line_exit_2(cli_store, monkeypatch):
    runner = CliRunner()
    res = runner.invoke(app, ["dashboards", "publish", "no-such-campaign", "--dry-run"])
    assert res.exit_code == 2 and res.output == (
        "dnscamp: dashboards publish: campaign 'no-such-campaign' has no records in the store\n")
    hostile = "x'); DROP VIEW v_contexts; --"
    res = runner.invoke(app, ["dashboards", "publish", hostile, "--dry-run"])
    assert res.exit_code == 2 and "has no records in the store" in res.output and res.output.count("\n") == 1
    res = runner.invoke(app, ["dashboards", "publish", CAMPAIGN])  # no Grafana named
    assert res.exit_code == 2 and "--grafana URL or DNSCAMP_GRAFANA_API_URL" in res.output
    res = runner.invoke(app, ["dashboards", "publish", CAMPAIGN, "--grafana", "http://127.0.0.1:9/"])  # no credentials
    assert res.exit_code == 2 and "DNSCAMP_GRAFANA_API_TOKEN" in res.output
    monkeypatch.setenv("DNSCAMP_GRAFANA_API_TOKEN", "t")
    res = runner.invoke(app, ["dashboards", "publish", CAMPAIGN, "--grafana", "http://127.0.0.1:9/"])  # nobody there
    assert res.exit_code == 1 and res.output.startswith("dnscamp: Grafana at http://127.0.0.1:9") and res.output.count("\n") == 1
    res = runner.invoke(app, ["dashboards", "publish", CAMPAIGN, "--dry-run"])
    assert res.exit_code == 0 and res.output.count(": built (") == len(dashboards.PUBLISHED)
    with psycopg.connect(reader_url(cli_store)) as c:  # the hostile name was only ever a value
        assert c.execute("SELECT count(*) FROM v_contexts").fetchone()[0] > 0
