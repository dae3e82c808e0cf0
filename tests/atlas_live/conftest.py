"""The `atlas` layer: the real RIPE Atlas API through the real cousteau client. Opt-in, like
`internet`: it needs RIPE_ATLAS_KEY (a key with at least results access) and DNSCAMP_ATLAS_LIVE=1;
without them every test here is skipped, saying so."""

from __future__ import annotations

import os

import pytest


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("atlas"):
        missing = [v for v, ok in (("RIPE_ATLAS_KEY", bool(os.environ.get("RIPE_ATLAS_KEY"))),
                                   ("DNSCAMP_ATLAS_LIVE=1", os.environ.get("DNSCAMP_ATLAS_LIVE") == "1")) if not ok]
        if missing:
            pytest.skip(f"needs the real RIPE Atlas API: set {' and '.join(missing)} to run")
