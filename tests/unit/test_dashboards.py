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
    assert sorted(dashboards.public_configs()) == sorted(p.name for p in dashboards.PUBLIC.glob("*.json"))


def test_published_dashboards_have_valid_public_configurations():
    configs = dashboards.public_configs()
    assert {c["dashboardUid"] for c in configs.values()} == {u + "-public" for u in dashboards.PUBLISHED}
    assert {c["dashboardUid"] for c in configs.values()} < {d["uid"] for d in BUILT.values()}
    for name, c in configs.items():
        assert public_errors(c, name) == []
        assert re.fullmatch(r"[0-9a-f]{32}", c["accessToken"]) and c["isEnabled"] and c["timeSelectionEnabled"]


def test_check_names_a_hand_edited_a_missing_and_an_extra_file(tmp_path):
    out, pub, doc = tmp_path / "dashboards", tmp_path / "public", tmp_path / "docs" / "dashboards.md"
    doc.parent.mkdir()
    doc.write_text(DOC.read_text().replace(docs.BEGIN, docs.BEGIN + "\nSELECT 'a stale query'"))
    assert "docs/dashboards.md" in generate.check(out, pub, doc)
    generate.write(out, pub, doc)
    assert generate.check(out, pub, doc) == []
    edited = out / "dnscamp-dns.json"
    edited.write_text(edited.read_text().replace("DNS response times", "DNS times", 1))
    (out / "dnscamp-health.json").unlink()
    (out / "old.json").write_text("{}\n")
    (pub / "dnscamp-failures.json").write_text("{}\n")
    assert generate.check(out, pub, doc) == ["dashboards/dnscamp-dns.json", "dashboards/dnscamp-health.json",
                                               "dashboards/old.json", "public/dnscamp-failures.json"]
    generate.write(out, pub, doc)  # build repairs all four
    assert generate.check(out, pub, doc) == [] and not (out / "old.json").exists()


def test_cli_build_check_fails_on_a_stale_file(tmp_path, monkeypatch):
    monkeypatch.setattr(dashboards, "OUT", tmp_path / "provisioning" / "dashboards")
    monkeypatch.setattr(dashboards, "PUBLIC", tmp_path / "public")
    monkeypatch.setattr(dashboards, "HERE", tmp_path)
    (tmp_path / "dashboards.md").write_text(DOC.read_text())
    monkeypatch.setattr(docs, "DOC", tmp_path / "dashboards.md")
    runner = CliRunner()
    r = runner.invoke(app, ["dashboards", "build", "--check"])
    assert r.exit_code == 1 and "dnscamp-dns.json differs" in r.output
    r = runner.invoke(app, ["dashboards", "build"])
    assert r.exit_code == 0 and r.output.count("wrote ") == len(BUILT) + len(dashboards.PUBLISHED) + 1
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


def test_public_copies_have_no_variables_and_otherwise_the_same_queries():
    """Grafana cannot share a dashboard with template variables: each published dashboard has a
    copy without them whose SQL is the original's with each variable's condition left out."""
    from dashboards.panels import FILTERS

    for uid in dashboards.PUBLISHED:
        orig, pub = BUILT[f"{uid}.json"], BUILT[f"{uid}-public.json"]
        assert orig["templating"]["list"] and pub["templating"]["list"] == [] and "public" in pub["tags"]
        po, pp = dashboards.panel_list(orig), dashboards.panel_list(pub)
        assert [p["title"] for p in po] == [p["title"] for p in pp]
        for a, b in zip(po, pp):
            sa, sb = a["targets"][0]["rawSql"], b["targets"][0]["rawSql"]
            assert "$" + "{" not in sb and sb.count("$__timeFilter(") == sa.count("$__timeFilter(")
            kept = [ln for ln in sa.splitlines() if not any(c in ln for c in FILTERS.values())]
            assert [ln for ln in sb.splitlines() if ln.strip()] == [ln for ln in kept if ln.strip()] or \
                "WHERE isp_resolver" in sb  # QuicSocks: the variable was the WHERE's first condition
    with pytest.raises(ValueError, match="still uses a variable"):
        bad = copy.deepcopy(BUILT["dnscamp-dns.json"])
        dashboards.panel_list(bad)[0]["targets"][0]["rawSql"] += " AND x = '${other}'"
        dashboards.public_variant(bad)
