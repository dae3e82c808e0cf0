"""Bring the testbed up for a campaign and describe it to the measurement kinds.

``ensure_up`` is what ``dnscamp campaign run`` (and ``make demo``) call for a spec with
testbed vantages: it reuses a healthy island that already has every profile the campaign
needs (and the spec's backbone, when it sets one), otherwise rebuilds it (same steps as
``dnscamp testbed up``), and returns the testbed
description the kinds get in their run context: ``topology.info`` plus, when the servers are
installed, the resolver catalog, CA file and site URLs of ``testbed.services``.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from testbed import topology
from testbed.profiles import load_profiles, select
from vantage_agent.paths import testbed_dir


def describe() -> dict[str, Any]:
    run_dir = testbed_dir()
    d = topology.info(run_dir)
    if d.get("up") and importlib.util.find_spec("testbed.services.info") is not None:
        from testbed.services import info as services_info

        try:
            d["services"] = services_info.describe(run_dir)
        except Exception as exc:  # noqa: BLE001 - described as missing, kinds report it per record
            d["services_error"] = f"{type(exc).__name__}: {exc}"
    return d


def ensure_up(profile_names: list[str], extra_profiles: dict[str, Any] | None = None, log=lambda m: None,
              backbone_rtt_ms: float | None = None) -> dict[str, Any]:
    """``backbone_rtt_ms`` (a spec's ``[testbed] backbone_rtt_ms``): the island must have this
    backbone; one that is up with another is rebuilt (said on ``log``), as one that lacks a
    profile is. None: any backbone is reused, a new island gets the default."""
    chosen = select(profile_names, load_profiles(extra_profiles))
    run_dir = testbed_dir()
    topology.check_not_leased()  # a test session holds the island: do not pull it from under it
    with topology.ops_lock():
        st = topology.read_state(run_dir)
        if st and topology.is_up(run_dir):
            have = set(st["island"].get("profiles") or [])
            defs = st["island"].get("profile_defs") or {}
            same_defs = all(defs.get(p.name) in (None, p.model_dump(mode="json")) for p in chosen)
            backbone = st["island"].get("backbone_rtt_ms", topology.DEFAULT_BACKBONE_RTT_MS)
            same_backbone = backbone_rtt_ms is None or float(backbone) == float(backbone_rtt_ms)
            if {p.name for p in chosen} <= have and same_defs and same_backbone and topology.status(run_dir)["healthy"]:
                log(f"testbed already up with {', '.join(sorted(have))} (backbone {backbone:g} ms)")
                return {**describe(), "started_now": False}
            if not same_backbone:
                log(f"the island is up with a {backbone:g} ms backbone, the campaign's [testbed] backbone_rtt_ms "
                    f"is {backbone_rtt_ms:g} ms: rebuilding it")
        res = topology.teardown(run_dir)
        if res["left"]:
            raise topology.TopologyError(f"cannot tear down the previous testbed: {'; '.join(res['problems'])}")
        try:
            topology.build(chosen, run_dir, topology.DEFAULT_BACKBONE_RTT_MS if backbone_rtt_ms is None
                           else backbone_rtt_ms, log=log)
        except BaseException:
            topology.teardown(run_dir)
            raise
    return {**describe(), "started_now": True}


def down(log=lambda m: None) -> dict[str, Any]:
    topology.check_not_leased()
    with topology.ops_lock():
        return topology.teardown(testbed_dir(), log=log)
