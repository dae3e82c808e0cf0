"""How `make test` spreads the suite over pytest-xdist workers (tests/conftest.py): the island's
tests form one work unit, every other test is its own, and a testbed test outside the island's
folders is refused at collection (it would run beside the island's tests on another worker)."""

from types import SimpleNamespace

import pytest

from pathlib import Path

from tests.conftest import ISLAND_PATHS, ON_TIME_PATHS, pytest_collection_modifyitems, work_unit

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("nodeid", [
    "tests/testbed/test_topology.py::test_conformance_check_meets_targets[nfqueue]",
    "tests/testbed/test_experiments.py::test_hol_reduced",
    "testbed/linkem/test_selftest.py::test_rtt_loss_goodput",
    "tests/local/test_pageload_stub.py::test_browser_load_through_the_stub[doh3-firefox]",  # on time, under SCHED_OTHER
])
def test_the_islands_tests_are_one_unit(nodeid):
    assert work_unit(nodeid) == "island"


@pytest.mark.parametrize("nodeid", [
    "tests/local/test_fleet_terraform.py::test_saved_plan_guard_locked_state_drain_and_destroy_by_state",
    "tests/unit/test_layout.py::test_no_cycles",
    "tests/fuzz/test_fuzz_ingest.py::test_ingest_contract",
    "tests/local/testbed/test_x.py::test_y",  # a folder named testbed elsewhere is not the island
    "tests/local/test_pageload_browsers.py::test_unknown_name_is_a_dns_error[firefox]",
])
def test_every_other_test_is_a_unit_of_its_own(nodeid):
    assert work_unit(nodeid) == nodeid


class _Item(SimpleNamespace):
    def get_closest_marker(self, name):
        return name if name in self.marks else None


def test_a_testbed_test_outside_the_islands_folders_is_refused():
    ok = [_Item(nodeid=f"{ISLAND_PATHS[0]}test_a.py::t", marks={"testbed"}), _Item(nodeid="tests/local/test_b.py::t", marks={"local"})]
    pytest_collection_modifyitems(None, ok)
    with pytest.raises(pytest.UsageError, match="tests/local/test_c.py::t: a testbed test outside"):
        pytest_collection_modifyitems(None, [*ok, _Item(nodeid="tests/local/test_c.py::t", marks={"testbed"})])


def test_every_path_held_in_the_islands_unit_exists():
    """A renamed file would silently leave the island's unit and run under SCHED_IDLE again."""
    root = Path(__file__).resolve().parents[2]
    assert [p for p in ISLAND_PATHS + ON_TIME_PATHS if not (root / p).exists()] == []


def test_the_page_load_design_covers_every_pair(monkeypatch):
    """tests/testbed/test_pageload_testbed.py's pairwise design loads every (browser, mode),
    (mode, HTTP) and (browser, HTTP) pair; the full product is there on request."""
    from tests.testbed.test_pageload_testbed import MODES, _cases

    browsers, https = ("chromium", "firefox"), ("h2", "h3")
    monkeypatch.delenv("DNSCAMP_PAGELOAD_FULL_MATRIX", raising=False)
    cases = _cases()
    assert len(cases) == len(MODES) * 2 and len(set(cases)) == len(cases)
    assert {(b, m) for b, m, _ in cases} == {(b, m) for b in browsers for m in MODES}
    assert {(m, h) for _, m, h in cases} == {(m, h) for m in MODES for h in https}
    assert {(b, h) for b, _, h in cases} == {(b, h) for b in browsers for h in https}
    monkeypatch.setenv("DNSCAMP_PAGELOAD_FULL_MATRIX", "1")
    assert sorted(_cases()) == sorted((b, m, h) for b in browsers for m in MODES for h in https)
