"""The ``page_load`` kind: one unit = one site (one URL) x one repetition, loaded with every
(browser, DNS mode, HTTP version) combination of the spec, in a seeded shuffled order.

Order (002_6fa4cf280535d36b.txt §3.2.2): the planner shuffles the sites (units) with the
campaign seed; inside a unit the combinations are shuffled with the unit's own seed; both
are recorded (``body.order``, ``env.seed``). After each load the RTT to the resolver used can
be measured (§4: "ICMP pings to each recursor after each attempted page load").

Every load is a record, whatever happened (WWW'20 Table 1 taxonomy); a crashed browser or
driver is a ``driver_error`` record and the next load starts a fresh one.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from pathlib import Path
from typing import Any, Iterable, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from vantage_agent import errors
from vantage_agent.dns import catalog
from vantage_agent.kind import RunContext, Unit, make_record, utcnow
from vantage_agent.pageload import dnsmode, har as harmod, metrics, registry
from vantage_agent.pageload.common import DEFAULT_TIMEOUT_S, DEFAULT_VIEWPORT, LoadOptions, LoadResult
from vantage_agent.records import Envelope
from vantage_agent.records.page_load import PageLoadBody
from vantage_agent.stats import median


class PageLoadParams(BaseModel):
    """``[kinds.page_load]`` in a campaign spec."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    urls: list[str] = Field(min_length=1, description="Pages to load (the target axis).")
    browsers: list[Literal["firefox", "chromium"]] = Field(default_factory=lambda: ["firefox", "chromium"], min_length=1)
    dns: list[str] = Field(default_factory=lambda: ["system"], min_length=1, description="DNS modes (docs/pageload.md).")
    http: list[Literal["h2", "h3"]] = Field(default_factory=lambda: ["h2"], min_length=1)
    h3_origins: list[str] = Field(
        default_factory=list, description="Extra host:port forced to HTTP/3 (the page's own origin always is)."
    )
    timeout_s: float = Field(DEFAULT_TIMEOUT_S, gt=0, le=600)
    viewport: tuple[int, int] = DEFAULT_VIEWPORT
    ca_file: str | None = Field(None, description="Extra trust anchor; default: the testbed CA when there is one.")
    resolver_rtt: bool = Field(True, description="Ping each resolver used after each load.")
    rtt_count: int = Field(3, ge=1, le=20)
    har: bool = True
    warm_origin: list[bool] = Field(
        default_factory=lambda: [False], min_length=1,
        description="true: Chromium loads the page once, closes its connections and clears its host cache (the "
                    "session tickets stay), then the second load is measured (HTTP/3 0-RTT); [false, true]: both, "
                    "as one more axis of the combinations (docs/pageload.md).")

    @field_validator("warm_origin", mode="before")
    @classmethod
    def _warm_axis(cls, v: Any) -> Any:
        return [v] if isinstance(v, bool) else v  # `warm_origin = true` is the one-value axis

    @model_validator(mode="after")
    def _warm_chromium(self) -> "PageLoadParams":
        if True in self.warm_origin and not all(registry.get(b).WARM_ORIGIN for b in self.browsers):
            can = ", ".join(json.dumps(b) for b in registry.names() if registry.get(b).WARM_ORIGIN)
            raise ValueError("warm_origin: only Chromium can close its connections and keep its session tickets "
                             f"between two loads (chrome.benchmarking); use browsers = [{can}]")
        if len(set(self.warm_origin)) != len(self.warm_origin):
            raise ValueError("warm_origin: a value twice")
        return self

    @field_validator("dns")
    @classmethod
    def _modes(cls, v: list[str]) -> list[str]:
        for m in v:
            dnsmode.parse(m)  # DnsModeError (a ValueError) names the bad mode
        return v

    @field_validator("urls")
    @classmethod
    def _urls(cls, v: list[str]) -> list[str]:
        for u in v:
            if not urlsplit(u).scheme.startswith("http") or not urlsplit(u).hostname:
                raise ValueError(f"not an http(s) URL: {u!r}")
        return v


def combinations(params: PageLoadParams, seed: int) -> list[tuple[str, str, str]]:
    """(browser, dns mode, http) for one site, shuffled with ``seed`` (pure; tested)."""
    combos = [(b, d, h) for b in params.browsers for d in params.dns for h in params.http]
    random.Random(seed).shuffle(combos)
    return combos


def load_plan(params: PageLoadParams, seed: int) -> list[tuple[str, str, str, bool]]:
    """(browser, dns mode, http, warm_origin) for one site, shuffled with ``seed``: with the
    default warm_origin = [false], the same order as ``combinations`` (a shuffle depends only on
    the list's length and the seed), so existing campaigns load in the same order."""
    combos = [(b, d, h, w) for b in params.browsers for d in params.dns for h in params.http for w in params.warm_origin]
    random.Random(seed).shuffle(combos)
    return combos


def origins_for(url: str, extra: list[str]) -> tuple[str, ...]:
    u = urlsplit(url)
    own = f"{u.hostname}:{u.port or 443}"
    return tuple(dict.fromkeys([own, *extra]))


def find_ca(params_ca: str | None, testbed: dict[str, Any] | None) -> str | None:
    """The trust anchor for sites and resolvers: the spec's, else the CA file that the testbed
    description names (None off the testbed: the system's trust store only)."""
    if params_ca:
        return params_ca
    ca = catalog.testbed_ca_file(testbed)
    return ca if ca and Path(ca).is_file() else None


def resolver_rtt(mode: dnsmode.DnsMode, count: int) -> dict[str, float | None] | None:
    """Median ICMP RTT (ms) to the mode's resolver, None when it did not answer."""
    if mode.resolver is None:
        return None
    from vantage_agent.ping import PingParams, ping

    addr = mode.resolver.address
    try:
        b = ping(PingParams(targets=[addr], count=count, interval_ms=0, timeout_ms=1000), addr)
        rtts = [r for r in b.rtts_ms if r is not None]
        return {addr: round(median(rtts), 3) if rtts else None}
    except Exception:  # noqa: BLE001 - an unanswered ping is a null, not a failed load
        return {addr: None}


def verify(mode: dnsmode.DnsMode, hosts: list[str], stub_stats: dict[str, Any] | None) -> tuple[bool | None, str]:
    """Resolver-side evidence this harness has by itself (the testbed tests add the
    frontends' logs): the stub saw the page's names and forwarded them over its transport."""
    if mode.driver.via_stub and stub_stats is not None:
        # Verified = every page name the stub saw was answered by the upstream over the
        # transport. A failed forward (the browser got SERVFAIL and retried) does not mean
        # another transport was used, so it is reported, not a refutation.
        seen = set(stub_stats.get("names") or [])
        answered = set(stub_stats.get("answered") or [])
        page = set(hosts) & seen
        n, failed = stub_stats.get("queries", 0), stub_stats.get("failures", 0)
        errs = "; ".join(stub_stats.get("errors") or [])[:300]
        tail = f", {failed} failed ({errs})" if failed else ""
        if n and page and page <= answered:
            return True, f"stub forwarded {n} queries over {mode.transport} ({len(page)} page names answered){tail}"
        missing = sorted(page - answered) or sorted(set(hosts) - seen)
        return False, f"stub saw {n} queries{tail}; page names not answered over {mode.transport}: {missing[:5]}"
    return None, mode.driver.evidence


class FrontendLogs:
    """The testbed resolver frontends' query logs (CoreDNS, one line per query, first word =
    the transport of the server block: testbed/services/frontends.py), as the testbed
    description names them (``resolvers.<key>.query_log``). Offsets are taken before a load;
    ``verify`` reads what was appended during it."""

    def __init__(self, testbed: dict[str, Any] | None) -> None:
        try:
            logs = {r.query_log for r in catalog.testbed_resolvers(testbed or {}).values() if r.query_log}
        except catalog.CatalogError:  # a malformed description: no log evidence, the load still runs
            logs = set()
        self.paths = sorted(Path(p) for p in logs)
        self.offsets = {p: self._size(p) for p in self.paths}

    @staticmethod
    def _size(p: Path) -> int:
        try:
            return p.stat().st_size
        except OSError:
            return 0

    def new_lines(self) -> list[list[str]]:
        out = []
        for p in self.paths:
            try:
                with open(p, "rb") as f:
                    f.seek(self.offsets[p])
                    data = f.read()
            except OSError:
                continue
            out += [parse_log_line(ln) for ln in data.decode(errors="replace").splitlines() if ln.strip()]
        return [ln for ln in out if ln]

    def verify(self, mode: dnsmode.DnsMode, hosts: list[str]) -> tuple[bool | None, str] | None:
        """None when there are no frontend logs (not on the testbed)."""
        if not self.paths:
            return None
        time.sleep(0.2)  # CoreDNS writes its log line after answering
        me = _source_address(mode.resolver.address if mode.resolver else None)
        ours = [ln for ln in self.new_lines() if len(ln) > 4 and ln[1].rsplit(":", 1)[0] == me]
        page = set(hosts)
        seen = {ln[4].rstrip(".").lower() for ln in ours}
        transports = sorted({ln[0] for ln in ours})
        want = mode.driver.wire_transport
        if not ours or not (page & seen):
            return None, f"no frontend log line for the page's names from {me}"
        ok = transports == [want]
        return ok, f"frontend logs: {len(ours)} queries from {me} over {','.join(transports)}"


def parse_log_line(line: str) -> list[str]:
    """A frontend log line as fields [transport, client:port, type, class, name, ...]; CoreDNS
    prefixes its log plugin's lines with the level (``[INFO]``)."""
    f = line.split()
    while f and f[0].startswith("[") and f[0].endswith("]"):
        f = f[1:]
    return f


def _source_address(resolver: str | None) -> str | None:
    """Our address towards ``resolver`` (for ``system``: the resolv.conf nameserver, which on
    a testbed client is the ISP resolver), as the frontend logs it."""
    import socket

    if resolver is None:
        local = catalog.resolv_conf_resolver()
        resolver = local.endpoints["do53"].address if local is not None else None
    if resolver is None:
        return None
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect((resolver, 53))
        return s.getsockname()[0]
    except OSError:
        return None
    finally:
        s.close()


def body_of(
    res: LoadResult,
    mode: dnsmode.DnsMode,
    opts: LoadOptions,
    *,
    har_path: str | None,
    har_valid: bool | None,
    stub_stats: dict[str, Any] | None,
    rtt: dict[str, float | None] | None,
    order: dict[str, Any] | None,
    logs: "FrontendLogs | None" = None,
) -> PageLoadBody:
    nav = res.navigation
    hosts = metrics.hostnames(res.url, res.resources, res.har)
    paint = res.paint or {}
    ok, how = verify(mode, hosts, stub_stats)
    from_logs = logs.verify(mode, hosts) if logs is not None and res.status == errors.OK else None
    if from_logs is not None and from_logs[0] is not None:
        ok, how = (from_logs[0] and ok is not False), from_logs[1] + ("" if ok is None else f"; {how}")
    if stub_stats is not None:
        stub_stats = {k: v for k, v in stub_stats.items()}
    return PageLoadBody(
        url=res.url,
        final_url=res.final_url,
        browser=res.browser,  # type: ignore[arg-type]
        browser_version=res.versions.get("browser_version"),
        driver_version=res.versions.get("driver_version"),
        dns_mode=str(mode),
        dns_transport=mode.transport,  # type: ignore[arg-type]
        resolver=mode.resolver.label() if mode.resolver else None,
        http=opts.http,  # type: ignore[arg-type]
        timeout_s=opts.timeout_s,
        viewport=opts.viewport,
        plt_ms=metrics.plt_ms(nav),
        navigation=nav,
        first_paint_ms=paint.get("first-paint"),
        first_contentful_paint_ms=paint.get("first-contentful-paint"),
        lcp_ms=res.lcp_ms,
        next_hop_protocol=(nav or {}).get("nextHopProtocol") or None,
        protocols=metrics.protocols(nav, res.resources),
        resources=metrics.resource_rows(res.resources),
        hostnames=hosts,
        unique_hostnames=len(hosts),
        dns_lookups=metrics.dns_lookups(nav, res.resources, res.har),
        stub=stub_stats,
        dns_transport_verified=ok,
        dns_verification=how,
        har_path=har_path,
        har_valid=har_valid,
        har_source=(res.har or {}).get("log", {}).get("_source") if res.har else None,
        har_entries=len(res.har["log"]["entries"]) if res.har else None,
        resolver_rtt_ms=rtt,
        wall_ms={k: round(v, 3) for k, v in res.wall_ms.items()},
        order=order,
        warm_origin=res.warm,
    )


def measure(
    unit: Unit,
    url: str,
    browser: str,
    mode: dnsmode.DnsMode,
    opts: LoadOptions,
    artifacts_dir: Path,
    *,
    dns: dnsmode.DnsSetup | None = None,
    rtt_count: int | None = 3,
    order: dict[str, Any] | None = None,
    testbed: dict[str, Any] | None = None,
) -> Envelope:
    """One load -> one record (HAR written beside it). Never raises. ``testbed``: the testbed
    description (its frontends' query logs verify the load's transport)."""
    started = utcnow()
    rid = uuid.uuid4()
    env: dict[str, Any] = {"seed": unit.seed}
    own_dns = dns is None
    logs: FrontendLogs | None = None
    res: LoadResult
    try:
        mod = registry.get(browser)
        env.update({k: v for k, v in mod.versions().items()})
        if own_dns:
            dns = dnsmode.setup(mode, artifacts_dir / "dns" / rid.hex[:12], ca_file=opts.ca_file)
        else:
            dns.reset_stats()
        logs = FrontendLogs(testbed)
        res = mod.load(url, opts, dns)
        stub_stats = dns.stats()
    except dnsmode.DnsModeError as exc:
        res = LoadResult(url=url, browser=browser, status=errors.SetupError.status, error=str(exc))
        stub_stats = None
    except (OSError, errors.MeasurementError) as exc:
        msg = exc.message if isinstance(exc, errors.MeasurementError) else f"{type(exc).__name__}: {exc}"
        st = exc.status if isinstance(exc, errors.MeasurementError) else errors.SetupError.status
        res = LoadResult(url=url, browser=browser, status=st, error=f"DNS mode {mode}: {msg}")
        stub_stats = None
    finally:
        if own_dns and dns is not None:
            dns.close()
    rtt = resolver_rtt(mode, rtt_count) if rtt_count else None
    har_path = har_valid = None
    if res.har is not None:
        problems = harmod.validate(res.har)
        har_valid = not problems
        if problems:
            res.har["log"]["comment"] = "schema problems: " + "; ".join(problems[:5])
        rel = Path("har") / f"{rid}.har"
        try:
            harmod.write(res.har, artifacts_dir / rel)
            har_path = str(rel)
        except OSError:
            har_path = None
    body = body_of(res, mode, opts, har_path=har_path, har_valid=har_valid, stub_stats=stub_stats, rtt=rtt, order=order, logs=logs)
    status = res.status
    error = res.error if status != errors.OK else None
    if status != errors.OK and not error:
        error = status
    return make_record(unit, started_at=started, body=body, status=status, error=error, env=env, record_id=rid)


class _PageLoadKind:
    name = "page_load"
    params_model = PageLoadParams
    where = "client"

    def targets(self, params: PageLoadParams) -> list[str]:
        return list(params.urls)

    def run(self, unit: Unit, ctx: RunContext) -> Iterable[Envelope]:
        params = PageLoadParams.model_validate({**unit.params, "urls": [unit.target]})
        ca = find_ca(params.ca_file, ctx.testbed)
        combos = load_plan(params, unit.seed)
        work = Path(ctx.artifacts_dir) / "work"
        refuse = _testbed_only(unit.target, params.dns) if not ctx.testbed else None
        for i, (browser, mode_s, http, warm) in enumerate(combos):
            why = refuse
            try:
                mode = dnsmode.parse(mode_s, testbed=ctx.testbed)
            except dnsmode.DnsModeError as exc:  # the description's entry for the alias is malformed
                mode, why = dnsmode.parse(mode_s), why or str(exc)
            if why:
                yield _setup_error(unit, browser, mode, http, params, why)
                continue
            opts = LoadOptions(
                timeout_s=params.timeout_s,
                viewport=tuple(params.viewport),  # type: ignore[arg-type]
                http=http,
                h3_origins=origins_for(unit.target, params.h3_origins) if http == "h3" else (),
                ca_file=ca,
                work_dir=str(work),
                har=params.har,
                warm_origin=warm,
            )
            order = {"seed": unit.seed, "site_order": unit.order, "combination": i, "of": len(combos),
                     **({"warm_origin": True} if warm else {})}
            yield measure(
                unit, unit.target, browser, mode, opts, Path(ctx.artifacts_dir),
                rtt_count=params.rtt_count if params.resolver_rtt else None, order=order, testbed=ctx.testbed,
            )  # fmt: skip


def _testbed_only(url: str, modes: list[str]) -> str | None:
    """Why this unit needs the testbed (its names or resolvers exist only there), or None.
    Testbed names must never be sent to a real resolver."""
    host = (urlsplit(url).hostname or "").lower()
    if host == "test" or host.endswith(".test"):
        return f"{host} is a testbed site: it needs a testbed vantage (no lookup was sent)"
    for m in modes:
        if m.split(":", 1)[-1] in dnsmode.ALIASES:
            return f"DNS mode {m} names a testbed resolver: it needs a testbed vantage"
    return None


def _setup_error(unit: Unit, browser: str, mode: dnsmode.DnsMode, http: str, params: PageLoadParams, why: str) -> Envelope:
    res = LoadResult(url=unit.target, browser=browser, status=errors.SetupError.status, error=why)
    opts = LoadOptions(timeout_s=params.timeout_s, viewport=tuple(params.viewport), http=http)  # type: ignore[arg-type]
    body = body_of(res, mode, opts, har_path=None, har_valid=None, stub_stats=None, rtt=None, order={"seed": unit.seed})
    return make_record(unit, started_at=utcnow(), body=body, status=res.status, error=why, env={"seed": unit.seed})


KIND = _PageLoadKind()


def wall_clock() -> float:
    return time.monotonic()
