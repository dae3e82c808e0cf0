"""Validate generated dashboards against Grafana 11.6's JSON Schemas (dashboards/schema/):
the dashboard itself, each panel's options and custom field config against its panel kind's
schema, each SQL target against the common DataQuery schema extended with the Postgres
datasource's fields (the SDK has no schema for them), and public-dashboard configurations."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jsonschema

from dashboards import panel_list

SCHEMA_DIR = Path(__file__).parent / "schema"
# what the Postgres datasource reads from a target, beside DataQuery's common fields
SQL_TARGET_FIELDS = {"rawSql": {"type": "string", "minLength": 1}, "format": {"enum": ["table", "time_series"]},
                     "editorMode": {"enum": ["code", "builder"]}, "rawQuery": {"type": "boolean"}}


# Grafana's CUE declares a matcher's options and an override's value as `_` (any value: a field
# name, a unit string, a number); the published JSON Schemas render `_` as "an object", which
# would reject every override Grafana itself writes. Those two are read as "any value" here.
ANY_VALUED = {"MatcherConfig": "options", "DynamicConfigValue": "value"}


@functools.cache
def _schema(kind: str) -> dict[str, Any]:
    path = SCHEMA_DIR / f"{kind}.jsonschema.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no Grafana schema for panel kind {kind!r} (copy it from the SDK's jsonschema/)")
    schema = json.loads(path.read_text())
    for definition, prop in ANY_VALUED.items():
        if definition in schema.get("definitions", {}):
            schema["definitions"][definition]["properties"][prop] = {}
    return schema


def _errors(schema: dict[str, Any], instance: Any, where: str) -> list[str]:
    v = jsonschema.Draft7Validator(schema)
    return [f"{where}{'/' + '/'.join(map(str, e.absolute_path)) if e.absolute_path else ''}: {e.message}"
            for e in sorted(v.iter_errors(instance), key=lambda e: list(map(str, e.absolute_path)))]


def _definition(kind: str, name: str) -> dict[str, Any] | None:
    s = _schema(kind)
    return {"$ref": f"#/definitions/{name}", "definitions": s["definitions"]} if name in s.get("definitions", {}) else None


def sql_target_schema() -> dict[str, Any]:
    base = _schema("common")["definitions"]["DataQuery"]
    return {**base, "required": [*base["required"], "rawSql", "format"],
            "properties": {**base["properties"], **SQL_TARGET_FIELDS}}


def errors(data: dict[str, Any], name: str = "dashboard") -> list[str]:
    """Every schema violation of one dashboard's JSON, each as 'where: what' (empty when valid)."""
    # the panels one by one against Panel or RowPanel (the dashboard schema's oneOf would only
    # say "not valid under any of the given schemas"), the rest against Dashboard
    # An annotation's target: the published schema types it as the built-in datasource's
    # (limit, matchAny, tags, type; "TODO: this should be a regular DataQuery" in Grafana's CUE);
    # a SQL annotation's is the datasource's query, as Grafana itself saves it: checked against
    # the SQL target schema instead.
    target = sql_target_schema()
    annotations = data.get("annotations", {}).get("list", [])
    rest = {k: v for k, v in data.items() if k != "panels"}
    if annotations:
        rest = {**rest, "annotations": {**data["annotations"],
                                        "list": [{k: v for k, v in a.items() if k != "target"} for a in annotations]}}
    out = _errors(_schema("dashboard"), rest, name)
    for i, a in enumerate(annotations):
        if "target" in a:
            out += _errors(target, a["target"], f"{name}/annotations/list/{i}/target")
    for i, p in enumerate(data.get("panels", [])):
        kind = "RowPanel" if p.get("type") == "row" else "Panel"
        out += _errors(_definition("dashboard", kind), p, f"{name}/panels/{i}")
    for p in panel_list(data):
        where = f"{name}/panel {p.get('title')!r}"
        if (opts := _definition(p["type"], "Options")) is not None:
            out += _errors(opts, p.get("options", {}), f"{where}/options")
        custom = p.get("fieldConfig", {}).get("defaults", {}).get("custom")
        if custom is not None and (fc := _definition(p["type"], "FieldConfig")) is not None:
            out += _errors(fc, custom, f"{where}/fieldConfig/defaults/custom")
        for i, t in enumerate(p.get("targets", [])):
            out += _errors(target, t, f"{where}/targets/{i}")
    return out


def public_errors(data: dict[str, Any], name: str) -> list[str]:
    return _errors(_schema("publicdashboard"), data, name)
