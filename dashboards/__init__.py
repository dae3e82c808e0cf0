"""Grafana dashboards as code: each module builds one dashboard with
grafana-foundation-sdk; `dnscamp dashboards build` writes them as JSON under
provisioning/dashboards/ (what Grafana's provider loads) and `--check` fails when the committed
JSON is not what the code generates (dashboards/generate.py). docs/dashboards.md lists every
panel's query and question (dashboards/docs.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.cog.encoder import JSONEncoder

HERE = Path(__file__).parent
PROVISIONING = HERE / "provisioning"
OUT = PROVISIONING / "dashboards"
PUBLIC = HERE / "public"
MODULES = ("dns", "failures", "pageloads", "quicsocks", "health")  # the order of docs/dashboards.md
# Published as Grafana public dashboards (anyone with the link, no login): the research results.
# Campaign health (ingest, quarantine, credits) is for operators: anonymous Viewers of the
# Grafana instance see it, the public links do not. Grafana cannot share a dashboard with
# template variables publicly, so each published one has a variable-free copy (<uid>-public:
# every campaign, vantage, resolver ... of the store, the time range still selectable).
PUBLISHED = ("dnscamp-dns", "dnscamp-failures", "dnscamp-pageloads", "dnscamp-quicsocks")
PUBLIC_SUFFIX = "-public"


def build() -> dict[str, dict[str, Any]]:
    """{file name: dashboard JSON (plain data)} for every dashboard."""
    import importlib

    out = {}
    for name in MODULES:
        d = importlib.import_module(f"dashboards.{name}").dashboard().build()
        data = json.loads(json.dumps(d, cls=JSONEncoder))
        out[f"{data['uid']}.json"] = data
        if data["uid"] in PUBLISHED:
            copy = public_variant(data)
            out[f"{copy['uid']}.json"] = copy
    return out


def public_variant(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` without template variables, for a public dashboard: each variable's condition
    (dashboards.panels.FILTERS, one line of a panel's WHERE) is left out, which is what "All"
    selects, the time filter stays. Fails if a panel would still refer to a variable."""
    import copy as _copy

    from dashboards.panels import FILTERS

    out = _copy.deepcopy(data)
    out["uid"] += PUBLIC_SUFFIX
    out["title"] += " (public)"
    out["tags"] = [*out.get("tags", []), "public"]
    out["templating"] = {"list": []}
    for p in panel_list(out):
        for t in p.get("targets", []):
            sql = t["rawSql"]
            for cond in FILTERS.values():
                sql = sql.replace(f"\n  AND {cond}", "").replace(f"WHERE {cond}\n  AND ", "WHERE ")
            if "${" in sql or "[[" in sql:
                raise ValueError(f"{out['uid']}: panel {p['title']!r} still uses a variable: {sql}")
            t["rawSql"] = sql
    return out


def public_configs() -> dict[str, dict[str, Any]]:
    """{file name: Grafana public-dashboard configuration} for every published dashboard, as
    POST /api/dashboards/uid/<uid>/public-dashboards takes it (docker-compose.yml's publish
    service). The access token (the public URL's last part, 32 hex digits) is derived from the
    uid, so the public links stay the same across re-deployments; it is an address, not a secret."""
    import hashlib

    return {f"{uid}{PUBLIC_SUFFIX}.json": {"uid": f"{uid}{PUBLIC_SUFFIX}", "dashboardUid": uid + PUBLIC_SUFFIX,
                            "accessToken": hashlib.md5(uid.encode()).hexdigest(),  # noqa: S324 - an id, not security
                            "isEnabled": True, "annotationsEnabled": False, "timeSelectionEnabled": True}
            for uid in PUBLISHED}


def panel_list(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The panels of a dashboard, rows' nested panels included (rows themselves left out)."""
    out = []
    for p in data.get("panels", []):
        if p.get("type") == "row":
            out += p.get("panels", [])
        else:
            out.append(p)
    return out
