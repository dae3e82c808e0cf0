"""Dashboards as code: the committed JSON is what dashboards/ generates, every
dashboard passes Grafana 11.6's JSON Schemas, panels read views only, and the provisioning
files point at the datasource the panels name."""

from __future__ import annotations

import copy
import json
import re

import pytest
import yaml
from typer.testing import CliRunner

import dashboards
from dashboards import docs, generate
from dashboards.docs import DOC
from dashboards.panels import DATASOURCE
from dashboards.validate import errors, public_errors, sql_target_schema
from db.models import Base
from dnscamp.cli import app

pytestmark = pytest.mark.unit
BUILT = dashboards.build()
RELATIONS = re.compile(r"\b(?:FROM|JOIN)\s+(?:LATERAL\s+)?([A-Za-z_][A-Za-z0-9_.]*)", re.IGNORECASE)
TABLES = set(Base.metadata.tables)


def _targets(data):
    return [(p["title"], t) for p in dashboards.panel_list(data) for t in p.get("targets", [])]


def test_the_committed_json_is_what_the_code_generates():
    assert generate.check() == [], "run `dnscamp dashboards build` and commit dashboards/provisioning/dashboards/"
    assert sorted(BUILT) == sorted(p.name for p in dashboards.OUT.glob("*.json"))
    # the public copies are built per campaign when publishing: none is committed, no token either
    assert not any(n.endswith("-public.json") for n in BUILT) and not (dashboards.HERE / "public").exists()


def test_check_names_a_hand_edited_a_missing_and_an_extra_file(tmp_path):
    out, doc = tmp_path / "dashboards", tmp_path / "docs" / "dashboards.md"
    doc.parent.mkdir()
    doc.write_text(DOC.read_text().replace(docs.BEGIN, docs.BEGIN + "\nSELECT 'a stale query'"))
    assert "docs/dashboards.md" in generate.check(out, doc)
    generate.write(out, doc)
    assert generate.check(out, doc) == []
    edited = out / "dnscamp-dns.json"
    edited.write_text(edited.read_text().replace("DNS response times", "DNS times", 1))
    (out / "dnscamp-health.json").unlink()
    (out / "old.json").write_text("{}\n")
    assert generate.check(out, doc) == ["dashboards/dnscamp-dns.json", "dashboards/dnscamp-health.json",
                                        "dashboards/old.json"]
    generate.write(out, doc)  # build repairs all three
    assert generate.check(out, doc) == [] and not (out / "old.json").exists()


def test_cli_build_check_fails_on_a_stale_file(tmp_path, monkeypatch):
    monkeypatch.setattr(dashboards, "OUT", tmp_path / "provisioning" / "dashboards")
    monkeypatch.setattr(dashboards, "HERE", tmp_path)
    (tmp_path / "dashboards.md").write_text(DOC.read_text())
    monkeypatch.setattr(docs, "DOC", tmp_path / "dashboards.md")
    runner = CliRunner()
    r = runner.invoke(app, ["dashboards", "build", "--check"])
    assert r.exit_code == 1 and "dnscamp-dns.json differs" in r.output
    r = runner.invoke(app, ["dashboards", "build"])
    assert r.exit_code == 0 and r.output.count("wrote ") == len(BUILT) + 1
    assert runner.invoke(app, ["dashboards", "build", "--check"]).exit_code == 0


@pytest.mark.parametrize("name", sorted(BUILT))
def test_every_dashboard_passes_grafanas_schemas(name):
    assert errors(BUILT[name], name) == []


def test_the_schemas_catch_what_grafana_would_reject():
    d = copy.deepcopy(BUILT["dnscamp-dns.json"])
    d["panels"][1]["gridPos"]["w"] = "wide"  # dashboard schema
    xy = next(p for p in dashboards.panel_list(d) if p["type"] == "xychart")
    xy["options"]["mapping"] = "diagonal"  # the xychart panel's own schema
    ts = next(p for p in dashboards.panel_list(d) if p["type"] == "timeseries")
    del ts["targets"][0]["rawSql"]  # our SQL target schema
    found = "\n".join(errors(d, "x"))
    assert "'wide' is not of type 'integer'" in found
    assert "'diagonal' is not one of" in found
    assert "'rawSql' is a required property" in found
    assert public_errors({"uid": "x"}, "p")


def test_targets_are_code_mode_sql_on_the_provisioned_datasource():
    schema = sql_target_schema()
    assert "rawSql" in schema["properties"] and schema["properties"]["refId"]["type"] == "string"
    for data in BUILT.values():
        for title, t in _targets(data):
            assert t["datasource"] == DATASOURCE.to_json() and t["editorMode"] == "code", title
            assert t["format"] in ("table", "time_series"), title


def test_panels_and_variables_read_views_only():
    """Statically: every query reads a view and names no table of the store (the local tests run
    them as dnscamp_reader, which can read nothing else)."""
    assert {"quarantine", "collected_objects", "atlas_ping"} <= TABLES
    for name, data in BUILT.items():
        sqls = [t["rawSql"] for _, t in _targets(data)] + [v["query"] for v in data["templating"]["list"]]
        assert sqls
        for sql in sqls:
            rels = set(RELATIONS.findall(re.sub(r"--[^\n]*", "", sql)))
            assert any(r.startswith("v_") for r in rels) and not rels & TABLES, (name, rels)


def test_each_panel_has_a_question_and_a_unique_id():
    for name, data in BUILT.items():
        ids = [p["id"] for p in data["panels"]]
        assert len(ids) == len(set(ids)), name
        for p in dashboards.panel_list(data):
            assert p["description"].startswith("Question: "), (name, p["title"])


def test_time_range_is_honoured_through_time_filter():
    """Every panel over timestamped views filters on the dashboard's time range; only the
    QuicSocks savings (no time axis in v_quicsocks_savings) and Atlas credits do not."""
    for name, data in BUILT.items():
        for title, t in _targets(data):
            if re.search(r"\bv_(quicsocks_savings|atlas_credits)\b", t["rawSql"]):
                continue
            assert "$__timeFilter(" in t["rawSql"], (name, title)


def test_provisioning_points_at_the_panels_datasource_and_the_json():
    ds = yaml.safe_load((dashboards.PROVISIONING / "datasources" / "postgres.yaml").read_text())["datasources"]
    assert [(d["uid"], d["type"]) for d in ds] == [(DATASOURCE.uid, DATASOURCE.type_val)]
    assert ds[0]["user"] == "${DNSCAMP_GRAFANA_USER}" and ds[0]["secureJsonData"]["password"] == "${DNSCAMP_GRAFANA_PASSWORD}"
    assert ds[0]["editable"] is False
    prov = yaml.safe_load((dashboards.OUT / "dnscamp.yaml").read_text())["providers"]
    assert prov[0]["type"] == "file" and prov[0]["options"]["path"] == "/etc/grafana/provisioning/dashboards"
    assert prov[0]["allowUiUpdates"] is False


def test_the_built_json_is_plain_sorted_data():
    for name, data in BUILT.items():
        text = (dashboards.OUT / name).read_text()
        assert json.loads(text) == data and text == json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def test_the_docs_show_every_panels_question_and_query():
    text = DOC.read_text()
    assert text == docs.render(text)  # the generated part is current
    for data in BUILT.values():
        if data["uid"].endswith("-public"):
            continue
        for p in dashboards.panel_list(data):
            assert f"#### {p['title']}" in text and p["description"] in text and p["targets"][0]["rawSql"] in text
    with pytest.raises(ValueError, match="markers"):
        docs.render("no markers")


def _var(name, *values, multi=True):
    from dashboards.expand import Variable

    return Variable(tuple(values), tuple(values), multi=multi, include_all=multi)


def _window():
    from datetime import datetime, timezone

    from dashboards.publish import Window

    return Window(datetime(2026, 11, 23, 21, 53, 55, tzinfo=timezone.utc),
                  datetime(2026, 11, 23, 21, 56, 30, tzinfo=timezone.utc), 10)


def _given(data, campaign="c1"):
    """Every variable of ``data`` fixed to one or two made-up values, the campaign to ``campaign``."""
    out = {}
    for v in data["templating"]["list"]:
        out[v["name"]] = _var(v["name"], campaign) if v["name"] in ("campaign", "atlas_campaign") else _var(v["name"], "a", "b'c")
    return out


def test_a_public_copy_has_no_variables_the_campaign_in_every_query_and_an_absolute_range():
    """Grafana cannot share a dashboard with template variables: a public copy has the values
    in the SQL, the campaign in every panel's, an absolute range from the hour of the first
    record to the minute after the last, and validates like the original."""
    from dashboards import publish

    for uid in dashboards.PUBLISHED:
        orig = BUILT[f"{uid}.json"]
        pub = publish.public_copy(orig, "c1", _given(orig), _window())
        assert orig["templating"]["list"] and pub["templating"]["list"] == [] and "public" in pub["tags"]
        assert pub["uid"] == publish.public_uid(uid, "c1") != publish.public_uid(uid, "c2") and len(pub["uid"]) <= 40
        assert pub["time"] == {"from": "2026-11-23T21:00:00.000Z", "to": "2026-11-23T21:57:00.000Z"}
        assert errors(pub, pub["uid"]) == [] and public_errors(publish.share_config(pub), pub["uid"]) == []
        po, pp = dashboards.panel_list(orig), dashboards.panel_list(pub)
        # every panel is there under its id (a repeated one, and those of a repeated row, once
        # per value under new ids), with the values in its SQL and no variable left
        by_id = {p["id"]: p for p in pp}
        kept = [p for p in po if "$" not in p["title"]]
        assert kept and all(p["id"] in by_id and by_id[p["id"]]["title"] == p["title"] for p in kept)
        for a in kept:
            sa, sb = a["targets"][0]["rawSql"], by_id[a["id"]]["targets"][0]["rawSql"]
            assert sb.count("$__timeFilter(") == sa.count("$__timeFilter(")
            if "${resolver" in sa:
                assert "'a','b''c'" in sb  # every other variable: its values, each quoted
        for b in pp:
            sb = b["targets"][0]["rawSql"]
            assert "${" not in sb and "'c1'" in sb and "$" not in b["title"].replace("$__", "")


def test_publishing_refuses_a_panel_that_does_not_filter_by_campaign():
    from dashboards import publish

    bad = copy.deepcopy(BUILT["dnscamp-dns.json"])
    t = dashboards.panel_list(bad)[0]["targets"][0]
    t["rawSql"] = re.sub(r"\s*AND campaign = ANY\(ARRAY\[\$\{campaign:sqlstring\}\]::text\[\]\)", "", t["rawSql"])
    t["rawSql"] = re.sub(r"campaign = ANY\(ARRAY\[\$\{campaign:sqlstring\}\]::text\[\]\)\s*AND", "", t["rawSql"])
    assert "${campaign" not in t["rawSql"]
    with pytest.raises(publish.PublishError, match="does not filter by \\$campaign"):
        publish.public_copy(bad, "c1", _given(bad), _window())
    unknown = copy.deepcopy(BUILT["dnscamp-dns.json"])
    dashboards.panel_list(unknown)[0]["targets"][0]["rawSql"] += " AND x = ${campaign:sqlstring} AND ${campaign:raw} = 1"
    with pytest.raises(publish.PublishError, match="cannot stand unquoted"):
        publish.public_copy(unknown, "c'1", _given(unknown, "c'1"), _window())


def test_repeated_rows_and_panels_become_one_copy_per_value():
    """Grafana repeats a row or panel per selected value of a variable at render time; the
    public copy has no variables, so the copies are made when publishing, each with its value."""
    from dashboards import publish

    d = copy.deepcopy(BUILT["dnscamp-dns.json"])
    row = next(p for p in d["panels"] if p["type"] == "row")
    row["repeat"], row["title"] = "region", "Region $region"
    under = [p for p in d["panels"] if p["type"] != "row" and p["gridPos"]["y"] >= row["gridPos"]["y"]]
    section = d["panels"][d["panels"].index(row) + 1:]
    section = section[:next((i for i, p in enumerate(section) if p["type"] == "row"), len(section))]
    section[0]["repeat"] = "transport"
    section[0]["targets"][0]["rawSql"] += "\n-- ${region:sqlstring} ${transport:sqlstring}"
    given = _given(d) | {"region": _var("region", "eu", "us"), "transport": _var("transport", "do53", "doq", "dot")}
    pub = publish.public_copy(d, "c1", given, _window())
    rows = [p for p in pub["panels"] if p["type"] == "row"]
    assert [r["title"] for r in rows if r["title"].startswith("Region")] == ["Region eu", "Region us"]
    marks = [p["targets"][0]["rawSql"].rsplit("\n", 1)[1] for p in pub["panels"] if p["type"] != "row"
             and p["title"] == section[0]["title"]]
    assert marks == [f"-- '{r}' '{t}'" for r in ("eu", "us") for t in ("do53", "doq", "dot")]
    ids = [p["id"] for p in pub["panels"]]
    # against the same dashboard's copy without these two repeats (it has repeats of its own):
    # the row's section once more, its row, and two more copies of the panel in each region
    base = publish.public_copy(copy.deepcopy(BUILT["dnscamp-dns.json"]), "c1", given, _window())
    assert len(ids) == len(set(ids)) and len(pub["panels"]) == len(base["panels"]) + len(section) + 1 + 2 * 2
    assert not any("repeat" in p for p in pub["panels"]) and under
    cells = [(p["gridPos"]["x"], p["gridPos"]["y"]) for p in pub["panels"] if p["type"] != "row"]
    assert len(cells) == len(set(cells))  # no two panels in the same place




def test_a_public_copy_keeps_links_out_of_the_instance_with_the_campaign_and_drops_those_into_it():
    """The public reaches only the public dashboards: links into the instance (/d/...) would
    lead to a login; a link out (the report) gets the campaign's value in its URL."""
    from dashboards import publish

    d = copy.deepcopy(BUILT["dnscamp-dns.json"])
    d["links"] = [{"title": "Failures", "type": "link", "url": "/d/dnscamp-failures?${campaign:queryparam}"},
                  {"title": "More", "type": "dashboards", "tags": ["dnscamp"]},
                  {"title": "Report of $campaign", "type": "link", "url": "https://r.example/${campaign:percentencode}/"}]
    p = dashboards.panel_list(d)[0]
    p["links"] = [{"title": "Per vantage", "url": "/d/dnscamp-dns?var-vantage=${vantage}"}]
    p.setdefault("fieldConfig", {}).setdefault("defaults", {})["links"] = [
        {"title": "Report figure", "url": "https://r.example/${campaign:percentencode}/fig.html"}]
    pub = publish.public_copy(d, "c 1/x", _given(d, "c 1/x"), _window())
    assert pub["links"] == [{"title": "Report of c 1/x", "type": "link", "url": "https://r.example/c%201%2Fx/"}]
    q = dashboards.panel_list(pub)[0]
    assert q["links"] == [] and q["fieldConfig"]["defaults"]["links"] == [
        {"title": "Report figure", "url": "https://r.example/c%201%2Fx/fig.html"}]
