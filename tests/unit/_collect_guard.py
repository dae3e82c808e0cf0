"""pytest plugin for tests/unit/test_collection.py: during collection, probing the linkem
backend or running anything that touches network namespaces raises, so a collection-time
namespace (or a detect_backend() in a parametrize) is a collection error, not a side effect."""

from __future__ import annotations

import subprocess

MARK = "COLLECT-GUARD"


class CollectionSideEffect(RuntimeError):
    pass


def _refuse_netns(real):
    def guarded(self, argv, *a, **kw):
        words = [str(w) for w in (argv if isinstance(argv, (list, tuple)) else str(argv).split())]
        if "netns" in words or "unshare" in words:
            raise CollectionSideEffect(f"{MARK}: namespace command at collection: {' '.join(words)}")
        return real(self, argv, *a, **kw)

    return guarded


def pytest_configure(config):
    from testbed.linkem import driver

    def detect_backend():
        raise CollectionSideEffect(f"{MARK}: detect_backend() called at collection")

    driver.detect_backend = detect_backend
    subprocess.Popen.__init__ = _refuse_netns(subprocess.Popen.__init__)
