"""The faster parser stores what the code before it stored, byte for byte: the same
content hashes (their first 16 bytes since migration 0021: a record ingested by the old code is
a duplicate for the new one), the same COPY rows and dimension rows, the same quarantine
reasons. The old code is run from git (commit OLD, before the change) in a subprocess over the
fixtures, the hostile corpus, a generated dns_query campaign and edge cases of the caches (env
values equal in Python but not in JSON, integers beyond 64 bits, a body that does not fit the
typed columns)."""

from __future__ import annotations

import importlib.util
import json
import pickle
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from collectors import parse, read
from db.writer import encode
from tests.store_util import old_code

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]
OLD = "f21396b"  # the last commit before the faster parser
FIELDS = ("ids", "hashes", "lines", "rows", "tables", "ctxs", "envs", "shapes", "regs", "statuses", "months", "bad")
# Runs in the old tree: every file's chunks through _parse_chunk, the Parsed fields (the rollup
# rows are not compared: they belong to the rollups, which change on their own).
DUMP = f"""
import pickle, sys
from pathlib import Path
import collectors.ingest as I
assert I.__file__.startswith(sys.argv[1]), I.__file__
out = {{}}
for f in sys.argv[2:]:
    out[f] = []
    for c in I._chunks([Path(f)]):
        p = I._parse_chunk(c)
        out[f].append({{**{{k: getattr(p, k) for k in {FIELDS!r}}}, "dims": vars(p.dims)}})
sys.stdout.buffer.write(pickle.dumps(out))
"""


def _edge_cases(path: Path) -> None:
    """dns_query records that exercise the new caches: env and shape values equal in Python
    but not in JSON (1, 1.0, true; 0.0, -0.0), an env integer beyond 64 bits, a body without a
    per-record key (stored whole), keys in another order."""
    base = json.loads((ROOT / "tests/fixtures/results/v1/dns_query.jsonl").read_text().splitlines()[0])
    lines = []
    for i, (seed, rtt, extra) in enumerate([(1, 14.8, {}), (1.0, 14.8, {}), (True, 14.8, {}), (0.0, 0.5, {}),
                                            (-0.0, 0.5, {}), (2**70, 14.8, {}), (1, 15, {}), (1, 14.8, {"drop": "sequence"}),
                                            (1, 14.8, {"reverse": True})]):  # fmt: skip
        rec = json.loads(json.dumps(base))
        rec["id"] = f"00000000-0000-4000-8000-{i:012d}"
        rec["env"]["seed"] = seed
        rec["body"]["access_rtt_ms"] = rtt
        if "drop" in extra:
            del rec["body"][extra["drop"]]
        if extra.get("reverse"):
            rec = dict(reversed(list(rec.items())))
            rec["body"] = dict(reversed(list(rec["body"].items())))
        lines.append(json.dumps(rec))
    path.write_text("\n".join(lines * 2) + "\n")  # twice: the second pass hits the caches


def _campaign(path: Path) -> None:
    spec = importlib.util.spec_from_file_location("gen_campaign", ROOT / "bench" / "gen_campaign.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    import numpy as np

    recs = gen.dns_queries(3000, np.random.default_rng(5), "eq", gen.END, vantages=gen.VANTAGES[:4],
                           resolvers=gen.RESOLVERS[:3], days=2)  # fmt: skip
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))


def _short_hash(chunk: dict) -> dict:
    """The old parser's output as it is stored since migration 0021: content hashes are the
    first 16 bytes of the same sha256 (docs/store.md "Footprint"), in the hashes and in each
    result_ids COPY row (uuid field, hash field, line field: the hash's length prefix 32 -> 16).
    Everything else must stay byte for byte."""
    def reg(r: bytes) -> bytes:
        n = int.from_bytes(r[20:24], "big", signed=True)
        return r if n != 32 else r[:20] + encode.LEN16 + r[24:40] + r[56:]

    return {**chunk, "hashes": [h if h is None else h[:16] for h in chunk["hashes"]],
            "regs": [reg(r) for r in chunk["regs"]]}


def _shaped_misfits(got: dict, want: dict) -> None:
    """The one intended change since OLD (migration 0026_shaped_misfits): a dns_query stored
    whole has a shape too, `parse.dns_shape` of its body (the old code gave it none). Checked
    here, then written into the old output, so that everything else compares byte for byte."""
    for i, (g, w) in enumerate(zip(got["shapes"], want["shapes"])):
        if g != w:
            assert w is None and got["tables"][i] == encode.GENERIC and g in got["dims"]["shapes"], i
            want["shapes"][i] = g
    extra = {k: v for k, v in got["dims"]["shapes"].items() if k not in want["dims"]["shapes"]}
    assert set(extra) <= {got["shapes"][i] for i, t in enumerate(got["tables"]) if t == encode.GENERIC}
    want["dims"] = {**want["dims"], "shapes": {**want["dims"]["shapes"], **extra}}


def test_new_parser_stores_what_the_old_one_stored(tmp_path):
    old = old_code(OLD, tmp_path / "old")
    _edge_cases(tmp_path / "edge.jsonl")
    _campaign(tmp_path / "campaign.jsonl")
    fixtures = ROOT / "tests/fixtures/results"
    files = [str(p) for p in (*sorted(fixtures.glob("v1/*.jsonl")), *sorted(fixtures.glob("v1/invalid/*.jsonl")),
                              *sorted(fixtures.glob("hostile/*.jsonl")), tmp_path / "edge.jsonl",
                              tmp_path / "campaign.jsonl")]  # fmt: skip
    r = subprocess.run([sys.executable, "-c", DUMP, str(old), *files], cwd=old, capture_output=True,
                       env={"PYTHONPATH": str(old), "PATH": "/usr/bin:/bin"}, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    want = {f: [_short_hash(c) for c in chunks] for f, chunks in pickle.loads(r.stdout).items()}
    records = 0
    for f in files:
        got = [{**{k: getattr(p, k) for k in FIELDS}, "dims": vars(p.dims)}
               for p in map(parse.parse_chunk, read.chunks([Path(f)]))]  # fmt: skip
        assert len(got) == len(want[f]), f
        for g, w in zip(got, want[f]):
            _shaped_misfits(g, w)
            for k in (*FIELDS, "dims"):
                assert g[k] == w[k], (f, k)
            records += len(g["ids"])
    assert records > 3000
    edge = parse.parse_chunk(next(read.chunks([tmp_path / "edge.jsonl"])))
    assert len(set(edge.envs)) == 6  # seed 1 / 1.0 / true / 0.0 / -0.0 / 2**70: six environments
    assert edge.tables.count(encode.GENERIC) == 2  # the body without `sequence`, twice
    # ... with the shape of the typed record it was made from (0026_shaped_misfits)
    generic = [i for i, t in enumerate(edge.tables) if t == encode.GENERIC]
    assert {edge.shapes[i] for i in generic} == {edge.shapes[0]} and edge.shapes[0] is not None


def test_canonical_is_keyed_by_the_json_not_python_equality():
    parse._CANONICAL.clear()
    values = [{"a": 1}, {"a": 1.0}, {"a": True}, {"a": 0.0}, {"a": -0.0}, {"b": 1, "a": 2}, {"a": 2, "b": 1}]
    got = [parse._canonical(v) for v in values]
    assert [j for _, j in got] == [encode.canonical_json(v) for v in values]
    assert [s for s, _ in got] == [parse.sha(encode.canonical_json(v)) for v in values]
    assert len({s for s, _ in got}) == 6  # key order is the one thing that does not count
    big = {"a": 2**70}  # orjson cannot write it: the stdlib's exact text, not cached
    assert parse._canonical(big) == (parse.sha(b'{"a":1180591620717411303424}'), b'{"a":1180591620717411303424}')


def test_dns_split_refuses_what_does_not_fit_the_typed_columns():
    body = json.loads((ROOT / "tests/fixtures/results/v1/dns_query.jsonl").read_text().splitlines()[0])["body"]
    assert encode.dns_split(body) is not None
    for key, value in (("t_start", 1.0), ("t_start", True), ("t_start", "5"), ("t_start", 2**63),
                       ("sequence", 2**31), ("sequence", -(2**31) - 1), ("response_size", [1])):  # fmt: skip
        assert encode.dns_split(dict(body, **{key: value})) is None, (key, value)
    assert encode.dns_split({k: v for k, v in body.items() if k != "answers"}) is None
    assert encode.dns_split(dict(body, t_start=2**63 - 1, sequence=-(2**31))) is not None  # the ranges' ends fit
