"""The campaign planner: pure. Spec -> the matrix of units, shuffled with a recorded seed.

Matrix: vantages x network profiles x kinds x targets x repetitions. Unit ids are derived
from the cell (not from the order), so a resumed run recognises what it already did; the
order is a seeded shuffle (STYLE.md: shuffle the order, record the seed).

The plan is lazy: its size is arithmetic over the matrix's blocks (one block per vantage,
profile and kind, holding the kind's targets), and units are built one at a time as they are
iterated, so a plan costs a few bytes per unit (the shuffled permutation of cell indices),
not a Unit object each. A spec whose plan is above ``MAX_UNITS`` (1,000,000 by default;
``--max-units`` raises it) is refused before anything is built.
"""

from __future__ import annotations

import bisect
import hashlib
import random
from array import array
from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, Iterator

from dnscamp.limits import MAX_UNITS
from dnscamp.spec import CampaignSpec, SpecError
from vantage_agent.kind import Unit
from vantage_agent.records import Vantage


def unit_id(vantage: str, profile: str | None, kind: str, target: str, rep: int) -> str:
    key = f"{vantage}|{profile or ''}|{kind}|{target}|{rep}"
    return hashlib.sha256(key.encode()).hexdigest()[:20]


@dataclass(frozen=True)
class Block:
    """One (vantage, profile, kind) of the matrix: its cells are targets x repetitions."""

    vantage: Vantage  # network_profile None for a kind that ignores the access profile
    kind: str
    params: dict[str, Any]  # one dict shared by the block's units (read-only, like the Unit)
    targets: tuple[str, ...]


@dataclass(frozen=True)
class Plan:
    campaign: str
    run: str
    seed: int
    repetitions: int
    blocks: tuple[Block, ...]
    factors: str = ""  # how the size comes about, for messages ("1 vantage x 2 profiles x ...")

    @cached_property
    def _starts(self) -> list[int]:
        """First cell index of each block (cells are numbered in matrix order)."""
        starts, n = [], 0
        for b in self.blocks:
            starts.append(n)
            n += len(b.targets) * self.repetitions
        return starts

    @property
    def size(self) -> int:
        return sum(len(b.targets) for b in self.blocks) * self.repetitions

    def __len__(self) -> int:
        return self.size

    def counts(self) -> dict[str, int]:
        """Units per kind, without building any."""
        c: Counter = Counter()
        for b in self.blocks:
            c[b.kind] += len(b.targets) * self.repetitions
        return dict(sorted(c.items()))

    @cached_property
    def order(self) -> array:
        """Cell indices in execution order: ``random.Random(seed).shuffle`` of 0..N-1, the same
        permutation the eager planner applied to its list of units; 4 bytes a unit, built on
        first use (validate and --count never build it)."""
        cells = array("I" if self.size < 2**32 else "Q", range(self.size))
        random.Random(self.seed).shuffle(cells)
        return cells

    def cell(self, index: int) -> tuple[int, str, int]:
        """Cell index (matrix order: vantage, profile, kind, target, repetition) -> (block, target, rep)."""
        b = bisect.bisect_right(self._starts, index) - 1
        t, rep = divmod(index - self._starts[b], self.repetitions)
        return b, self.blocks[b].targets[t], rep

    def unit(self, index: int, order: int = 0) -> Unit:
        b, target, rep = self.cell(index)
        block = self.blocks[b]
        uid = unit_id(block.vantage.id, block.vantage.network_profile, block.kind, target, rep)
        return Unit(
            id=uid, campaign=self.campaign, run=self.run, kind=block.kind, vantage=block.vantage,
            target=target, repetition=rep, params=block.params,
            seed=int(hashlib.sha256(f"{self.seed}|{uid}".encode()).hexdigest()[:8], 16), order=order,
        )  # fmt: skip

    def units(self, blocks: set[int] | None = None) -> Iterator[Unit]:
        """Units in execution order, built as they are consumed; only those of ``blocks`` if given."""
        for order, index in enumerate(self.order):
            if blocks is None or self.cell(index)[0] in blocks:
                yield self.unit(index, order)

    __iter__ = units

    def cells(self, shuffled: bool = False) -> Iterator[tuple[int, str]]:
        """(block, unit id) of every cell, in matrix order or execution order, without building units."""
        for index in self.order if shuffled else range(self.size):
            b, target, rep = self.cell(index)
            v = self.blocks[b].vantage
            yield b, unit_id(v.id, v.network_profile, self.blocks[b].kind, target, rep)

    def ids(self) -> Iterator[str]:
        """Unit ids in execution order."""
        return (uid for _, uid in self.cells(shuffled=True))


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _factors(spec: CampaignSpec, blocks: list[Block], per_profile: dict[str, bool]) -> str:
    """The product behind the size, factored where the matrix is regular."""
    reps = _n(spec.campaign.repetitions, "repetition")
    profiles = {len(v.network_profiles) for v in spec.vantages}
    targets = {len(b.targets) for b in blocks}
    if len(targets) == 1 and len(profiles) == 1 and all(per_profile.values()):
        return (
            f"{_n(len(spec.vantages), 'vantage')} x {_n(profiles.pop(), 'profile')} x "
            f"{_n(len(per_profile), 'kind')} x {_n(targets.pop(), 'target')} x {reps}"
        )
    cells = Counter(b.kind for b in blocks)
    terms = {
        kind: f"{_n(n, 'vantage/profile pair' if per_profile[kind] else 'vantage')} x "
        f"{_n(len(next(b for b in blocks if b.kind == kind).targets), 'target')}"
        for kind, n in cells.items()
    }
    if len(terms) == 1:
        pairs, _, t = next(iter(terms.values())).partition(" x ")
        return f"{pairs} x 1 kind x {t} x {reps}"
    return f"[{' + '.join(f'{k}: {t}' for k, t in terms.items())}] x {reps}"


def plan(
    spec: CampaignSpec,
    run: str,
    targets_of: Callable[[str, Any], list[str]] | None = None,
    max_units: int | None = MAX_UNITS,
) -> Plan:
    """The lazy, shuffled plan. ``targets_of(kind_name, params) -> list[str]`` (default: the
    kind's). Raises SpecError when the plan has more than ``max_units`` units (None: no bound)."""
    from dnscamp import kinds as registry

    if targets_of is None:
        targets_of = lambda name, params: registry.get(name).targets(params)  # noqa: E731
    per_profile = {k: getattr(registry.get(k), "per_profile", True) for k in sorted(spec.kinds)}
    targets = {k: tuple(targets_of(k, spec.params[k])) for k in per_profile}  # once per kind: small lists
    params = {k: spec.params[k].model_dump(mode="json") for k in per_profile}
    blocks: list[Block] = []
    for v in spec.vantages:
        for i, profile in enumerate(v.network_profiles):
            vantage = Vantage(id=v.id, provider=v.provider, region=v.region, network_profile=profile)
            for k in per_profile:
                if not per_profile[k]:
                    if i > 0:
                        continue  # a kind that ignores the access profile runs once per vantage
                    blocks.append(Block(vantage.model_copy(update={"network_profile": None}), k, params[k], targets[k]))
                else:
                    blocks.append(Block(vantage, k, params[k], targets[k]))
    p = Plan(
        campaign=spec.campaign.name, run=run, seed=spec.campaign.seed, repetitions=spec.campaign.repetitions,
        blocks=tuple(b for b in blocks if b.targets), factors=_factors(spec, blocks, per_profile),
    )  # fmt: skip
    if max_units is not None and p.size > max_units:
        raise SpecError(
            [
                f"{spec.source or '<spec>'}: the plan has {p.size:,} units ({p.factors}), "
                f"above the maximum {max_units:,}: raise it with --max-units"
            ]
        )
    return p
