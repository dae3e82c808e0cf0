"""Where the Atlas-like probes stand, described as RIPE Atlas's probe API describes a probe.

The emulated population is the paper's German probes (001_3c494309ab66be23.txt §IV-B), so
probe i stands at the ((i - 1) mod n)-th documented site of sites.json (German cities), in the
AS the island's pyasn database gives it (``PROBE_ASN_BASE + i``). The objects have the probe
API's shape (``GET /api/v2/probes/``: ``geometry`` is a GeoJSON Point, longitude first), so the
collector reads them with atlas.probes.parse_probe like the API's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from testbed.atlas_probes.island import PROBE_ASN_BASE

SITES = Path(__file__).with_name("sites.json")


def sites() -> list[dict[str, Any]]:
    return json.loads(SITES.read_text())["sites"]


def probe_objects(prb_ids: Iterable[int]) -> list[dict[str, Any]]:
    """The probes ``prb_ids`` as probe API objects, round-robin over the documented sites."""
    all_sites = sites()
    out = []
    for i in sorted(prb_ids):
        s = all_sites[(i - 1) % len(all_sites)]
        out.append({"id": i, "country_code": s["country_code"], "asn_v4": PROBE_ASN_BASE + i,
                    "geometry": {"type": "Point", "coordinates": [s["lon"], s["lat"]]},
                    "status": {"name": "Connected"}})
    return out
