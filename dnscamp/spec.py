"""Campaign specs (TOML), validated by pydantic.

    [campaign]            name, seed, repetitions, description
    [campaign.schedule]   cron, jitter_s, max_runtime_s: when scheduled agents fire (dnscamp schedule)
    [[vantages]]          id, provider ("testbed" | "local" | "ec2" ...), region, network_profiles;
                          ec2 vantages also: regions, instance_type, instance_count, ssh_cidr
    [profiles.<name>]     extra access-network profiles for the testbed (same keys as testbed/profiles.toml)
    [testbed]             the island a campaign with testbed vantages needs: backbone_rtt_ms (docs/testbed.md)
    [kinds.<kind>]        one table per measurement kind: its targets and parameters
    [fleet]               where ec2 vantages put their results and what the bill assumes (docs/fleet.md)
    [atlas]               a live RIPE Atlas campaign (the schema of atlas/spec.py, docs/atlas.md)

Errors name the file, the field path and the reason, one line each.
"""

from __future__ import annotations

import codecs
import hashlib
import ipaddress
import math
import re
import tomllib
from pathlib import Path
from typing import Any

from croniter import croniter
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from dnscamp import kinds as kind_registry

MAX_SPEC_BYTES = 10 * 2**20  # a spec is a few KiB; anything near this is a mistake or an attack
MAX_DEPTH = 32  # nesting of tables and arrays; real specs use 3
# C0 and C1 controls (tab, newline and carriage return allowed), DEL, line/paragraph separators
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029]")
_KEY_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")  # keys are names: no tab or newline either


class SpecError(Exception):
    """A spec that cannot be used; ``lines`` are 'file: field.path: reason' lines."""

    def __init__(self, lines: list[str]):
        super().__init__("\n".join(lines))
        self.lines = lines


class ScheduleSpec(BaseModel):
    """``[campaign.schedule]``: when scheduled agents fire (`dnscamp schedule`, dnscamp.schedule).

        [campaign.schedule]
        cron = "17 */3 * * *"   # standard 5-field cron (croniter validates it)
        jitter_s = 300          # each firing sleeps a random 0..jitter_s first (spreads the fleet)
        max_runtime_s = 3600    # a run still going after this is stopped; its units end as timeout
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    cron: str = Field(description="5-field cron expression (minute hour day-of-month month day-of-week).")
    jitter_s: float = Field(0.0, ge=0, le=86_400, allow_inf_nan=False,
                            description="Random delay 0..jitter_s before each firing.")
    max_runtime_s: float = Field(3600.0, gt=0, le=7 * 86_400, allow_inf_nan=False,
                                 description="A run still going after this is stopped (its units: timeout).")

    @field_validator("cron")
    @classmethod
    def _cron(cls, v: str) -> str:
        v = " ".join(v.split())
        # cron.d lines are 5 fields; croniter would also take 6 (seconds) or 7 (year)
        if len(v.split(" ")) != 5 or not croniter.is_valid(v):
            raise ValueError(f"not a 5-field cron expression: {v!r}")
        return v


class CampaignSection(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    description: str = ""
    seed: int = Field(0, ge=0, lt=2**63, description="Seed of the shuffled order (recorded in every run).")
    repetitions: int = Field(1, ge=1, le=100_000)
    schedule: ScheduleSpec | None = Field(None, description="When scheduled agents fire (dnscamp schedule).")


# AWS names: a region like "eu-central-1" / "us-gov-west-1", an instance type like "m5.2xlarge".
AWS_REGION = r"^[a-z]{2}(-gov)?-[a-z]+-[0-9]$"
INSTANCE_TYPE = r"^[a-z][a-z0-9-]*\.[a-z0-9]+$"
EC2_FIELDS = ("regions", "instance_type", "instance_count", "ssh_cidr")
EC2_DEFAULT_INSTANCE_TYPE = "t3.medium"  # infra/modules/vantage's default


class VantageSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    provider: str = Field("local", min_length=1)
    region: str | None = None
    network_profiles: list[str | None] = Field(default_factory=lambda: [None])
    # provider = "ec2" only (`dnscamp fleet`): instances of one vantage in each of its regions
    regions: list[str] | None = Field(None, min_length=1, description="ec2: several regions (instead of region).")
    instance_type: str | None = Field(None, pattern=INSTANCE_TYPE, description="ec2: e.g. 'm5.2xlarge' (default t3.medium).")
    instance_count: int | None = Field(None, ge=1, le=50, description="ec2: instances per region (default 1).")
    ssh_cidr: str | None = Field(None, description="ec2: operator network allowed to SSH in (default: no SSH).")


    @field_validator("network_profiles")
    @classmethod
    def _nonempty(cls, v: list[str | None]) -> list[str | None]:
        if not v:
            raise ValueError("at least one network profile (or omit the field)")
        if len(set(v)) != len(v):
            raise ValueError("duplicate network profile")
        return v

    @field_validator("regions")
    @classmethod
    def _regions(cls, v: list[str] | None) -> list[str] | None:
        for r in v or ():
            if not re.match(AWS_REGION, r):
                raise ValueError(f"{r!r} is not an AWS region name (like 'eu-central-1')")
        if v and len(set(v)) != len(v):
            raise ValueError("duplicate region")
        return v

    @field_validator("ssh_cidr")
    @classmethod
    def _cidr(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                net = ipaddress.ip_network(v, strict=True)
            except ValueError as exc:
                raise ValueError(f"not a network in CIDR notation ({exc})") from None
            if net.prefixlen == 0:
                raise ValueError(f"{v} opens SSH to the whole Internet: give the operator's own network")
            v = str(net)
        return v

    @model_validator(mode="after")
    def _ec2(self) -> "VantageSpec":
        if self.provider != "ec2":
            given = [f for f in EC2_FIELDS if getattr(self, f) is not None]
            if given:
                raise ValueError(f"{', '.join(given)}: only for provider = 'ec2' (this vantage is {self.provider!r})")
            return self
        if (self.region is None) == (self.regions is None):
            raise ValueError("an ec2 vantage needs exactly one of region or regions")
        if self.region is not None and not re.match(AWS_REGION, self.region):
            raise ValueError(f"region: {self.region!r} is not an AWS region name (like 'eu-central-1')")
        if len(self.network_profiles) != 1:
            # one instance per network condition, as 002_6fa4cf280535d36b.txt §3.2.4 dedicates one
            raise ValueError("network_profiles: an ec2 vantage has one network profile (its instances apply it); "
                             "make one vantage per profile")
        return self

    @property
    def all_regions(self) -> list[str]:
        """The regions of an ec2 vantage (region or regions); [] for the other providers."""
        if self.provider != "ec2":
            return []
        return list(self.regions or [self.region])  # type: ignore[list-item]


S3_BUCKET = r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"


class FleetSection(BaseModel):
    """``[fleet]``: the cloud side of a campaign with ec2 vantages (`dnscamp fleet`, docs/fleet.md)."""

    model_config = ConfigDict(extra="forbid")
    results_bucket: str = Field(pattern=S3_BUCKET, description="S3 bucket the agents upload to (globally unique).")
    home_region: str = Field(pattern=AWS_REGION, description="Region of the bucket (and of the whoami server).")
    transition_days: int = Field(30, ge=1, le=3650, description="Days before results move to a colder class.")
    whoami_zone: str | None = Field(None, description="Run the authoritative whoami server for this zone (Atlas discovery).")
    whoami_instance_type: str = Field("t3.micro", pattern=INSTANCE_TYPE)
    ami_ids: dict[str, str] = Field(default_factory=dict, description=(
        "Pin the image per region (region -> ami-id); default: the newest official Debian 12 (data source)."))
    # For the bill only (`dnscamp fleet cost`): how long the fleet runs and what one instance does a day.
    days: float = Field(1.0, gt=0, le=3650, description="How long the fleet runs, in days (for the bill).")
    upload_mib_per_day: float = Field(50.0, ge=0, description="Results one instance uploads a day, MiB (for the bill).")
    uploads_per_day: int = Field(96, ge=0, description="PutObject requests of one instance a day (for the bill).")
    egress_gib_per_day: float = Field(2.0, ge=0, description="Traffic out of one instance a day, GiB (for the bill).")
    state_bucket: str | None = Field(None, pattern=S3_BUCKET, description=(
        "S3 bucket of the Terraform state (locked with a lock file); default: local state in the build dir."))
    budget_email: str | None = Field(None, max_length=254, description="Who AWS Budgets mails when the fleet's cost nears the budget.")
    budget_usd_per_month: float | None = Field(None, gt=0, le=1_000_000, allow_inf_nan=False,
                                               description="The AWS Budgets monthly limit, USD (default: the bill x 1.2).")

    @field_validator("results_bucket")
    @classmethod
    def _bucket(cls, v: str) -> str:
        # S3's naming rules beyond the pattern (docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html)
        if ".." in v or re.match(r"^\d+\.\d+\.\d+\.\d+$", v) or v.startswith("xn--") or v.endswith("-s3alias"):
            raise ValueError(f"{v!r} is not a valid S3 bucket name (no '..', IP-like names, 'xn--' or '-s3alias')")
        return v

    @field_validator("ami_ids")
    @classmethod
    def _amis(cls, v: dict[str, str]) -> dict[str, str]:
        for region, ami in v.items():
            if not re.match(AWS_REGION, region):
                raise ValueError(f"{region!r} is not an AWS region name (like 'eu-central-1')")
            if not re.match(r"^ami-[0-9a-f]{8,17}$", ami):
                raise ValueError(f"{region}: {ami!r} is not an AMI id (ami- and 8 or 17 hex digits)")
        return v

    @field_validator("whoami_zone")
    @classmethod
    def _zone(cls, v: str | None) -> str | None:
        if v is not None and not re.match(r"^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}\.?$", v.lower()):
            raise ValueError(f"{v!r} is not a domain name")
        return v


class TestbedSection(BaseModel):
    """``[testbed]``: how the island must be built for this campaign (`dnscamp campaign run` builds
    it so, or rebuilds an island that is up with other values; docs/testbed.md)."""

    model_config = ConfigDict(extra="forbid")
    # strict: a TOML number (integer or float), never a string or boolean; None: any island
    # that is up is reused, a new one gets the testbed's default (10 ms)
    backbone_rtt_ms: float | None = Field(
        None, ge=0, le=10_000, strict=True, allow_inf_nan=False,
        description="Round trip added between the ISP and the servers (0: the access profile's RTT is the whole "
                    "client-server RTT, as in 000_6647a8606a2226e0.txt).")


class CampaignSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    campaign: CampaignSection
    vantages: list[VantageSpec] = Field(min_length=1)
    profiles: dict[str, dict[str, Any]] = Field(default_factory=dict)
    testbed: TestbedSection = Field(default_factory=TestbedSection)
    kinds: dict[str, dict[str, Any]] = Field(min_length=1)
    fleet: FleetSection | None = None
    atlas: dict[str, Any] | None = None  # checked by atlas.spec's own schema in load(); see atlas_spec

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

    @property
    def atlas_spec(self):
        """The ``[atlas]`` section as an atlas.spec.AtlasSpec (validated by load()), or None."""
        from atlas.spec import parse_spec

        return parse_spec(self.atlas, where="atlas") if self.atlas is not None else None

    def ec2_vantages(self) -> list[VantageSpec]:
        return [v for v in self.vantages if v.provider == "ec2"]

    def testbed_profiles(self) -> list[str]:
        out: list[str] = []
        for v in self.vantages:
            if v.provider == "testbed":
                out.extend(p for p in v.network_profiles if p and p not in out)
        return out


def _one_line(text: str, limit: int = 300) -> str:
    """A message part as one printable line: input can hold newlines, terminal escapes or
    megabytes, none of which may reach the user's terminal or split an error line."""
    text = text if len(text) <= limit else text[:limit] + "..."
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _path(loc: tuple) -> str:
    return ".".join(str(p) for p in loc) or "(top level)"


def _sort_key(raw: dict, loc: tuple) -> tuple:
    """File order of the top-level sections (TOML tables keep it), then the path."""
    top = list(raw).index(loc[0]) if loc and isinstance(raw, dict) and loc[0] in raw else -1
    return (top, *((0, p, "") if isinstance(p, int) else (1, 0, str(p)) for p in loc[1:]))


def _validation(prefix: tuple, exc: ValidationError) -> list[tuple[tuple, str]]:
    return [((*prefix, *e.get("loc", ())), e.get("msg", "invalid")) for e in exc.errors()]


def _decode(data: str | bytes) -> tuple[bytes, str]:
    """Bytes (size-limited, UTF-8 without BOM) and text, or SpecError lines without the file name."""
    if isinstance(data, str):
        if len(data) > MAX_SPEC_BYTES:
            raise _Bad("size", f"more than {MAX_SPEC_BYTES:,} bytes (10 MiB), the limit of a spec file")
        try:
            data = data.encode()
        except UnicodeEncodeError as exc:
            line = data.count("\n", 0, exc.start) + 1
            raise _Bad("encoding", f"line {line}: not valid UTF-8 (lone surrogate {data[exc.start]!r})") from None
    if len(data) > MAX_SPEC_BYTES:
        raise _Bad("size", f"more than {MAX_SPEC_BYTES:,} bytes (10 MiB), the limit of a spec file")
    if data.startswith(codecs.BOM_UTF8):
        raise _Bad("encoding", "starts with a byte order mark (BOM): TOML is plain UTF-8; save the file without one")
    try:
        return data, data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise _Bad("encoding", f"line {line}: not valid UTF-8 (byte 0x{data[exc.start]:02x})") from None


class _Bad(Exception):
    """A whole-file problem: (what, reason)."""


def _parse(text: str) -> dict:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _Bad("TOML syntax", str(exc)) from None
    except ValueError:  # int() refuses more than 4300 digits; TOML integers are 64-bit anyway
        raise _Bad("TOML syntax", "an integer out of range (TOML integers are 64-bit)") from None
    except RecursionError:
        raise _Bad("TOML syntax", f"arrays or inline tables nested too deeply (at most {MAX_DEPTH} levels)") from None


def _values(raw: dict) -> list[tuple[tuple, str]]:
    """Values no field should get, wherever they are (kinds' tables included): non-finite
    floats (TOML's nan, inf), integers beyond TOML's 64 bits, control characters in strings or
    keys (they would reach records, file names and terminals), nesting deeper than MAX_DEPTH."""
    problems: list[tuple[tuple, str]] = []
    stack: list[tuple[tuple, Any]] = [((), raw)]
    while stack:  # iterative: a deep table header ([a.a.a...]) must not exhaust the stack
        loc, value = stack.pop()
        if isinstance(value, dict | list):
            if len(loc) >= MAX_DEPTH:
                problems.append((loc, f"nested deeper than {MAX_DEPTH} levels"))
                continue
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for k, v in items:
                if isinstance(k, str) and (bad := _KEY_CONTROL.search(k)):
                    problems.append(((*loc, k), f"control character {bad.group()!r} in a key"))
                stack.append(((*loc, k), v))
        elif isinstance(value, float) and not math.isfinite(value):
            problems.append((loc, f"{value} is not a finite number"))
        elif isinstance(value, int) and not -(2**63) <= value < 2**63:
            problems.append((loc, "integer out of range (TOML integers are 64-bit)"))
        elif isinstance(value, str) and (bad := _CONTROL.search(value)):
            problems.append((loc, f"control character {bad.group()!r} in a string"))
    return problems


def loads(data: str | bytes, source: str = "<spec>") -> CampaignSpec:
    """Parse and validate a spec; every error of it in one SpecError ('file: field.path: reason'
    lines, in file order). Nothing else escapes, whatever the input (a fuzz test holds us to it)."""
    try:
        return _loads(data, source)
    except SpecError:
        raise
    except _Bad as exc:
        raise SpecError([_one_line(f"{source}: {exc.args[0]}: {exc.args[1]}")]) from None
    except Exception as exc:  # a checker we call broke on this input: still one line, never a traceback
        raise SpecError([_one_line(f"{source}: (top level): cannot be checked: {type(exc).__name__}: {exc}")]) from None


def _loads(data: str | bytes, source: str) -> CampaignSpec:
    blob, text = _decode(data)
    raw = _parse(text)
    problems = _values(raw)
    spec = None
    try:
        spec = CampaignSpec.model_validate(raw)
    except ValidationError as exc:
        problems.extend(_validation((), exc))
    # Kinds' tables, profiles and the vantage/profile cross-checks are checked independently of
    # the top level, as far as the raw data allows, so that every error shows in one pass.
    params: dict[str, BaseModel] = {}
    kinds = raw.get("kinds")
    for name, table in kinds.items() if isinstance(kinds, dict) else ():
        try:
            kind = kind_registry.get(name)
        except kind_registry.UnknownKind as exc:
            problems.append((("kinds", name), exc.args[0]))
            continue
        if isinstance(table, dict):  # else the top level says what it should be
            try:
                params[name] = kind.params_model.model_validate(table)
            except ValidationError as exc:
                problems.extend(_validation(("kinds", name), exc))
    problems.extend(_check_vantages(raw))
    problems.extend(_check_fleet(raw))
    if problems:
        lines = sorted(problems, key=lambda p: _sort_key(raw, p[0]))
        raise SpecError([_one_line(f"{source}: {_path(loc)}: {reason}", 600) for loc, reason in lines])
    assert spec is not None
    spec._params = params
    spec._source = source
    spec._sha256 = hashlib.sha256(blob).hexdigest()
    return spec


def _check_vantages(raw: dict) -> list[tuple[tuple, str]]:
    """Vantage ids are unique (they key unit ids); testbed profiles: custom ones are validated
    by the testbed's own profile model, and every profile a testbed vantage names must exist."""
    problems: list[tuple[tuple, str]] = []
    vantages: list[tuple[int, VantageSpec]] = []
    raw_vantages = raw.get("vantages")
    for i, v in enumerate(raw_vantages if isinstance(raw_vantages, list) else ()):
        try:
            vantages.append((i, VantageSpec.model_validate(v)))
        except ValidationError:
            continue  # reported by the top level
    first: dict[str, int] = {}
    for i, v in vantages:
        if first.setdefault(v.id, i) != i:
            problems.append((("vantages", i, "id"), f"duplicate vantage id {v.id!r} (also vantages.{first[v.id]})"))
    raw_profiles = raw.get("profiles")
    raw_profiles = raw_profiles if isinstance(raw_profiles, dict) else {}
    if "testbed" in raw and vantages and not any(v.provider == "testbed" for _, v in vantages):
        problems.append((("testbed",), "only for a campaign with a testbed vantage (provider = 'testbed')"))
    if not any(v.provider in ("testbed", "ec2") for _, v in vantages) and not raw_profiles:
        return problems
    from testbed.profiles import ProfileError, load_profiles, parse_profile  # the testbed owns the schema

    good: dict[str, Any] = {}
    for name, table in raw_profiles.items():
        if not isinstance(table, dict):
            continue  # reported by the top level
        try:
            parse_profile(name, table)
            good[name] = table
        except ProfileError as exc:
            problems.append((("profiles", name), str(exc)))
    known = set(load_profiles(good)) | set(raw_profiles)  # a broken custom profile is reported above, not as unknown
    for i, v in vantages:
        if v.provider not in ("testbed", "ec2"):  # ec2 instances apply the same profiles (netem)
            continue
        for j, p in enumerate(v.network_profiles):
            if p is None and v.provider == "ec2":
                continue  # the instance's own network: 002's "default network conditions"
            if p is None:
                problems.append((("vantages", i, "network_profiles"), "a testbed vantage needs network profiles"))
            elif p not in known:
                problems.append(
                    (("vantages", i, "network_profiles", j), f"unknown profile {p!r} (known: {', '.join(sorted(known))})")
                )
    return problems


def _check_fleet(raw: dict) -> list[tuple[tuple, str]]:
    """ec2 vantages need a [fleet] section; [atlas] holds an Atlas spec (atlas.spec's schema),
    whose zone is the fleet's whoami zone when both are given."""
    problems: list[tuple[tuple, str]] = []
    vantages = raw.get("vantages") if isinstance(raw.get("vantages"), list) else []
    if "fleet" not in raw and any(isinstance(v, dict) and v.get("provider") == "ec2" for v in vantages):
        problems.append((("fleet",), "required when a vantage has provider = 'ec2' (results_bucket, home_region)"))
    atlas = raw.get("atlas")
    if not isinstance(atlas, dict):
        return problems  # absent, or the top level says what it should be
    from atlas.spec import AtlasSpec

    try:
        a = AtlasSpec.model_validate(atlas)
    except ValidationError as exc:
        problems.extend((loc, msg.removeprefix("Value error, ")) for loc, msg in _validation(("atlas",), exc))
        return problems
    fleet = raw.get("fleet") if isinstance(raw.get("fleet"), dict) else {}
    zone = fleet.get("whoami_zone")
    if isinstance(zone, str) and a.zone.name and a.zone.name.rstrip(".").lower() != zone.rstrip(".").lower():
        problems.append((("atlas", "zone", "name"), f"{a.zone.name!r} is not the fleet's whoami_zone {zone!r}: "
                                                    "the discovery needs the zone our server answers for"))
    return problems


def load(path: Path | str) -> CampaignSpec:
    path = Path(path)
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_SPEC_BYTES + 1)  # bounded: a spec is small, the file might not be
    except OSError as exc:
        raise SpecError([_one_line(f"{path}: cannot read: {exc.strerror or exc}")]) from None
    return loads(data, str(path))
