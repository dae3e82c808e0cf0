"""RIPE Atlas ingest under fuzzing: results of the fixtures (every firmware) with mutated fields,
types, missing keys, garbage abufs and huge numbers, as JSON lines or a JSON array, plain or
gzip. Ingest never raises; every item ends as a stored raw row (with a status of the taxonomy)
or a quarantine row, and the counts add up."""

from __future__ import annotations

import base64
import copy
import gzip
import json
from pathlib import Path

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors.atlas_ingest import ingest_files
from tests.fuzz import strategies as S
from tests.fuzz.conftest import TALLY, examples
from vantage_agent import errors

pytestmark = pytest.mark.local

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "atlas"
RESULTS = [json.loads(x) for f in ("sagan_ping.jsonl", "sagan_dns.jsonl") for x in (FIX / f).read_text().splitlines() if x.strip()]
KEYS = sorted({k for r in RESULTS for k in r} | {"result", "resultset", "abuf", "rt", "size", "error", "x", "rtt"})

_NUMBER = st.one_of(
    st.integers(-(2**70), 2**70), st.sampled_from((0, -1, 2**31, 2**63, 10**20, 253402300800)),
    st.floats(), st.sampled_from((float("nan"), float("inf"))),
)  # fmt: skip
_VALUE = st.recursive(
    st.one_of(st.none(), st.booleans(), _NUMBER, S.TEXT, st.text(max_size=3).map(lambda s: s + "\x00")),
    lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(st.sampled_from(KEYS), c, max_size=3)),
    max_leaves=5,
)
_ABUF = st.one_of(st.binary(max_size=60).map(lambda b: base64.b64encode(b).decode()), S.TEXT, st.just("!!not base64"))


def _mutate(draw, v, depth=0):
    """Change some leaves and keys of a result, recursively."""
    if isinstance(v, dict):
        v = dict(v)
        for k in list(v):
            op = draw(st.integers(0, 11))
            if op == 0:
                del v[k]
            elif op == 1:
                v[k] = draw(_VALUE)
            elif op == 2 and k == "abuf":
                v[k] = draw(_ABUF)
            elif op >= 8 and depth < 4:
                v[k] = _mutate(draw, v[k], depth + 1)
        if draw(st.integers(0, 5)) == 0:
            v[draw(st.sampled_from(KEYS))] = draw(_VALUE)
        return v
    if isinstance(v, list):
        return [_mutate(draw, x, depth + 1) for x in v if draw(st.integers(0, 7))]
    return v


@st.composite
def atlas_item(draw):
    base = copy.deepcopy(draw(st.sampled_from(RESULTS)))
    kind = draw(st.sampled_from(("mutated", "mutated", "mutated", "same", "value", "header")))
    if kind == "same":
        return base
    if kind == "value":
        return draw(_VALUE)
    if kind == "header":  # the raw table's key columns at and beyond their edges
        for k in draw(st.lists(st.sampled_from(("prb_id", "msm_id", "timestamp", "fw", "af", "type", "from", "dst_addr")), max_size=3)):
            base[k] = draw(_VALUE)
        return base
    return _mutate(draw, base)


def run_example(url: str, tmp: Path, items: list, layout: str, gz: bool, v: S.Violations) -> None:
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("TRUNCATE atlas_results_raw, quarantine CASCADE")
    if layout == "array":
        data = json.dumps(items).encode()
    else:  # a line holding an array is several results (iter_items): one item per line here
        items[:] = [{"not a result": x} if isinstance(x, list) else x for x in items]
        data = b"\n".join(json.dumps(x).encode() for x in items) + b"\n"
    path = tmp / ("fuzz.json.gz" if gz else "fuzz.json")
    path.write_bytes(gzip.compress(data) if gz else data)
    try:
        stats = ingest_files([path], url)
    except Exception as exc:  # noqa: BLE001 - the property: ingest never raises
        v.check(False, f"atlas ingest raised {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}")
        return
    n = len(items)
    got = (stats.ingested, stats.duplicates, stats.quarantined)
    v.check(sum(got) == n, f"ingested + duplicates + quarantined = {got} != {n} items")
    with psycopg.connect(url) as c:
        raw = c.execute("SELECT status FROM atlas_results_raw").fetchall()
        q = c.execute("SELECT count(*) FROM quarantine").fetchone()[0]
        for view in ("v_atlas_ping", "v_atlas_dns"):
            try:
                c.execute(f"SELECT * FROM {view}").fetchall()
            except psycopg.Error as exc:
                c.rollback()
                v.check(False, f"SELECT * FROM {view} fails on stored data: {str(exc).splitlines()[0]}")
    v.check(len(raw) == stats.ingested, f"{len(raw)} raw rows, {stats.ingested} counted as ingested")
    v.check(q == stats.quarantined, f"{q} quarantine rows, {stats.quarantined} counted")
    statuses = set(errors.statuses())
    v.check(all(s in statuses for (s,) in raw), f"raw row status outside the taxonomy: {[s for (s,) in raw if s not in statuses][:3]}")


def test_atlas_ingest_contract(empty_db, tmp_path):
    n = []

    @settings(max_examples=examples(200))
    @given(st.lists(atlas_item(), min_size=1, max_size=25), st.sampled_from(("lines", "array")), st.booleans())
    def prop(items: list, layout: str, gz: bool) -> None:
        v = S.Violations()
        run_example(empty_db, tmp_path, items, layout, gz, v)
        n.append(len(items))
        if v.found:
            v.found = {f"{k} (items: {json.dumps(items)[:1500]})": x for k, x in v.found.items()}
        v.raise_any()

    prop()
    TALLY["atlas"] += sum(n)
