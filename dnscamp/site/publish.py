"""Upload a built report to S3 (or any S3-compatible store) as a static site: every file under
its key with the Content-Type a browser needs to show it (an SVG served as
binary/octet-stream would not display in an <img>), HTML not cached."""

from __future__ import annotations

from pathlib import Path

from collectors.s3 import parse_uri, s3_client

# What the report writes (dnscamp/site/build.py); the SQL is shown as text, not downloaded.
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".csv": "text/csv; charset=utf-8",
    ".sql": "text/plain; charset=utf-8",
}


class PublishError(Exception):
    """One line naming what is wrong (a missing site, an unknown file type)."""


def publish(site: Path, uri: str, *, client=None, endpoint_url: str | None = None, delete: bool = False) -> dict:
    """Upload every file of site under uri (s3://bucket/prefix); with delete, remove the
    objects under the prefix that the site no longer has. Returns the counts and the index key."""
    if not (site / "index.html").is_file():
        raise PublishError(f"{site}: no index.html (build it with `dnscamp report --html {site}`)")
    bucket, prefix = parse_uri(uri)
    prefix = prefix.rstrip("/") + "/" if prefix.strip("/") else ""
    files = sorted(p for p in site.rglob("*") if p.is_file())
    for p in files:
        if p.suffix not in CONTENT_TYPES:
            raise PublishError(f"{p}: no Content-Type known for {p.suffix or 'a file without suffix'} (not a report file?)")
    client = client or s3_client(endpoint_url)
    keys = set()
    for p in files:
        key = prefix + p.relative_to(site).as_posix()
        extra = {"CacheControl": "no-cache"} if p.suffix == ".html" else {}
        client.put_object(Bucket=bucket, Key=key, Body=p.read_bytes(), ContentType=CONTENT_TYPES[p.suffix], **extra)
        keys.add(key)
    deleted = 0
    if delete:
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for o in page.get("Contents", []):
                if o["Key"] not in keys:
                    client.delete_object(Bucket=bucket, Key=o["Key"])
                    deleted += 1
    return {"uploaded": len(keys), "deleted": deleted, "index": f"s3://{bucket}/{prefix}index.html"}
