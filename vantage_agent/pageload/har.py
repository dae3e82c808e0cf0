"""HAR 1.2 from what the browsers give, validated against the shipped schema.

- Chromium: the CDP ``Network.*`` events of chromedriver's performance log;
- Firefox: WebDriver BiDi ``network.*`` events (beforeRequestSent / responseCompleted /
  fetchError), which carry the Fetch timing info of every request;
- either browser, when no events arrived: the Resource Timing entries (``_source`` says which).

The HAR is written beside the record (``<artifacts>/har/<record id>.har``) and its path is
stored in the record (``body.har_path``). ``unique_names(har)`` gives the hostnames a page
used: the list WWW'20 handed to its DNS timing tool (002_6fa4cf280535d36b.txt §3.1.2).
"""

from __future__ import annotations

import functools
import json
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

SCHEMA_FILE = "har-1.2.schema.json"


@functools.cache
def schema() -> dict[str, Any]:
    return json.loads(resources.files("vantage_agent.pageload").joinpath(SCHEMA_FILE).read_text())


def validate(har: dict[str, Any]) -> list[str]:
    """Schema errors of ``har`` (empty when valid), each one line with its JSON path."""
    import jsonschema

    v = jsonschema.Draft7Validator(schema())
    out = []
    for e in sorted(v.iter_errors(har), key=lambda e: list(e.absolute_path)):
        path = "/".join(str(p) for p in e.absolute_path)
        out.append(f"{path or '<root>'}: {e.message}")
    return out


def write(har: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(har, separators=(",", ":")))
    tmp.replace(path)


def unique_names(har: dict[str, Any]) -> list[str]:
    """Unique hostnames requested in a HAR, sorted (for the DNS engine, the WWW'20 method)."""
    out = set()
    for e in har.get("log", {}).get("entries", []):
        h = urlsplit(e.get("request", {}).get("url", "")).hostname
        if h:
            out.add(h.lower().rstrip("."))
    return sorted(out)


# -- helpers ---------------------------------------------------------------------------------


def _iso(epoch_ms: float | None) -> str:
    if not epoch_ms:
        epoch_ms = datetime.now(timezone.utc).timestamp() * 1000
    return datetime.fromtimestamp(epoch_ms / 1000, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _nv(headers: Any) -> list[dict[str, str]]:
    if isinstance(headers, dict):
        return [{"name": str(k), "value": str(v)} for k, v in headers.items()]
    out = []
    for h in headers or []:
        v = h.get("value")
        if isinstance(v, dict):  # BiDi: {"type": "string", "value": ...}
            v = v.get("value", "")
        out.append({"name": str(h.get("name", "")), "value": "" if v is None else str(v)})
    return out


def _qs(url: str) -> list[dict[str, str]]:
    try:
        return [{"name": k, "value": v} for k, v in parse_qsl(urlsplit(url).query, keep_blank_values=True)]
    except ValueError:
        return []


def _http_version(p: str | None) -> str:
    p = (p or "").lower()
    return {"h2": "HTTP/2", "h3": "HTTP/3", "http/1.1": "HTTP/1.1", "http/1.0": "HTTP/1.0", "h3-29": "HTTP/3"}.get(p, p or "unknown")


def _nn(v: float) -> float:
    return round(max(0.0, v), 3)


def _opt(a: float | None, b: float | None) -> float:
    if a is None or b is None or a < 0 or b < 0 or b < a:
        return -1
    return round(b - a, 3)


def _page(url: str, res: Any, creator: str) -> dict[str, Any]:
    nav = getattr(res, "navigation", None) or {}
    t0 = getattr(res, "time_origin_ms", None)
    onload = nav.get("loadEventStart") if nav else None
    ondcl = nav.get("domContentLoadedEventStart") if nav else None
    return {
        "startedDateTime": _iso(t0),
        "id": "page_1",
        "title": url,
        "pageTimings": {
            "onContentLoad": round(ondcl, 3) if isinstance(ondcl, (int, float)) and ondcl > 0 else -1,
            "onLoad": round(onload, 3) if isinstance(onload, (int, float)) and onload > 0 else -1,
        },
    }


def _log(creator: str, version: str, url: str, res: Any, entries: list[dict[str, Any]], source: str) -> dict[str, Any]:
    entries.sort(key=lambda e: e["startedDateTime"])
    return {
        "log": {
            "version": "1.2",
            "creator": {"name": "dnscamp", "version": "1", "comment": f"from {source}"},
            "browser": {"name": creator, "version": version or "unknown"},
            "pages": [_page(url, res, creator)],
            "entries": entries,
            "_source": source,
        }
    }


def _entry(
    *,
    started_ms: float,
    method: str,
    url: str,
    req_headers: Any,
    http_version: str,
    status: int,
    status_text: str,
    resp_headers: Any,
    mime: str,
    size: int,
    body_size: int,
    headers_size: int,
    timings: dict[str, float],
    server_ip: str | None = None,
    connection: str | None = None,
    error: str | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    total = sum(v for k, v in timings.items() if k != "ssl" and v > 0)
    e: dict[str, Any] = {
        "pageref": "page_1",
        "startedDateTime": _iso(started_ms),
        "time": round(total, 3),
        "request": {
            "method": method or "GET",
            "url": url,
            "httpVersion": http_version,
            "cookies": [],
            "headers": _nv(req_headers),
            "queryString": _qs(url),
            "headersSize": -1,
            "bodySize": -1 if method in ("GET", "HEAD", None, "") else 0,
        },
        "response": {
            "status": int(status or 0),
            "statusText": status_text or "",
            "httpVersion": http_version,
            "cookies": [],
            "headers": _nv(resp_headers),
            "content": {"size": int(size if size is not None and size >= 0 else 0), "mimeType": mime or "x-unknown"},
            "redirectURL": "",
            "headersSize": int(headers_size) if headers_size is not None and headers_size >= 0 else -1,
            "bodySize": int(body_size) if body_size is not None and body_size >= 0 else -1,
        },
        "cache": {},
        "timings": timings,
    }
    if server_ip:
        e["serverIPAddress"] = server_ip.strip("[]")
    if connection:
        e["connection"] = str(connection)
    if error:
        e["_error"] = error
    if extra:
        e.update(extra)
    return e


# -- Chromium: CDP Network events ------------------------------------------------------------


def from_cdp(events: list[dict[str, Any]], url: str, res: Any, creator_version: str = "") -> dict[str, Any]:
    reqs: dict[str, dict[str, Any]] = {}
    order: list[tuple[str, int]] = []
    entries: list[dict[str, Any]] = []

    def finish(rid: str, end_ts: float | None, error: str | None = None, response: dict | None = None) -> None:
        r = reqs.get(rid)
        if not r or r.get("done"):
            return
        resp = response or r.get("response") or {}
        t = resp.get("timing") or {}
        req_time = t.get("requestTime")
        if req_time is not None:
            def rel(k: str) -> float | None:
                v = t.get(k)
                return v if isinstance(v, (int, float)) and v >= 0 else None

            dns_s, dns_e = rel("dnsStart"), rel("dnsEnd")
            con_s, con_e = rel("connectStart"), rel("connectEnd")
            ssl_s, ssl_e = rel("sslStart"), rel("sslEnd")
            send_s, send_e = rel("sendStart") or 0.0, rel("sendEnd") or 0.0
            hdr_e = rel("receiveHeadersEnd") or send_e
            first = next((x for x in (dns_s, con_s, send_s) if x is not None), 0.0)
            blocked = _nn(first + (req_time - r["ts"]) * 1000) if r.get("ts") else _nn(first)
            end_rel = ((end_ts - req_time) * 1000) if end_ts else hdr_e
            timings = {
                "blocked": blocked,
                "dns": _opt(dns_s, dns_e),
                "connect": _opt(con_s, con_e),
                "ssl": _opt(ssl_s, ssl_e),
                "send": _nn(send_e - send_s),
                "wait": _nn(hdr_e - send_e),
                "receive": _nn(end_rel - hdr_e),
            }
        else:
            dur = ((end_ts - r["ts"]) * 1000) if (end_ts and r.get("ts")) else 0.0
            timings = {"blocked": -1, "dns": -1, "connect": -1, "ssl": -1, "send": 0, "wait": _nn(dur), "receive": 0}
        req = r["request"]
        hv = _http_version(resp.get("protocol"))
        entries.append(
            _entry(
                started_ms=r["wall"] * 1000,
                method=req.get("method", "GET"),
                url=req.get("url", ""),
                req_headers=resp.get("requestHeaders") or req.get("headers"),
                http_version=hv,
                status=resp.get("status", 0),
                status_text=resp.get("statusText", ""),
                resp_headers=resp.get("headers"),
                mime=resp.get("mimeType", ""),
                size=int(r.get("data", 0)),
                body_size=int(r.get("encoded", -1)),
                headers_size=-1,
                timings=timings,
                server_ip=resp.get("remoteIPAddress"),
                connection=resp.get("connectionId"),
                error=error,
                extra={"_resourceType": r.get("type"), "_fromCache": bool(resp.get("fromDiskCache") or resp.get("fromPrefetchCache"))},
            )
        )
        r["done"] = True

    for ev in events:
        m, p = ev.get("method"), ev.get("params") or {}
        rid = p.get("requestId")
        if m == "Network.requestWillBeSent":
            if rid in reqs and p.get("redirectResponse"):
                finish(rid, p.get("timestamp"), response=p["redirectResponse"])
                reqs[rid + f"#r{len(order)}"] = reqs.pop(rid)
            req = p.get("request") or {}
            if not str(req.get("url", "")).startswith(("http://", "https://")):
                continue
            reqs[rid] = {"request": req, "ts": p.get("timestamp"), "wall": p.get("wallTime") or 0, "type": p.get("type")}
            order.append((rid, len(order)))
        elif m == "Network.responseReceived" and rid in reqs:
            reqs[rid]["response"] = p.get("response") or {}
        elif m == "Network.dataReceived" and rid in reqs:
            reqs[rid]["data"] = reqs[rid].get("data", 0) + int(p.get("dataLength") or 0)
        elif m == "Network.loadingFinished" and rid in reqs:
            reqs[rid]["encoded"] = p.get("encodedDataLength", -1)
            finish(rid, p.get("timestamp"))
        elif m == "Network.loadingFailed" and rid in reqs:
            finish(rid, p.get("timestamp"), error=p.get("errorText") or "failed")
    for rid in list(reqs):
        finish(rid, None, error=None if reqs[rid].get("response") else "no response")
    return _log("chromium", creator_version, url, res, entries, "cdp")


# -- Firefox: WebDriver BiDi network events --------------------------------------------------


def from_bidi(events: list[tuple[str, dict[str, Any]]], url: str, res: Any, creator_version: str = "") -> dict[str, Any]:
    """``events``: (event name, params) for network.beforeRequestSent / responseCompleted /
    fetchError, in arrival order."""
    started: dict[str, dict[str, Any]] = {}
    entries: list[dict[str, Any]] = []
    # Selenium delivers each event on its own thread: pair by (request id, redirect count).
    for name, p in events:
        if name == "network.beforeRequestSent":
            req = p.get("request") or {}
            started[f"{req.get('request')}#{p.get('redirectCount', 0)}"] = p
    for name, p in events:
        if name not in ("network.responseCompleted", "network.fetchError"):
            continue
        req = p.get("request") or {}
        rid = f"{req.get('request')}#{p.get('redirectCount', 0)}"
        first = started.pop(rid, p)
        resp = p.get("response") or {}
        t = req.get("timings") or {}

        def g(k: str) -> float | None:
            v = t.get(k)
            return float(v) if isinstance(v, (int, float)) and v > 0 else None

        fetch_s = g("fetchStart") or g("requestTime") or 0.0
        dns_s, dns_e = g("dnsStart"), g("dnsEnd")
        con_s, con_e = g("connectStart"), g("connectEnd")
        tls_s = g("tlsStart")
        req_s, rsp_s, rsp_e = g("requestStart"), g("responseStart"), g("responseEnd")
        first_net = next((x for x in (dns_s, con_s, req_s) if x is not None), fetch_s)
        timings = {
            "blocked": _nn(first_net - fetch_s),
            "dns": _opt(dns_s, dns_e),
            "connect": _opt(con_s, con_e),
            "ssl": _opt(tls_s, con_e) if tls_s else -1,
            "send": 0.0,
            "wait": _nn((rsp_s or 0) - (req_s or 0)) if rsp_s and req_s else 0.0,
            "receive": _nn((rsp_e or 0) - (rsp_s or 0)) if rsp_e and rsp_s else 0.0,
        }
        origin = t.get("timeOrigin") or 0
        started_ms = (origin + fetch_s) if origin else float(first.get("timestamp") or 0)
        content = resp.get("content") or {}
        entries.append(
            _entry(
                started_ms=started_ms,
                method=req.get("method", "GET"),
                url=req.get("url", ""),
                req_headers=req.get("headers"),
                http_version=_http_version(resp.get("protocol")),
                status=resp.get("status", 0),
                status_text=resp.get("statusText", ""),
                resp_headers=resp.get("headers"),
                mime=resp.get("mimeType", ""),
                size=int(content.get("size") or 0),
                body_size=resp.get("bodySize", -1) if resp.get("bodySize") is not None else -1,
                headers_size=resp.get("headersSize", -1) if resp.get("headersSize") is not None else -1,
                timings=timings,
                error=p.get("errorText") if name == "network.fetchError" else None,
                extra={"_fromCache": bool(resp.get("fromCache"))},
            )
        )
    return _log("firefox", creator_version, url, res, entries, "bidi")


# -- any browser: Resource Timing ------------------------------------------------------------


def from_timing(url: str, res: Any, creator: str, creator_version: str = "") -> dict[str, Any]:
    """HAR entries from Navigation + Resource Timing (no headers; cross-origin entries without
    Timing-Allow-Origin have zero phases). Used when no network events were captured."""
    t0 = getattr(res, "time_origin_ms", None) or 0
    rows = ([res.navigation] if getattr(res, "navigation", None) else []) + list(getattr(res, "resources", []) or [])
    entries = []
    for r in rows:
        def g(k: str) -> float | None:
            v = r.get(k)
            return float(v) if isinstance(v, (int, float)) and v > 0 else None

        fs = g("fetchStart") or g("startTime") or 0.0
        ds, de, cs, ce, ss = g("domainLookupStart"), g("domainLookupEnd"), g("connectStart"), g("connectEnd"), g("secureConnectionStart")
        rq, rs, re_ = g("requestStart"), g("responseStart"), g("responseEnd")
        timings = {
            "blocked": _nn((next((x for x in (ds, cs, rq) if x), fs)) - fs),
            "dns": _opt(ds, de) if ds else -1,
            "connect": _opt(cs, ce) if cs else -1,
            "ssl": _opt(ss, ce) if ss else -1,
            "send": 0.0,
            "wait": _nn((rs or 0) - (rq or 0)) if rs and rq else 0.0,
            "receive": _nn((re_ or 0) - (rs or 0)) if re_ and rs else 0.0,
        }
        entries.append(
            _entry(
                started_ms=t0 + (r.get("startTime") or 0),
                method="GET",
                url=str(r.get("name") or url),
                req_headers=[],
                http_version=_http_version(r.get("nextHopProtocol")),
                status=int(r.get("responseStatus") or 0),
                status_text="",
                resp_headers=[],
                mime="x-unknown",
                size=int(r.get("decodedBodySize") or 0),
                body_size=int(r.get("encodedBodySize") or 0),
                headers_size=-1,
                timings=timings,
                extra={"_initiatorType": r.get("initiatorType")},
            )
        )
    return _log(creator, creator_version, url, res, entries, "resource-timing")
