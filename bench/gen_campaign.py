"""A realistic generated campaign: dns_query and page_load result records (JSONL,
schema dnscamp.result/1, valid for `dnscamp ingest`) and RIPE Atlas results (the Atlas result
format that collectors/atlas_ingest.py reads), shaped like the testbed's figures.

    .venv/bin/python bench/gen_campaign.py OUT [--scale 0.01] [--seed 1] [--ingest]

Sizes: --dns-queries 10,000,000, --page-loads 1,000,000, --atlas 2,000,000 (the issue's),
each multiplied by --scale. Same --seed and sizes, same bytes (ids, times, values).

Shape (what the views and dashboards are exercised with):
- 20 vantages = 5 EC2 regions (the WWW'20 paper's) x 4 access profiles (rtt_ms of
  testbed/profiles.toml: fiber, cable, dsl, 4g), 8 resolvers, 5 transports, 30 days ending at
  --end. A run is one vantage at one time doing every resolver x transport unit, 5 queries each
  (policy reuse: the first query of a connection pays its handshakes, the others reuse it).
- Round trips as the testbed measures them (tests/fixtures/demo): Do53 1 RTT; DoT and DoH
  3 (TCP, TLS 1.3, exchange), DoQ and DoH3 2 (QUIC handshake, exchange) on a fresh
  connection, 1 on a reused one; RTT = the profile's access RTT + the resolver's distance from
  the region, with jitter and a 2 % queueing tail; the resolver answers from cache 95 % of the
  time (~0.2 ms) and otherwise recurses (median 30 ms). Bytes and packets per phase are the
  demo's per transport.
- Failures 1-5 % per transport (more on 4G), statuses from the taxonomy (vantage_agent/
  errors.py) as each transport fails: Do53 timeouts, SERVFAIL, REFUSED, truncation; TLS and
  connect errors for DoT/DoH, HTTP errors for DoH, QUIC errors for DoQ/DoH3; page loads time
  out, fail DNS or the driver. Failed bodies carry what was measured up to the failure.
- Atlas: 474 probes, each with a resolver (most in the probe's AS); rounds of one DNS result
  (resolver_dns) and two pings per probe (probe_server, probe_resolver) and one ping per
  resolver from the server (server_resolver), so v_quicsocks_savings has rows; ~2 % of
  results are timeouts. atlas/atlas-bundle.json (atlas/bundle.py) holds the measurement roles,
  the discovery and the probes' places (stored as tests/scaffolding/demo_data.py stores them).

Layout: OUT/records/{dns_query,page_load}-NNNN.jsonl, OUT/atlas/results-NNNN.jsonl,
OUT/atlas/atlas-bundle.json, OUT/generated.json (sizes, seed, counts by kind and status).
`load(OUT, url)` (or --ingest) stores it all through the normal ingest paths.
"""

from __future__ import annotations

import argparse
import base64
import ipaddress
import json
import struct
import sys
import time
import tomllib
from datetime import datetime
from pathlib import Path
from typing import Iterator

import numpy as np
import orjson

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from atlas import bundle  # noqa: E402 - after the path set-up
from vantage_agent.pageload.dnsmode import MODES  # noqa: E402

PER_FILE = 250_000  # records per JSONL file
BATCH_RUNS = 1_000  # runs generated per numpy batch (200,000 dns_query records)
DAYS = 30
END = "2026-11-23T00:00:00Z"

REGIONS = ("us-east-2", "us-west-1", "eu-central-1", "ap-southeast-2", "ap-northeast-2")
PROFILES = ("fiber", "cable", "dsl", "4g")
_PROFILE_TOML = tomllib.loads((ROOT / "testbed" / "profiles.toml").read_text())
ACCESS_RTT = {p: float(_PROFILE_TOML[p]["rtt_ms"]) for p in PROFILES}
VANTAGES = tuple((f"ec2-{r}-{p}", r, p) for r in REGIONS for p in PROFILES)
# name, address, tls name, DoH URL, distance (ms of RTT beyond the access link) per region
RESOLVERS = (
    ("cloudflare", "1.1.1.1", "cloudflare-dns.com", "https://cloudflare-dns.com/dns-query", (1.2, 2.0, 1.5, 2.5, 3.0)),
    ("google", "8.8.8.8", "dns.google", "https://dns.google/dns-query", (1.5, 2.2, 1.8, 3.5, 2.8)),
    ("quad9", "9.9.9.9", "dns.quad9.net", "https://dns.quad9.net/dns-query", (3.0, 5.5, 2.5, 12.0, 9.0)),
    ("adguard", "94.140.14.14", "dns.adguard-dns.com", "https://dns.adguard-dns.com/dns-query", (18.0, 25.0, 4.0, 60.0, 45.0)),
    ("nextdns", "45.90.28.0", "dns.nextdns.io", "https://dns.nextdns.io/dns-query", (2.5, 3.0, 3.5, 6.0, 5.0)),
    ("opendns", "208.67.222.222", "doh.opendns.com", "https://doh.opendns.com/dns-query", (4.0, 6.0, 5.0, 14.0, 10.0)),
    ("controld", "76.76.2.0", "freedns.controld.com", "https://freedns.controld.com/p0", (8.0, 12.0, 9.0, 30.0, 22.0)),
    ("local", "10.0.0.2", "resolver.internal", "https://resolver.internal/dns-query", (0.4, 0.4, 0.4, 0.4, 0.4)),
)
TRANSPORTS = ("do53", "dot", "doh", "doh3", "doq")
QUERIES_PER_UNIT = 5
RECORDS_PER_RUN = len(RESOLVERS) * len(TRANSPORTS) * QUERIES_PER_UNIT
QNAMES = tuple(f"www.{s}.example." for s in ("single", "js", "js-css", "multi-5", "multi-10", "multi-30"))

# Per transport: round trips before the query on a fresh connection, port, protocol fields,
# wire basis, and the demo's (tests/fixtures/demo) bytes/packets: handshake (sent, received,
# packets sent, received) and query fresh / reused (sent, received, packets sent, received).
# setup: how a fresh connection is opened (None: none, UDP), which shapes its phase timestamps
TRANSPORT = {
    "do53": dict(port=53, alpn=None, http=None, method=None, quic=None, tls=None, basis="udp_count", attempts=2,
                 setup=None, hs=None, q=(44, 75, 1, 1), qr=(44, 75, 1, 1)),
    "dot": dict(port=853, alpn=None, http=None, method=None, quic=None, tls="TLSv1.3", basis="tcp_info", attempts=1,
                setup="tcp", hs=(517, 1497, 6, 4), q=(132, 99, 1, 2), qr=(64, 91, 1, 1)),
    "doh": dict(port=443, alpn="h2", http="2", method="POST", quic=None, tls="TLSv1.3", basis="tcp_info", attempts=1,
                setup="tcp", hs=(1566, 2594, 7, 5), q=(445, 322, 5, 5), qr=(187, 142, 3, 3)),
    "doh3": dict(port=443, alpn="h3", http="3", method="GET", quic=None, tls="TLSv1.3", basis="netdev_count",
                 attempts=1, setup="libcurl_quic", hs=(5006, 2813, 4, 5), q=(1740, 539, 3, 3), qr=(234, 256, 1, 3)),
    "doq": dict(port=853, alpn="doq", http=None, method=None, quic="1", tls="TLSv1.3", basis="quic_count", attempts=1,
                setup="quic", hs=(2400, 1613, 2, 2), q=(124, 421, 2, 2), qr=(75, 133, 1, 2)),
}
# Failure probability per transport (x1.4 on 4G) and the statuses it fails with (weights).
FAIL_P = {"do53": 0.012, "dot": 0.018, "doh": 0.022, "doh3": 0.028, "doq": 0.03}
FAIL_STATUS = {
    "do53": {"timeout": 55, "servfail": 20, "refused": 10, "truncated": 5, "malformed_response": 5, "unreachable": 5},
    "dot": {"timeout": 40, "connect_error": 30, "tls_error": 25, "unreachable": 5},
    "doh": {"timeout": 30, "connect_error": 20, "tls_error": 20, "http_error": 25, "other": 5},
    "doh3": {"timeout": 40, "quic_error": 50, "http_error": 10},
    "doq": {"timeout": 40, "quic_error": 55, "malformed_response": 5},
}
ERROR_TEXT = {
    "timeout": "no response within 5.0 s",
    "servfail": "resolver answered SERVFAIL",
    "refused": "resolver answered REFUSED",
    "truncated": "TC bit set in the UDP response",
    "malformed_response": "response did not parse: message too short",
    "unreachable": "ICMP host unreachable",
    "connect_error": "connection refused",
    "tls_error": "certificate verify failed: unable to get local issuer certificate",
    "http_error": "HTTP 503",
    "quic_error": "QUIC connection closed: handshake timeout",
    "other": "connection reset by peer after the request",
    "page_load_timeout": "page did not load within 30.0 s",
    "dns_error": "about:neterror?e=dnsNotFound",
    "driver_error": "WebDriver session crashed: browser exited",
}


def _env(region: str, profile: str, kind: str) -> bytes:
    """One vantage's env block (the demo's shape), serialised once and spliced into every record."""
    env = {"kernel": "6.1.0-28-cloud-amd64", "os": "Linux-6.1.0-28-cloud-amd64-x86_64-with-glibc2.36",
           "python": "3.11.7", "hostname": f"ip-10-0-{REGIONS.index(region)}-{PROFILES.index(profile) + 10}",
           "netns": None, "link_backend": "netem",
           "link": {"profile": profile, "backend": "netem", "device": "ens5", "applied_at": "2026-10-20T00:00:00Z"}}
    if kind == "dns_query":
        env["dns"] = {"dnspython": "2.9.2", "aioquic": "1.7.2", "pycurl": "PycURL/7.49.0 libcurl/8.23.0 "
                      "OpenSSL/3.6.5 nghttp2/1.70.0 ngtcp2/1.25.0 nghttp3/1.18.0", "python_ssl": "OpenSSL 3.0.19"}
    return orjson.dumps(env)


def _uuids(rng: np.random.Generator, n: int) -> list[str]:
    b = rng.integers(0, 256, size=(n, 16), dtype=np.uint8)
    b[:, 6] = (b[:, 6] & 0x0F) | 0x40  # version 4
    b[:, 8] = (b[:, 8] & 0x3F) | 0x80  # RFC 4122 variant
    hx = b.tobytes().hex()
    return [f"{hx[j:j + 8]}-{hx[j + 8:j + 12]}-{hx[j + 12:j + 16]}-{hx[j + 16:j + 20]}-{hx[j + 20:j + 32]}"
            for j in range(0, 32 * n, 32)]


def _times(t_ns: np.ndarray) -> list[str]:
    """Nanoseconds since the epoch -> RFC 3339 UTC strings with microseconds."""
    return [s + "Z" for s in np.datetime_as_string(t_ns.astype("datetime64[ns]").astype("datetime64[us]"), unit="us")]


def _pick(rng: np.random.Generator, weights: dict[str, int], n: int) -> np.ndarray:
    keys = list(weights)
    p = np.array([weights[k] for k in keys], dtype=float)
    return np.array(keys, dtype=object)[rng.choice(len(keys), size=n, p=p / p.sum())]


class Writer:
    """JSONL files of PER_FILE lines: OUT/<dir>/<stem>-NNNN.jsonl."""

    def __init__(self, out: Path, stem: str):
        self.out, self.stem, self.n, self.f = out, stem, 0, None
        out.mkdir(parents=True, exist_ok=True)

    def write(self, line: bytes) -> None:
        if self.n % PER_FILE == 0:
            self.close()
            self.f = open(self.out / f"{self.stem}-{self.n // PER_FILE:04d}.jsonl", "wb", buffering=1 << 20)
        self.f.write(line)
        self.f.write(b"\n")
        self.n += 1

    def close(self) -> None:
        if self.f:
            self.f.close()
            self.f = None


def _window(end: str, days: int = DAYS) -> tuple[int, int]:
    t1 = int(datetime.fromisoformat(end.replace("Z", "+00:00")).timestamp()) * 10**9
    return t1 - days * 86400 * 10**9, t1


# --- dns_query --------------------------------------------------------------------------


def dns_queries(n: int, rng: np.random.Generator, campaign: str, end: str, *, vantages: tuple = VANTAGES,
                resolvers: tuple = RESOLVERS, days: int = DAYS) -> Iterator[dict]:
    """n dns_query records (as dicts whose env is an orjson.Fragment), in time order per vantage;
    ``vantages``, ``resolvers`` and ``days``: a smaller campaign of the same shape (tests)."""
    records_per_run = len(resolvers) * len(TRANSPORTS) * QUERIES_PER_UNIT
    t0, t1 = _window(end, days)
    n_runs = -(-n // records_per_run)
    per_vantage = -(-n_runs // len(vantages))
    gap = (t1 - t0) // max(per_vantage, 1)  # between two runs of one vantage
    envs = [orjson.Fragment(_env(r, p, "dns_query")) for _, r, p in vantages]
    boot = rng.integers(86_400 * 10**9, 3 * 86_400 * 10**9, len(vantages))
    units = [(ri, t) for ri in range(len(resolvers)) for t in TRANSPORTS]
    made = 0
    for first in range(0, n_runs, BATCH_RUNS):
        runs = np.arange(first, min(first + BATCH_RUNS, n_runs))
        k = len(runs) * records_per_run
        run_of = np.repeat(runs, records_per_run)
        vi = run_of % len(vantages)
        slot = np.tile(np.arange(records_per_run), len(runs))
        ui, seq = slot // QUERIES_PER_UNIT, slot % QUERIES_PER_UNIT
        run_t = t0 + (run_of // len(vantages)) * gap + vi * (gap // len(vantages)) + rng.integers(0, 30 * 10**9, k)
        started = run_t + ui * 1_500_000_000 + seq * 120_000_000  # 1.5 s per unit, 120 ms per query
        access = np.array([ACCESS_RTT[vantages[v][2]] for v in range(len(vantages))])[vi]
        region = np.array([REGIONS.index(vantages[v][1]) for v in range(len(vantages))])[vi]
        res_i = np.array([u[0] for u in units])[ui]
        dist = np.array([r[4] for r in resolvers])[res_i, region]
        # per query RTT: access + distance, +-2 % jitter, and a 2 % queueing/retransmission tail
        rtt = (access + dist) * (1 + np.abs(rng.normal(0, 0.02, k))) \
            + np.where(rng.random(k) < 0.02, rng.exponential(40.0, k), 0.0)  # fmt: skip
        server = np.where(rng.random(k) < 0.95, rng.exponential(0.2, k), rng.lognormal(np.log(30.0), 0.8, k))
        local = rng.exponential(0.15, (3, k))  # client-side gaps between phases (ms)
        fail_u = rng.random(k)
        is_4g = np.array([vantages[v][2] == "4g" for v in range(len(vantages))])[vi]
        # CLOCK_MONOTONIC as on a vantage: ns since its boot (one boot 1-3 days before the window)
        mono0 = boot[vi] + (started - t0)
        ids = _uuids(rng, k)
        stamps = _times(started)
        qn = rng.integers(0, len(QNAMES), k)
        status_draw = {t: iter(_pick(rng, FAIL_STATUS[t], k)) for t in TRANSPORTS}
        for i in range(k):
            if made >= n:
                return
            made += 1
            ri, tr = units[ui[i]]
            name, addr, tls_name, url, _ = resolvers[ri]
            spec = TRANSPORT[tr]
            s = int(seq[i])
            reused = spec["setup"] is not None and s > 0  # Do53 over UDP has no connection to reuse
            failed = fail_u[i] < FAIL_P[tr] * (1.4 if is_4g[i] else 1.0)
            status = next(status_draw[tr]) if failed else "ok"
            r_ms = float(rtt[i])
            t_start = int(mono0[i])
            t = t_start + int(local[0, i] * 1e6)
            t_conn = t_tls = None
            hs = None
            if not reused and spec["setup"] is not None:
                hs = spec["hs"]
                if spec["setup"] == "tcp":
                    t_conn = t_start + int(r_ms * 1e6)
                    t_tls = t_conn + int((r_ms + local[1, i]) * 1e6)
                elif spec["setup"] == "libcurl_quic":
                    t_conn = t_start + int(r_ms * 1e6)
                    t_tls = t_conn + int((1.5 + local[1, i]) * 1e6)
                else:  # our QUIC (doq): first flight at once, handshake done one RTT later
                    t_conn = t_start + int((2.0 + local[1, i]) * 1e6)
                    t_tls = t_conn + int(r_ms * 1e6)
                t = t_tls + int(local[2, i] * 1e6)
            t_sent: int | None = t
            t_resp: int | None = t + int((r_ms + server[i]) * 1e6)
            q = spec["qr"] if reused else spec["q"]
            rcode: str | None = "NOERROR"
            answers = [f"{QNAMES[qn[i]]} A 192.0.2.{1 + qn[i]}"]
            size: int | None = 75
            http_status: int | None = 200 if spec["http"] else None
            attempts = 1
            if status != "ok":
                answers, size = [], None
                if status in ("timeout", "unreachable"):
                    t_resp, rcode, q = None, None, (q[0], 0, q[2], 0)
                    attempts = spec["attempts"]
                    http_status = None
                elif status in ("connect_error", "tls_error", "quic_error"):
                    t_sent = t_resp = None
                    rcode, q, http_status, attempts = None, (None, None, None, None), None, 0
                    if status == "connect_error" or reused:
                        t_conn = t_tls = None
                        hs = None if reused else (hs[0] // 8, 0, 1, 0)
                    else:
                        t_tls = None
                elif status == "http_error":
                    rcode, http_status = None, 503
                elif status in ("servfail", "refused"):
                    rcode = status.upper()
                    size = 44
                else:  # truncated, malformed_response, other: an answer that could not be used
                    rcode = None
            vid, vregion, vprofile = vantages[vi[i]]
            yield {
                "schema": "dnscamp.result/1", "kind": "dns_query", "id": ids[i], "campaign": campaign,
                "run": f"{vid}-r{int(run_of[i]) // len(vantages):06d}", "unit": f"u-dns-{name}-{tr}",
                "vantage": {"id": vid, "provider": "ec2", "region": vregion, "network_profile": vprofile},
                "started_at": stamps[i], "status": status,
                "error": None if status == "ok" else ERROR_TEXT[status],
                "env": envs[vi[i]],
                "body": {
                    "resolver": name, "transport": tr, "address": addr, "port": spec["port"],
                    "tls_name": None if spec["tls"] is None else tls_name,
                    "url": url if spec["http"] else None, "qname": QNAMES[qn[i]], "qtype": "A",
                    "sequence": s, "policy": "reuse", "idle_timeout_s": 10.0, "timeout_s": 5.0,
                    "max_attempts": spec["attempts"], "attempts": attempts,
                    "t_start": t_start, "t_connected": t_conn, "t_tls_done": t_tls, "t_query_sent": t_sent,
                    "t_response": t_resp, "connection_reused": reused,
                    "resumed": None if (reused or spec["tls"] is None or t_tls is None) else False,
                    "early_data": False if spec["setup"] == "quic" and not reused and t_tls else None,
                    "tls_version": spec["tls"], "alpn": spec["alpn"], "quic_version": spec["quic"],
                    "http_version": spec["http"], "http_method": spec["method"], "http_status": http_status,
                    "rcode": rcode, "answers": answers, "response_size": size, "wire_basis": spec["basis"],
                    "handshake_bytes_sent": hs[0] if hs else None, "handshake_bytes_received": hs[1] if hs else None,
                    "handshake_packets_sent": hs[2] if hs else None,
                    "handshake_packets_received": hs[3] if hs else None,
                    "query_bytes_sent": q[0], "query_bytes_received": q[1],
                    "query_packets_sent": q[2], "query_packets_received": q[3],
                    "access_rtt_ms": ACCESS_RTT[vprofile], "cache_warmed": True,
                    "engine": "dnscamp", "engine_version": "dnscamp 0.1.0", "engine_run_time_ms": None,
                },
            }


# --- page_load --------------------------------------------------------------------------

SITES = (("single", 1), ("js", 1), ("js-css", 1), ("multi-5", 5), ("multi-10", 10), ("multi-30", 30))
DNS_MODES = (("system", "system", None), ("do53:isp", "do53", "isp"), ("dot:cloudflare", "dot", "cloudflare"),
             ("doh:cloudflare", "doh", "cloudflare"), ("doh:google", "doh", "google"),
             ("doq:adguard", "doq", "adguard"), ("doh3:cloudflare", "doh3", "cloudflare"))
# extra round trips for a name's first resolution per transport (fresh connection: above)
DNS_RTTS = {"system": 1.0, "do53": 1.0, "dot": 3.0, "doh": 3.0, "doq": 2.0, "doh3": 2.0}
BROWSERS = (("firefox", "153.7.0esr", "0.37.1"), ("chromium", "142.0.7444.59", "142.0.7444.59"))
PL_FAIL = {"page_load_timeout": 50, "dns_error": 25, "driver_error": 15, "tls_error": 10}


def page_loads(n: int, rng: np.random.Generator, campaign: str, end: str) -> Iterator[dict]:
    t0, t1 = _window(end)
    envs = {(v, b[0]): orjson.Fragment(orjson.dumps({**orjson.loads(_env(r, p, "page_load")), "browser": b[0],
                                                        "browser_version": b[1], "seed": 765993791}))
            for v, r, p in VANTAGES for b in BROWSERS}  # fmt: skip
    per = 2_000_000
    for first in range(0, n, per):
        k = min(per, n - first)
        idx = np.arange(first, first + k)
        vi = idx % len(VANTAGES)
        started = t0 + (idx * ((t1 - t0) // max(n, 1))) + rng.integers(0, 10**9, k)
        site = rng.integers(0, len(SITES), k)
        mode = rng.integers(0, len(DNS_MODES), k)
        br = rng.integers(0, len(BROWSERS), k)
        h3 = rng.random(k) < 0.5
        noise = rng.lognormal(0, 0.15, k)
        failed = rng.random(k) < 0.03
        fstat = _pick(rng, PL_FAIL, k)
        ids = _uuids(rng, k)
        stamps = _times(started)
        for i in range(k):
            vid, region, profile = VANTAGES[vi[i]]
            rtt = ACCESS_RTT[profile] + RESOLVERS[0][4][REGIONS.index(region)]
            sname, hosts = SITES[site[i]]
            dns_mode, dtr, res = DNS_MODES[mode[i]]
            browser, bver, dver = BROWSERS[br[i]]
            http = "h3" if h3[i] else "h2"
            dns_ms = DNS_RTTS[dtr] * rtt * float(noise[i])
            conn_rtts = 1.0 if http == "h3" else 2.0
            ttfb = dns_ms + (conn_rtts + 1) * rtt
            plt = ttfb + rtt * (2 + min(hosts, 10) * 0.6) * float(noise[i]) + 40.0
            status = str(fstat[i]) if failed[i] else "ok"
            url = f"https://www.{sname}.test/"
            hostnames = [f"www.{sname}.test"] + [f"h{j}.{sname}.test" for j in range(1, hosts)]
            nav = None
            resources = []
            if status == "ok":
                nav = {"startTime": 0, "fetchStart": 0.02, "domainLookupStart": 0.5, "domainLookupEnd": round(0.5 + dns_ms, 2),
                       "connectStart": round(0.6 + dns_ms, 2), "secureConnectionStart": round(0.6 + dns_ms + rtt, 2),
                       "connectEnd": round(0.6 + dns_ms + conn_rtts * rtt, 2), "requestStart": round(0.8 + dns_ms + conn_rtts * rtt, 2),
                       "responseStart": round(ttfb, 2), "responseEnd": round(ttfb + 5, 2),
                       "domContentLoadedEventStart": round(plt * 0.6, 2), "domContentLoadedEventEnd": round(plt * 0.61, 2),
                       "loadEventStart": round(plt, 2), "loadEventEnd": round(plt + 0.2, 2), "duration": round(plt + 0.2, 2),
                       "nextHopProtocol": http, "transferSize": 35470, "entryType": "navigation", "type": "navigate"}  # fmt: skip
                for j, h in enumerate(hostnames[1:6]):
                    st = round(ttfb + 10 + j * 3, 2)
                    resources.append({"name": f"https://{h}/r{j}.js", "host": h, "initiator_type": "script",
                                      "next_hop_protocol": http, "response_status": 200, "startTime": st,
                                      "fetchStart": st, "domainLookupStart": st, "domainLookupEnd": round(st + dns_ms, 2),
                                      "connectStart": round(st + dns_ms, 2), "connectEnd": round(st + dns_ms + conn_rtts * rtt, 2),
                                      "requestStart": round(st + dns_ms + conn_rtts * rtt, 2),
                                      "responseStart": round(st + dns_ms + (conn_rtts + 1) * rtt, 2),
                                      "responseEnd": round(st + dns_ms + (conn_rtts + 1) * rtt + 2, 2),
                                      "duration": round(dns_ms + (conn_rtts + 1) * rtt + 2, 2), "transferSize": 300.0})  # fmt: skip
            yield {
                "schema": "dnscamp.result/1", "kind": "page_load", "id": ids[i], "campaign": campaign,
                "run": f"{vid}-p{int(idx[i]) // 400:06d}", "unit": f"u-pl-{sname}-{browser}-{dtr}-{http}",
                "vantage": {"id": vid, "provider": "ec2", "region": region, "network_profile": profile},
                "started_at": stamps[i], "status": status, "error": None if status == "ok" else ERROR_TEXT[status],
                "env": envs[(vid, browser)],
                "body": {
                    "url": url, "final_url": url if status == "ok" else None, "browser": browser,
                    "browser_version": bver, "driver_version": dver, "dns_mode": dns_mode, "dns_transport": dtr,
                    "resolver": None if res is None else f"{res}@{RESOLVERS[0][1]}", "http": http,
                    "timeout_s": 30.0, "viewport": [1366, 768],
                    "plt_ms": round(plt, 2) if status == "ok" else None, "navigation": nav,
                    "first_paint_ms": None, "first_contentful_paint_ms": round(ttfb + 60, 2) if nav else None,
                    "lcp_ms": round(ttfb + 60, 2) if nav else None, "next_hop_protocol": http if nav else None,
                    "protocols": {http: 1 + len(resources)} if nav else {}, "resources": resources,
                    "hostnames": hostnames if nav else [], "unique_hostnames": hosts if nav else 0,
                    "dns_lookups": hosts if nav else 0, "stub": None,
                    "dns_transport_verified": True if nav and not MODES[dtr].uses_os_resolver else None,
                    "dns_verification": None, "har_path": f"har/{ids[i]}.har" if nav else None,
                    "har_valid": True if nav else None, "har_source": "bidi" if nav else None,
                    "har_entries": 1 + len(resources) if nav else None,
                    "resolver_rtt_ms": {RESOLVERS[0][1]: round(rtt, 2)},
                    "wall_ms": {"total": round(plt + 1500, 3)}, "order": {"seed": 765993791, "site_order": int(site[i])},
                },
            }


# --- RIPE Atlas -------------------------------------------------------------------------

N_PROBES = 474
MSM = {"resolver_dns": 70000001, "probe_server": 70000002, "probe_resolver": 70000003, "server_resolver": 70000004}
SERVER = "198.51.100.10"  # the QuicSocks server the probes ping


def _probes(rng: np.random.Generator, n: int) -> list[dict]:
    out = []
    for p in range(1, n + 1):
        asn = 64500 + p
        own = rng.random() < 0.8  # most probes use their ISP's resolver
        out.append({"prb_id": p, "probe_addr": str(ipaddress.IPv4Address(0x0A000000 + p * 256 + 2)),
                    "resolver": str(ipaddress.IPv4Address((0x0A000000 if own else 0x0B000000) + p * 256 + 53)),
                    "configured_resolver": str(ipaddress.IPv4Address(0x0A000000 + p * 256 + 53)),
                    "probe_asn": asn, "resolver_asn": asn if own else 65000 + p % 50, "method": "query_log",
                    "qname": None,
                    "rtt_dns": float(rng.lognormal(np.log(8.0 if own else 25.0), 0.5)),
                    "rtt_direct": float(rng.lognormal(np.log(60.0), 0.6)),
                    "rtt_server": float(rng.lognormal(np.log(45.0), 0.6))})  # fmt: skip
    return out


def _abuf(qid: int, qname: str, addr: str) -> str:
    """A DNS response (one A record) in wire format, base64: what an Atlas DNS result carries."""
    q = b"".join(bytes([len(lab)]) + lab.encode() for lab in qname.rstrip(".").split(".")) + b"\0"
    msg = struct.pack(">HHHHHH", qid, 0x8580, 1, 1, 0, 0) + q + struct.pack(">HH", 1, 1)
    msg += b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 0, 4) + ipaddress.IPv4Address(addr).packed
    return base64.b64encode(msg).decode()


def _ping(msm: int, prb: int, src: str, dst: str, ts: int, rtt: float, rng: np.random.Generator, lost: bool) -> dict:
    rtts = [] if lost else [round(rtt * (1 + abs(x)), 3) for x in rng.normal(0, 0.01, 5).tolist()]
    return {"af": 4, "avg": round(sum(rtts) / 5, 6) if rtts else -1, "dst_addr": dst, "dst_name": dst, "dup": 0,
            "from": src, "fw": 5080, "group_id": msm, "lts": 10, "max": max(rtts) if rtts else -1,
            "min": min(rtts) if rtts else -1, "msm_id": msm, "msm_name": "Ping", "prb_id": prb, "proto": "ICMP",
            "rcvd": len(rtts), "result": [{"rtt": r, "ttl": 64} for r in rtts] or [{"x": "*"}] * 5, "sent": 5,
            "size": 48, "src_addr": src, "step": None, "stored_timestamp": ts, "timestamp": ts, "ttl": 64,
            "type": "ping"}  # fmt: skip


def atlas_results(n: int, rng: np.random.Generator, end: str, probes: list[dict]) -> Iterator[dict]:
    t0, t1 = _window(end)
    resolvers = sorted({p["resolver"] for p in probes})
    rtt_server = {p["resolver"]: p["rtt_server"] for p in probes}
    per_round = 3 * len(probes) + len(resolvers)
    rounds = -(-n // per_round)
    gap = (t1 - t0) // 10**9 // max(rounds, 1)
    made = 0
    for rd in range(rounds):
        ts = t0 // 10**9 + rd * gap
        lost = rng.random(per_round) < 0.02
        j = 0
        for p in probes:
            for role in ("resolver_dns", "probe_server", "probe_resolver"):
                if made >= n:
                    return
                msm, prb, src = MSM[role], p["prb_id"], p["probe_addr"]
                if role == "resolver_dns":
                    entry = {"af": 4, "dst_addr": p["configured_resolver"], "lts": 10, "proto": "UDP",
                             "src_addr": src, "subid": 1, "submax": 1, "time": ts}  # fmt: skip
                    if lost[j]:
                        entry["error"] = {"timeout": 5000}
                    else:
                        qname = f"{prb}-{ts}.gen.qs.whoami.test."
                        entry["result"] = {"ANCOUNT": 1, "ARCOUNT": 0, "ID": (prb * 7919 + rd) & 0xFFFF, "NSCOUNT": 0,
                                           "QDCOUNT": 1, "abuf": _abuf((prb * 7919 + rd) & 0xFFFF, qname, p["resolver"]),
                                           "rt": round(p["rtt_dns"] * 1.05, 3), "size": 75}  # fmt: skip
                    yield {"from": src, "fw": 5080, "group_id": msm, "lts": 10, "msm_id": msm, "msm_name": "Tdig",
                           "prb_id": prb, "resultset": [entry], "stored_timestamp": ts, "timestamp": ts, "type": "dns"}
                elif role == "probe_server":
                    yield _ping(msm, prb, src, SERVER, ts + 1, p["rtt_direct"], rng, lost[j])
                else:
                    yield _ping(msm, prb, src, p["resolver"], ts + 2, p["rtt_dns"], rng, lost[j])
                made += 1
                j += 1
        for r in resolvers:
            if made >= n:
                return
            yield _ping(MSM["server_resolver"], 0, SERVER, r, ts + 3, rtt_server[r], rng, lost[j])
            made += 1
            j += 1


# --- driver -----------------------------------------------------------------------------


def generate(out: Path, *, dns_queries_n: int = 10_000_000, page_loads_n: int = 1_000_000, atlas_n: int = 2_000_000,
             seed: int = 1, campaign: str = "gen", end: str = END) -> dict:
    """Write the campaign under ``out``; returns what generated.json holds."""
    out = Path(out)
    counts: dict[str, dict[str, int]] = {}
    streams = (("dns_query", dns_queries, dns_queries_n), ("page_load", page_loads, page_loads_n))
    for i, (kind, fn, n) in enumerate(streams):
        w = Writer(out / "records", kind)
        by_status: dict[str, int] = {}
        for rec in fn(n, np.random.default_rng([seed, i]), campaign, end):
            by_status[rec["status"]] = by_status.get(rec["status"], 0) + 1
            w.write(orjson.dumps(rec))
        w.close()
        counts[kind] = by_status
    rng = np.random.default_rng([seed, 9])
    probes = _probes(rng, N_PROBES)
    atlas_campaign = f"{campaign}/atlas"
    w = Writer(out / "atlas", "results")
    by_type: dict[str, int] = {}
    for res in atlas_results(atlas_n, rng, end, probes):
        by_type[res["type"]] = by_type.get(res["type"], 0) + 1
        w.write(orjson.dumps(res))
    w.close()
    counts["atlas"] = by_type
    bundle.write(out / "atlas", bundle.Bundle.from_json({
        "schema": bundle.SCHEMA, "campaign": atlas_campaign,
        "created": datetime.fromisoformat(end.replace("Z", "+00:00")).isoformat(timespec="microseconds"),
        "measurements": [{"msm_id": m, "role": role, "target": SERVER if role == "probe_server" else None,
                          "definition": {"label": "gen", "packets": 5}} for role, m in MSM.items()],  # fmt: skip
        "discovery": [{k: p[k] for k in ("prb_id", "probe_addr", "resolver", "configured_resolver", "probe_asn",
                                         "resolver_asn", "method", "qname")} for p in probes] if atlas_n else [],
        "probes": _probe_sites(probes) if atlas_n else [],
        "result_files": [f"results-{i:04d}.jsonl" for i in range(-(-w.n // PER_FILE))],
    }))  # fmt: skip
    meta = {"seed": seed, "campaign": campaign, "atlas_campaign": atlas_campaign, "end": end, "days": DAYS,
            "vantages": len(VANTAGES), "resolvers": len(RESOLVERS), "counts": counts}  # fmt: skip
    (out / "generated.json").write_text(json.dumps(meta, indent=1, sort_keys=True))
    return meta


def _probe_sites(probes: list[dict]) -> list[dict]:
    """Where the generated probes stand (atlas_probes, the QuicSocks map): the testbed's
    documented German sites (dnscamp.atlas_offline.atlas_like_probe_meta), each in its generated AS."""
    from dataclasses import asdict, replace

    from dnscamp.atlas_offline import atlas_like_probe_meta

    asn = {p["prb_id"]: p["probe_asn"] for p in probes}
    return [asdict(replace(m, asn_v4=asn[m.prb_id])) for m in atlas_like_probe_meta(asn)]


def load(out: Path, url: str, *, workers: int | None = None, records: bool = True) -> dict:
    """Store a generated campaign through the normal paths (as tests/scaffolding/demo_data.py
    loads the demo): collectors.ingest for the records (``records=False``: stored already),
    collectors.atlas_bundle for the Atlas bundle (roles, discovery, probe places, results)."""
    from collectors import atlas_bundle
    from collectors.ingest import ingest

    out = Path(out)
    stats = ingest([out / "records"], url, workers=workers) if records else None
    atlas = atlas_bundle.store(out / "atlas" / bundle.NAME, url)
    return {"records": stats.as_json() if stats else None, "atlas": atlas.as_json()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--dns-queries", type=int, default=10_000_000)
    ap.add_argument("--page-loads", type=int, default=1_000_000)
    ap.add_argument("--atlas", type=int, default=2_000_000)
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every size (0.01: 100,000 DNS queries)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--campaign", default="gen")
    ap.add_argument("--end", default=END, help="end of the 30 days (UTC)")
    ap.add_argument("--ingest", action="store_true", help="then store it (owner URL of the store dnscamp uses)")
    a = ap.parse_args(argv)
    t = time.monotonic()
    meta = generate(a.out, dns_queries_n=round(a.dns_queries * a.scale), page_loads_n=round(a.page_loads * a.scale),
                    atlas_n=round(a.atlas * a.scale), seed=a.seed, campaign=a.campaign, end=a.end)  # fmt: skip
    total = sum(sum(c.values()) for c in meta["counts"].values())
    print(f"generated {total:,} records in {time.monotonic() - t:.1f} s under {a.out}: {json.dumps(meta['counts'])}")
    if a.ingest:
        from db import engine

        t = time.monotonic()
        print(json.dumps(load(a.out, engine.database_url("owner"))), f"({time.monotonic() - t:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
