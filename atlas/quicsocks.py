"""The QuicSocks latency model and its analysis over many probes.

Source: 001_3c494309ab66be23.txt (the QuicSocks paper), §IV-A Table I (the model), Table II
(the LTE example: RTT_DNS = RTT_Server = 30 ms, RTT_direct = 60 ms → 90 vs 60 ms without a
stateless retry, 150 vs 90 ms with one) and §IV-B (the RIPE Atlas evaluation: RTTs are the
average of five pings; only probes whose resolver is in the probe's own AS count as using an
ISP resolver; shares of probes saving ≥ 5, 10, 15, 30, 40, 50 ms; share with RTT_DNS < 10 ms;
Fig. 6 and Fig. 7 are CDFs).

Definitions (Fig. 5 of the paper):

- ``RTT_DNS``: client ↔ DNS resolver (= the colocated QuicSocks proxy);
- ``RTT_Server``: QuicSocks proxy (resolver) ↔ server;
- ``RTT_direct``: client ↔ server.

Pure code: no I/O, no database.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Iterable, Mapping, Sequence

from vantage_agent import errors
from vantage_agent.stats import median

# §IV-B: "For 51% ... at least 5 ms", "36.7% ... at least 10 ms", "24.3% ... 15 ms",
# "10% ... 30 ms", "7.2% and 3.8% ... at least 40 ms and 50 ms".
SAVING_THRESHOLDS_MS: tuple[int, ...] = (5, 10, 15, 30, 40, 50)
# §IV-B: "60% of the nodes have a RTT with their ISP-provided DNS resolver of less than 10 ms".
RTT_DNS_LOW_MS = 10.0
# §IV-B: "we used an average over five ping measurements to determine the respective RTT".
PINGS_PER_RTT = 5


@dataclass(frozen=True)
class ModelResult:
    """Table I for one (RTT_DNS, RTT_Server, RTT_direct) case. All values in ms."""

    rtt_dns: float
    rtt_server: float
    rtt_direct: float
    status_quo: float  # RTT_DNS + RTT_direct
    proposal: float  # RTT_DNS + RTT_Server
    status_quo_retry: float  # RTT_DNS + 2·RTT_direct
    proposal_retry: float  # RTT_DNS + 2·RTT_Server
    saving: float  # status_quo - proposal = RTT_direct - RTT_Server
    saving_retry: float  # 2·(RTT_direct - RTT_Server)
    reduction_pct: float | None  # saving / status_quo · 100
    reduction_retry_pct: float | None

    def to_dict(self) -> dict[str, float | None]:
        return asdict(self)


def _check(name: str, v: float) -> float:
    v = float(v)
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{name} must be a finite number >= 0 ms, got {v!r}")
    return v


def model(rtt_dns: float, rtt_server: float, rtt_direct: float) -> ModelResult:
    """Table I of the paper for one case."""
    d = _check("rtt_dns", rtt_dns)
    s = _check("rtt_server", rtt_server)
    r = _check("rtt_direct", rtt_direct)
    sq, pr = d + r, d + s
    sq2, pr2 = d + 2 * r, d + 2 * s
    return ModelResult(
        rtt_dns=d,
        rtt_server=s,
        rtt_direct=r,
        status_quo=sq,
        proposal=pr,
        status_quo_retry=sq2,
        proposal_retry=pr2,
        saving=sq - pr,
        saving_retry=sq2 - pr2,
        reduction_pct=(100.0 * (sq - pr) / sq) if sq > 0 else None,
        reduction_retry_pct=(100.0 * (sq2 - pr2) / sq2) if sq2 > 0 else None,
    )


def average_rtt(rtts: Sequence[float | None], *, expected: int = PINGS_PER_RTT) -> float | None:
    """The RTT of one peer pair: the mean of the replies among ``expected`` pings (§IV-B).

    Lost packets (None) are left out of the mean; with no reply at all there is no RTT (the
    paper counts such probes as failures: "DNS resolver that did not respond to ping").
    """
    got = [float(x) for x in rtts if x is not None]
    if not got:
        return None
    return sum(got) / len(got)


@dataclass(frozen=True)
class ProbeRtts:
    """The three RTTs of one probe (ms), and what is known of its resolver."""

    prb_id: int
    rtt_dns: float | None
    rtt_server: float | None
    rtt_direct: float | None
    resolver: str | None = None
    probe_asn: int | None = None
    resolver_asn: int | None = None

    @property
    def complete(self) -> bool:
        return None not in (self.rtt_dns, self.rtt_server, self.rtt_direct)

    @property
    def isp_resolver(self) -> bool:
        """§IV-B: an ISP-provided resolver has an address in the same AS as the probe."""
        return self.probe_asn is not None and self.probe_asn == self.resolver_asn


def rtts_of_pings(pings: Iterable, roles: Mapping[int | None, str], discovery: Iterable) -> list[ProbeRtts]:
    """The probes' RTTs as the view ``v_quicsocks_savings`` gives them, from parsed pings
    (``atlas.ping.PingRow``) instead of the store: one per discovered probe
    (``atlas.discovery.Discovered``), by prb_id. ``roles``: msm_id → role. Each RTT is the mean of
    the replies of the latest successful ping (status ok, a mean) of its role: RTT_DNS probe →
    its discovered resolver, RTT_direct probe → server, RTT_Server server → that resolver. As in
    the store, a result repeated (same measurement, probe, second and destination) counts once,
    the first; of two equally recent pings of a role the later one read wins."""
    latest: dict[tuple, tuple] = {}
    seen: set[tuple] = set()  # the store's unique key of a ping result (uq_atlas_raw_result)
    for n, p in enumerate(pings):
        key = (p.msm_id, p.prb_id, p.timestamp, p.dst_addr or p.dst_name or "")
        if key in seen:
            continue
        seen.add(key)
        role = roles.get(p.msm_id)
        if role is None or p.status != errors.OK or p.avg is None:
            continue
        key = {"probe_resolver": (role, p.prb_id, p.dst_addr), "probe_server": (role, p.prb_id),
               "server_resolver": (role, p.dst_addr)}.get(role)
        if key is not None and (key not in latest or (p.timestamp, n) >= latest[key][:2]):
            latest[key] = (p.timestamp, n, p.avg)

    def rtt(*key: object) -> float | None:
        got = latest.get(key)
        return got[2] if got else None

    return [ProbeRtts(d.prb_id, rtt("probe_resolver", d.prb_id, d.resolver), rtt("server_resolver", d.resolver),
                      rtt("probe_server", d.prb_id), d.resolver, d.probe_asn, d.resolver_asn)
            for d in sorted(discovery, key=lambda d: d.prb_id)]


def _share(values: Iterable[bool], n: int) -> float | None:
    return (sum(1 for v in values if v) / n) if n else None


def _cdf(values: Iterable[float]) -> list[list[float]]:
    xs = sorted(values)
    n = len(xs)
    return [[round(x, 3), round((i + 1) / n, 6)] for i, x in enumerate(xs)]


def summarize(probes: Sequence[ProbeRtts], *, isp_only: bool = True) -> dict:
    """The §IV-B analysis over probes: shares of savings, RTT_DNS < 10 ms, CDF data.

    ``isp_only`` keeps only probes whose resolver is in their own AS (the paper's 474 of 650).
    Probes missing any of the three RTTs are counted as failures and left out.
    """
    total = len(probes)
    complete = [p for p in probes if p.complete]
    kept = [p for p in complete if p.isp_resolver] if isp_only else complete
    n = len(kept)
    models = [model(p.rtt_dns, p.rtt_server, p.rtt_direct) for p in kept]  # type: ignore[arg-type]
    shares = {
        str(t): {
            "without_retry": _share((m.saving >= t for m in models), n),
            "with_retry": _share((m.saving_retry >= t for m in models), n),
        }
        for t in SAVING_THRESHOLDS_MS
    }
    return {
        "probes_total": total,
        "probes_complete": len(complete),
        "probes_isp_resolver": sum(1 for p in complete if p.isp_resolver),
        "probes_analysed": n,
        "isp_only": isp_only,
        "thresholds_ms": list(SAVING_THRESHOLDS_MS),
        "share_saving_at_least": shares,
        "share_faster": _share((m.saving > 0 for m in models), n),
        "share_rtt_dns_below_10ms": _share((m.rtt_dns < RTT_DNS_LOW_MS for m in models), n),
        # §IV-B: "a third of the nodes experience a faster connection establishment using our
        # proposal in a stateless retry connection establishment than having a status quo
        # handshake without stateless retry".
        "share_proposal_retry_beats_status_quo": _share(
            (m.proposal_retry < m.status_quo for m in models), n
        ),
        "median_ms": {
            k: median([getattr(m, k) for m in models])
            for k in ("rtt_dns", "rtt_server", "rtt_direct", "saving", "saving_retry")
        },
        "cdf": {  # Fig. 6 (the three RTTs) and Fig. 7 (the four latencies)
            "rtt_dns": _cdf(m.rtt_dns for m in models),
            "rtt_server": _cdf(m.rtt_server for m in models),
            "rtt_direct": _cdf(m.rtt_direct for m in models),
            "status_quo": _cdf(m.status_quo for m in models),
            "proposal": _cdf(m.proposal for m in models),
            "status_quo_retry": _cdf(m.status_quo_retry for m in models),
            "proposal_retry": _cdf(m.proposal_retry for m in models),
        },
    }


def format_summary(s: dict) -> str:
    """A short human-readable summary (what `dnscamp atlas quicsocks` prints)."""
    lines = [
        f"probes: {s['probes_total']} total, {s['probes_complete']} with all three RTTs, "
        f"{s['probes_isp_resolver']} with an ISP resolver (same AS), {s['probes_analysed']} analysed",
    ]
    if not s["probes_analysed"]:
        lines.append("no probe to analyse")
        return "\n".join(lines)

    def pct(v: float | None) -> str:
        return "-" if v is None else f"{100 * v:5.1f} %"

    lines.append("saving at least   without retry   with retry")
    for t in s["thresholds_ms"]:
        sh = s["share_saving_at_least"][str(t)]
        lines.append(f"  {t:>3} ms          {pct(sh['without_retry']):>12}   {pct(sh['with_retry']):>10}")
    lines.append(f"RTT_DNS < 10 ms: {pct(s['share_rtt_dns_below_10ms'])}")
    lines.append(f"proposal with retry faster than status quo without: {pct(s['share_proposal_retry_beats_status_quo'])}")
    med = s["median_ms"]
    lines.append(
        "medians: "
        + ", ".join(f"{k} {v:.1f} ms" for k, v in med.items() if v is not None)
    )
    return "\n".join(lines)


def format_model(m: ModelResult) -> str:
    def pct(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f} %"

    return "\n".join(
        [
            f"RTT_DNS {m.rtt_dns:g} ms, RTT_Server {m.rtt_server:g} ms, RTT_direct {m.rtt_direct:g} ms",
            "stateless retry   status quo   proposal   saving",
            f"  w/o             {m.status_quo:>7.1f} ms {m.proposal:>7.1f} ms {m.saving:>6.1f} ms ({pct(m.reduction_pct)})",
            f"  with            {m.status_quo_retry:>7.1f} ms {m.proposal_retry:>7.1f} ms {m.saving_retry:>6.1f} ms ({pct(m.reduction_retry_pct)})",
        ]
    )
