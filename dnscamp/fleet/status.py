"""Status objects of a campaign's instances, status/<campaign>/<vantage>/<region>/<instance_id>.json
(written by the agent's ship step): reading them, and the units still to ship."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

STATUS_MAX_BYTES = 64 * 1024  # a status object is a small JSON document


def status_prefix(campaign: str) -> str:
    return f"status/{campaign}/"


def _parts(key: str, campaign: str) -> tuple[str, str, str]:
    rest = key[len(status_prefix(campaign)):].split("/")
    if len(rest) == 3 and rest[2].endswith(".json"):
        return rest[0], rest[1], rest[2][: -len(".json")]
    return "?", "?", "?"


def read_statuses(s3, bucket: str, campaign: str) -> list[dict[str, Any]]:
    """Every status object of the campaign, parsed, with ``key`` and ``last_modified`` added; one
    that is not a JSON object becomes ``{"corrupt": "<key>: <why>", ...}`` (still attributed to the
    vantage, region and instance its key names)."""
    out: list[dict[str, Any]] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=status_prefix(campaign)):
        for entry in page.get("Contents", []):
            key = entry["Key"]
            vantage, region, iid = _parts(key, campaign)
            base = {"key": key, "vantage": vantage, "region": region, "instance_id": iid,
                    "last_modified": entry["LastModified"]}
            body = s3.get_object(Bucket=bucket, Key=key, Range=f"bytes=0-{STATUS_MAX_BYTES}")["Body"].read()
            try:
                doc = json.loads(body.decode("utf-8")) if len(body) <= STATUS_MAX_BYTES else None
            except ValueError as exc:
                out.append(base | {"corrupt": f"{key}: not JSON ({exc})"[:300]})
                continue
            if not isinstance(doc, dict):
                out.append(base | {"corrupt": f"{key}: not a JSON object (or larger than {STATUS_MAX_BYTES} bytes)"})
                continue
            out.append(base | doc | {"key": key, "last_modified": entry["LastModified"]})
    return sorted(out, key=lambda s: s["key"])


def pending_total(statuses: list[dict[str, Any]], instance_ids: Iterable[str] | None = None) -> int:
    """Units not yet shipped, over the statuses (only those of ``instance_ids`` when given). A
    corrupt status, or one whose count is null, adds 1: its queue is unknown, so a drain cannot
    call it empty."""
    only = set(instance_ids) if instance_ids is not None else None
    total = 0
    for st in statuses:
        if only is not None and st.get("instance_id") not in only:
            continue
        n = None if st.get("corrupt") else st.get("pending_units")
        total += n if isinstance(n, int) and not isinstance(n, bool) else 1
    return total
