"""bench/gen_campaign.py at small scale: ingest accepts every record it writes (the same
parser and strictness checks `dnscamp ingest` runs, without a store), the Atlas results parse
with the statuses meant, the shape is the documented one, and a seed gives the same bytes."""

from __future__ import annotations

import hashlib
import importlib.util
from collections import Counter
from datetime import datetime
from pathlib import Path

import orjson
import pytest

from atlas import bundle, measurement_types
from atlas import result as atlas_result
from collectors import read
from collectors.parse import parse_chunk
from vantage_agent import errors

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("gen_campaign", ROOT / "bench" / "gen_campaign.py")
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)

SIZES = dict(dns_queries_n=12_000, page_loads_n=1_500, atlas_n=3_000)


@pytest.fixture(scope="module")
def campaign(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gen")
    gen.generate(out, seed=7, **SIZES)
    return out


def _records(out: Path) -> list[dict]:
    return [orjson.loads(line) for f in sorted((out / "records").glob("*.jsonl")) for line in f.read_bytes().splitlines()]


def test_ingest_accepts_every_generated_record(campaign):
    for f in sorted((campaign / "records").glob("*.jsonl")):
        chunk = read.Chunk(str(f), 1, f.read_bytes())
        parsed = parse_chunk(chunk)  # what an ingest worker runs on each batch
        assert parsed.bad == [], parsed.bad[:3]
        assert len(parsed.rows) == chunk.block.count(b"\n") and len(set(parsed.ids)) == len(parsed.ids)


def test_sizes_shape_and_failures(campaign):
    recs = _records(campaign)
    kinds = Counter(r["kind"] for r in recs)
    assert kinds == {"dns_query": SIZES["dns_queries_n"], "page_load": SIZES["page_loads_n"]}
    assert len({r["id"] for r in recs}) == len(recs)
    dns = [r for r in recs if r["kind"] == "dns_query"]
    assert len({r["vantage"]["id"] for r in dns}) == 20
    assert len({r["body"]["resolver"] for r in dns}) == 8
    assert {r["body"]["transport"] for r in dns} == set(gen.TRANSPORTS)
    days = {datetime.fromisoformat(r["started_at"]).date() for r in dns}
    assert len(days) >= 29, sorted(days)
    for kind in kinds:
        statuses = Counter(r["status"] for r in recs if r["kind"] == kind)
        assert set(statuses) <= set(errors.statuses())
        share = 1 - statuses["ok"] / sum(statuses.values())
        assert 0.01 <= share <= 0.05, (kind, share)
    assert len({r["status"] for r in dns}) >= 8  # failures across the taxonomy, not one status

    def total_ms(b):
        return (b["t_response"] - b["t_start"]) / 1e6

    # round trips: fresh DoT/DoH ~3 RTT, fresh DoQ/DoH3 ~2, reused and Do53 ~1 (the testbed's figures)
    g4 = [r["body"] for r in dns if r["status"] == "ok" and r["vantage"]["network_profile"] == "4g"
             and r["body"]["resolver"] == "local"]  # fmt: skip
    for tr, fresh_rtts in (("do53", 1), ("dot", 3), ("doh", 3), ("doq", 2), ("doh3", 2)):
        fresh = sorted(total_ms(b) / b["access_rtt_ms"] for b in g4 if b["transport"] == tr and b["sequence"] == 0)
        assert fresh and fresh_rtts <= fresh[len(fresh) // 2] < fresh_rtts + 0.3, (tr, fresh[len(fresh) // 2])
        reused = sorted(total_ms(b) / b["access_rtt_ms"] for b in g4 if b["transport"] == tr and b["sequence"] > 0)
        assert 1 <= reused[len(reused) // 2] < 1.3


def test_atlas_results_parse_with_their_statuses(campaign):
    b = bundle.read(campaign / "atlas" / bundle.NAME)
    assert {m.role for m in b.measurements} == {"resolver_dns", "probe_server", "probe_resolver", "server_resolver"}
    assert [campaign / "atlas" / f for f in b.result_files] == sorted((campaign / "atlas").glob("results-*.jsonl"))
    statuses: Counter = Counter()
    n = 0
    for line in (campaign / "atlas" / "results-0000.jsonl").read_bytes().splitlines():
        raw = atlas_result.load(orjson.loads(line))
        h = atlas_result.header(raw)
        rows = measurement_types.parse(raw, h)
        statuses[atlas_result.result_status(rows)] += 1
        n += 1
        if h.type == "dns" and rows[0].status == errors.OK:
            assert rows[0].answers and rows[0].rcode == "NOERROR"
    assert n == SIZES["atlas_n"]
    assert set(statuses) == {errors.OK, errors.Timeout.status} and 0.005 < statuses["timeout"] / n < 0.05


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    def digest(seed: int, d: Path) -> str:
        gen.generate(d, seed=seed, dns_queries_n=500, page_loads_n=50, atlas_n=100)
        h = hashlib.sha256()
        for f in sorted(d.rglob("*.jsonl")):
            h.update(f.read_bytes())
        return h.hexdigest()

    assert digest(3, tmp_path / "a") == digest(3, tmp_path / "b") != digest(4, tmp_path / "c")
