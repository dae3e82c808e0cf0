"""Access-network profiles: the data file testbed/profiles.toml, validated by pydantic.

A profile is two link directions (``up`` = client -> ISP, ``down`` = ISP -> client) in the
configuration language of testbed/linkem. ``load_profiles(extra)`` returns the built-in ones
plus (or overridden by) a campaign spec's own ``[profiles.<name>]`` tables.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

PROFILES_FILE = Path(__file__).with_name("profiles.toml")
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,30}$")

# Rate queue default when a profile does not set one: one round trip, at least 50 ms (about a
# bandwidth-delay product: a single TCP flow fills the link without a standing bloat queue).
MIN_QUEUE_MS = 50.0


class ProfileError(ValueError):
    """A profile table is invalid; the message names the profile and the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RandomLoss(_Strict):
    model: Literal["random"]
    p: float = Field(ge=0, le=1)


class GilbertElliottLoss(_Strict):
    """netem's 4-parameter Gilbert-Elliott: p good->bad, r bad->good, 1-k loss in good, 1-h... (linkem README)."""

    model: Literal["gilbert_elliott"]
    p: float = Field(ge=0, le=1)
    r: float = Field(ge=0, le=1)
    k: float = Field(1.0, ge=0, le=1)
    h: float = Field(0.0, ge=0, le=1)


class NoLoss(_Strict):
    model: Literal["none"] = "none"


class Direction(_Strict):
    """One direction of a link (keys of testbed/linkem's direction config)."""

    delay_ms: float = Field(0.0, ge=0)
    jitter_ms: float = Field(0.0, ge=0)
    jitter_dist: Literal["uniform", "normal"] = "uniform"
    jitter_correlation: float = Field(0.0, ge=0, lt=1)
    reorder: bool = False
    loss: RandomLoss | GilbertElliottLoss | NoLoss = Field(default_factory=NoLoss, discriminator="model")
    rate_mbps: float | None = Field(None, gt=0)
    queue_limit_ms: float | None = Field(None, gt=0)
    queue_limit_bytes: int | None = Field(None, gt=0)
    trace_file: str | None = None
    seed: int | None = None

    @property
    def loss_p(self) -> float:
        """Long-run loss probability of this direction."""
        if isinstance(self.loss, RandomLoss):
            return self.loss.p
        if isinstance(self.loss, GilbertElliottLoss):
            ge = self.loss
            if ge.p + ge.r == 0:
                return 1 - ge.k
            pi_bad = ge.p / (ge.p + ge.r)
            return (1 - pi_bad) * (1 - ge.k) + pi_bad * (1 - ge.h)
        return 0.0

    @property
    def is_null(self) -> bool:
        return (self.delay_ms == 0 and self.jitter_ms == 0 and self.loss_p == 0
                and self.rate_mbps is None and self.trace_file is None
                and not isinstance(self.loss, GilbertElliottLoss))

    def linkem_config(self, seed: int, default_queue_ms: float) -> dict[str, Any]:
        """The direction dict for ``testbed.linkem.driver.Link``."""
        d = self.model_dump(exclude_none=True)
        d["seed"] = self.seed if self.seed is not None else seed
        if self.rate_mbps is not None and self.queue_limit_ms is None and self.queue_limit_bytes is None:
            d["queue_limit_ms"] = default_queue_ms
        if d.get("loss", {}).get("model") == "none":
            d["loss"] = {"model": "none"}
        return d


class Profile(_Strict):
    name: str
    description: str = ""
    source: str = Field(min_length=1, description="Paper file + table/section the numbers come from.")
    up: Direction = Field(default_factory=Direction, description="client -> ISP")
    down: Direction = Field(default_factory=Direction, description="ISP -> client")

    @property
    def rtt_ms(self) -> float:
        """Configured added round trip (mean delays; jitter excluded)."""
        return self.up.delay_ms + self.down.delay_ms

    @property
    def is_null(self) -> bool:
        return self.up.is_null and self.down.is_null

    def default_queue_ms(self) -> float:
        return max(MIN_QUEUE_MS, self.rtt_ms)

    def link_config(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """(a_to_b, b_to_a) = (up, down) for the access link; seeds derived from the name."""
        import zlib

        seed = zlib.crc32(self.name.encode()) & 0x7FFFFFFF
        q = self.default_queue_ms()
        return self.up.linkem_config(seed, q), self.down.linkem_config(seed + 1, q)

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "rtt_ms": round(self.rtt_ms, 3),
            "down_mbps": self.down.rate_mbps,
            "up_mbps": self.up.rate_mbps,
            "loss_up": self.up.loss_p,
            "loss_down": self.down.loss_p,
            "jitter_up_ms": self.up.jitter_ms,
            "jitter_down_ms": self.down.jitter_ms,
            "source": self.source,
        }


_SHORTHAND = {"rtt_ms", "down_mbps", "up_mbps", "jitter_ms", "loss"}


def parse_profile(name: str, table: dict[str, Any]) -> Profile:
    """One ``[name]`` table (shorthand or explicit up/down) -> Profile; ProfileError names the field."""
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise ProfileError(f"profile {name!r}: name must match {NAME_RE.pattern} (used in namespace names)")
    if not isinstance(table, dict):
        raise ProfileError(f"profile {name!r}: expected a table, got {type(table).__name__}")
    t = dict(table)
    short = {k: t.pop(k) for k in list(t) if k in _SHORTHAND}
    if short and ("up" in t or "down" in t):
        raise ProfileError(f"profile {name!r}: use either the shorthand ({', '.join(sorted(short))}) "
                           "or explicit up/down tables, not both")
    if short:
        up: dict[str, Any] = {}
        down: dict[str, Any] = {}
        rtt = short.get("rtt_ms", 0.0)
        if not isinstance(rtt, (int, float)) or rtt < 0:
            raise ProfileError(f"profile {name!r}: rtt_ms must be a number >= 0")
        # half per direction: Kosek et al. §III, "one-way delay is assumed to be symmetrical"
        up["delay_ms"] = down["delay_ms"] = rtt / 2
        if "up_mbps" in short:
            up["rate_mbps"] = short["up_mbps"]
        if "down_mbps" in short:
            down["rate_mbps"] = short["down_mbps"]
        if "jitter_ms" in short:
            up["jitter_ms"] = down["jitter_ms"] = short["jitter_ms"]
        if "loss" in short:
            loss = short["loss"]
            if isinstance(loss, (int, float)):
                loss = {"model": "random", "p": loss}
            up["loss"] = down["loss"] = loss
        t["up"], t["down"] = up, down
    try:
        return Profile.model_validate({"name": name, **t})
    except ValidationError as exc:
        e = exc.errors()[0]
        loc = ".".join(str(p) for p in e.get("loc", ()))
        raise ProfileError(f"profile {name!r}: {loc}: {e.get('msg')}") from None


def load_profiles(extra: dict[str, Any] | None = None, path: Path = PROFILES_FILE) -> dict[str, Profile]:
    """Built-in profiles from ``path``, then ``extra`` (a campaign spec's ``[profiles]``) on top."""
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{path}: {exc}") from None
    out = {name: parse_profile(name, table) for name, table in data.items()}
    for name, table in (extra or {}).items():
        out[name] = parse_profile(name, table)
    return out


def select(names: list[str], profiles: dict[str, Profile] | None = None) -> list[Profile]:
    """Profiles by name, in order, without duplicates; ProfileError on an unknown name."""
    profiles = profiles if profiles is not None else load_profiles()
    out: list[Profile] = []
    for n in names:
        n = n.strip()
        if not n:
            continue
        if n not in profiles:
            raise ProfileError(f"unknown profile {n!r} (known: {', '.join(sorted(profiles))})")
        if all(p.name != n for p in out):
            out.append(profiles[n])
    if not out:
        raise ProfileError("no profile given")
    return out
