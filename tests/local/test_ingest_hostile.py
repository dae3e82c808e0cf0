"""Ingest against hostile input and faults: every code point class round-trips
byte-equal, every bad line is quarantined (never a crash, never blocking other files),
quarantine rows are resolved, id conflicts are told from duplicates, counts equal rows
written, a stopped database ends in one line, workers die with the ingest process."""

import gzip
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import psycopg
import pytest

import collectors.read as cr
from collectors.ingest import CountMismatch, ingest

pytestmark = pytest.mark.local
ROOT = Path(__file__).resolve().parents[2]
V1 = ROOT / "tests" / "fixtures" / "results" / "v1"
FRAMING = ROOT / "tests" / "fixtures" / "results" / "hostile" / "framing.jsonl"
CLI = [str(ROOT / ".venv" / "bin" / "dnscamp")]


def cli_env(url: str) -> dict:
    return dict(os.environ, DNSCAMP_DATABASE_NAME=url.split("/")[3].split("?")[0])


def good(n: int, **changes) -> list[str]:
    """n valid ping records with fresh ids (from the v1 fixture)."""
    base = json.loads((V1 / "ping.jsonl").read_text().splitlines()[0])
    return [json.dumps(dict(base, id=str(uuid.uuid4()), **changes)) for _ in range(n)]


def quarantine(url: str) -> dict[tuple[str, int], str]:
    with psycopg.connect(url) as c:
        return {(Path(f).name, ln): r for f, ln, r in c.execute("SELECT source_file, line, reason FROM quarantine")}


def test_every_code_point_class_round_trips_byte_equal(empty_db):
    """Line/paragraph separators, C0/C1 controls, DEL, emoji, RTL marks, COPY's own markers:
    raw and escaped, in error, env (keys too) and body. The old text COPY split such rows and
    stored fewer than it counted."""
    lines = FRAMING.read_text(encoding="utf-8").split("\n")[:-1]  # split on LF only, as JSONL is
    recs = {r["id"]: r for r in map(json.loads, lines[:47])}  # 48-50: lone surrogates, NUL
    assert len(recs) == 47
    stats = ingest([FRAMING], empty_db)
    assert stats.as_json() == {"ingested": 47, "duplicates": 0, "quarantined": 3}
    with psycopg.connect(empty_db) as c:
        assert c.execute("SELECT count(*) FROM results").fetchone()[0] == 47
        rows = c.execute(
            "SELECT v.id::text, v.unit, v.error, r.env, r.body, r.source_line FROM v_results v JOIN results r USING (id)"
        ).fetchall()
    assert len(rows) == 47
    for rid, unit, error, env, body, line in rows:
        want = recs[rid]
        assert (unit, error, env, body) == (want["unit"], want["error"], want["env"], want["body"]), unit
        assert json.loads(lines[line - 1])["id"] == rid  # each row paired with its own line
    # Lone surrogates and NUL cannot be PostgreSQL text: quarantined, each with a reason.
    assert sorted(ln for _, ln in quarantine(empty_db)) == [48, 49, 50]
    assert ingest([FRAMING], empty_db).as_json() == {"ingested": 0, "duplicates": 47, "quarantined": 3}


def _write(path: Path, lines: list) -> None:
    path.write_bytes(b"".join((x if isinstance(x, bytes) else x.encode()) + b"\n" for x in lines))


def test_bad_lines_and_files_are_quarantined_never_a_crash(empty_db, tmp_path):
    d = tmp_path / "spool"
    d.mkdir()
    g = good(20)
    nan = g[1].replace('"env": {', '"env": {"x": NaN, ')
    inf = g[2].replace('"interval_ms": 10.0', '"interval_ms": Infinity')
    ninf = g[3].replace('"timeout_ms": 1000.0', '"timeout_ms": -Infinity')
    nul_raw = g[4].replace('"fixtures"', '"fix\x00tures"').encode()
    nul_esc = g[5].replace('"env": {', '"env": {"x": "a\\u0000b", ')
    bad_utf8 = g[6].replace('"fixtures"', '"fix\udcfftures"').encode("utf-8", "surrogateescape")
    surrogate = g[7].replace('"fixtures"', '"fix\\ud800tures"')
    huge = g[8].replace('"interval_ms": 10.0', '"interval_ms": 1e999')
    _write(d / "a.jsonl", [g[0], nan, inf, ninf, b"\xef\xbb\xbf" + g[9].encode(), nul_raw, nul_esc,
                           bad_utf8, surrogate, g[10], huge, "\f", "  ", g[11]])  # fmt: skip
    _write(d / "b_bom.jsonl", [b"\xef\xbb\xbf" + g[12].encode(), g[13]])
    _write(d / "c_not_gzip.jsonl.gz", [g[14]])
    (d / "d_gzip_named_plain.jsonl").write_bytes(gzip.compress((g[15] + "\n" + g[16] + "\n").encode()))
    many = good(3000)
    data = gzip.compress(("\n".join(many) + "\n").encode())
    (d / "e_cut.jsonl.gz").write_bytes(data[: len(data) // 2])
    with open(d / "f_long.jsonl", "wb") as f:  # over MAX_LINE_BYTES: skipped in pieces
        f.write(g[17].encode() + b"\n" + b'{"x": "' + b"y" * (cr.MAX_LINE_BYTES + 1000) + b'"}\n' + g[18].encode() + b"\n")
    _write(d / "z.jsonl", [g[19]])

    r = subprocess.run([*CLI, "ingest", "--json", str(d)], capture_output=True, text=True, env=cli_env(empty_db))
    assert r.returncode == 3, r.stderr
    assert "Traceback" not in r.stderr
    out = json.loads(r.stdout)
    q = quarantine(empty_db)
    want_bad = {("a.jsonl", n) for n in (2, 3, 4, 5, 6, 7, 8, 9, 11, 12)} | {
        ("b_bom.jsonl", 1), ("c_not_gzip.jsonl.gz", 1), ("f_long.jsonl", 2)}  # fmt: skip
    cut = [k for k in q if k[0] == "e_cut.jsonl.gz"]
    assert len(cut) == 1 and "corrupt file" in q[cut[0]]
    assert set(q) - set(cut) == want_bad
    assert "BOM" in q[("b_bom.jsonl", 1)] and "BOM" in q[("a.jsonl", 5)]
    assert "not gzip" in q[("c_not_gzip.jsonl.gz", 1)]
    assert "longer than 16 MiB" in q[("f_long.jsonl", 2)]
    assert all("\n" not in reason for reason in q.values())
    with psycopg.connect(empty_db) as c:
        stored = c.execute("SELECT count(*) FROM results").fetchone()[0]
        cut_stored = c.execute("SELECT count(*) FROM results WHERE source_file LIKE '%e_cut%'").fetchone()[0]
    # a: 1, 10, 14; b: 2; d: 2 (gzip recognised by content); f: 1, 3; z: 1; e: what was readable
    assert 0 < cut_stored < 3000 and stored == 3 + 1 + 2 + 2 + 1 + cut_stored
    assert out == {"ingested": stored, "duplicates": 0, "quarantined": len(q)}


def test_fixed_line_resolves_its_quarantine_row(empty_db, tmp_path):
    g = good(3)
    f = tmp_path / "a.jsonl"
    _write(f, [g[0], g[1][: len(g[1]) // 2], g[2]])
    assert ingest([f], empty_db).as_json() == {"ingested": 2, "duplicates": 0, "quarantined": 1}
    assert list(quarantine(empty_db)) == [("a.jsonl", 2)]
    _write(f, g)  # the researcher repairs line 2
    assert ingest([f], empty_db).as_json() == {"ingested": 1, "duplicates": 2, "quarantined": 0}
    assert quarantine(empty_db) == {}
    r = subprocess.run([*CLI, "db", "status", "--json"], capture_output=True, text=True, env=cli_env(empty_db))
    assert json.loads(r.stdout)["quarantined"] == 0


def test_different_record_under_stored_id_is_an_id_conflict(empty_db, tmp_path):
    (a,) = good(1)
    rec = json.loads(a)
    same = json.dumps(dict(reversed(list(rec.items()))), indent=None, separators=(", ", " : "))  # other key order, spacing
    other = json.dumps(dict(rec, run="r2"))
    _write(tmp_path / "1.jsonl", [a])
    _write(tmp_path / "2.jsonl", [same, other])
    stats = ingest([tmp_path], empty_db)
    assert stats.as_json() == {"ingested": 1, "duplicates": 1, "quarantined": 1}
    with psycopg.connect(empty_db) as c:
        stored = c.execute("SELECT content_sha256 FROM results").fetchone()[0]
    reason = quarantine(empty_db)[("2.jsonl", 2)]
    assert reason.startswith(f"id_conflict: record {rec['id']} is stored with content hash {stored.hex()}")
    assert f"1.jsonl:1); this line's is " in reason
    theirs = reason.rsplit(" is ", 1)[1]  # the line's hash: 16 bytes (0021), not the stored one
    assert len(stored) == 16 and len(theirs) == 32 and theirs != stored.hex()
    # within one batch too: the second, different line under the same id is the conflict
    (b,) = good(1)
    _write(tmp_path / "3.jsonl", [b, json.dumps(dict(json.loads(b), run="r9"))])
    assert ingest([tmp_path / "3.jsonl"], empty_db).as_json() == {"ingested": 1, "duplicates": 0, "quarantined": 1}


def test_integers_beyond_64_bits_are_stored_exactly(empty_db, tmp_path):
    """orjson reads them as floats; the store must keep the number the agent wrote."""
    rec = json.loads(good(1)[0])
    big = [2**70, -(2**63) - 1, 2**64 - 1, 12345678901234567890123]
    rec["env"]["big"] = big
    rec["body"]["rtts_ms"] = [2.5, 1180591620717411303424, 15.0]  # a float field given an integer
    f = tmp_path / "big.jsonl"
    _write(f, [json.dumps(rec)])
    assert ingest([f], empty_db).as_json() == {"ingested": 1, "duplicates": 0, "quarantined": 0}
    with psycopg.connect(empty_db) as c:
        env, body = c.execute("SELECT env, body FROM results").fetchone()
    assert env["big"] == big and body["rtts_ms"] == rec["body"]["rtts_ms"]
    assert ingest([f], empty_db).as_json() == {"ingested": 0, "duplicates": 1, "quarantined": 0}


def test_migration_backfills_the_hash_ingest_computes(fresh_db, tmp_path):
    """Rows stored before 0008 get content_sha256 from their stored columns; it equals what
    ingest computes from the line, so re-ingesting them finds duplicates, not conflicts."""
    import importlib.util

    import sqlalchemy as sa

    rec = json.loads(good(1)[0])
    rec["env"]["big"] = 2**70  # canonical JSON by the stdlib on both sides
    _write(tmp_path / "big.jsonl", [json.dumps(rec)])
    files = [*sorted(V1.glob("*.jsonl")), tmp_path / "big.jsonl"]
    first = ingest(files, fresh_db)
    with psycopg.connect(fresh_db) as c:
        before = dict(c.execute("SELECT id, content_sha256 FROM results").fetchall())
    # the one-table store of 0008-0011 (migration 0012's downgrade keeps the records)
    from db import migrate

    sa_url = fresh_db.replace("postgresql://", "postgresql+psycopg://", 1)
    migrate.downgrade(sa_url, "0011_dashboard_views")
    with psycopg.connect(fresh_db) as c:
        c.execute("UPDATE results SET content_sha256 = NULL")
    spec = importlib.util.spec_from_file_location("m0008", ROOT / "db/migrations/versions/0008_ingest_hardening.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    engine = sa.create_engine(fresh_db.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.begin() as conn:
        m._backfill(conn, batch=5)
    engine.dispose()
    with psycopg.connect(fresh_db) as c:
        after = dict(c.execute("SELECT id, content_sha256 FROM results").fetchall())
    assert after == before and None not in after.values() and len(after) == first.ingested
    migrate.upgrade(sa_url)
    assert ingest(files, fresh_db).as_json() == {"ingested": 0, "duplicates": first.ingested, "quarantined": 0}


def test_count_differing_from_rows_written_fails_the_batch(fresh_db, tmp_path):
    """COPY's row count is checked before commit: a trigger that silently drops a row makes
    the batch fail loudly and roll back, instead of counting a record that is not there."""
    with psycopg.connect(fresh_db, autocommit=True) as c:
        c.execute(
            "CREATE FUNCTION drop_one() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN IF (SELECT run FROM contexts WHERE id = NEW.ctx_id) = 'drop-me' THEN RETURN NULL; END IF; "
            "RETURN NEW; END $$"
        )
        c.execute("CREATE TRIGGER drop_one BEFORE INSERT ON generic_results FOR EACH ROW EXECUTE FUNCTION drop_one()")
    f = tmp_path / "a.jsonl"
    _write(f, good(2) + good(1, run="drop-me"))
    with pytest.raises(CountMismatch, match="COPY stored 2 rows of 3 sent"):
        ingest([f], fresh_db)
    with psycopg.connect(fresh_db) as c:
        assert c.execute("SELECT count(*) FROM results").fetchone()[0] == 0


def big_file(path: Path, n: int) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    from ingest_bench import generate

    generate(path, n, seed=n)


def test_database_stopped_during_ingest_one_line_then_rerun_completes(empty_db, tmp_path):
    """The server ending the connection mid-run (what `dnscamp db down` does to clients):
    one line naming what happened and what to run, exit 1, no traceback; committed batches
    stay and the same ingest again completes."""
    f = tmp_path / "many.jsonl"
    big_file(f, 150_000)
    env = cli_env(empty_db)
    dbname = env["DNSCAMP_DATABASE_NAME"]
    p = subprocess.Popen([*CLI, "ingest", "--json", str(f)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    with psycopg.connect(empty_db, autocommit=True) as c:
        deadline = time.monotonic() + 60
        while c.execute("SELECT count(*) FROM results").fetchone()[0] == 0:
            assert time.monotonic() < deadline and p.poll() is None, p.stderr.read() if p.poll() is not None else ""
            time.sleep(0.05)
        c.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (dbname,),
        )
    out, err = p.communicate(timeout=60)
    assert p.returncode == 1, (out, err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "run `dnscamp db up`" in err and "same ingest again" in err and "kept" in err
    r = subprocess.run([*CLI, "ingest", "--json", str(f)], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    with psycopg.connect(empty_db) as c:
        assert c.execute("SELECT count(*) FROM results").fetchone()[0] == 150_000


def test_parser_workers_die_with_the_ingest_process(empty_db, tmp_path):
    f = tmp_path / "many.jsonl"
    big_file(f, 300_000)
    p = subprocess.Popen([*CLI, "ingest", str(f)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=cli_env(empty_db))
    proc = psutil.Process(p.pid)
    deadline = time.monotonic() + 60
    while len(children := proc.children(recursive=True)) < 2:
        assert time.monotonic() < deadline and p.poll() is None, "ingest never started its workers"
        time.sleep(0.05)
    time.sleep(0.5)  # workers busy parsing
    os.kill(p.pid, signal.SIGKILL)  # the ingest process only, not its process group
    p.wait()
    gone, alive = psutil.wait_procs(children, timeout=3)
    alive = [c for c in alive if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
    assert not alive, f"workers left after kill -9 of their parent: {alive}"


def test_campaign_run_ingest_quarantines_bad_lines_and_goes_on(empty_db, tmp_path):
    """The ingest block of `campaign run` uses the same path: a hostile file in the run dir
    is quarantined line by line, the run's records are ingested, no traceback."""
    f = tmp_path / "spec.toml"
    f.write_text(
        '[campaign]\nname = "hostile"\nseed = 1\n[[vantages]]\nid = "here"\nprovider = "local"\n'
        '[kinds.ping]\ntargets = ["127.0.0.1"]\nprotocol = "icmp"\ncount = 1\ninterval_ms = 5\ntimeout_ms = 300\n'
    )
    env = dict(cli_env(empty_db), DNSCAMP_SPOOL=str(tmp_path / "spool"))
    run = [*CLI, "campaign", "run", str(f), "--json", "--no-report"]
    first = subprocess.run([*run, "--no-ingest"], capture_output=True, text=True, env=env)
    assert first.returncode == 0, first.stderr
    run_id = json.loads(first.stdout)["run"]
    (run_dir,) = (tmp_path / "spool" / "hostile").glob("*")
    g = good(2)
    _write(run_dir / "zz-hostile.jsonl", [g[0].replace('"env": {', '"env": {"x": NaN, '), b"\xef\xbb\xbf" + g[1].encode(), "\x00"])
    r = subprocess.run([*run, "--run", run_id], capture_output=True, text=True, env=env)
    assert r.returncode == 3 and "Traceback" not in r.stderr, r.stderr  # 3: something was quarantined
    assert json.loads(r.stdout)["ingest"] == {"ingested": 1, "duplicates": 0, "quarantined": 3}
    assert sorted(ln for name, ln in quarantine(empty_db) if name == "zz-hostile.jsonl") == [1, 2, 3]
