"""Draining before `fleet destroy`: wait until every live instance's status object shows nothing
pending (`pending_units == 0`), so no record still in an agent's spool is lost with its volume."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from dnscamp.fleet.status import pending_total

GONE = ("shutting-down", "terminated")  # an instance in these states ships nothing more


def live(instances: Iterable[Any]) -> list[Any]:
    return [i for i in instances if i.state not in GONE]


def blocking(statuses: list[dict[str, Any]], instances: Iterable[Any]) -> list[str]:
    """One line per live instance that may still hold results: no status object, a corrupt one,
    or units pending."""
    by_id = {st.get("instance_id"): st for st in statuses}  # one key (and so one status) per instance
    out = []
    for i in live(instances):
        st = by_id.get(i.id)
        where = f"{i.vantage} @ {i.region} {i.id} ({i.state})"
        if st is None:
            out.append(f"{where}: no status object yet (what it holds is unknown)")
        elif st.get("corrupt"):
            out.append(f"{where}: status unreadable: {st['corrupt']}")
        elif (n := pending_total([st])) > 0:
            out.append(f"{where}: {n} unit(s) pending as of {st.get('at') or st.get('last_modified')}")
    return out


def drain(read_statuses: Callable[[], list[dict[str, Any]]], list_instances: Callable[[], list[Any]], *,
          timeout_s: float, poll_s: float = 30.0, log: Callable[[str], None] = lambda m: None,
          sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> list[str]:
    """Poll until nothing blocks (returns []) or ``timeout_s`` passed (returns the blocking lines)."""
    t0 = clock()
    while True:
        waiting = blocking(read_statuses(), list_instances())
        if not waiting:
            return []
        if clock() - t0 >= timeout_s:
            return waiting
        log(f"draining: {len(waiting)} instance(s) still hold results, next look in {poll_s:g} s; first: {waiting[0]}")
        sleep(poll_s)
