"""The campaign planner: pure. Spec -> the matrix of units, shuffled with a recorded seed.

Matrix: vantages x network profiles x kinds x targets x repetitions. Unit ids are derived
from the cell (not from the order), so a resumed run recognises what it already did; the
order is a seeded shuffle (STYLE.md: shuffle the order, record the seed).
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

from dnscamp.spec import CampaignSpec
from vantage_agent.kind import Unit
from vantage_agent.records import Vantage


@dataclass(frozen=True)
class Plan:
    campaign: str
    run: str
    seed: int
    units: list[Unit]


def unit_id(vantage: str, profile: str | None, kind: str, target: str, rep: int) -> str:
    key = f"{vantage}|{profile or ''}|{kind}|{target}|{rep}"
    return hashlib.sha256(key.encode()).hexdigest()[:20]


def plan(spec: CampaignSpec, run: str, targets_of=None) -> Plan:
    """Expand and shuffle. ``targets_of(kind_name, params) -> list[str]`` (default: the kind's)."""
    from dnscamp import kinds as registry

    if targets_of is None:
        targets_of = lambda name, params: registry.get(name).targets(params)  # noqa: E731
    seed = spec.campaign.seed
    units: list[Unit] = []
    for v in spec.vantages:
        for i, profile in enumerate(v.network_profiles):
            vantage = Vantage(id=v.id, provider=v.provider, region=v.region, network_profile=profile)
            for kind_name in sorted(spec.kinds):
                if not getattr(registry.get(kind_name), "per_profile", True):
                    if i > 0:
                        continue  # a kind that ignores the access profile runs once per vantage
                    vantage_k = vantage.model_copy(update={"network_profile": None})
                else:
                    vantage_k = vantage
                params = spec.params[kind_name]
                for target in targets_of(kind_name, params):
                    for rep in range(spec.campaign.repetitions):
                        uid = unit_id(v.id, vantage_k.network_profile, kind_name, target, rep)
                        units.append(
                            Unit(
                                id=uid, campaign=spec.campaign.name, run=run, kind=kind_name,
                                vantage=vantage_k, target=target, repetition=rep,
                                params=params.model_dump(mode="json"),
                                seed=int(hashlib.sha256(f"{seed}|{uid}".encode()).hexdigest()[:8], 16),
                            )  # fmt: skip
                        )
    rnd = random.Random(seed)
    rnd.shuffle(units)
    units = [Unit(**{**u.__dict__, "order": i}) for i, u in enumerate(units)]
    return Plan(campaign=spec.campaign.name, run=run, seed=seed, units=units)
