"""Per-load metrics from the browser's own timing APIs (W3C Navigation / Resource / Paint
Timing and Largest Contentful Paint), read with one async script after the load event.

What is kept: the full Navigation Timing entry; FP and FCP; LCP where the
browser gives it; one Resource Timing entry per resource with its DNS / connect / TLS phase
timestamps and ``nextHopProtocol``; the onLoad page-load time; unique hostnames and DNS
lookups per page. Timestamps stay timestamps (ms since navigation start, the entries' own
clock); durations are derived later (STYLE.md §2).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

# Runs as an async script: waits until loadEventEnd is set (the load handlers have run), lets
# a buffered LCP observer report, then returns every entry as plain JSON.
COLLECT_JS = r"""
const done = arguments[arguments.length - 1];
const t0 = Date.now();
function nav() { const n = performance.getEntriesByType('navigation'); return n.length ? n[0] : null; }
function finish() {
  const out = {href: location.href, timeOrigin: performance.timeOrigin, lcp: null, lcpSupported: false};
  const n = nav();
  out.navigation = n ? n.toJSON() : null;
  out.paint = performance.getEntriesByType('paint').map(e => e.toJSON());
  out.resources = performance.getEntriesByType('resource').map(e => e.toJSON());
  try {
    const types = PerformanceObserver.supportedEntryTypes || [];
    if (types.includes('largest-contentful-paint')) {
      out.lcpSupported = true;
      const po = new PerformanceObserver(list => {
        const es = list.getEntries(); if (es.length) { out.lcp = es[es.length - 1].startTime; }
      });
      po.observe({type: 'largest-contentful-paint', buffered: true});
      setTimeout(() => { try { const r = po.takeRecords(); if (r.length) out.lcp = r[r.length-1].startTime; po.disconnect(); } catch (e) {} done(out); }, 50);
      return;
    }
  } catch (e) { out.lcpError = String(e); }
  done(out);
}
(function wait() {
  const n = nav();
  if ((n && n.loadEventEnd > 0) || Date.now() - t0 > 5000) { finish(); } else { setTimeout(wait, 10); }
})();
"""

# Navigation Timing fields kept as phase timestamps (ms since navigation start).
RESOURCE_FIELDS = (
    "startTime",
    "redirectStart",
    "redirectEnd",
    "fetchStart",
    "domainLookupStart",
    "domainLookupEnd",
    "connectStart",
    "secureConnectionStart",
    "connectEnd",
    "requestStart",
    "responseStart",
    "responseEnd",
    "duration",
    "transferSize",
    "encodedBodySize",
    "decodedBodySize",
)


def host_of(url: str) -> str | None:
    try:
        h = urlsplit(url).hostname
    except ValueError:
        return None
    return h.lower() if h else None


def resource_rows(resources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Trim Resource Timing entries to the stored fields (one row per resource)."""
    rows = []
    for r in resources:
        row = {
            "name": r.get("name"),
            "host": host_of(str(r.get("name") or "")),
            "initiator_type": r.get("initiatorType"),
            "next_hop_protocol": r.get("nextHopProtocol") or None,
            "response_status": r.get("responseStatus"),
        }
        for f in RESOURCE_FIELDS:
            v = r.get(f)
            row[f] = float(v) if isinstance(v, (int, float)) else None
        rows.append(row)
    return rows


def paint_times(paint: list[dict[str, Any]]) -> dict[str, float]:
    out = {}
    for p in paint:
        if p.get("name") == "first-paint":
            out["first_paint_ms"] = float(p["startTime"])
        elif p.get("name") == "first-contentful-paint":
            out["first_contentful_paint_ms"] = float(p["startTime"])
    return out


def plt_ms(navigation: dict[str, Any] | None) -> float | None:
    """onLoad page-load time: when the load event fired, ms since navigation start (the HAR
    ``onLoad`` the WWW'20 paper used, 002_6fa4cf280535d36b.txt §3.1.1)."""
    if not navigation:
        return None
    v = navigation.get("loadEventStart")
    return float(v) if isinstance(v, (int, float)) and v > 0 else None


def hostnames(url: str, resources: list[dict[str, Any]], har: dict[str, Any] | None = None) -> list[str]:
    """Unique hostnames the page touched (document + resources + HAR entries), sorted."""
    seen = set()
    h = host_of(url)
    if h:
        seen.add(h)
    for r in resources:
        h = host_of(str(r.get("name") or ""))
        if h:
            seen.add(h)
    if har:
        for e in har.get("log", {}).get("entries", []):
            h = host_of(e.get("request", {}).get("url", ""))
            if h:
                seen.add(h)
    return sorted(seen)


def dns_lookups(navigation: dict[str, Any] | None, resources: list[dict[str, Any]], har: dict[str, Any] | None) -> int:
    """Hostnames whose first connection shows a DNS phase (domainLookupEnd > Start, or a HAR
    ``timings.dns`` > 0). A lower bound: WWW'20 §3.1.2 explains why browser-reported DNS
    timings miss lookups; the resolver-side count comes from the stub or frontend logs."""
    hosts: set[str] = set()
    entries = ([navigation] if navigation else []) + list(resources)
    for r in entries:
        ds, de = r.get("domainLookupStart"), r.get("domainLookupEnd")
        if isinstance(ds, (int, float)) and isinstance(de, (int, float)) and de > ds:
            h = host_of(str(r.get("name") or ""))
            if h:
                hosts.add(h)
    if har:
        for e in har.get("log", {}).get("entries", []):
            d = (e.get("timings") or {}).get("dns")
            if isinstance(d, (int, float)) and d > 0:
                h = host_of(e.get("request", {}).get("url", ""))
                if h:
                    hosts.add(h)
    return len(hosts)


def protocols(navigation: dict[str, Any] | None, resources: list[dict[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in ([navigation] if navigation else []) + list(resources):
        p = r.get("nextHopProtocol") or r.get("next_hop_protocol") or "unknown"
        out[p] = out.get(p, 0) + 1
    return out
