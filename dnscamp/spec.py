"""Campaign specs (TOML), validated by pydantic.

    [campaign]            name, seed, repetitions, description
    [[vantages]]          id, provider ("testbed" | "local" | "ec2" ...), region, network_profiles
    [profiles.<name>]     extra access-network profiles for the testbed (same keys as testbed/profiles.toml)
    [kinds.<kind>]        one table per measurement kind: its targets and parameters

Errors name the file, the field path and the reason, one line each.
"""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from dnscamp import kinds as kind_registry


class SpecError(Exception):
    """A spec that cannot be used; ``lines`` are 'file: field.path: reason' lines."""

    def __init__(self, lines: list[str]):
        super().__init__("\n".join(lines))
        self.lines = lines


class CampaignSection(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    description: str = ""
    seed: int = Field(0, ge=0, description="Seed of the shuffled order (recorded in every run).")
    repetitions: int = Field(1, ge=1, le=100_000)


class VantageSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    provider: str = Field("local", min_length=1)
    region: str | None = None
    network_profiles: list[str | None] = Field(default_factory=lambda: [None])

    @field_validator("network_profiles")
    @classmethod
    def _nonempty(cls, v: list[str | None]) -> list[str | None]:
        if not v:
            raise ValueError("at least one network profile (or omit the field)")
        if len(set(v)) != len(v):
            raise ValueError("duplicate network profile")
        return v


class CampaignSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    campaign: CampaignSection
    vantages: list[VantageSpec] = Field(min_length=1)
    profiles: dict[str, dict[str, Any]] = Field(default_factory=dict)
    kinds: dict[str, dict[str, Any]] = Field(min_length=1)

    # Filled by load(): validated params per kind, and where the spec came from.
    _params: dict[str, BaseModel] = {}
    _source: str = ""
    _sha256: str = ""

    @property
    def params(self) -> dict[str, BaseModel]:
        return self._params

    @property
    def source(self) -> str:
        return self._source

    @property
    def sha256(self) -> str:
        return self._sha256

    def testbed_profiles(self) -> list[str]:
        out: list[str] = []
        for v in self.vantages:
            if v.provider == "testbed":
                out.extend(p for p in v.network_profiles if p and p not in out)
        return out


def _fmt(source: str, prefix: tuple, exc: ValidationError) -> list[str]:
    lines = []
    for e in exc.errors():
        path = ".".join(str(p) for p in (*prefix, *e.get("loc", ()))) or "(top level)"
        lines.append(f"{source}: {path}: {e.get('msg')}")
    return lines


def loads(text: str, source: str = "<spec>") -> CampaignSpec:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError([f"{source}: TOML syntax: {exc}"]) from None
    try:
        spec = CampaignSpec.model_validate(raw)
    except ValidationError as exc:
        raise SpecError(_fmt(source, (), exc)) from None
    problems: list[str] = []
    params: dict[str, BaseModel] = {}
    for name, table in spec.kinds.items():
        try:
            kind = kind_registry.get(name)
        except kind_registry.UnknownKind as exc:
            problems.append(f"{source}: kinds.{name}: {exc.args[0]}")
            continue
        try:
            params[name] = kind.params_model.model_validate(table)
        except ValidationError as exc:
            problems.extend(_fmt(source, ("kinds", name), exc))
    problems.extend(_check_profiles(source, spec))
    if problems:
        raise SpecError(problems)
    spec._params = params
    spec._source = source
    spec._sha256 = hashlib.sha256(text.encode()).hexdigest()
    return spec


def _check_profiles(source: str, spec: CampaignSpec) -> list[str]:
    """Testbed profiles: custom ones are validated by the testbed's own profile model, and
    every profile a testbed vantage names must exist."""
    if not any(v.provider == "testbed" for v in spec.vantages) and not spec.profiles:
        return []
    from testbed.profiles import ProfileError, load_profiles, parse_profile  # the testbed owns the schema

    problems = []
    for name, table in spec.profiles.items():
        try:
            parse_profile(name, table)
        except ProfileError as exc:
            problems.append(f"{source}: profiles.{name}: {exc}")
    if problems:
        return problems
    known = load_profiles(spec.profiles)
    for i, v in enumerate(spec.vantages):
        if v.provider != "testbed":
            continue
        for j, p in enumerate(v.network_profiles):
            if p is None:
                problems.append(f"{source}: vantages.{i}.network_profiles: a testbed vantage needs network profiles")
            elif p not in known:
                problems.append(
                    f"{source}: vantages.{i}.network_profiles.{j}: unknown profile {p!r} (known: {', '.join(sorted(known))})"
                )
    return problems


def load(path: Path | str) -> CampaignSpec:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise SpecError([f"{path}: cannot read: {exc.strerror or exc}"]) from None
    return loads(text, str(path))
