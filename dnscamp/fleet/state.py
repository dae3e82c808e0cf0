"""What a fleet's Terraform state holds (`terraform state pull`, local or S3 backend): the root's
modules and the regions of their providers. `fleet destroy` destroys by the state, not by the spec
(a vantage removed from the spec is still in the state, and still billing), and the rendered root
keeps a provider for every region the state has resources in, so Terraform can destroy them."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

_PROVIDER_ALIAS = re.compile(r'^provider\["[^"]+/aws"\]\.([a-z0-9_]+)$')


class StateError(ValueError):
    """A state that cannot be read (one line)."""


@dataclass
class State:
    modules: list[str] = field(default_factory=list)  # root module calls with managed resources, in state order
    regions: list[str] = field(default_factory=list)  # regions of their providers
    resources: int = 0  # managed resource instances

    @property
    def empty(self) -> bool:
        return self.resources == 0


def parse(text: str) -> State:
    """The raw state JSON (`terraform state pull`); empty text is an empty state."""
    if not text.strip():
        return State()
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise StateError(f"state: not JSON ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("resources", []), list):
        raise StateError("state: no resources list (not a Terraform state)")
    s = State()
    for r in doc.get("resources", []):
        if r.get("mode") != "managed":
            continue
        s.resources += len(r.get("instances") or [])
        if not r.get("instances"):
            continue
        mod = (r.get("module") or "").split(".")
        if len(mod) >= 2 and mod[0] == "module":
            name = mod[1].split("[")[0]
            if name not in s.modules:
                s.modules.append(name)
        m = _PROVIDER_ALIAS.match(r.get("provider") or "")
        if m:
            region = m.group(1).replace("_", "-")
            if region not in s.regions:
                s.regions.append(region)
    return s
