"""The servers' part of ``dnscamp testbed info``: per resolver every endpoint in the DNS
engine's catalog format, the CA file, the client namespaces, the site URLs per page profile
and the whoami zone. Read from ``<run_dir>/services.json`` (written by ``start_all``), so it
needs no root and costs nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from testbed.services import state_path


def describe(run_dir: Path) -> dict[str, Any]:
    """The description of the running servers; ``{"running": False}`` if they are not up."""
    run_dir = Path(run_dir)
    try:
        d = json.loads(state_path(run_dir).read_text())
    except (OSError, ValueError):
        return {"running": False, "run_dir": str(run_dir)}
    out: dict[str, Any] = {"running": True}
    out.update(d)
    out["catalog"] = [d["resolvers"][k] for k in ("isp", "public") if k in d.get("resolvers", {})]
    out["site_urls"] = {prof: s["url"] for prof, s in d.get("sites", {}).items()}
    try:
        from testbed import topology

        island = topology.load_island(run_dir)
    except Exception:  # noqa: BLE001 - the island part is optional here
        island = None
    if island is not None:
        out["clients"] = {p: {"ns": island.client_ns(p), "address": island.nodes[island.client_ns(p)].address}
                          for p in island.profiles if island.client_ns(p) in island.nodes}
    return out
