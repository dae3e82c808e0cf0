"""Where the probes of a campaign stand: RIPE Atlas's probe API objects → ``ProbeMeta``
(stored by collectors/atlas_store.py in table atlas_probes; the QuicSocks dashboard's geomap
joins v_quicsocks_savings with v_atlas_probes on (campaign, prb_id)).

Two sources, one format:

- ``atlas_api``: RIPE Atlas's probe API, ``GET /api/v2/probes/?id__in=...`` through
  ripe.atlas.cousteau's AtlasRequest with the pipeline's retry policy (atlas.client), following
  the ``next`` page links as cousteau's ProbeRequest does (reference:
  https://atlas.ripe.net/docs/apis/rest-api-reference/probes/probes_list). Atlas gives a probe's
  place as GeoJSON ``geometry: {type: Point, coordinates: [lon, lat]}`` (longitude first), its AS
  as ``asn_v4``, its country as ``country_code`` and its state as ``status.name``.
- ``testbed``: the testbed's Atlas-like probes describe themselves as the probe API does
  (testbed/atlas_probes/sites.py: the paper's German population at documented sites), and
  ``parse_probe(obj, source="testbed")`` reads them like the API's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable
from urllib.parse import urlsplit

from ripe.atlas.cousteau import AtlasRequest

from atlas.client import AtlasApiError, Backoff, call_with_retry
from atlas.key import ApiKey

PROBES_PATH = "/api/v2/probes/"
FIELDS = "id,country_code,asn_v4,geometry,status"
PAGE_SIZE = 500  # the API's largest page; also bounds a request's id__in list (URL length)


@dataclass(frozen=True)
class ProbeMeta:
    prb_id: int
    country_code: str | None
    asn_v4: int | None
    lat: float | None
    lon: float | None
    status: str | None
    source: str  # atlas_api | testbed


def _coords(geometry: Any, where: str) -> tuple[float | None, float | None]:
    """(lat, lon) of a GeoJSON Point (coordinates are [lon, lat]); None, None without one."""
    if geometry is None:
        return None, None
    try:
        if geometry["type"] != "Point":
            raise ValueError(f"type {geometry['type']!r}, not Point")
        lon, lat = (float(x) for x in geometry["coordinates"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{where}: geometry: not a GeoJSON Point [lon, lat] ({exc})") from None
    if not (-90 <= lat <= 90 and -180 <= lon <= 180):
        raise ValueError(f"{where}: geometry: [lon, lat] = [{lon}, {lat}] is off the globe")
    return lat, lon


def parse_probe(obj: dict[str, Any], *, source: str = "atlas_api") -> ProbeMeta:
    """One object of the probe API's ``results``; ValueError naming the probe and field."""
    if not isinstance(obj, dict) or not isinstance(obj.get("id"), int):
        raise ValueError(f"probe API: an object without an integer id: {str(obj)[:120]}")
    where = f"probe {obj['id']}"
    lat, lon = _coords(obj.get("geometry"), where)
    asn = obj.get("asn_v4")
    if asn is not None and not isinstance(asn, int):
        raise ValueError(f"{where}: asn_v4: {asn!r} is not an integer")
    status = obj.get("status")
    name = status.get("name") if isinstance(status, dict) else status  # older API: a bare name
    return ProbeMeta(obj["id"], obj.get("country_code"), asn, lat, lon, name, source)


def fetch_probes(ids: Iterable[int], *, key: ApiKey | None = None, server: str | None = None, verify: Any = True,
                 policy: Backoff = Backoff(), sleep: Callable[[float], None] = time.sleep) -> list[ProbeMeta]:
    """The probe API's metadata of ``ids`` (ids the API does not know are simply not returned)."""
    wanted = sorted(set(ids))
    out: dict[int, ProbeMeta] = {}
    for i in range(0, len(wanted), PAGE_SIZE):
        chunk = ",".join(map(str, wanted[i:i + PAGE_SIZE]))
        path: str | None = f"{PROBES_PATH}?id__in={chunk}&fields={FIELDS}&page_size={PAGE_SIZE}"
        while path:
            kw: dict[str, Any] = {"url_path": path, "server": server, "verify": verify}
            if key is not None:
                kw["key"] = key.reveal()
            body = call_with_retry(lambda kw=kw: AtlasRequest(**kw), lambda req: req.get(), policy=policy,
                                   sleep=sleep, key=key, what="probes")
            if not isinstance(body, dict) or not isinstance(body.get("results"), list):
                raise AtlasApiError(f"probes: expected an object with a results array, got {str(body)[:120]}")
            for obj in body["results"]:
                p = parse_probe(obj)
                out[p.prb_id] = p
            nxt = body.get("next")  # an absolute URL on the same server
            path = f"{urlsplit(nxt).path}?{urlsplit(nxt).query}" if nxt else None
    return [out[k] for k in sorted(out)]
