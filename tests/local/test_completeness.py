"""Completeness proven: runs shipped by the agent's own code to moto's S3 (server mode), their
manifests read by the collector, reconciled in v_run_completeness and reported by
`dnscamp campaign completeness`; an object deleted from S3 is named, a run without its
manifest is named, a corrupt manifest is one line and quarantined, never a crash."""

from __future__ import annotations

import gzip
import hashlib
import itertools
import json
from pathlib import Path
from urllib.parse import urlparse

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collectors import manifest as mf
from collectors import s3 as coll
from dnscamp import completeness
from tests.local.test_pipeline_collect import BUCKET, counts, record_lines
from tests.scaffolding.moto_s3 import s3_server
from vantage_agent import ship

pytestmark = pytest.mark.local
CAMPAIGN = "cmp"
R1, R2, R3, R4 = (f"20261127T{h:02d}0000Z-us-east-2-{h:06x}" for h in (10, 11, 12, 13))
_SEEDS = itertools.count(500)  # each unit file its own record ids


@pytest.fixture()
def moto(monkeypatch):
    with s3_server(monkeypatch, BUCKET) as m:
        yield m


def spool_run(spool: Path, run: str, units: list[str], planned: list[str] | None = None) -> None:
    """A completed run as the runner leaves it: unit files, planned.json, complete.json."""
    d = spool / CAMPAIGN / run
    d.mkdir(parents=True)
    for u in units:
        recs = [json.loads(ln) | {"campaign": CAMPAIGN} for ln in record_lines(3, run, f"{u}-", seed=next(_SEEDS)).splitlines()]
        (d / f"{u}.jsonl").write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in recs))
    (d / "planned.json").write_text(json.dumps({"units": planned if planned is not None else units}))
    (d / "complete.json").write_text(json.dumps({"run": run}))


def built_manifest(spool: Path, vantage: str, run: str) -> dict:
    """The manifest as the agent ships it (the run's shipped unit files, their gzip's sha256)."""
    d = spool / CAMPAIGN / run
    objects = []
    for f in sorted(d.glob("*.jsonl")):
        body = ship.gz(f.read_bytes())
        unit = f.name[: -len(".jsonl")]
        objects.append({"unit": unit, "key": ship.object_key(CAMPAIGN, vantage, run, unit),
                        "sha256": hashlib.sha256(body).hexdigest(), "bytes": len(body),
                        "records": len(f.read_bytes().splitlines())})  # fmt: skip
    return {"schema": 1, "campaign": CAMPAIGN, "vantage": vantage, "region": "us-east-2", "instance_id": "i-0abc",
            "run": run, "units_planned": json.loads((d / "planned.json").read_text())["units"], "objects": objects,
            "artifacts": [], "complete": json.loads((d / "complete.json").read_text())}  # fmt: skip


def manifest_key(vantage: str, run: str) -> str:
    return f"results/{CAMPAIGN}/{vantage}/{run}/manifest.json"


def ship_with_manifest(moto, spool: Path, vantage: str, run: str) -> None:
    """`agent ship` as the vantage runs it; when this agent does not ship manifests itself,
    the manifest it would ship is PUT after the units, as the agent does (last)."""
    out = ship.ship(spool, BUCKET, vantage, campaign=CAMPAIGN)
    assert out.pending == 0 and not out.errors, out
    key = manifest_key(vantage, run)
    if "Contents" not in moto.client.list_objects_v2(Bucket=BUCKET, Prefix=key):
        moto.client.put_object(Bucket=BUCKET, Key=key, Body=json.dumps(built_manifest(spool, vantage, run)).encode())


def role_url(owner_url: str, role: str) -> str:
    from db import engine

    return engine.database_url(role, dbname=urlparse(owner_url).path.lstrip("/"))


def by_run(url: str) -> dict[str, completeness.RunCompleteness]:
    return {r.run: r for r in completeness.report(role_url(url, "reader"), CAMPAIGN)}


def test_a_deleted_object_a_missing_manifest_and_a_corrupt_one_are_named(moto, tmp_path, empty_db, monkeypatch):
    sp1, sp2 = tmp_path / "v1", tmp_path / "v2"  # each vantage's own spool
    spool_run(sp1, R1, ["unit000", "unit001", "unit002"])
    ship_with_manifest(moto, sp1, "v1", R1)
    spool_run(sp1, R2, ["unit000", "unit001"])  # shipped, but its manifest never arrives
    ship.ship(sp1, BUCKET, "v1", campaign=CAMPAIGN)
    moto.client.delete_object(Bucket=BUCKET, Key=manifest_key("v1", R2))  # (an agent that ships it: lost after)
    spool_run(sp2, R3, ["unit000"], planned=["unit000", "unit009"])  # a unit planned, never made
    ship_with_manifest(moto, sp2, "v2", R3)
    spool_run(sp2, R4, ["unit000", "unit001"])  # its manifest is corrupt
    ship.ship(sp2, BUCKET, "v2", campaign=CAMPAIGN)
    bad = built_manifest(sp2, "v2", R4)
    bad["objects"][0]["sha256"] = "not-a-digest"
    moto.client.put_object(Bucket=BUCKET, Key=manifest_key("v2", R4), Body=json.dumps(bad).encode())
    gone = ship.object_key(CAMPAIGN, "v1", R1, "unit001")
    moto.client.delete_object(Bucket=BUCKET, Key=gone)

    st = coll.collect(f"s3://{BUCKET}/results/", role_url(empty_db, "writer"), client=moto.client)  # the collector's role
    assert (st.collected, st.manifests, st.manifests_corrupt, st.quarantined) == (7, 2, 1, 0)
    assert len(st.errors) == 1 and "\n" not in st.errors[0]
    assert st.errors[0] == (f"s3://{BUCKET}/{manifest_key('v2', R4)}: corrupt manifest: objects[0].sha256: "
                            "'not-a-digest' is not 64 lowercase hex digits")  # fmt: skip
    assert counts(empty_db) == (21, 21)  # the records of every run are stored, whatever their manifest

    runs = by_run(empty_db)  # as the reader role: the view's grant
    assert set(runs) == {R1, R2, R3, R4}
    r1 = runs[R1]
    assert (r1.manifest, r1.units_planned, r1.units_collected, r1.units_missing, r1.units_quarantined) == (True, 3, 2, 1, 0)
    assert r1.missing_objects == [gone] and r1.missing_units == ["unit001"] and not r1.complete
    assert r1.problems() == [f"v1/{R1}: unit unit001 missing: s3://{BUCKET}/{gone} not collected"]
    r2 = runs[R2]
    assert (r2.manifest, r2.manifest_error, r2.units_planned, r2.units_collected, r2.units_missing) == (False, None, None, 2, 0)
    assert "no manifest" in r2.problems()[0] and R2 in r2.problems()[0]
    r3 = runs[R3]
    assert (r3.manifest, r3.units_planned, r3.units_collected, r3.missing_units, r3.missing_objects) == (
        True, 2, 1, ["unit009"], [])  # fmt: skip
    assert r3.problems() == [f"v2/{R3}: unit unit009 missing: planned, not among the manifest's objects"]
    r4 = runs[R4]
    assert not r4.manifest and "objects[0].sha256" in r4.manifest_error and r4.units_collected == 2
    with psycopg.connect(empty_db) as c:
        q = c.execute("SELECT source_file, line, reason FROM quarantine").fetchall()
    assert q == [(f"s3://{BUCKET}/{manifest_key('v2', R4)}", 0,
                  "corrupt manifest: objects[0].sha256: 'not-a-digest' is not 64 lowercase hex digits")]  # fmt: skip

    # the command: every problem by name, exit 1
    from typer.testing import CliRunner

    from db import engine
    from dnscamp.cli import app

    real, reader = engine.database_url, role_url(empty_db, "reader")
    monkeypatch.setattr(engine, "database_url", lambda role="owner", **kw: reader if role == "reader" else real(role, **kw))
    r = CliRunner().invoke(app, ["campaign", "completeness", CAMPAIGN])
    assert r.exit_code == 1, r.output
    assert gone in r.stdout and f"v1/{R2}: no manifest" in r.stdout and "unit unit009 missing" in r.stdout
    assert "corrupt manifest: objects[0].sha256" in r.stdout
    assert f"{CAMPAIGN}: runs 4, complete 0, without a manifest 2; units planned 5, collected 7 (60 % of planned), " \
           "missing 2, quarantined 0" in r.stdout  # fmt: skip
    r = CliRunner().invoke(app, ["campaign", "completeness", CAMPAIGN, "--json"])
    out = json.loads(r.stdout)
    assert r.exit_code == 1 and out["runs_complete"] == 0 and len(out["problems"]) == 4
    assert [x["run"] for x in out["runs"]] == [R1, R2, R3, R4] and out["runs"][0]["missing_objects"] == [gone]
    r = CliRunner().invoke(app, ["campaign", "completeness", "no-such-campaign"])
    assert r.exit_code == 1 and "campaign no-such-campaign: no run in the store" in r.stderr

    # repaired: the agent ships the lost unit again (its ledger line gone) and a good manifest
    # for R4; R2's arrives late. Unchanged objects are not downloaded again.
    (sp1 / CAMPAIGN / R1 / ship.LEDGER).unlink()
    ship.ship(sp1, BUCKET, "v1", campaign=CAMPAIGN)
    for sp, v, run in ((sp2, "v2", R4), (sp1, "v1", R2)):
        moto.client.put_object(Bucket=BUCKET, Key=manifest_key(v, run), Body=json.dumps(built_manifest(sp, v, run)).encode())
    st = coll.collect(f"s3://{BUCKET}/results/", empty_db, client=moto.client)
    # (an agent that ships manifests ships R1's again with its unit: read again if its bytes changed)
    assert (st.collected, st.duplicates, st.manifests_corrupt) == (1, 0, 0) and st.manifests in (2, 3)
    runs = by_run(empty_db)
    assert [r.run for r in runs.values() if r.complete] == [R1, R2, R4] and runs[R3].missing_units == ["unit009"]
    with psycopg.connect(empty_db) as c:
        assert c.execute("SELECT count(*) FROM quarantine").fetchone()[0] == 0  # the fixed manifest's row is gone
    assert counts(empty_db) == (24, 24)


def test_a_quarantined_unit_and_a_changed_object_count_against_their_run(moto, tmp_path, empty_db):
    spool = tmp_path / "spool"
    spool_run(spool, R1, ["unit000", "unit001"])
    ship_with_manifest(moto, spool, "v1", R1)
    key0, key1 = (ship.object_key(CAMPAIGN, "v1", R1, u) for u in ("unit000", "unit001"))
    body = record_lines(2, R1, seed=91) + b'{"schema": broken\n'
    moto.client.put_object(Bucket=BUCKET, Key=key0, Body=gzip.compress(body, mtime=0))  # not what the manifest says
    coll.collect(f"s3://{BUCKET}/results/", empty_db, client=moto.client)
    r = by_run(empty_db)[R1]
    # unit000's object is not the one the manifest describes (another sha256): missing, by key
    assert (r.units_collected, r.units_missing, r.missing_objects) == (1, 1, [key0])
    spool_run(spool, R2, ["unit000"])
    ship_with_manifest(moto, spool, "v1", R2)
    k = ship.object_key(CAMPAIGN, "v1", R2, "unit000")
    with psycopg.connect(empty_db, autocommit=True) as c:  # a line of that unit later in quarantine
        c.execute("INSERT INTO quarantine (source_file, line, reason, raw) VALUES (%s, 7, 'invalid JSON: x', 'x')",
                  (f"s3://{BUCKET}/{k}",))  # fmt: skip
    coll.collect(f"s3://{BUCKET}/results/", empty_db, client=moto.client)
    r2 = by_run(empty_db)[R2]
    assert (r2.complete, r2.units_collected, r2.units_quarantined) == (True, 1, 1)
    assert key1 not in by_run(empty_db)[R1].missing_objects


# --- the manifest parser on hostile input ----------------------------------------------------------

KEY = f"results/{CAMPAIGN}/v1/{R1}/manifest.json"
GOOD = {"schema": 1, "campaign": CAMPAIGN, "vantage": "v1", "region": None, "instance_id": None, "run": R1,
        "units_planned": ["a"], "objects": [{"unit": "a", "key": f"results/{CAMPAIGN}/v1/{R1}/a.jsonl.gz",
                                             "sha256": "0" * 64, "bytes": 10, "records": 2}],
        "artifacts": [], "complete": {}}  # fmt: skip
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3),
                    max_leaves=8)  # fmt: skip


def test_the_good_manifest_parses():
    m = mf.parse(KEY, json.dumps(GOOD).encode())
    assert (m.campaign, m.vantage, m.run, m.units_planned) == (CAMPAIGN, "v1", R1, ("a",))
    assert m.objects[0].sha256 == "0" * 64 and m.objects[0].records == 2


def _one_line_or_manifest(key: str, data: bytes):
    try:
        return mf.parse(key, data)
    except mf.ManifestError as exc:
        text = str(exc)
        assert text and "\n" not in text and "\r" not in text and len(text) < 400, text
        return None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=200))
def test_any_bytes_are_a_manifest_or_one_line(data):
    _one_line_or_manifest(KEY, data)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(["schema", "campaign", "vantage", "region", "instance_id", "run", "units_planned",
                             "objects", "artifacts", "complete", "objects.0", "objects.0.unit", "objects.0.key",
                             "objects.0.sha256", "objects.0.bytes", "objects.0.records", "units_planned.0"]),
       value=JSON, drop=st.booleans())  # fmt: skip
def test_a_manifest_with_any_field_changed_is_read_or_refused_by_that_field(path, value, drop):
    body = json.loads(json.dumps(GOOD))
    *parents, last = path.split(".")
    node = body
    for p in parents:
        node = node[int(p)] if isinstance(node, list) else node[p]
    if isinstance(node, list):
        node[int(last)] = value
    elif drop:
        del node[last]
    else:
        node[last] = value
    try:
        data = json.dumps(body, allow_nan=True).encode()
    except (ValueError, TypeError):
        return
    m = _one_line_or_manifest(KEY, data)
    if m is None:
        with pytest.raises(mf.ManifestError) as exc:
            mf.parse(KEY, data)
        top = path.split(".")[0]
        assert str(exc.value).startswith((top, "body:")), (path, str(exc.value))
    else:  # read: then it is storable and says what it was given
        assert m.run == R1 and all(len(o.sha256) == 64 for o in m.objects)


def test_a_manifest_under_another_run_or_schema_is_refused():
    with pytest.raises(mf.ManifestError, match=r"^run: .* shipped under"):
        mf.parse(f"results/{CAMPAIGN}/v1/other/manifest.json", json.dumps(GOOD).encode())
    with pytest.raises(mf.ManifestError, match=r"^schema: 2, this collector reads schema 1$"):
        mf.parse(KEY, json.dumps(GOOD | {"schema": 2}).encode())
    with pytest.raises(mf.ManifestError, match=r"^body: a NUL"):
        mf.parse(KEY, json.dumps(GOOD | {"complete": {"x": "a\x00"}}).encode())
    with pytest.raises(mf.ManifestError, match=r"^objects\[0\]\.key: .* not a unit file of this run"):
        mf.parse(KEY, json.dumps(GOOD | {"objects": [dict(GOOD["objects"][0], key="results/x/v1/r/a.jsonl.gz")]}).encode())


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_a_campaign_export_carries_its_completeness(moto, tmp_path, empty_db, fmt):
    """`dnscamp export` writes every reader view with a campaign column: v_run_completeness's
    text arrays (missing units and objects) as lists of strings (parquet) or JSON text (csv)."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    from dnscamp.opendata.export import export

    spool = tmp_path / "v1"
    spool_run(spool, R1, ["unit000", "unit001"])
    ship_with_manifest(moto, spool, "v1", R1)
    moto.client.delete_object(Bucket=BUCKET, Key=ship.object_key(CAMPAIGN, "v1", R1, "unit001"))
    coll.collect(f"s3://{BUCKET}/results/", empty_db, client=moto.client)
    out = tmp_path / "export"
    files = export(empty_db, role_url(empty_db, "reader"), CAMPAIGN, out, fmt)
    assert files["files"][f"v_run_completeness.{fmt}"] == 1
    if fmt == "parquet":
        row = pq.read_table(out / "v_run_completeness.parquet").to_pylist()[0]
        assert row["missing_units"] == ["unit001"] and row["missing_objects"] == [ship.object_key(CAMPAIGN, "v1", R1, "unit001")]
    else:
        row = pacsv.read_csv(out / "v_run_completeness.csv").to_pylist()[0]
        assert json.loads(row["missing_units"]) == ["unit001"]
    assert row["manifest"] is True and row["units_planned"] == 2 and row["units_collected"] == 1
