"""Hypothesis settings for the fuzz suite, and the tally of generated lines.

``make test`` runs the ``dnscamp-ci`` profile: derandomized (the same examples on every run, so
a red build is reproducible and not flaky), no example database (nothing written into the
work tree), no deadline (an example is a whole batch of records through a real Postgres, and
its time depends on the machine's load, not on the code under test).

``DNSCAMP_FUZZ_EXAMPLES=<factor>`` runs each property ``factor`` times as many examples, with
fresh random seeds: the way to fuzz longer locally, e.g. ``DNSCAMP_FUZZ_EXAMPLES=20 .venv/bin/python
-m pytest -q tests/fuzz``. ``DNSCAMP_FUZZ_SHRINK=1`` lets hypothesis shrink a failing batch.
"""

from __future__ import annotations

import collections
import os

from hypothesis import HealthCheck, Phase, settings

FACTOR = float(os.environ.get("DNSCAMP_FUZZ_EXAMPLES", "1") or 1)
settings.register_profile(
    "dnscamp-ci",
    derandomize=FACTOR == 1,
    database=None,
    deadline=None,
    print_blob=True,
    # Every property names the offending line in its failure message, so the batch need not
    # be shrunk (shrinking a batch of 50 records takes minutes); DNSCAMP_FUZZ_SHRINK=1 shrinks.
    phases=[p for p in Phase if p not in (Phase.shrink, Phase.explain) or os.environ.get("DNSCAMP_FUZZ_SHRINK") == "1"],
    # Examples are deliberately big (dozens of records per example, so that 10,000 lines go
    # through ingest in a few hundred examples): hypothesis would flag that as slow or large.
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)
settings.load_profile("dnscamp-ci")

# How many generated lines went through each entry point in this test session ("records",
# "ingest", "spec", "atlas"): each property asserts its own share, the summary shows all.
TALLY: collections.Counter[str] = collections.Counter()


def examples(n: int) -> int:
    """max_examples for a property whose default is n."""
    return max(1, round(n * FACTOR))


def pytest_sessionfinish(session) -> None:
    # An xdist worker hands its tally to the controller, which adds them up (tests/conftest.py
    # prints the summary line).
    out = getattr(session.config, "workeroutput", None)
    if out is not None:
        out["fuzz_tally"] = dict(TALLY)
