"""bench/ingest_bench.py's `floors`: what a dns_query record's parse cannot do without (the
library calls, the hand-off to a parser process), beside today's whole parse."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.local
ROOT = Path(__file__).resolve().parents[2]


def test_floors_time_each_library_call_and_the_whole_parse(tmp_path):
    sys.path.insert(0, str(ROOT / "bench"))
    from ingest_bench import floors, generate_dns

    generate_dns(tmp_path / "dns.jsonl", 600, days=1, vantages=2, resolvers=2, seed=7)
    out = floors(tmp_path / "dns.jsonl", limit=500)
    assert out["records"] == 500
    libs = out["library_calls_us"]
    assert len(libs) == 7 and all(v > 0 for v in libs.values()), libs
    assert out["library_calls_sum_us"] == pytest.approx(sum(libs.values()), abs=0.05)
    # the whole parse makes every one of these calls and more
    assert out["parse_today_us"] > libs["pydantic-core validation of the line"] + libs["orjson strict parse"]
    assert out["handoff_us"] > 0
