"""vantage_agent.stats: the one percentile definition (PostgreSQL's percentile_cont), its edge
cases, the callers that used to have their own, and a scan so a second definition cannot come back."""

from __future__ import annotations

import ast
import math
import re
import statistics
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vantage_agent.stats import binomial_interval, median, percentile

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def test_interpolates_between_closest_ranks():
    assert percentile([10, 20], 50) == 15
    assert percentile([10, 20], 90) == pytest.approx(19)
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile(list(range(101)), 95) == 95
    assert median([3, 1, 2]) == 2


def test_single_value_empty_and_nones():
    assert percentile([7.5], 0) == percentile([7.5], 50) == percentile([7.5], 100) == 7.5
    assert percentile([], 50) is None
    assert percentile([None, None], 50) is None
    # None is a failed measurement: ignored, as SQL ignores NULL
    assert percentile([None, 10, None, 20], 50) == 15


def test_ends_and_unsorted_input():
    xs = [5.0, -1.0, 3.0, 9.5, 0.0]
    assert percentile(xs, 0) == -1.0
    assert percentile(xs, 100) == 9.5
    assert percentile(xs, 50) == 3.0
    assert percentile(iter(xs), 25) == 0.0  # any iterable, consumed once
    assert xs == [5.0, -1.0, 3.0, 9.5, 0.0]  # the caller's list is not sorted in place


@pytest.mark.parametrize("p", [-0.1, 100.01, 150, float("nan")])
def test_p_outside_0_100_is_an_error(p):
    with pytest.raises(ValueError, match="0..100"):
        percentile([1, 2], p)


def test_nan_value_is_an_error():
    with pytest.raises(ValueError, match="NaN"):
        percentile([1.0, float("nan")], 50)


def test_same_as_statistics_quantiles_inclusive():
    xs = [12.5, 3.25, 7.0, 7.0, 101.0, 0.5, 44.0]
    q = statistics.quantiles(xs, n=100, method="inclusive")  # q[k-1] is the k-th percentile
    for k in range(1, 100):
        assert percentile(xs, k) == pytest.approx(q[k - 1], rel=1e-12)


def test_pageload_summary_p50_of_10_and_20_is_15():
    """`dnscamp pageload` printed p50 = 10 for PLTs [10, 20] (nearest rank, rounding half to even)
    while the SQL views say 15."""
    from dnscamp.commands.pageload import _summarise

    def rec(plt, lookups):
        body = {"browser": "firefox", "dns_mode": "system", "http": "h2", "plt_ms": plt,
                "dns_lookups": lookups, "dns_transport_verified": None}
        return SimpleNamespace(status="ok", body=body)

    (s,) = _summarise([rec(10.0, 1), rec(20.0, 4)])
    assert s["plt_ms_p50"] == 15.0
    assert s["plt_ms_p90"] == 19.0
    assert s["dns_lookups_p50"] == 2.5


def test_selftest_percentiles_take_percent():
    """linkem's selftest took 0..1 and raised IndexError on 50."""
    from testbed.linkem import selftest

    assert selftest.pct_nan([10.0, 20.0], 50) == 15
    assert math.isnan(selftest.pct_nan([], 50))


# A function named so taking values and a rank (or values, for a median) is a second definition
# of the concept; one-argument pct(x) helpers (linkem's driver, atlas) format a share as text.
_NAME = re.compile(r"(percentile|quantile|median|^_?pct$)", re.I)


def test_no_other_percentile_definition():
    found = []
    for folder in ("vantage_agent", "dnscamp", "testbed", "atlas", "bench", "collectors", "db"):
        for f in sorted((ROOT / folder).rglob("*.py")):
            if f == ROOT / "vantage_agent" / "stats.py":
                continue
            for node in ast.walk(ast.parse(f.read_text(), str(f))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _NAME.search(node.name):
                    n = len(node.args.args)
                    if n >= 2 or (n == 1 and "median" in node.name.lower()):
                        found.append(f"{f.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert not found, "use vantage_agent.stats.percentile instead of: " + ", ".join(found)


def _binomial_cdf(n: int, p: float, k: int) -> float:
    """P(X <= k) for X ~ Binomial(n, p), summed term by term (math.comb), independently of
    the lgamma form binomial_interval uses."""
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(0, k + 1)) if k >= 0 else 0.0


@settings(max_examples=150, deadline=None)
@given(n=st.integers(1, 400), p=st.floats(0.001, 0.999))
def test_binomial_interval_is_the_tightest_central_99(n, p):
    """Each tail outside [lo, hi] holds at most 0.5 %, and one step inwards on either side would
    put more than 0.5 % outside: the interval the testbed's loss checks judge by is exact."""
    lo, hi = binomial_interval(n, p)
    assert 0 <= lo <= hi <= n
    alpha, eps = 0.005, 1e-9
    assert _binomial_cdf(n, p, lo - 1) <= alpha + eps
    assert 1 - _binomial_cdf(n, p, hi) <= alpha + eps
    assert _binomial_cdf(n, p, lo) > alpha - eps
    assert 1 - _binomial_cdf(n, p, hi - 1) > alpha - eps
