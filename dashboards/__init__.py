"""Grafana dashboards as code (issue 15): each module builds one dashboard with
grafana-foundation-sdk; `dnscamp dashboards build` writes them as JSON under
provisioning/dashboards/ (what Grafana's provider loads), `--check` fails when the committed JSON
is not what the code generates. docs/dashboards.md lists every panel's query and question."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.cog.encoder import JSONEncoder

HERE = Path(__file__).parent
PROVISIONING = HERE / "provisioning"
OUT = PROVISIONING / "dashboards"
MODULES = ("dns", "failures", "pageloads", "quicsocks", "health")  # the order of docs/dashboards.md


def build() -> dict[str, dict[str, Any]]:
    """{file name: dashboard JSON (plain data)} for every dashboard."""
    import importlib

    out = {}
    for name in MODULES:
        d = importlib.import_module(f"dashboards.{name}").dashboard().build()
        data = json.loads(json.dumps(d, cls=JSONEncoder))
        out[f"{data['uid']}.json"] = data
    return out


def render(data: dict[str, Any]) -> str:
    """The committed form: sorted keys, two-space indent, one trailing newline (stable diffs)."""
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write(out_dir: Path | None = None) -> list[Path]:
    """Write every dashboard; remove JSON files no dashboard generates any more."""
    out_dir = out_dir or OUT
    out_dir.mkdir(parents=True, exist_ok=True)
    built = build()
    for stale in set(p.name for p in out_dir.glob("*.json")) - set(built):
        (out_dir / stale).unlink()
    paths = []
    for name, data in built.items():
        (out_dir / name).write_text(render(data))
        paths.append(out_dir / name)
    return paths


def check(out_dir: Path | None = None) -> list[str]:
    """Files that differ from what the code generates (missing, changed, or not generated)."""
    out_dir = out_dir or OUT
    built = {name: render(data) for name, data in build().items()}
    have = {p.name: p.read_text() for p in out_dir.glob("*.json")} if out_dir.is_dir() else {}
    return sorted(n for n in set(built) | set(have) if built.get(n) != have.get(n))


def panel_list(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The panels of a dashboard, rows' nested panels included (rows themselves left out)."""
    out = []
    for p in data.get("panels", []):
        if p.get("type") == "row":
            out += p.get("panels", [])
        else:
            out.append(p)
    return out
