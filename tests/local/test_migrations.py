"""Migrations: one linear history; each revision creates the views frozen in it
(db/migrations/views/<revision>/), whatever db/views says today; every downgrade restores the
previous revision's schema exactly; the models (db/models.py) are the head's tables; a store
migrated by the dnscamp of before this change (two heads, 0005_atlas beside
0008_ingest_hardening) upgrades and keeps its records."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import tarfile
import uuid
import warnings
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from db import engine, migrate
from db.migrations import views as frozen
from db.models import Base
from db.views import all_views, view_sql

pytestmark = pytest.mark.local
ROOT = Path(__file__).resolve().parents[2]
V1 = ROOT / "tests" / "fixtures" / "results" / "v1"
SCRIPT = ScriptDirectory.from_config(migrate.alembic_config())
CHAIN = [s.revision for s in SCRIPT.walk_revisions()][::-1]  # base first
HEAD = CHAIN[-1]
# The last commit before the history was made linear: its migrations made the stores in use.
BEFORE_LINEAR = "7cf8a0a35f69f7c55349e98ee6a1f0403cf0d411"
KIND_VIEW = {"ping": "v_ping", "dns_query": "v_dns_query", "page_load": "v_page_load"}

# Everything a migration can change in the public schema, from pg_catalog, without oids.
# ACLs are compared as explicit lists (acldefault for a NULL acl), so that "granted then
# revoked" equals "never granted".


def _acl(acl: str, kind: str, owner: str) -> str:
    return ("(SELECT array_agg(format('%s:%s:%s', a.grantee::regrole, a.privilege_type, a.is_grantable) ORDER BY 1)"
            f" FROM aclexplode(coalesce({acl}, acldefault({kind}::\"char\", {owner}))) a)")


SCHEMA_QUERIES = {
    "relations": f"""SELECT c.relname, c.relkind, {_acl("c.relacl", "(CASE c.relkind WHEN 'S' THEN 's' ELSE 'r' END)", "c.relowner")}
        FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace ORDER BY 1""",
    "columns": """SELECT c.relname, array_agg(format('%s %s%s%s%s', a.attname, format_type(a.atttypid, a.atttypmod),
                         CASE WHEN a.attnotnull THEN ' not null' END, ' default ' || pg_get_expr(d.adbin, d.adrelid),
                         nullif(' identity ' || a.attidentity::text, ' identity ')) ORDER BY a.attnum)
        FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
        LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
        WHERE c.relnamespace = 'public'::regnamespace AND a.attnum > 0 AND NOT a.attisdropped GROUP BY 1 ORDER BY 1""",
    "views": """SELECT c.relname, pg_get_viewdef(c.oid, true) FROM pg_class c
        WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'v' ORDER BY 1""",
    "constraints": """SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint
        WHERE connamespace = 'public'::regnamespace ORDER BY 1, 2""",
    "indexes": "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1",
    "functions": """SELECT pg_get_functiondef(oid) FROM pg_proc WHERE pronamespace = 'public'::regnamespace ORDER BY 1""",
    "schema_acl": "SELECT " + _acl("nspacl", "'n'", "nspowner") + " FROM pg_namespace WHERE nspname = 'public'",
    "database_acl": "SELECT " + _acl("datacl", "'d'", "datdba") + " FROM pg_database WHERE datname = current_database()",
}


# Month partitions (0012_compact_store) are made by ingest when records of that month come, not
# by migrations: they and their indexes are left out of the comparison.
_PARTITION = re.compile(r"_p\d{4}_\d{2}(_|$)")


def schema_dump(url: str) -> dict[str, list[tuple]]:
    """The public schema from pg_catalog; Alembic's own table is left out (a downgrade to base
    empties it but leaves it), and so are month partitions."""
    with psycopg.connect(url) as c:
        dump = {k: c.execute(q).fetchall() for k, q in SCHEMA_QUERIES.items()}
    return {k: [r for r in rows if not str(r[0]).startswith("alembic_version") and not _PARTITION.search(str(r[0]))]
            for k, rows in dump.items()}


def _sa(url: str) -> str:
    return url.replace("postgresql://", "postgresql+psycopg://", 1)


def _upgrade(url: str, rev: str) -> None:
    migrate.upgrade(_sa(url), rev)


def _downgrade(url: str, rev: str | None) -> None:
    migrate.downgrade(_sa(url), rev or "base")


@pytest.fixture()
def blank_db(db_url):
    """A new database with nothing in it (the cluster's roles exist: they are cluster-wide)."""
    name = f"m_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(engine.database_url("owner", dbname="postgres"), autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
    yield name
    with psycopg.connect(engine.database_url("owner", dbname="postgres"), autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# --- (a) the graph --------------------------------------------------------------------------


def test_history_is_one_line():
    assert SCRIPT.get_heads() == [HEAD] and SCRIPT.get_bases() == [CHAIN[0]]
    for s in SCRIPT.walk_revisions():
        assert isinstance(s.down_revision, str) or (s.revision == CHAIN[0] and s.down_revision is None), s.revision
        assert not s.dependencies, s.revision
    assert CHAIN == sorted(CHAIN), "revision ids must sort in history order"
    # the existing ids are kept: stores at any of them stay valid
    assert CHAIN[:7] == ["0001_foundation", "0002_dns_query", "0003_page_load", "0005_atlas",
                         "0006_dns_cache_warmed", "0007_strict_records", "0008_ingest_hardening"]
    frozen_dirs = {p.name for p in frozen.HERE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert frozen_dirs <= set(CHAIN), "frozen views of a revision that does not exist"


def test_db_views_are_the_heads_frozen_sql():
    """db/views/*.sql (what researchers read) is what the head migration creates."""
    at_head = frozen.views_at(HEAD)
    assert sorted(at_head) == all_views()
    for name, rev in at_head.items():
        assert view_sql(name) == frozen.view_sql(rev, name), f"db/views/{name}.sql differs from {rev}'s"


# --- (b), (c) walking the history -----------------------------------------------------------


def _fixture_records() -> list[dict]:
    return [json.loads((V1 / f"{kind}.jsonl").read_text().splitlines()[0]) for kind in KIND_VIEW]


def _insert_result(conn, rec: dict, campaign: str) -> str:
    rid = str(uuid.uuid4())
    v = rec["vantage"]
    conn.execute(
        "INSERT INTO results (id, schema, kind, campaign, run, unit, vantage_id, provider, region, network_profile,"
        " started_at, status, error, env, body) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (rid, rec["schema"], rec["kind"], campaign, rec["run"], rec.get("unit"), v["id"], v["provider"], v.get("region"),
         v.get("network_profile"), rec["started_at"], rec["status"], rec.get("error"), json.dumps(rec.get("env", {})),
         json.dumps(rec["body"])),
    )
    return rid


def _insert_atlas(conn, campaign: str) -> int:
    msm = int(uuid.uuid4().int % 10**12)
    conn.execute("INSERT INTO atlas_measurements (msm_id, campaign, role) VALUES (%s, %s, 'probe_server')", (msm, campaign))
    raw = {}
    for typ in ("ping", "dns"):
        raw[typ] = conn.execute(
            "INSERT INTO atlas_results_raw (campaign, msm_id, prb_id, timestamp, type, status, raw)"
            " VALUES (%s, %s, 7, now(), %s, 'ok', '{}') RETURNING id", (campaign, msm, typ)).fetchone()[0]
    conn.execute("INSERT INTO atlas_ping (raw_id, campaign, msm_id, prb_id, timestamp, sent, received, rtts_ms, avg_ms,"
                 " status) VALUES (%s, %s, %s, 7, now(), 1, 1, '{12.5}', 12.5, 'ok')", (raw["ping"], campaign, msm))
    conn.execute("INSERT INTO atlas_dns (raw_id, campaign, msm_id, prb_id, timestamp, resolver, response_time_ms, status)"
                 " VALUES (%s, %s, %s, 7, now(), '192.0.2.53', 20.0, 'ok')", (raw["dns"], campaign, msm))
    conn.execute("INSERT INTO atlas_discovery (campaign, prb_id, resolver, method) VALUES (%s, 7, '192.0.2.53', 'whoami')",
                 (campaign,))
    return msm


def _views_differing_from_frozen(url: str, rev: str | None) -> list[str]:
    """Views whose definition in the database is not ``rev``'s frozen SQL (and views that are
    missing or should not be there). Oracle: re-creating a view from the frozen SQL inside a
    rolled-back transaction leaves pg_get_viewdef unchanged iff the view is that SQL."""
    expected = frozen.views_at(rev)
    bad = []
    with psycopg.connect(url) as c:
        # v_*: the readers' views (0012's ``results`` is the old table's compatibility view)
        present = {r[0] for r in c.execute("SELECT viewname FROM pg_views WHERE schemaname = 'public' AND viewname LIKE 'v\\_%'")}
        bad += sorted(present ^ set(expected))
        for name in sorted(present & set(expected)):
            before = c.execute("SELECT pg_get_viewdef(%s::regclass, true)", (name,)).fetchone()[0]
            try:
                c.execute(frozen.view_sql(expected[name], name))
                after = c.execute("SELECT pg_get_viewdef(%s::regclass, true)", (name,)).fetchone()[0]
            except psycopg.errors.InvalidTableDefinition:  # other columns: CREATE OR REPLACE refuses
                after = None
            c.rollback()
            if before != after:
                bad.append(name)
    return bad


def _unreadable_records(dbname: str, rev: str | None, step: str) -> list[str]:
    """Insert one record of each kind (and Atlas rows) as the schema at ``rev`` allows, then
    read each back as the reader role through every view present: what does not come back."""
    views = frozen.views_at(rev)
    if not views:
        return []
    campaign = f"walk-{step}"
    with psycopg.connect(engine.database_url("owner", dbname=dbname)) as c:
        ids = {KIND_VIEW[r["kind"]]: _insert_result(c, r, campaign) for r in _fixture_records()}
        msm = _insert_atlas(c, campaign) if "v_atlas_ping" in views else None
    missing = []
    with psycopg.connect(engine.database_url("reader", dbname=dbname)) as r:
        for view in views:
            if view == "v_results" or view in ids:
                want = set(ids.values()) if view == "v_results" else {ids[view]}
                got = {str(x[0]) for x in r.execute(f"SELECT id FROM {view} WHERE campaign = %s", (campaign,))}
                ok = want <= got
            elif view == "v_failures":
                ok = r.execute("SELECT sum(n) FROM v_failures WHERE campaign = %s", (campaign,)).fetchone()[0] == 3
            elif view in ("v_atlas_ping", "v_atlas_dns"):
                ok = r.execute(f"SELECT count(*) FROM {view} WHERE msm_id = %s", (msm,)).fetchone()[0] == 1
            elif view == "v_quicsocks_savings":  # one row per discovered probe
                ok = r.execute(f"SELECT count(*) FROM {view} WHERE campaign = %s", (campaign,)).fetchone()[0] == 1
            else:  # views of other tables (0011's dashboard views): they evaluate, below
                ok = True
            r.execute(f"SELECT * FROM {view}").fetchall()  # the whole view evaluates
            if not ok:
                missing.append(view)
    return missing


@pytest.fixture(scope="module")
def walk(db_url):
    """Upgrade one revision at a time base -> head, downgrade head -> base, upgrade again,
    on an empty database; after each step: the schema dump, the views that differ from the
    revision's frozen SQL, the views through which a fresh record did not read back."""
    name = f"walk_{os.getpid()}"
    admin = engine.database_url("owner", dbname="postgres")
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        c.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
    url = engine.database_url("owner", dbname=name)
    steps = []

    def observe(direction: str, rev: str | None) -> None:
        step = f"{direction}-{rev}"
        steps.append({"direction": direction, "rev": rev, "schema": schema_dump(url),
                      "not_frozen": _views_differing_from_frozen(url, rev),
                      "unreadable": _unreadable_records(name, rev, step)})

    observe("base", None)
    for rev in CHAIN:
        _upgrade(url, rev)
        observe("up", rev)
    for prev in [None, *CHAIN[:-1]][::-1]:
        _downgrade(url, prev)
        observe("down", prev)
    for rev in CHAIN:
        _upgrade(url, rev)
        observe("up2", rev)
    yield steps
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_views_at_every_step_are_that_revisions_frozen_sql(walk):
    assert {(s["direction"], s["rev"]): s["not_frozen"] for s in walk if s["not_frozen"]} == {}


def test_a_record_reads_back_through_every_view_at_every_step(walk):
    assert {(s["direction"], s["rev"]): s["unreadable"] for s in walk if s["unreadable"]} == {}


def test_downgrade_restores_the_previous_schema_exactly(walk):
    up = {s["rev"]: s["schema"] for s in walk if s["direction"] in ("base", "up")}
    down = {s["rev"]: s["schema"] for s in walk if s["direction"] == "down"}
    assert set(down) == set(up) - {HEAD}
    for rev, schema in down.items():
        for part in schema:
            assert schema[part] == up[rev][part], f"downgrade to {rev}: {part} differs from the upgrade to {rev}"


def test_upgrade_after_a_full_downgrade_rebuilds_the_same_schema(walk):
    first = {s["rev"]: s["schema"] for s in walk if s["direction"] == "up"}
    again = {s["rev"]: s["schema"] for s in walk if s["direction"] == "up2"}
    assert again == first


def test_the_reader_keeps_select_on_every_view_after_downgrades(walk):
    last = walk[-1]
    assert last["rev"] == HEAD
    acl = {name: grants for name, kind, grants in last["schema"]["relations"] if kind == "v" and name.startswith("v_")}
    assert sorted(acl) == all_views()
    assert all(f"{engine.READER}:SELECT:f" in g for g in acl.values()), acl


# --- (d) models ------------------------------------------------------------------------------


def test_models_match_the_schema_at_head(fresh_db):
    """compare_metadata reports what it can change; a generated column's expression it cannot,
    and only warns that it differs: that warning fails here too."""
    eng = sa.create_engine(_sa(fresh_db))
    try:
        with eng.connect() as conn, warnings.catch_warnings():
            warnings.filterwarnings("error", message="Computed default")
            ctx = MigrationContext.configure(conn, opts={"compare_type": True, "compare_server_default": True})
            diff = compare_metadata(ctx, Base.metadata)
    finally:
        eng.dispose()
    assert diff == []


# --- 0009 --------------------------------------------------------------------------------------


def test_v_dns_query_reads_the_engine_fields(empty_db):
    rec = _fixture_records()[1]
    assert rec["kind"] == "dns_query"
    bodies = {
        "getdns": {"engine": "getdns", "engine_version": "1.7.3", "engine_run_time_ms": 12},
        "absent": {},
        "hostile": {"engine": {"x": 1}, "engine_version": ["1"], "engine_run_time_ms": "1e400"},
    }
    with psycopg.connect(empty_db) as c:
        ids = {k: _insert_result(c, {**rec, "body": {**rec["body"], **extra}}, "engine") for k, extra in bodies.items()}
    with psycopg.connect(empty_db.replace("postgres@", f"{engine.READER}@", 1)) as r:
        rows = {str(i): v for i, *v in r.execute(
            "SELECT id, engine, engine_version, engine_run_time_ms FROM v_dns_query WHERE campaign = 'engine'")}
        types = dict(r.execute("SELECT column_name, data_type FROM information_schema.columns "
                               "WHERE table_name = 'v_dns_query' AND column_name LIKE 'engine%'").fetchall())
    assert rows[ids["getdns"]] == ["getdns", "1.7.3", 12.0]
    assert rows[ids["absent"]] == [None, None, None]
    assert rows[ids["hostile"]] == [None, None, None]
    assert types == {"engine": "text", "engine_version": "text", "engine_run_time_ms": "double precision"}


# --- (e) a store made before this change ------------------------------------------------------

_OLD_UPGRADE = """
import sys
import db
from db import migrate
assert db.__file__.startswith(sys.argv[2]), db.__file__  # the old package, not this checkout's
migrate.upgrade(sys.argv[1])
"""


def test_a_store_made_by_the_old_migrations_upgrades_and_keeps_its_records(blank_db, tmp_path):
    try:
        # its db/ with the collectors/ and vantage_agent/ of its time: that 0008 ran live ingest code
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", BEFORE_LINEAR, "db", "collectors", "vantage_agent"],
                                 capture_output=True, check=True)  # fmt: skip
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.fail(f"this test needs git and the repository's history (commit {BEFORE_LINEAR[:12]}): {e}")
    tarfile.open(fileobj=io.BytesIO(archive.stdout)).extractall(tmp_path / "old", filter="data")
    url = engine.database_url("owner", dbname=blank_db)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "old"), str(ROOT)])}
    subprocess.run([sys.executable, "-c", _OLD_UPGRADE, _sa(url), str(tmp_path / "old")], env=env, check=True,
                   cwd=tmp_path)
    # the records as that store holds them (today's ingest writes today's tables)
    with psycopg.connect(url) as c:
        for f in sorted(V1.glob("*.jsonl")):
            for line in f.read_text().splitlines():
                _insert_result(c, json.loads(line), "old-store")
    read = "SELECT id, content_sha256, env, body FROM results ORDER BY id"
    with psycopg.connect(url) as c:
        assert sorted(r[0] for r in c.execute("SELECT version_num FROM alembic_version")) == \
            ["0005_atlas", "0008_ingest_hardening"]  # two heads: what those stores say
        before = c.execute(read).fetchall()
        dns_before = c.execute("SELECT count(*) FROM v_dns_query").fetchone()[0]

    _upgrade(url, "heads")

    with psycopg.connect(url) as c:
        assert [r[0] for r in c.execute("SELECT version_num FROM alembic_version")] == [HEAD]
        assert c.execute(read).fetchall() == before
        assert c.execute("SELECT count(*) FROM v_dns_query WHERE engine IS NULL").fetchone()[0] == dns_before > 0
    assert _views_differing_from_frozen(url, HEAD) == []


# --- 0012: the compact store -------------------------------------------------------------------

HOSTILE = ROOT / "tests" / "fixtures" / "results" / "hostile"


def _view_columns(url: str) -> dict[str, list[str]]:
    """The columns of every reader view of 0011 as they are now (later revisions append some)."""
    with psycopg.connect(url) as c:
        return {v: [d.name for d in c.execute(f"SELECT * FROM {v} LIMIT 0").description]
                for v in frozen.views_at("0011_dashboard_views")}


def _every_view(url: str, cols: dict[str, list[str]]) -> dict[str, list[str]]:
    """Every row of every reader view of 0011 (before the compact store), in 0011's columns
    ``cols``, as sorted text."""
    with psycopg.connect(url) as c:
        return {v: sorted(str(r) for r in c.execute(f"SELECT {', '.join(map(_quote, names))} FROM {v}"))
                for v, names in cols.items()}


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def test_0012_moves_the_records_and_the_views_give_the_same_rows(fresh_db):
    """A store at 0011 with records (every fixture line that parses as JSON, valid or not: rows
    of older, laxer dnscamps included, and some with content hashes) upgrades to the compact
    store (and its rollups, 0013: v_failures reads one): every view gives the same rows,
    `results` the same records; and back down."""
    from tests.local.test_views_hostile import LEGACY

    _downgrade(fresh_db, "0011_dashboard_views")
    lines = [ln for f in sorted([*V1.glob("*.jsonl"), *HOSTILE.glob("*.jsonl")]) for ln in f.read_text().splitlines()]
    with psycopg.connect(fresh_db) as c:
        n = 0
        for line in lines:
            try:
                rec = json.loads(line)
                _insert_result(c, rec, f"c{n % 3}")
                n += 1
            except (ValueError, KeyError, TypeError, psycopg.Error):
                c.rollback()  # not a record a table could hold (NUL, not an object...)
        for kind, body in LEGACY.items():
            rec = {**_fixture_records()[0], "kind": kind, "body": body}
            _insert_result(c, rec, "legacy")
        c.execute("UPDATE results SET content_sha256 = sha256(id::text::bytea) WHERE campaign = 'c1'")
        c.commit()
        assert n > 60
        read = "SELECT * FROM results ORDER BY id"
        cur = c.execute(read)
        before = cur.fetchall()
        assert cur.description[-1].name == "content_sha256"
    cols = _view_columns(fresh_db)
    views_before = _every_view(fresh_db, cols)
    assert sum(map(len, views_before.values())) > 100

    # content_sha256 (the last column): its first 16 bytes from 0021 on; NULL after 0021's downgrade
    short = [(*r[:-1], r[-1] and r[-1][:16]) for r in before]
    _upgrade(fresh_db, HEAD)
    with psycopg.connect(fresh_db) as c:
        assert c.execute(read).fetchall() == short
        typed = c.execute("SELECT count(*) FROM dns_queries").fetchone()[0]
        assert 0 < typed < c.execute("SELECT count(*) FROM v_dns_query").fetchone()[0]  # the legacy row stays whole
    assert _every_view(fresh_db, cols) == views_before

    _downgrade(fresh_db, "0011_dashboard_views")
    with psycopg.connect(fresh_db) as c:
        assert c.execute(read).fetchall() == [(*r[:-1], None) for r in before]
    assert _every_view(fresh_db, cols) == views_before
    _upgrade(fresh_db, HEAD)
