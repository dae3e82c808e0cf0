"""The S3 collector (`dnscamp collect s3://bucket/prefix`): result objects of the
results bucket into the store, each record exactly once; run manifests beside them.

- List (each page one LIST request); an object whose (key, ETag) is in ``collected_objects``
  is done; a new key, or a key whose ETag changed (re-uploaded), is downloaded and ingested.
- Incremental listing: under ``results/<campaign>/<vantage>/`` run ids sort by time
  (dnscamp.runner.new_run_id: ``YYYYmmddTHHMMSSZ...``), so a pass lists each such prefix only
  from its watermark (``collect_watermarks``: the greatest run id a listing has seen, shared by
  every collector of the store) back ``lookback_h`` hours, unless a full listing would take no
  more requests (``_listing``). A full listing (``full=True``; `--watch` makes one on its first
  pass and every ``full_every`` passes) catches what came later than the lookback (an agent
  that could not ship for longer) and vantages not seen before.
- A download is checked against the ContentLength S3 announced; a short body (or botocore's
  IncompleteReadError) is retried, never ingested. Its sha256 is kept in ``collected_objects``.
- Ingest is collectors/ingest.py's, line by line and batch by batch, with the object's
  ``s3://bucket/key`` as the source: records are stored once by id (a record already stored
  with the same content hash is a duplicate, a different one an id_conflict in quarantine),
  and a corrupt object (truncated gzip, bad JSON) is quarantined under its key, line by line,
  while the rest go on.
- Only after the object's last batch committed is its ``collected_objects`` row written.
  A collector killed anywhere before that re-ingests the object on the next pass: the
  batches it committed are duplicates, the rest new, so every record is stored exactly once.
- Manifests (``results/<c>/<v>/<run>/manifest.json``, collectors/manifest.py) are read after
  the record objects of the pass and stored in ``run_manifests`` / ``run_manifest_objects``
  (one transaction each); a corrupt one is one line, kept as the manifest's ``error`` and as
  a quarantine row under its key (line 0: the whole object), never a crash.
  ``v_run_completeness`` reconciles them with ``collected_objects``.
- Two collectors at once: each object is taken under a session advisory lock on its URI
  (``pg_try_advisory_lock``); the other collector skips it (the next pass sees it done), and
  the ingest itself retries a batch whose ids a concurrent ingest committed meanwhile.
- ``watch`` survives S3 outages: a pass that fails on S3 is retried after a capped
  exponential backoff, each distinct failure is logged once, and the recovery once.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlparse

import psycopg
from psycopg.types.json import Jsonb

from collectors import ingest as ing
from collectors import manifest as mf
from collectors import quarantine
from collectors.parse import parse_chunk
from collectors.read import file_chunks
from vantage_agent import errors

SUFFIXES = (".jsonl.gz", ".jsonl")  # status/<vantage>.json and anything else are not records
RESULTS = "results/"
LOOKBACK_H = 6.0  # a run shipped up to this long after the newest run of its vantage is listed by every pass
FULL_EVERY = 20  # --watch lists everything on its first pass and every FULL_EVERY passes
DOWNLOAD_ATTEMPTS = 3  # a truncated body is fetched again this many times in all
BACKOFF_S = (1.0, 60.0)  # watch: first and longest wait after a failed pass
LIST_PAGE_KEYS = 1000  # keys per LIST page (S3's maximum and default)
_RUN_TIME = re.compile(r"(\d{8}T\d{6}Z)")
_LOCK = "SELECT pg_try_advisory_lock(hashtextextended(%s, 0))"
_UNLOCK = "SELECT pg_advisory_unlock(hashtextextended(%s, 0))"
_UPSERT = (
    "INSERT INTO collected_objects (bucket, key, etag, size, ingested, duplicates, quarantined, sha256) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (bucket, key) DO UPDATE SET etag = EXCLUDED.etag, "
    "size = EXCLUDED.size, ingested = EXCLUDED.ingested, duplicates = EXCLUDED.duplicates, "
    "quarantined = EXCLUDED.quarantined, sha256 = EXCLUDED.sha256, collected_at = now()"
)
_MANIFEST_UPSERT = (
    "INSERT INTO run_manifests (bucket, key, campaign, vantage, run, etag, region, instance_id, units_planned, body, error) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (bucket, key) DO UPDATE SET "
    "campaign = EXCLUDED.campaign, vantage = EXCLUDED.vantage, run = EXCLUDED.run, etag = EXCLUDED.etag, "
    "region = EXCLUDED.region, instance_id = EXCLUDED.instance_id, units_planned = EXCLUDED.units_planned, "
    "body = EXCLUDED.body, error = EXCLUDED.error, collected_at = now()"
)
_WATERMARK = (
    "INSERT INTO collect_watermarks (bucket, prefix, run) VALUES (%s, %s, %s) ON CONFLICT (bucket, prefix) "
    "DO UPDATE SET run = EXCLUDED.run, updated_at = now() "
    'WHERE collect_watermarks.run COLLATE "C" < EXCLUDED.run COLLATE "C"'  # byte order, as S3 lists keys
)


class CollectError(ing.IngestError):
    """A bucket URI or a bucket that cannot be read (one line)."""


class S3Unavailable(CollectError):
    """S3 failed under a pass (endpoint down, refused, throttled past the retries, a body
    truncated every time): the pass stops, what it committed stays, the next pass goes on."""


@dataclass
class CollectStats:
    listed: int = 0  # result objects under the prefix (this pass's listing)
    collected: int = 0  # downloaded and ingested by this pass
    unchanged: int = 0  # (key, ETag) already collected
    locked: int = 0  # taken by another collector at that moment
    bytes: int = 0
    ingested: int = 0
    duplicates: int = 0
    quarantined: int = 0
    manifests: int = 0  # manifests read and stored by this pass
    manifests_corrupt: int = 0  # of those, refused (one line each in ``errors``)
    list_requests: int = 0  # LIST requests (pages) this pass made: what S3 bills per 1,000
    get_requests: int = 0  # GET requests, retries of a truncated body included
    retried_downloads: int = 0  # bodies shorter than their ContentLength, fetched again
    full_listing: bool = True  # False: only the watermarked recent runs were listed
    errors: list[str] = field(default_factory=list)  # a corrupt manifest: its key and field

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def parse_uri(uri: str) -> tuple[str, str]:
    u = urlparse(uri)
    if u.scheme != "s3" or not u.netloc:
        raise CollectError(f"{uri}: not an s3://bucket/prefix URI")
    return u.netloc, u.path.lstrip("/")


def s3_client(endpoint_url: str | None = None, *, max_attempts: int = 5, connect_timeout: float = 10,
              read_timeout: float = 60):  # fmt: skip
    """boto3's default chain for credentials; standard retry mode. The timeouts are shorter than
    botocore's 60 s connect: an unreachable endpoint is a failed pass for watch's backoff."""
    import boto3
    from botocore.config import Config

    cfg = Config(retries={"mode": "standard", "max_attempts": max_attempts}, connect_timeout=connect_timeout,
                 read_timeout=read_timeout)  # fmt: skip
    return boto3.client("s3", endpoint_url=endpoint_url, config=cfg)


def ingest_file(conn: psycopg.Connection, path: Path, source: str) -> ing.IngestStats:
    """collectors/ingest.py's batches for one file, recorded under ``source`` (the object's URI)."""
    stats = ing.IngestStats()
    for chunk in file_chunks(path, source):
        ing._store(conn, chunk, parse_chunk(chunk), stats)
    return stats


# --- download ----------------------------------------------------------------------------------


def _truncation_errors() -> tuple[type[BaseException], ...]:
    # botocore's StreamingBody wraps urllib3's ProtocolError (a connection cut mid-body) in
    # ResponseStreamingError, so urllib3 need not be named here
    from botocore.exceptions import IncompleteReadError, ReadTimeoutError, ResponseStreamingError

    return IncompleteReadError, ResponseStreamingError, ReadTimeoutError, ConnectionError


def download(client, bucket: str, key: str, f, stats: CollectStats) -> tuple[str, int, str]:
    """The object's body into the open binary file ``f`` (rewritten from its start on each
    attempt): (ETag, size, sha256 hex). A body shorter than the ContentLength of its response,
    or cut by the connection, is fetched again; DOWNLOAD_ATTEMPTS short bodies are S3Unavailable."""
    cut = _truncation_errors()
    why = ""
    for attempt in range(DOWNLOAD_ATTEMPTS):
        if attempt:
            stats.retried_downloads += 1
            time.sleep(0.2 * 2**attempt)
        f.seek(0)
        f.truncate()
        stats.get_requests += 1
        resp = client.get_object(Bucket=bucket, Key=key)
        etag = resp["ETag"].strip('"')  # the ETag of the bytes we read, whatever the listing said
        want = resp.get("ContentLength")
        h, n = hashlib.sha256(), 0
        try:
            for piece in resp["Body"].iter_chunks(1 << 20):
                f.write(piece)
                h.update(piece)
                n += len(piece)
        except cut as exc:
            why = f"{type(exc).__name__}: {errors.first_line(exc)}"
            continue
        if want is not None and n != want:
            why = f"{n} of {want} bytes"
            continue
        f.flush()
        return etag, n, h.hexdigest()
    raise S3Unavailable(f"s3://{bucket}/{key}: download truncated {DOWNLOAD_ATTEMPTS} times ({why})")


def _collect_one(conn, client, bucket: str, key: str, workdir: Path, stats: CollectStats,
                 before_record: Callable[[str], None] | None) -> None:  # fmt: skip
    uri = f"s3://{bucket}/{key}"
    fd, tmp = tempfile.mkstemp(prefix=".object.", suffix=".jsonl.gz" if key.endswith(".gz") else ".jsonl", dir=workdir)
    try:
        with os.fdopen(fd, "w+b") as f:
            etag, size, sha = download(client, bucket, key, f, stats)
        st = ingest_file(conn, Path(tmp), uri)
        if before_record:
            before_record(key)  # tests: a kill point between the last batch and the ledger row
        conn.execute(_UPSERT, (bucket, key, etag, size, st.ingested, st.duplicates, st.quarantined, sha))
    finally:
        Path(tmp).unlink(missing_ok=True)
    stats.collected += 1
    stats.bytes += size
    stats.ingested += st.ingested
    stats.duplicates += st.duplicates
    stats.quarantined += st.quarantined


def _collect_manifest(conn, client, bucket: str, key: str, workdir: Path, stats: CollectStats) -> None:
    """Read, check and store one manifest (one transaction); a corrupt one is its one line,
    kept as the row's error and in quarantine (line 0: the whole object)."""
    uri = f"s3://{bucket}/{key}"
    with tempfile.TemporaryFile(dir=workdir) as f:
        etag, size, _ = download(client, bucket, key, f, stats)
        f.seek(0)
        data = f.read(mf.MAX_BYTES + 1)
    campaign, vantage, run = mf.run_of_key(key)
    try:
        m = mf.parse(key, data)
    except mf.ManifestError as exc:
        line = f"{uri}: corrupt manifest: {exc}"
        with conn.transaction():
            conn.execute("DELETE FROM run_manifest_objects WHERE bucket = %s AND manifest_key = %s", (bucket, key))
            conn.execute(_MANIFEST_UPSERT, (bucket, key, campaign, vantage, run, etag, None, None, None, None, line))
            with conn.cursor() as cur:
                quarantine.add(cur, [(uri, 0, f"corrupt manifest: {exc}", quarantine.quarantine_text(data[:1 << 20]))])
        stats.manifests_corrupt += 1
        stats.errors.append(line)
        return
    with conn.transaction():
        conn.execute("DELETE FROM run_manifest_objects WHERE bucket = %s AND manifest_key = %s", (bucket, key))
        conn.execute(_MANIFEST_UPSERT, (bucket, key, m.campaign, m.vantage, m.run, etag, m.region, m.instance_id,
                                        list(m.units_planned), Jsonb(m.body), None))  # fmt: skip
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO run_manifest_objects (bucket, manifest_key, unit, key, sha256, bytes, records) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                [(bucket, key, o.unit, o.key, o.sha256, o.bytes, o.records) for o in m.objects])  # fmt: skip
        conn.execute("DELETE FROM quarantine WHERE source_file = %s AND line = 0", (uri,))  # fixed since
    stats.manifests += 1


# --- listing -----------------------------------------------------------------------------------


def _pages(client, stats: CollectStats, **kw):
    for page in client.get_paginator("list_objects_v2").paginate(**kw):
        stats.list_requests += 1
        yield page


def run_start_after(watermark: str, lookback_h: float) -> str | None:
    """The StartAfter (relative to its vantage prefix) that lists the runs from ``lookback_h``
    hours before the ``watermark`` run on; None when the run id does not start with its time
    (a run id of another form: the prefix is listed whole)."""
    m = _RUN_TIME.match(watermark)
    if not m:
        return None
    try:
        t = datetime.strptime(m[1], "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc)
    except ValueError:
        return None
    return (t - timedelta(hours=lookback_h)).strftime("%Y%m%dT%H%M%SZ")


def _vantage_prefixes(client, bucket: str, prefix: str, stats: CollectStats, found: list[dict]) -> list[str] | None:
    """The ``results/<campaign>/<vantage>/`` prefixes under ``prefix`` (or ``prefix`` itself when
    it is one or lies below one), by delimiter listings; objects met on the way go into
    ``found``. None when ``prefix`` is not in the results layout (it is listed whole)."""
    if RESULTS.startswith(prefix):
        level = [RESULTS]
    elif prefix.startswith(RESULTS):
        level = [prefix]
    else:
        return None
    out = []
    while level:
        deeper = []
        for p in level:
            if p.count("/") >= 3:
                out.append(p)
                continue
            for page in _pages(client, stats, Bucket=bucket, Prefix=p, Delimiter="/"):
                deeper += [cp["Prefix"] for cp in page.get("CommonPrefixes", [])]
                found += page.get("Contents", [])
        level = deeper
    return out


def _known_vantages(conn, bucket: str, prefix: str) -> tuple[list[str], dict[str, str]]:
    """The vantage prefixes under ``prefix`` that earlier listings saw (their watermarks), and
    every watermark of the bucket."""
    marks = dict(conn.execute("SELECT prefix, run FROM collect_watermarks WHERE bucket = %s", (bucket,)).fetchall())
    if prefix.count("/") >= 3:
        return [], marks  # one vantage or narrower: _vantage_prefixes gives it without a LIST
    return sorted(vp for vp in marks if vp.startswith(prefix)), marks


def _full_listing_pages(conn, bucket: str, prefix: str) -> int:
    """LIST requests a full listing of ``prefix`` would take, from the objects the store knows there."""
    like = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    n = conn.execute("SELECT (SELECT count(*) FROM collected_objects WHERE bucket = %s AND key LIKE %s) + "
                     "(SELECT count(*) FROM run_manifests WHERE bucket = %s AND key LIKE %s)",
                     (bucket, like, bucket, like)).fetchone()[0]  # fmt: skip
    return n // LIST_PAGE_KEYS + 1


def _listing(conn, client, bucket: str, prefix: str, stats: CollectStats, *, full: bool,
             lookback_h: float) -> list[dict]:  # fmt: skip
    """The objects of this pass: everything under ``prefix`` (full), or per vantage prefix the
    runs from its watermark back ``lookback_h`` hours; the watermarks are moved up.

    An incremental pass lists the vantages earlier listings saw (new vantages appear at the next
    full listing; with none known, delimiter listings find them), and falls back to a full
    listing when that takes no more requests (a young campaign: fewer objects than LIST pages of
    1,000 keys per vantage)."""
    found: list[dict] = []
    vantages = None
    if not full:
        known, marks = _known_vantages(conn, bucket, prefix)
        in_layout = RESULTS.startswith(prefix) or prefix.startswith(RESULTS)
        if in_layout and known and _full_listing_pages(conn, bucket, prefix) > len(known):
            vantages = known
        elif in_layout and not known:
            vantages = _vantage_prefixes(client, bucket, prefix, stats, found)
    if vantages is None:
        stats.full_listing = True
        for page in _pages(client, stats, Bucket=bucket, Prefix=prefix):
            found += page.get("Contents", [])
        seen = {}
        for o in found:
            vp = _vantage_of(o["Key"])
            if vp:
                run = o["Key"][len(vp):].split("/", 1)[0]
                seen[vp] = max(seen.get(vp, run), run)
    else:
        stats.full_listing = False
        seen = {}
        for vp in vantages:
            kw: dict[str, Any] = {"Bucket": bucket, "Prefix": vp}
            after = run_start_after(marks[vp], lookback_h) if vp in marks and _is_vantage(vp) else None
            if after:
                kw["StartAfter"] = vp + after
            objs = [o for page in _pages(client, stats, **kw) for o in page.get("Contents", [])]
            found += objs
            if _is_vantage(vp):
                seen[vp] = _greatest_run(vp, objs)
    for vp, run in seen.items():
        if run:
            conn.execute(_WATERMARK, (bucket, vp, run))
    return found


def _is_vantage(p: str) -> bool:
    return p.startswith(RESULTS) and p.endswith("/") and p.count("/") == 3 and "//" not in p


def _vantage_of(key: str) -> str | None:
    """``results/<c>/<v>/`` of a key ``results/<c>/<v>/<run>/...``; None for another shape."""
    if not key.startswith(RESULTS):
        return None
    parts = key.split("/")
    return "/".join(parts[:3]) + "/" if len(parts) >= 5 and all(parts[1:4]) else None


def _greatest_run(vp: str, objs: list[dict]) -> str | None:
    runs = [o["Key"][len(vp):].split("/", 1)[0] for o in objs if o["Key"].startswith(vp) and "/" in o["Key"][len(vp):]]
    return max(runs, default=None)


# --- a pass ------------------------------------------------------------------------------------


def _s3_error(uri: str, exc: BaseException) -> S3Unavailable:
    return S3Unavailable(f"{uri}: {type(exc).__name__}: {errors.first_line(exc)}")


def collect(uri: str, url: str, *, client=None, endpoint_url: str | None = None, workdir: Path | None = None,
            before_record: Callable[[str], None] | None = None, full: bool = True,
            lookback_h: float = LOOKBACK_H) -> CollectStats:  # fmt: skip
    """One pass over ``uri`` into the database at ``url`` (libpq URL, the writer): the record
    objects, then the manifests. ``full=False`` lists incrementally (the module's docstring)."""
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, prefix = parse_uri(uri)
    client = client or s3_client(endpoint_url)
    stats = CollectStats()
    with tempfile.TemporaryDirectory(prefix="dnscamp-collect-", dir=workdir) as wd, \
            psycopg.connect(url, autocommit=True) as conn:  # fmt: skip
        try:
            objects = _listing(conn, client, bucket, prefix, stats, full=full, lookback_h=lookback_h)
            keys = [o["Key"] for o in objects]  # only what was listed: an incremental pass reads few rows
            done = dict(conn.execute("SELECT key, etag FROM collected_objects WHERE bucket = %s AND key = ANY(%s)",
                                     (bucket, keys)).fetchall())  # fmt: skip
            manifests = dict(conn.execute("SELECT key, etag FROM run_manifests WHERE bucket = %s AND key = ANY(%s)",
                                          (bucket, keys)).fetchall())  # fmt: skip
            todo = []
            for obj in objects:
                key, etag = obj["Key"], obj["ETag"].strip('"')
                if key.endswith(SUFFIXES):
                    stats.listed += 1
                    if done.get(key) == etag:
                        stats.unchanged += 1
                    else:
                        todo.append((key, etag, False))
                elif mf.is_manifest_key(key) and manifests.get(key) != etag:
                    todo.append((key, etag, True))
            todo.sort(key=lambda t: t[2])  # records first: a manifest is read after its run's objects
            for key, etag, is_manifest in todo:
                lock = f"s3://{bucket}/{key}"
                if not conn.execute(_LOCK, (lock,)).fetchone()[0]:
                    stats.locked += 1
                    continue
                try:  # another collector may have finished it between our listing and the lock
                    table = "run_manifests" if is_manifest else "collected_objects"
                    row = conn.execute(f"SELECT etag FROM {table} WHERE bucket = %s AND key = %s",  # noqa: S608
                                       (bucket, key)).fetchone()  # fmt: skip
                    if row and row[0] == etag:
                        stats.unchanged += not is_manifest
                    elif is_manifest:
                        _collect_manifest(conn, client, bucket, key, Path(wd), stats)
                    else:
                        _collect_one(conn, client, bucket, key, Path(wd), stats, before_record)
                finally:
                    conn.execute(_UNLOCK, (lock,))
        except psycopg.OperationalError:
            raise
        except psycopg.Error as exc:
            raise ing.IngestError(f"the store refused the collect: {errors.first_line(exc)}") from None
        except (BotoCoreError, ClientError) as exc:
            raise _s3_error(uri, exc) from None
    return stats


# --- watch -------------------------------------------------------------------------------------

_VARYING = re.compile(r"\?[^\s\"']*|\b[0-9A-F]{16,}\b")  # a URL's query, request ids: not what tells failures apart


def failure_kind(message: str) -> str:
    """What makes two failures "the same" for logging: the message without the parts that
    change from one retry to the next (the listing's query string, request ids)."""
    return _VARYING.sub("", message)


def _stderr(line: str) -> None:
    sys.stderr.write(f"dnscamp collect: {line}\n")
    sys.stderr.flush()


def watch(uri: str, url: str, *, interval_s: float, on_pass: Callable[[CollectStats], None],
          full_every: int = FULL_EVERY, lookback_h: float = LOOKBACK_H, backoff_s: tuple[float, float] = BACKOFF_S,
          log: Callable[[str], None] = _stderr, passes: int | None = None, sleep: Callable[[float], None] = time.sleep,
          **kw) -> None:  # fmt: skip
    """collect() every ``interval_s`` until interrupted (or ``passes`` passes): the first pass
    and every ``full_every``-th lists everything, the others incrementally. A pass that fails
    on S3 is retried after 1, 2, 4 ... ``backoff_s[1]`` seconds; each distinct failure is
    logged once per outage, and the recovery once."""
    client = kw.pop("client", None) or s3_client(kw.pop("endpoint_url", None), max_attempts=3)
    done = 0
    delay = 0.0
    outage: dict[str, int] = {}  # failure kind -> retries, since the last good pass
    down_since = 0.0
    while passes is None or done < passes:
        try:
            st = collect(uri, url, client=client, full=done % max(full_every, 1) == 0, lookback_h=lookback_h, **kw)
        except S3Unavailable as exc:
            kind = failure_kind(str(exc))
            if not outage:
                down_since = time.monotonic()
            if kind not in outage:
                outage[kind] = 0
                log(f"{exc} (retrying, waits {backoff_s[0]:g} s doubling up to {backoff_s[1]:g} s)")
            outage[kind] += 1
            delay = min(backoff_s[1], delay * 2 if delay else backoff_s[0])
            sleep(delay)
            continue
        if outage:
            log(f"S3 answers again: {sum(outage.values())} failed passes over {time.monotonic() - down_since:.0f} s, "
                "resuming")  # fmt: skip
            outage.clear()
            delay = 0.0
        on_pass(st)
        done += 1
        if passes is None or done < passes:
            sleep(interval_s)
