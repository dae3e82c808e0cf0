"""The steps every browser's load shares: start the driver, navigate, collect the timings,
quit and clean up. chromium.py and firefox.py keep what differs (options, trust store, HAR
source, error pages); both go through these so that a load is timed, classified and cleaned
up the same way in either browser.

Every step records into the ``LoadResult`` instead of raising: a load always ends in a
record with a status from the taxonomy (vantage_agent/errors.py).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any, Callable

from vantage_agent import errors
from vantage_agent.pageload.common import LoadOptions, LoadResult, classify_exception, descendants, kill_survivors
from vantage_agent.pageload.metrics import COLLECT_JS


def start_driver(res: LoadResult, make: Callable[[], Any]) -> Any | None:
    """``make()`` the WebDriver; on failure record a driver_error and return None."""
    try:
        return make()
    except Exception as exc:  # noqa: BLE001 - translated at the boundary
        e = classify_exception(exc)
        res.status, res.error = errors.DriverError.status, f"driver start: {e.message}"
        return None


def navigate(driver: Any, url: str, opts: LoadOptions, res: LoadResult) -> BaseException | None:
    """Load ``url`` under the page-load timeout; returns what ``get`` raised (or None)."""
    driver.set_page_load_timeout(opts.timeout_s)
    driver.set_script_timeout(10)
    t1 = time.monotonic()
    nav_exc: BaseException | None = None
    try:
        driver.get(url)
    except Exception as exc:  # noqa: BLE001 - classified by the caller (browser-specific texts)
        nav_exc = exc
    res.wall_ms["load"] = (time.monotonic() - t1) * 1000
    return nav_exc


def set_failure(res: LoadResult, e: errors.MeasurementError) -> bool:
    """Record a navigation failure; True when the driver is gone (nothing more to collect)."""
    res.status, res.error = e.status, e.message
    return e.status == errors.DriverError.status


def collect_timings(driver: Any, res: LoadResult) -> None:
    """Navigation / Resource / Paint Timing and LCP from the page (metrics.COLLECT_JS)."""
    try:
        data = driver.execute_async_script(COLLECT_JS)
    except Exception as exc:  # noqa: BLE001 - the load keeps its status; timings are missing
        if res.status == errors.OK:
            e = classify_exception(exc)
            res.status, res.error = e.status, f"collecting timings: {e.message}"
        return
    if not data:
        return
    res.final_url = data.get("href")
    res.navigation = data.get("navigation")
    res.resources = data.get("resources") or []
    res.paint = {p["name"]: p["startTime"] for p in data.get("paint") or []}
    res.lcp_ms = data.get("lcp")
    res.time_origin_ms = data.get("timeOrigin")


def fail(res: LoadResult, exc: BaseException) -> LoadResult:
    """Whatever escaped a load becomes its status (never raised to the campaign)."""
    e = classify_exception(exc)
    res.status, res.error = e.status, e.message
    return res


def finish(
    driver: Any | None,
    res: LoadResult,
    opts: LoadOptions,
    wd: Path,
    t0: float,
    quit_: Callable[[Any], None] | None = None,
) -> None:
    """Quit the browser (``quit_`` when the browser needs its own order), kill what survived
    of its process tree, record the wall times and remove the work directory."""
    t3 = time.monotonic()
    if driver is not None:
        tree = descendants(getattr(getattr(driver.service, "process", None), "pid", None))
        try:
            (quit_ or (lambda d: d.quit()))(driver)
        except Exception:  # noqa: BLE001 - the browser is gone already; the load is recorded
            pass
        kill_survivors(tree)
    res.wall_ms["quit"] = (time.monotonic() - t3) * 1000
    res.wall_ms["total"] = (time.monotonic() - t0) * 1000
    if not opts.keep_profile:
        shutil.rmtree(wd, ignore_errors=True)
