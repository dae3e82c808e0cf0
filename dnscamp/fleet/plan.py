"""A saved Terraform plan (`terraform show -json tfplan`) as the operator reads it before
anything is created or destroyed: per region, the resources to add, change, replace and destroy
by address, and the fleet's bill per day (dnscamp.fleet.cost).

`guarded()` names what `fleet apply` refuses without --allow-replace: an ``aws_instance``
replaced, destroyed or forgotten (its agent's unshipped spool and its place in the campaign go
with it) and the same for the results bucket. The plan JSON's layout is Terraform's documented
"JSON Output Format" (format_version 1.x): ``resource_changes[].change.actions``."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

ACTIONS = ("create", "update", "replace", "delete", "forget")
SYMBOL = {"create": "+", "update": "~", "replace": "-/+", "delete": "-", "forget": "(forget)"}
GUARDED_TYPES = ("aws_instance",)
RESULTS_BUCKET = "module.results_bucket.aws_s3_bucket.results"
_ARN_REGION = re.compile(r"^arn:[^:]+:[^:]*:([a-z]{2}(?:-[a-z]+)+-\d):")


class PlanError(ValueError):
    """A plan that cannot be read (one line)."""


class PlanRefused(ValueError):
    """A plan that would replace or destroy an agent or the results bucket (one line naming them)."""


@dataclass(frozen=True)
class Change:
    address: str
    type: str
    action: str  # one of ACTIONS
    region: str  # "?" when neither the rendered root nor the resource tells

    @property
    def guarded(self) -> bool:
        return self.action in ("replace", "delete", "forget") and (
            self.type in GUARDED_TYPES or self.address == RESULTS_BUCKET)


@dataclass
class PlanSummary:
    changes: list[Change] = field(default_factory=list)
    per_day_usd: dict[str, float] = field(default_factory=dict)  # region -> the bill per day there
    destroy: bool = False

    @property
    def empty(self) -> bool:
        return not self.changes

    def counts(self, region: str | None = None) -> dict[str, int]:
        out = dict.fromkeys(ACTIONS, 0)
        for c in self.changes:
            if region is None or c.region == region:
                out[c.action] += 1
        return out

    def guarded(self) -> list[Change]:
        return [c for c in self.changes if c.guarded]

    def regions(self) -> list[str]:
        seen: list[str] = []
        for r in [*self.per_day_usd, *(c.region for c in self.changes)]:
            if r not in seen:
                seen.append(r)
        return seen

    def line(self, counts: dict[str, int]) -> str:
        return (f"{counts['create']} to add, {counts['update']} to change, {counts['replace']} to replace, "
                f"{counts['delete']} to destroy" + (f", {counts['forget']} to forget" if counts["forget"] else ""))

    def describe(self) -> str:
        out = [f"Plan: {self.line(self.counts())}" + (" (nothing changes)" if self.empty else "")]
        for region in self.regions():
            mine = [c for c in self.changes if c.region == region]
            bill = self.per_day_usd.get(region)
            out.append(f"  {region}: {self.line(self.counts(region))}"
                       + (f"; bill ${bill:,.2f} per day" if bill is not None and not self.destroy else ""))
            out += [f"    {SYMBOL[c.action]:<3} {c.address}" for c in sorted(mine, key=lambda c: c.address)]
        if self.per_day_usd and not self.destroy:
            out.append(f"  bill of the fleet as planned: ${sum(self.per_day_usd.values()):,.2f} per day")
        return "\n".join(out)

    def check(self, allow_replace: bool) -> None:
        """Raise PlanRefused naming every guarded change, unless ``allow_replace``."""
        bad = self.guarded()
        if bad and not allow_replace:
            what = ", ".join(f"{c.address} ({c.action})" for c in bad)
            raise PlanRefused(f"fleet: refused: the plan would replace or destroy {what}; a running agent's unshipped "
                              "results and its place in the campaign go with it (re-run with --allow-replace to "
                              "accept, after `dnscamp fleet status` shows nothing pending)")


def action(actions: list[str]) -> str | None:
    """Terraform's action list as one word; None for no-op and data reads."""
    a = tuple(actions)
    if a in (("no-op",), ("read",)) or not a:
        return None
    if a in (("delete", "create"), ("create", "delete")):
        return "replace"
    if len(a) == 1 and a[0] in ACTIONS:
        return a[0]
    raise PlanError(f"plan: unknown action list {list(a)!r}")


def module_regions(config: dict[str, Any] | None) -> dict[str, str]:
    """module name -> region, from the rendered root (main.tf.json): its providers argument names
    an aliased provider, whose region the root sets."""
    if not config:
        return {}
    by_alias = {p["alias"]: p["region"] for p in config.get("provider", {}).get("aws", [])}
    out: dict[str, str] = {}
    for name, m in config.get("module", {}).items():
        ref = (m.get("providers") or {}).get("aws", "")
        if ref.startswith("aws.") and ref[4:] in by_alias:
            out[name] = by_alias[ref[4:]]
    return out


def _region_of(rc: dict[str, Any], regions: dict[str, str]) -> str:
    module = rc.get("module_address") or ""
    name = module.split(".")[1].split("[")[0] if module.startswith("module.") else ""
    if name in regions:
        return regions[name]
    before = (rc.get("change") or {}).get("before") or {}
    if isinstance(before, dict):  # a resource no longer in the root (its vantage left the spec)
        tags = before.get("tags_all") or before.get("tags") or {}
        if isinstance(tags, dict) and tags.get("region"):
            return str(tags["region"])
        m = _ARN_REGION.match(str(before.get("arn") or ""))
        if m:
            return m.group(1)
        az = str(before.get("availability_zone") or "")
        if az:
            return az[:-1]
    return "?"


def summarize(plan: dict[str, Any], config: dict[str, Any] | None = None, bill: Any = None) -> PlanSummary:
    """The summary of ``plan`` (`terraform show -json` of a saved plan); ``config`` is the rendered
    root (for each module's region), ``bill`` a dnscamp.fleet.cost.Bill (for the bill per region)."""
    if not isinstance(plan, dict) or "resource_changes" not in plan and "format_version" not in plan:
        raise PlanError("plan: not the JSON of a saved plan (`terraform show -json tfplan`)")
    regions = module_regions(config)
    s = PlanSummary(destroy=any(rc.get("mode") == "managed" and (rc.get("change") or {}).get("actions") == ["delete"]
                                for rc in plan.get("resource_changes") or [])
                    and not any((rc.get("change") or {}).get("actions") not in (["delete"], ["no-op"], ["read"])
                                for rc in plan.get("resource_changes") or [] if rc.get("mode") == "managed"))
    for rc in plan.get("resource_changes") or []:
        if rc.get("mode") != "managed":
            continue
        a = action((rc.get("change") or {}).get("actions") or [])
        if a is None:
            continue
        s.changes.append(Change(address=rc["address"], type=rc.get("type", "?"), action=a, region=_region_of(rc, regions)))
    if bill is not None:
        for li in bill.lines:
            s.per_day_usd[li.region] = s.per_day_usd.get(li.region, 0.0) + li.usd / bill.days
    return s
