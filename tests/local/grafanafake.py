"""A fake Grafana 11 for the publishing client: the documented dashboards API
(POST /api/dashboards/db, GET and DELETE /api/dashboards/uid/<uid>), public-dashboards API
(GET/POST /api/dashboards/uid/<uid>/public-dashboards, PATCH and DELETE
.../public-dashboards/<uid>, GET /api/dashboards/public-dashboards with perpage/page) and what
an anonymous visitor of a public link calls (GET /api/public/dashboards/<token>, POST
/api/public/dashboards/<token>/panels/<id>/query, answered with data frames). There is no
Grafana server here; the behaviour follows Grafana's HTTP API documentation (status codes,
bodies, an access token being 32 hex digits), not its code.

A panel query runs the panel's SQL through dashboards.expand's macros (what Grafana's Postgres
datasource does) over the dashboard's own time range, or the visitor's when the share allows
time selection, with ``run_sql``: the tests give it a connection as the role Grafana uses."""

from __future__ import annotations

import base64
import json
import re
import threading
import uuid
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit

import dashboards
from dashboards.expand import expand


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)


class FakeGrafana:
    def __init__(self, *, token: str = "", user: str = "", password: str = "",
                 run_sql: Callable[[str], tuple[list[str], list[tuple]]] | None = None):
        self.auth = set()
        if token:
            self.auth.add(f"Bearer {token}")
        if user:
            self.auth.add("Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())
        self.run_sql = run_sql
        self.dashboards: dict[str, dict[str, Any]] = {}
        self.versions: dict[str, int] = {}
        self.shares: dict[str, dict[str, Any]] = {}  # by dashboard uid
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []  # method, path, headers, body
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/"

    def __enter__(self) -> "FakeGrafana":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    # --- the API -----------------------------------------------------------------------------

    def _route(self, method: str, path: str, query: dict[str, list[str]], headers, body: Any) -> tuple[int, Any]:
        if m := re.fullmatch(r"/api/public/dashboards/([^/]+)(/panels/(\d+)/query)?", path):
            return self._public(m.group(1), int(m.group(3)) if m.group(3) else None, method, body)
        if headers.get("Authorization") not in self.auth:
            return 401, {"message": "Unauthorized"}
        if method == "POST" and path == "/api/dashboards/db":
            d = body.get("dashboard") or {}
            uid = d.get("uid") or uuid.uuid4().hex[:14]
            if uid in self.dashboards and not body.get("overwrite"):
                return 412, {"message": "A dashboard with the same uid already exists", "status": "name-exists"}
            if len(uid) > 40:
                return 400, {"message": "uid too long, max 40 characters"}
            self.versions[uid] = self.versions.get(uid, 0) + 1
            self.dashboards[uid] = {**d, "uid": uid, "version": self.versions[uid]}
            slug = re.sub(r"[^a-z0-9]+", "-", d.get("title", "").lower()).strip("-")
            return 200, {"id": len(self.dashboards), "uid": uid, "url": f"/d/{uid}/{slug}", "status": "success",
                         "version": self.versions[uid], "slug": slug}
        if m := re.fullmatch(r"/api/dashboards/uid/([^/]+)", path):
            uid = m.group(1)
            if uid not in self.dashboards:
                return 404, {"message": "Dashboard not found"}
            if method == "GET":
                return 200, {"dashboard": self.dashboards[uid], "meta": {"slug": uid}}
            if method == "DELETE":
                d = self.dashboards.pop(uid)
                self.shares.pop(uid, None)
                return 200, {"title": d.get("title"), "message": f"Dashboard {d.get('title')} deleted", "uid": uid}
        if m := re.fullmatch(r"/api/dashboards/uid/([^/]+)/public-dashboards/?([^/]*)", path):
            return self._share(method, m.group(1), m.group(2), body)
        if method == "GET" and path == "/api/dashboards/public-dashboards":
            per = int(query.get("perpage", ["1000"])[0])
            page = int(query.get("page", ["1"])[0])
            items = [{"uid": s["uid"], "accessToken": s["accessToken"], "title": self.dashboards[d]["title"],
                      "dashboardUid": d, "isEnabled": s["isEnabled"]} for d, s in sorted(self.shares.items())]
            return 200, {"publicDashboards": items[(page - 1) * per:page * per], "totalCount": len(items),
                         "page": page, "perPage": per}
        return 404, {"message": "Not found"}

    def _share(self, method: str, duid: str, puid: str, body: Any) -> tuple[int, Any]:
        if duid not in self.dashboards:
            return 404, {"message": "Dashboard not found"}
        have = self.shares.get(duid)
        if method == "GET" and not puid:
            return (200, have) if have else (404, {"message": "Public dashboard not found"})
        if method == "POST" and not puid:
            if have:
                return 400, {"message": "Public dashboard already exists"}
            token = body.get("accessToken") or uuid.uuid4().hex
            if not re.fullmatch(r"[0-9a-f]{32}", token):
                return 400, {"message": "Invalid access token"}
            if any(s["accessToken"] == token for s in self.shares.values()):
                return 400, {"message": "Access token already in use"}
            now = datetime.now(timezone.utc).isoformat()
            s = {"uid": body.get("uid") or uuid.uuid4().hex[:14], "dashboardUid": duid, "accessToken": token,
                 "isEnabled": bool(body.get("isEnabled", False)), "annotationsEnabled": bool(body.get("annotationsEnabled", False)),
                 "timeSelectionEnabled": bool(body.get("timeSelectionEnabled", False)), "share": body.get("share", "public"),
                 "createdBy": 1, "updatedBy": 1, "createdAt": now, "updatedAt": now}
            self.shares[duid] = s
            return 200, s
        if not have or have["uid"] != puid:
            return 404, {"message": "Public dashboard not found"}
        if method == "PATCH":
            for k in ("isEnabled", "annotationsEnabled", "timeSelectionEnabled", "share"):
                if k in body:
                    have[k] = body[k]
            return 200, have
        if method == "DELETE":
            del self.shares[duid]
            return 200, None
        return 405, {"message": "Method not allowed"}

    def _public(self, token: str, panel_id: int | None, method: str, body: Any) -> tuple[int, Any]:
        share = next((s for s in self.shares.values() if s["accessToken"] == token), None)
        if share is None:
            return 404, {"message": "Public dashboard not found"}
        if not share["isEnabled"]:
            return 403, {"message": "Public dashboard paused"}
        d = self.dashboards[share["dashboardUid"]]
        if panel_id is None:
            return 200, {"dashboard": d, "meta": {"publicDashboardEnabled": True}}
        panel = next((p for p in dashboards.panel_list(d) if p.get("id") == panel_id), None)
        if panel is None or method != "POST":
            return 404, {"message": "Panel not found"}
        start, end = _time(d["time"]["from"]), _time(d["time"]["to"])
        if share["timeSelectionEnabled"] and (tr := (body or {}).get("timeRange")):
            start, end = _time(tr["from"]), _time(tr["to"])
        frames = {}
        for t in panel.get("targets", []):
            cols, rows = self.run_sql(expand(t["rawSql"], {}, start, end))
            frames[t.get("refId", "A")] = {"frames": [{"schema": {"fields": [{"name": c} for c in cols]},
                                                       "data": {"values": [[r[i] for r in rows] for i in range(len(cols))]}}]}
        return 200, {"results": frames}

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def _do(self) -> None:
                parts = urlsplit(self.path)
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                fake.requests.append((self.command, parts.path, dict(self.headers), raw))
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    code, out = 400, {"message": "bad request data"}
                else:
                    code, out = fake._route(self.command, parts.path.rstrip("/") or "/", parse_qs(parts.query),
                                            self.headers, body)
                data = b"" if out is None else json.dumps(out, default=str).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_DELETE = _do

        return Handler
