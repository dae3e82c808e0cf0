"""The ``dns_query`` measurement kind: times DNS queries over every (resolver, transport) of
the campaign, one record per query, in the vantage's client namespace (``where="client"``).

Campaign spec (``[kinds.dns_query]``)::

    resolvers = ["testbed-isp", "testbed-public"]   # catalog names (docs/dns.md)
    transports = ["do53", "dot", "doh", "doh3", "doq"]
    policy = "reuse"              # fresh | reuse | resume
    names = ["www.site1.test"]    # and/or names_file = "names.txt" (text or .har)
    count = 3                     # rounds over the names per unit
    timeout_s = 5.0               # resolv.conf default (004_9d5842b322ef90bc.txt §2)
    attempts = 2                  # resolv.conf default (Do53/UDP)
    warm_cache = true             # resolve every name once, untimed, before timing (below)
    engine = "dnscamp"            # or "getdns" (do53 and dot only; docs/dns-engines.md)
    arrival = "poisson"           # open-loop load over one connection (load.py); default "sequential"
    rate_per_s = 10.0             # poisson: mean arrivals per second (schedule seeded by the unit seed)
    unique_names = true           # each query under a fresh random 5-character label (no cache hit)
    http_version = "1.1"          # doh only: HTTP/1.1 instead of HTTP/2

Targets are ``<resolver>/<transport>``; the runner shuffles the matrix order, and each unit
shuffles its names with the unit seed (the WWW'20 practice of shuffled orders).

Warm cache (default): one unit times one transport, and the resolver's cache is shared by all
of them, so without a warm-up whichever transport's unit happens to run first would pay the
recursion for every name (in the default campaign on fiber that put DoH3's median at 1.78 RTT
against 1.04–1.08 for the others). Each unit therefore first resolves each of its names once
over the resolver's Do53 endpoint (or, if it has none, over its own transport on a separate
connection), untimed and unrecorded; the fidelity figures assume a warm cache too.
``cache_warmed`` in every record says whether that happened and all warm-up queries got an
answer. ``warm_cache = false`` measures cold-cache behaviour instead. The warm-up always uses
our engine (it is not measured); ``engine`` chooses who makes the timed queries.

``dnscamp dns`` runs this very kind (``run`` below), one unit per transport; what a campaign
cannot express comes in ``RunContext.extra``: ``access_rtt_ms`` (an explicit access RTT) and
``shuffle`` (False: the names in the given order).
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Iterable, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from vantage_agent import errors
from vantage_agent.kind import RunContext, Unit, make_record, utcnow
from vantage_agent.records import Envelope

from . import catalog as catalog_mod
from . import names as names_mod
from . import load, registry, runner
from ._common import QueryOptions
from .policy import DEFAULT_IDLE_TIMEOUT_S, Policy


class DnsQueryParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    resolvers: list[str] = Field(default_factory=lambda: ["testbed-isp"], min_length=1)
    transports: list[str] = Field(default_factory=lambda: ["do53", "dot", "doh", "doh3", "doq"], min_length=1)
    policy: Literal["fresh", "reuse", "resume"] = "reuse"
    idle_timeout_s: float = Field(DEFAULT_IDLE_TIMEOUT_S, gt=0)
    names: list[str] = Field(default_factory=list)
    names_file: str | None = None
    qtype: str = "A"
    count: int = Field(1, ge=1, le=10000)
    timeout_s: float = Field(5.0, gt=0)
    attempts: int = Field(2, ge=1, le=10)
    doh_method: Literal["POST", "GET"] | None = None  # None: POST for doh, GET for doh3 (docs/dns.md)
    warm_cache: bool = True
    engine: Literal["dnscamp", "getdns"] = registry.DEFAULT_ENGINE
    # Open-loop load (vantage_agent/dns/load.py; experiment 1, head-of-line blocking)
    arrival: Literal["sequential", "poisson"] = "sequential"
    rate_per_s: float | None = Field(None, gt=0, le=10000)
    unique_names: bool = False
    http_version: Literal["1.1", "2"] | None = None

    @model_validator(mode="after")
    def _load_fits(self) -> "DnsQueryParams":
        if self.arrival == "poisson":
            if self.rate_per_s is None:
                raise ValueError("arrival 'poisson' needs rate_per_s")
            if self.policy != "reuse" or self.engine != registry.DEFAULT_ENGINE:
                raise ValueError("arrival 'poisson' runs over one connection: policy 'reuse', engine 'dnscamp'")
        elif self.rate_per_s is not None:
            raise ValueError("rate_per_s is for arrival 'poisson'")
        if self.http_version is not None:
            can = [t for t in registry.names() if registry.transport(t).chooses_http_version]
            if not set(self.transports) <= set(can):
                raise ValueError(f"http_version applies to transport {', '.join(can)} only: "
                                 f"list transports = [{', '.join(map(json.dumps, can))}]")
        return self

    @field_validator("transports")
    @classmethod
    def _known(cls, v: list[str]) -> list[str]:
        for t in v:
            registry.endpoint_key(t)  # raises with the known list
        return v

    @field_validator("names")
    @classmethod
    def _names(cls, v: list[str]) -> list[str]:
        return [names_mod.normalize(n) for n in v]

    @model_validator(mode="after")
    def _some_names(self) -> "DnsQueryParams":
        if not self.names and not self.names_file:
            raise ValueError("give names or names_file")
        return self

    @model_validator(mode="after")
    def _engine_fits(self) -> "DnsQueryParams":
        if self.engine != registry.DEFAULT_ENGINE:
            try:
                registry.check_engine(self.engine, self.transports)
            except registry.UnsupportedEngine as exc:
                raise ValueError(f"engine: {exc}; list only those in transports") from None
            if self.policy == "resume":
                raise ValueError(f"engine: {self.engine!r} does not support policy 'resume' "
                                 "(no TLS session carried between connections; use fresh or reuse)")
        return self

    def name_list(self, base_dir: Path | None = None) -> list[str]:
        out = list(self.names)
        if self.names_file:
            p = Path(self.names_file)
            if not p.is_absolute() and base_dir is not None:
                p = base_dir / p
            out += names_mod.from_file(p)
        return list(dict.fromkeys(out))


class _DnsQueryKind:
    name = "dns_query"
    params_model = DnsQueryParams
    where = "client"

    def targets(self, params: DnsQueryParams) -> list[str]:
        return [f"{r}/{t}" for r in params.resolvers for t in params.transports]

    def run(self, unit: Unit, ctx: RunContext) -> Iterable[Envelope]:
        started = utcnow()
        env = {"dns": runner.tool_versions()}
        try:
            params = DnsQueryParams.model_validate(unit.params)
            resolver, _, transport = unit.target.partition("/")
            # Testbed resolvers exist only for units that run on the testbed (ctx.testbed).
            cat = catalog_mod.Catalog.load(testbed=ctx.testbed if ctx.testbed else False)
            try:
                endpoint = cat.endpoint(resolver, transport)
            except catalog_mod.CatalogError as exc:
                hint = " (testbed resolvers need a testbed vantage)" if resolver.startswith("testbed-") and not ctx.testbed else ""
                raise catalog_mod.CatalogError(f"{exc}{hint}") from None
            seed = unit.seed if ctx.extra.get("shuffle", True) else None
            qnames = runner.plan(params.name_list(Path(ctx.extra.get("campaign_dir", "."))), params.count, seed=seed)
            policy = Policy(params.policy, params.idle_timeout_s)
            options = QueryOptions(timeout_s=params.timeout_s, attempts=params.attempts, doh_method=params.doh_method,
                                   http_version=params.http_version)
            # the warm-up resolves the base names; the timed queries ask names no cache holds
            timed = load.unique_names(qnames) if params.unique_names else qnames
            warm_via, warm_endpoint = transport, endpoint
            if params.warm_cache:
                try:
                    warm_via, warm_endpoint = "do53", cat.endpoint(resolver, "do53")
                except catalog_mod.CatalogError:
                    pass  # no Do53 endpoint: warm over the unit's own transport
        except Exception as exc:  # noqa: BLE001 - a unit that cannot start is still a record
            body = _setup_failure_body(unit, Path(ctx.extra.get("campaign_dir", ".")))
            yield make_record(unit, started_at=started, body=body, status=errors.SetupError.status,
                              error=f"dns_query set-up failed for {unit.target!r}: {exc}", env=env)
            return
        rtt = ctx.extra.get("access_rtt_ms") or runner.access_rtt_ms(ctx.testbed, unit.vantage.network_profile)
        warmed = _warm(warm_via, warm_endpoint, list(dict.fromkeys(qnames)), params, options) if params.warm_cache else None
        try:
            client = registry.client(transport, endpoint, policy, options, engine=params.engine)
        except errors.MeasurementError as exc:  # e.g. getdns cannot start: a record, as above
            body = {**_setup_failure_body(unit, Path(ctx.extra.get("campaign_dir", "."))),
                    "address": endpoint.address, "port": endpoint.port, "cache_warmed": warmed}
            yield make_record(unit, started_at=started, body=body, status=exc.status, error=exc.message, env=env)
            return
        version = getattr(client, "engine_version", None)
        if params.arrival == "poisson":
            yield from _load(unit, client, timed, params, seed, endpoint=endpoint, policy=policy, options=options,
                             access_rtt_ms=rtt, cache_warmed=warmed, env=env)
            return
        try:
            for i, qn in enumerate(timed):
                at = utcnow()
                t = client.query(qn, params.qtype)
                b = runner.body(t, endpoint=endpoint, policy=policy, options=options, sequence=i, access_rtt_ms=rtt,
                                cache_warmed=warmed, engine=params.engine, engine_version=version)
                yield make_record(unit, started_at=at, body=b, status=t.status, error=t.error, env=env)
        finally:
            client.close()


def _load(unit: Unit, client, qnames: list[str], params: DnsQueryParams, seed: int | None, *,
          env: dict, **body_kw) -> Iterable[Envelope]:
    """The open-loop run (load.py): every query a record, ``started_at`` its scheduled arrival."""
    offsets = load.schedule(len(qnames), params.rate_per_s, seed)
    wall, t0 = utcnow(), load.c.now() + 50_000_000  # 50 ms to get ready before the first arrival
    results = load.run(client, qnames, offsets, qtype=params.qtype, seed=seed, start_ns=t0)
    for i, (t, off) in enumerate(zip(results, offsets)):
        b = runner.body(t, sequence=i, engine=params.engine, **body_kw)
        yield make_record(unit, started_at=wall + timedelta(seconds=0.05 + off), body=b, status=t.status,
                          error=t.error, env=env)


def _setup_failure_body(unit: Unit, base_dir: Path) -> dict:
    """The body of a unit that could not start: what the campaign asked for (policy, timeouts,
    the name when the unit asked for one) and null for what was never known (address, port,
    t_start), never a placeholder that would enter v_dns_query as if measured."""
    resolver, _, transport = unit.target.partition("/")
    try:
        params: DnsQueryParams | None = DnsQueryParams.model_validate(unit.params)
    except Exception:  # noqa: BLE001 - invalid parameters: nothing of them is recorded
        params = None
    qname = None
    if params is not None:
        try:
            names = params.name_list(base_dir)
        except Exception:  # noqa: BLE001 - an unreadable names_file: the names are unknown
            names = params.names
        qname = names[0] if len(names) == 1 else None
    transport = transport if transport in registry.TRANSPORTS else None
    return {"transport": transport, "resolver": resolver or None, "address": None, "port": None,
            "qname": qname, "qtype": params.qtype if params else None,
            "policy": params.policy if params else None,
            "idle_timeout_s": params.idle_timeout_s if params else None,
            "timeout_s": params.timeout_s if params else None,
            "max_attempts": runner.max_attempts(transport, params.engine, params.attempts) if params else None,
            "attempts": 0, "t_start": None, "connection_reused": None, "wire_basis": "unavailable",
            "cache_warmed": None, "engine": params.engine if params else None,
            "engine_version": registry.dnscamp_version() if params and params.engine == registry.DEFAULT_ENGINE else None,
            "engine_run_time_ms": None}


def _warm(transport: str, endpoint, names: list[str], params: DnsQueryParams, options: QueryOptions) -> bool:
    """Resolve every name once, untimed and unrecorded, so that the timed queries find the
    resolver's cache warm; True when every warm-up query got a DNS answer (any rcode)."""
    try:
        client = registry.client(transport, endpoint, Policy("reuse", params.idle_timeout_s), options)
    except Exception:  # noqa: BLE001 - a failed warm-up is recorded as cache_warmed false, never fatal
        return False
    try:
        answered = [client.query(n, params.qtype).rcode is not None for n in names]  # every name, no short cut
        return all(answered)
    except Exception:  # noqa: BLE001 - as above
        return False
    finally:
        client.close()


KIND = _DnsQueryKind()
