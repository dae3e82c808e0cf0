"""Spec → the exact RIPE Atlas API requests and their credit total. Pure: nothing is sent.

Phase 1 (one request, so both measurements use the same probes): the DNS measurement from
every probe through its own resolver(s) for a random subdomain of our zone (with
``prepend_probe_id``, so our authoritative server's query log names the probe), or for the
whoami name; and the ping probe → server (RTT_direct).
Phase 2 (after discovery, `plan_resolver_pings`): ping probe → its discovered resolver
(RTT_DNS), one measurement per resolver from the probes that use it. The third RTT,
server → resolver (RTT_Server), is measured by our agent on the server: no credits.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ripe.atlas.cousteau import AtlasCreateRequest

from atlas import definitions as defs
from atlas import dns, ping
from atlas.discovery import random_label
from atlas.spec import AtlasSpec

API_PATH = "/api/v2/measurements/"


class PlanError(ValueError):
    pass


@dataclass(frozen=True)
class ApiRequest:
    method: str
    url: str
    body: dict[str, Any]
    roles: list[str]  # role of each definition, in order (the API answers ids in this order)
    credits: int  # unit cost × expected results, one-off factor included
    results_expected: int
    measurements: tuple = field(default=(), repr=False, compare=False)  # cousteau objects (for submit)
    sources: tuple = field(default=(), repr=False, compare=False)
    is_oneoff: bool = True
    bill_to: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "url": self.url,
            "headers": {"Content-Type": "application/json", "Authorization": "Key <redacted>"},
            "body": self.body,
            "roles": self.roles,
            "credits": self.credits,
            "results_expected": self.results_expected,
        }


@dataclass(frozen=True)
class Plan:
    campaign: str
    requests: list[ApiRequest]
    query_name: str
    credits_phase1: int
    credits_phase2_estimate: int
    max_credits: int
    notes: list[str] = field(default_factory=list)

    @property
    def credits_total(self) -> int:
        return self.credits_phase1 + self.credits_phase2_estimate

    def to_dict(self) -> dict[str, Any]:
        return {
            "campaign": self.campaign,
            "query_name": self.query_name,
            "requests": [r.to_dict() for r in self.requests],
            "credits": {
                "phase1": self.credits_phase1,
                "phase2_estimate": self.credits_phase2_estimate,
                "total": self.credits_total,
                "max": self.max_credits,
            },
            "notes": self.notes,
        }

    def describe(self) -> str:
        lines = [f"campaign {self.campaign}: {len(self.requests)} API request(s), DNS name {self.query_name}"]
        for r in self.requests:
            lines.append(f"  {r.method} {r.url}  {', '.join(r.roles)}: {r.results_expected} results, {r.credits} credits")
        lines.append(f"  phase 2 (probe -> resolver pings, after discovery): ~{self.credits_phase2_estimate} credits")
        lines.append(f"credits: {self.credits_total} total (max {self.max_credits})")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def _url(server: str) -> str:
    return f"https://{server}{API_PATH}"


def _body(measurements: list, sources: list, *, oneoff: bool, bill_to: str | None) -> dict[str, Any]:
    req = AtlasCreateRequest(measurements=measurements, sources=sources, is_oneoff=oneoff, bill_to=bill_to,
                             key=None)
    req._construct_post_data()  # cousteau's own body builder: what `submit` sends
    # sort for a stable, diffable dry-run (JSON objects are unordered for the API)
    return json.loads(json.dumps(req.post_data, sort_keys=True))


def _sources(spec: AtlasSpec) -> list:
    return [
        defs.source(type=s.type, value=s.value, requested=s.count, include=s.tags.include, exclude=s.tags.exclude)
        for s in spec.sources
    ]


def plan(spec: AtlasSpec, *, label: str | None = None) -> Plan:
    """Phase-1 requests + credits (exact), phase-2 credits (estimate: one resolver per probe)."""
    try:
        if spec.zone.name:
            qarg = f"{label or random_label()}.{spec.zone.name.rstrip('.')}"
            prepend = True
        else:
            qarg = spec.zone.whoami.rstrip(".")  # type: ignore[union-attr]
            prepend = False
        resolver_dns = dns.definition(
            query_argument=qarg, query_type=spec.dns.query_type, af=spec.af, protocol=spec.dns.protocol,
            description=f"{spec.description} [{spec.name}] resolver discovery", oneoff=spec.is_oneoff,
            prepend_probe_id=prepend, timeout_ms=spec.dns.timeout_ms, is_public=spec.is_public,
        )
        direct = ping.definition(role="probe_server", target=spec.server, af=spec.af, packets=spec.ping.packets,
                                 size=spec.ping.size, description=f"{spec.description} [{spec.name}] probe->server",
                                 oneoff=spec.is_oneoff, is_public=spec.is_public)
        sources = _sources(spec)
    except defs.DefinitionError as exc:
        raise PlanError(str(exc)) from None
    n = spec.probes_requested
    defs_ = [resolver_dns, direct]
    req = ApiRequest(
        method="POST",
        url=_url(spec.api_server),
        body=_body([d.measurement for d in defs_], sources, oneoff=spec.is_oneoff, bill_to=spec.bill_to),
        roles=[d.role for d in defs_],
        credits=sum(d.unit_cost for d in defs_) * n,
        results_expected=len(defs_) * n,
        measurements=tuple(d.measurement for d in defs_),
        sources=tuple(sources),
        is_oneoff=spec.is_oneoff,
        bill_to=spec.bill_to,
    )
    phase2 = ping.unit_cost(spec.ping.packets, spec.ping.size, oneoff=spec.is_oneoff) * n
    notes = []
    if not spec.is_oneoff:
        notes.append("periodic measurements cost per result delivered until stopped: the totals are per round")
    p = Plan(campaign=spec.name, requests=[req], query_name=qarg, credits_phase1=req.credits,
             credits_phase2_estimate=phase2, max_credits=spec.max_credits, notes=notes)
    if p.credits_total > spec.max_credits:
        raise PlanError(f"max_credits: the plan costs {p.credits_total} credits, more than max_credits = {spec.max_credits}")
    return p


def plan_resolver_pings(spec: AtlasSpec, probe_resolver: dict[int, str]) -> list[ApiRequest]:
    """Phase 2: ping probe → discovered resolver, one measurement per resolver address."""
    by_resolver: dict[str, list[int]] = {}
    for prb, res in sorted(probe_resolver.items()):
        by_resolver.setdefault(res, []).append(prb)
    out = []
    for res, prbs in sorted(by_resolver.items()):
        d = ping.definition(role="probe_resolver", target=res, af=spec.af, packets=spec.ping.packets,
                            size=spec.ping.size, description=f"{spec.description} [{spec.name}] probe->resolver",
                            oneoff=spec.is_oneoff, is_public=spec.is_public)
        src = defs.source(type="probes", value=",".join(map(str, prbs)), requested=len(prbs))
        out.append(ApiRequest(method="POST", url=_url(spec.api_server),
                              body=_body([d.measurement], [src], oneoff=spec.is_oneoff, bill_to=spec.bill_to),
                              roles=[d.role], credits=d.unit_cost * len(prbs), results_expected=len(prbs),
                              measurements=(d.measurement,), sources=(src,), is_oneoff=spec.is_oneoff,
                              bill_to=spec.bill_to))
    return out
