"""Grafana dashboards as code: each module builds one dashboard with
grafana-foundation-sdk; `dnscamp dashboards build` writes them as JSON under
provisioning/dashboards/ (what Grafana's provider loads) and `--check` fails when the committed
JSON is not what the code generates (dashboards/generate.py); `dnscamp dashboards publish` makes
public copies of one campaign (dashboards/publish.py). docs/dashboards.md lists every
panel's query and question (dashboards/docs.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.cog.encoder import JSONEncoder

HERE = Path(__file__).parent
PROVISIONING = HERE / "provisioning"
OUT = PROVISIONING / "dashboards"
MODULES = ("dns", "failures", "pageloads", "quicsocks", "health")  # the order of docs/dashboards.md
# Published as Grafana public dashboards (anyone with the link, no login), one campaign per copy:
# `dnscamp dashboards publish CAMPAIGN` (dashboards/publish.py) builds them from the store, with
# the campaign and its time window fixed. Campaign health (ingest, quarantine, credits) is for
# operators and is never published.
PUBLISHED = ("dnscamp-dns", "dnscamp-failures", "dnscamp-pageloads", "dnscamp-quicsocks")


def build() -> dict[str, dict[str, Any]]:
    """{file name: dashboard JSON (plain data)} for every dashboard."""
    import importlib

    out = {}
    for name in MODULES:
        d = importlib.import_module(f"dashboards.{name}").dashboard().build()
        data = json.loads(json.dumps(d, cls=JSONEncoder))
        out[f"{data['uid']}.json"] = data
    return out


def panel_list(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The panels of a dashboard, rows' nested panels included (rows themselves left out)."""
    out = []
    for p in data.get("panels", []):
        if p.get("type") == "row":
            out += p.get("panels", [])
        else:
            out.append(p)
    return out
