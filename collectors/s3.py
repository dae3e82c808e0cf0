"""The S3 collector (`dnscamp collect s3://bucket/prefix`): result objects of the
results bucket into the store, each record exactly once.

- List with the paginator; an object whose (key, ETag) is in ``collected_objects`` is done;
  a new key, or a key whose ETag changed (re-uploaded), is downloaded and ingested.
- Ingest is collectors/ingest.py's, line by line and batch by batch, with the object's
  ``s3://bucket/key`` as the source: records are stored once by id (a record already stored
  with the same content hash is a duplicate, a different one an id_conflict in quarantine),
  and a corrupt object (truncated gzip, bad JSON) is quarantined under its key, line by line,
  while the rest go on.
- Only after the object's last batch committed is its ``collected_objects`` row written.
  A collector killed anywhere before that re-ingests the object on the next pass: the
  batches it committed are duplicates, the rest new, so every record is stored exactly once.
- Two collectors at once: each object is taken under a session advisory lock on its URI
  (``pg_try_advisory_lock``); the other collector skips it (the next pass sees it done), and
  the ingest itself retries a batch whose ids a concurrent ingest committed meanwhile.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlparse

import psycopg

from collectors import ingest as ing
from collectors.parse import parse_chunk
from collectors.read import file_chunks
from vantage_agent import errors

SUFFIXES = (".jsonl.gz", ".jsonl")  # status/<vantage>.json and anything else are not records
_LOCK = "SELECT pg_try_advisory_lock(hashtextextended(%s, 0))"
_UNLOCK = "SELECT pg_advisory_unlock(hashtextextended(%s, 0))"
_UPSERT = (
    "INSERT INTO collected_objects (bucket, key, etag, size, ingested, duplicates, quarantined) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (bucket, key) DO UPDATE SET etag = EXCLUDED.etag, "
    "size = EXCLUDED.size, ingested = EXCLUDED.ingested, duplicates = EXCLUDED.duplicates, "
    "quarantined = EXCLUDED.quarantined, collected_at = now()"
)


class CollectError(ing.IngestError):
    """A bucket URI or a bucket that cannot be read (one line)."""


@dataclass
class CollectStats:
    listed: int = 0  # result objects under the prefix
    collected: int = 0  # downloaded and ingested by this pass
    unchanged: int = 0  # (key, ETag) already collected
    locked: int = 0  # taken by another collector at that moment
    bytes: int = 0
    ingested: int = 0
    duplicates: int = 0
    quarantined: int = 0

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def parse_uri(uri: str) -> tuple[str, str]:
    u = urlparse(uri)
    if u.scheme != "s3" or not u.netloc:
        raise CollectError(f"{uri}: not an s3://bucket/prefix URI")
    return u.netloc, u.path.lstrip("/")


def s3_client(endpoint_url: str | None = None):
    """boto3's default chain for credentials; standard retry mode."""
    import boto3
    from botocore.config import Config

    return boto3.client("s3", endpoint_url=endpoint_url, config=Config(retries={"mode": "standard", "max_attempts": 5}))


def ingest_file(conn: psycopg.Connection, path: Path, source: str) -> ing.IngestStats:
    """collectors/ingest.py's batches for one file, recorded under ``source`` (the object's URI)."""
    stats = ing.IngestStats()
    for chunk in file_chunks(path, source):
        ing._store(conn, chunk, parse_chunk(chunk), stats)
    return stats


def _collect_one(conn, client, bucket: str, key: str, workdir: Path, stats: CollectStats,
                 before_record: Callable[[str], None] | None) -> None:  # fmt: skip
    uri = f"s3://{bucket}/{key}"
    fd, tmp = tempfile.mkstemp(prefix=".object.", suffix=".jsonl.gz" if key.endswith(".gz") else ".jsonl", dir=workdir)
    try:
        with os.fdopen(fd, "wb") as f:
            resp = client.get_object(Bucket=bucket, Key=key)
            etag = resp["ETag"].strip('"')  # the ETag of the bytes we read, whatever the listing said
            for piece in resp["Body"].iter_chunks(1 << 20):
                f.write(piece)
        size = os.path.getsize(tmp)
        st = ingest_file(conn, Path(tmp), uri)
        if before_record:
            before_record(key)  # tests: a kill point between the last batch and the ledger row
        conn.execute(_UPSERT, (bucket, key, etag, size, st.ingested, st.duplicates, st.quarantined))
    finally:
        Path(tmp).unlink(missing_ok=True)
    stats.collected += 1
    stats.bytes += size
    stats.ingested += st.ingested
    stats.duplicates += st.duplicates
    stats.quarantined += st.quarantined


def collect(uri: str, url: str, *, client=None, endpoint_url: str | None = None, workdir: Path | None = None,
            before_record: Callable[[str], None] | None = None) -> CollectStats:  # fmt: skip
    """One pass over ``uri`` into the database at ``url`` (libpq URL, the writer)."""
    bucket, prefix = parse_uri(uri)
    client = client or s3_client(endpoint_url)
    stats = CollectStats()
    with tempfile.TemporaryDirectory(prefix="dnscamp-collect-", dir=workdir) as wd, \
            psycopg.connect(url, autocommit=True) as conn:  # fmt: skip
        done = dict(conn.execute("SELECT key, etag FROM collected_objects WHERE bucket = %s", (bucket,)).fetchall())
        try:
            pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
            for page in pages:
                for obj in page.get("Contents", []):
                    key = obj["Key"]
                    if not key.endswith(SUFFIXES):
                        continue
                    stats.listed += 1
                    if done.get(key) == obj["ETag"].strip('"'):
                        stats.unchanged += 1
                        continue
                    lock = f"s3://{bucket}/{key}"
                    if not conn.execute(_LOCK, (lock,)).fetchone()[0]:
                        stats.locked += 1
                        continue
                    try:  # another collector may have finished it between our listing and the lock
                        row = conn.execute("SELECT etag FROM collected_objects WHERE bucket = %s AND key = %s",
                                           (bucket, key)).fetchone()  # fmt: skip
                        if row and row[0] == obj["ETag"].strip('"'):
                            stats.unchanged += 1
                        else:
                            _collect_one(conn, client, bucket, key, Path(wd), stats, before_record)
                    finally:
                        conn.execute(_UNLOCK, (lock,))
        except psycopg.OperationalError:
            raise
        except psycopg.Error as exc:
            raise ing.IngestError(f"the store refused the collect: {errors.first_line(exc)}") from None
        except Exception as exc:
            from botocore.exceptions import BotoCoreError, ClientError

            if isinstance(exc, (BotoCoreError, ClientError)):
                raise CollectError(f"{uri}: {type(exc).__name__}: {errors.first_line(exc)}") from None
            raise
    return stats


def watch(uri: str, url: str, *, interval_s: float, on_pass: Callable[[CollectStats], None], **kw) -> None:
    """collect() every ``interval_s`` until interrupted."""
    client = kw.pop("client", None) or s3_client(kw.pop("endpoint_url", None))
    while True:
        on_pass(collect(uri, url, client=client, **kw))
        time.sleep(interval_s)
