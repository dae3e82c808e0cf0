"""dns_hourly keyed by (hour, key_id) with the key's texts in dns_hourly_keys (migration
0022_hourly_keys): v_dns_hourly and v_dns_hourly_hist give what v_dns_query says per
hour (counts, failures, timed records, the histogram of total_ms) after many small batches,
re-ingest, rows inserted into / deleted from the ``results`` view, archive + restore, and the
upgrade to 0022 of a store with records (the rows move unchanged; the downgrade moves them
back); two ingests that add the same new key at once end with one key and both counts."""

from __future__ import annotations

import importlib
import importlib.util
import json
import shutil
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import psycopg
import pytest

from collectors import read as read_mod
from collectors.ingest import ingest
from db import migrate
from db.writer import rollups
from tests.store_util import ingest_with_old_code

pytestmark = pytest.mark.local
BEFORE = importlib.import_module("db.migrations.versions.0022_hourly_keys").down_revision  # the revision before 0022
ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "tests" / "fixtures" / "results"
_spec = importlib.util.spec_from_file_location("gen_campaign_hourly", ROOT / "bench" / "gen_campaign.py")
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)

KEY = "hour, campaign, vantage_id, network_profile, resolver, transport"
_BASE = ("SELECT date_trunc('hour', started_at, 'UTC') AS hour, campaign, vantage_id, network_profile, resolver, "
         "transport, status, CASE WHEN status = 'ok' AND t_start IS NOT NULL AND t_response IS NOT NULL "
         "THEN dnscamp_hist_bucket(total_ms) END AS b FROM v_dns_query")  # fmt: skip
CHECKS = {  # the view, what the records say
    "hourly": (f"SELECT {KEY}, n, failures, timed FROM v_dns_hourly",
               f"SELECT {KEY}, count(*), count(*) FILTER (WHERE status <> 'ok'), count(b) FROM ({_BASE}) r "
               f"GROUP BY 1, 2, 3, 4, 5, 6"),
    "hist": (f"SELECT {KEY}, bucket, n FROM v_dns_hourly_hist",
             f"SELECT {KEY}, b, count(*) FROM ({_BASE}) r WHERE b IS NOT NULL GROUP BY 1, 2, 3, 4, 5, 6, 7"),
}  # fmt: skip
VIEWS = {name: sql for name, (sql, _) in CHECKS.items()}


def _rows(c, sql: str) -> list[tuple]:
    return sorted(c.execute(sql).fetchall(), key=repr)


def check(url: str) -> dict[str, int]:
    """The hourly views equal the records' per-hour figures; one key row per key. Returns the
    rows compared per view."""
    sizes = {}
    with psycopg.connect(url) as c:
        for name, (view, base) in CHECKS.items():
            got, want = _rows(c, view), _rows(c, base)
            assert got == want, f"{name}: the rollup differs from v_dns_query ({len(got)} / {len(want)} rows)"
            sizes[name] = len(got)
        if c.execute("SELECT to_regclass('dns_hourly_keys')").fetchone()[0]:  # 0022's layout
            assert c.execute("SELECT count(*) FROM dns_hourly h LEFT JOIN dns_hourly_keys k ON k.id = h.key_id "
                             "WHERE k.id IS NULL").fetchone()[0] == 0  # fmt: skip
    return sizes


def _views(url: str) -> dict[str, list[tuple]]:
    with psycopg.connect(url) as c:
        return {name: _rows(c, sql) for name, sql in VIEWS.items()}


@pytest.fixture()
def records(tmp_path):
    """Dense dns_query records (many per hour and key, over several batches), the v1 fixtures and
    the hostile corpus (bodies that go whole to generic_results, keys with NULLs)."""
    out = tmp_path / "records"
    out.mkdir()
    recs = [gen.orjson.dumps(r) + b"\n" for r in gen.dns_queries(
        4000, np.random.default_rng(11), "hourly", gen.END, vantages=gen.VANTAGES[:2], resolvers=gen.RESOLVERS[:1], days=1)]
    # every other record in a second file: each (hour, key) row gets records from several batches
    (out / "dns-a.jsonl").write_bytes(b"".join(recs[::2]))
    (out / "dns-b.jsonl").write_bytes(b"".join(recs[1::2]))
    shutil.copytree(RESULTS / "v1", out / "v1", ignore=shutil.ignore_patterns("invalid"))
    shutil.copytree(RESULTS / "hostile", out / "hostile")
    # keys with a NULL: queries of a vantage without a network profile
    nulls = []
    for i, line in enumerate((RESULTS / "v1" / "dns_query.jsonl").read_text().splitlines()[:20]):
        rec = json.loads(line)
        nulls.append(json.dumps({**rec, "id": str(uuid.UUID(int=i + 1)), "vantage": {**rec["vantage"], "network_profile": None}}))
    (out / "nulls.jsonl").write_text("\n".join(nulls) + "\n")
    return out


def _sa(url: str) -> str:
    return url.replace("postgresql://", "postgresql+psycopg://", 1)


def test_hourly_views_equal_the_records_through_every_write_path(empty_db, records, monkeypatch):
    monkeypatch.setattr(read_mod, "BATCH_BYTES", 64 << 10)  # many batches: a key's hour in several
    st = ingest([records], empty_db, workers=1)
    assert st.ingested > 4000
    sizes = check(empty_db)
    assert sizes["hourly"] > 200 and sizes["hist"] > 1000
    with psycopg.connect(empty_db) as c:
        assert c.execute("SELECT max(n) FROM dns_hourly").fetchone()[0] > 10
        assert c.execute("SELECT count(*) FROM ingest_batches").fetchone()[0] > 10
        # keys with NULLs (a record without a profile, resolver or transport) are one key each
        assert c.execute("SELECT count(*) FROM dns_hourly_keys "
                         "WHERE network_profile IS NULL OR resolver IS NULL OR transport IS NULL").fetchone()[0] > 0  # fmt: skip
        assert c.execute("SELECT count(*) FROM dns_hourly_keys").fetchone()[0] == c.execute(
            "SELECT count(DISTINCT (campaign, vantage_id, network_profile, resolver, transport)) FROM v_dns_hourly"
        ).fetchone()[0]
        # the readers' columns keep their types: n and failures bigint
        cols = {d.name: d.type_code for d in c.execute("SELECT * FROM v_dns_hourly LIMIT 0").description}
        assert cols["n"] == cols["failures"] == 20  # int8
        keys = c.execute("SELECT count(*) FROM dns_hourly_keys").fetchone()[0]

    # re-ingest: duplicates add nothing, no new keys
    assert ingest([records], empty_db, workers=1).ingested == 0
    assert check(empty_db) == sizes
    with psycopg.connect(empty_db) as c:
        assert c.execute("SELECT count(*) FROM dns_hourly_keys").fetchone()[0] == keys

    # the results view's triggers: copies (a new campaign: new keys) counted, deleted rows uncounted
    with psycopg.connect(empty_db) as c:
        ids = [r[0] for r in c.execute("SELECT id FROM v_dns_query WHERE campaign = 'hourly' ORDER BY id LIMIT 300")]
        c.execute("INSERT INTO results (id, schema, kind, campaign, run, unit, vantage_id, provider, region, "
                  "network_profile, started_at, status, error, env, body) SELECT gen_random_uuid(), schema, kind, "
                  "'copied', run, unit, vantage_id, provider, region, network_profile, started_at, status, error, env, "
                  "body FROM results WHERE id = ANY(%s)", (ids[:120],))  # fmt: skip
        c.execute("DELETE FROM results WHERE id = ANY(%s)", (ids[120:],))
        assert c.execute("SELECT count(*) FROM dns_hourly_keys WHERE campaign = 'copied'").fetchone()[0] > 5
    after = check(empty_db)
    assert after != sizes
    # every record of some keys deleted: their rows go (a key never seen has none either)
    with psycopg.connect(empty_db) as c:
        c.execute("DELETE FROM results WHERE campaign = 'copied'")
        assert c.execute("SELECT count(*) FROM v_dns_hourly WHERE campaign = 'copied'").fetchone()[0] == 0
        assert c.execute("SELECT count(*) FROM dns_hourly WHERE n = 0").fetchone()[0] == 0
    check(empty_db)


def test_archive_restore_rebuilds_dns_hourly(empty_db, records, tmp_path):
    from dnscamp.opendata import archive

    from tests.local.test_rollups_daily import scratch_db

    ingest([records], empty_db, workers=1)
    with psycopg.connect(empty_db) as c:
        archive.write(c, "hourly", str(tmp_path / "arch"))
    with scratch_db() as url:
        archive.restore(str(tmp_path / "arch"), url, workers=1)
        archive.restore(str(tmp_path / "arch"), url, workers=1)  # idempotent
        assert check(url)["hourly"] > 20
        q = "SELECT * FROM v_dns_hourly WHERE campaign = 'hourly' ORDER BY 1, 2, 3, 4, 5, 6"
        with psycopg.connect(url) as a, psycopg.connect(empty_db) as b:
            assert a.execute(q).fetchall() == b.execute(q).fetchall()


def test_the_upgrade_moves_the_rows_unchanged_and_the_downgrade_moves_them_back(fresh_db, records):
    ingest([records], fresh_db, workers=1)
    at_head = _views(fresh_db)
    assert len(at_head["hourly"]) > 100

    migrate.downgrade(_sa(fresh_db), BEFORE)
    with psycopg.connect(fresh_db) as c:
        assert c.execute("SELECT to_regclass('dns_hourly_keys')").fetchone()[0] is None
        assert c.execute("SELECT count(*) FROM dns_hourly").fetchone()[0] == len(at_head["hourly"])
    assert _views(fresh_db) == at_head
    check(fresh_db)
    # records written before 0022 (an older dnscamp's ingest, its upsert of 0013's layout; the
    # results view's trigger of 0013), then the upgrade
    (records.parent / "old").mkdir()
    recs = gen.dns_queries(300, np.random.default_rng(13), "hourly", gen.END, vantages=gen.VANTAGES[:4], days=1)
    (records.parent / "old" / "old.jsonl").write_bytes(b"".join(gen.orjson.dumps(r) + b"\n" for r in recs))
    assert ingest_with_old_code([records.parent / "old"], fresh_db, records.parent / "code") == 300
    with psycopg.connect(fresh_db) as c:
        c.execute("INSERT INTO results (id, schema, kind, campaign, run, unit, vantage_id, provider, region, "
                  "network_profile, started_at, status, error, env, body) SELECT gen_random_uuid(), schema, kind, "
                  "'before-0022', run, unit, vantage_id, provider, region, NULL, started_at, status, error, env, body - 'resolver' "
                  "FROM results WHERE kind = 'dns_query' ORDER BY id LIMIT 60")  # fmt: skip
    before = _views(fresh_db)
    assert len(before["hourly"]) > len(at_head["hourly"])

    migrate.upgrade(_sa(fresh_db), "0022_hourly_keys")
    assert _views(fresh_db) == before
    check(fresh_db)
    with psycopg.connect(fresh_db) as c:
        assert c.execute("SELECT count(*) FROM dns_hourly_keys").fetchone()[0] == c.execute(
            "SELECT count(DISTINCT (campaign, vantage_id, network_profile, resolver, transport)) FROM v_dns_hourly"
        ).fetchone()[0]
    # and ingest goes on from there: new records of known and new keys
    more = records.parent / "more"
    more.mkdir()
    recs = gen.dns_queries(500, np.random.default_rng(12), "hourly", gen.END, vantages=gen.VANTAGES[:5], days=1)
    (more / "more.jsonl").write_bytes(b"".join(gen.orjson.dumps(r) + b"\n" for r in recs))
    assert ingest([more], fresh_db, workers=1).ingested == 500
    check(fresh_db)


def test_two_ingests_adding_the_same_new_key_at_once_share_it(empty_db):
    """The second ingest's key insert waits for the first's transaction, then reads the key back
    (ON CONFLICT DO UPDATE ... RETURNING) instead of failing or adding a second one."""
    rows = [("2026-11-01 10:00+00", "race", "v1", None, "1.1.1.1", "doh", "ok", 300),
            ("2026-11-01 10:00+00", "race", "v1", "p", None, "do53", "timeout", None),
            ("2026-11-01 11:00+00", "race", "v2", None, None, None, "ok", 310)]

    def add(c) -> None:  # the first row as a parser's sum, the others as per-record rows
        c.execute("SELECT dnscamp_rollup_temp()")
        c.execute(rollups.SUM_TABLES)
        c.execute("INSERT INTO dnscamp_hourly_sum (hour, campaign, vantage_id, network_profile, resolver, transport, "
                  "bucket, n, failures) VALUES (%s, %s, %s, %s, %s, %s, %s, 1, 0)", rows[0][:6] + rows[0][7:])  # fmt: skip
        c.cursor().executemany("INSERT INTO dnscamp_dns_in (hour, campaign, vantage_id, network_profile, resolver, "
                               "transport, status, bucket) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)", rows[1:])  # fmt: skip
        c.execute(rollups.HOURLY_UPSERT)

    with psycopg.connect(empty_db) as a, psycopg.connect(empty_db) as b:
        add(a)  # not committed yet
        errors: list[BaseException] = []

        def second() -> None:
            try:
                add(b)
                b.commit()
            except BaseException as e:  # noqa: BLE001 - reported by the assertion below
                errors.append(e)

        t = threading.Thread(target=second)
        t.start()
        time.sleep(0.5)
        assert t.is_alive()  # waiting for a's keys
        a.commit()
        t.join(10)
        assert not t.is_alive() and errors == []
        assert a.execute("SELECT count(*) FROM dns_hourly_keys WHERE campaign = 'race'").fetchone()[0] == 3
        got = a.execute("SELECT vantage_id, network_profile, resolver, transport, n, failures, timed "
                        "FROM v_dns_hourly WHERE campaign = 'race' ORDER BY 1, 2").fetchall()  # fmt: skip
    assert got == [("v1", "p", None, "do53", 2, 2, 0), ("v1", None, "1.1.1.1", "doh", 2, 0, 2),
                   ("v2", None, None, None, 2, 0, 2)]  # fmt: skip
