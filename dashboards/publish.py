"""Public dashboards that show one campaign (`dnscamp dashboards publish CAMPAIGN`).

Grafana cannot share a dashboard that has template variables, and a copy without them that
left each variable's condition out showed every campaign in the store (demo and testbed
included) over `now-7d`. A public copy is therefore built per campaign, from the store:

- every template variable is replaced by literals in the SQL, as Grafana would have put them
  in: the campaign variable by the campaign (quoted as Grafana's ``sqlstring`` does: each
  quote doubled), the Atlas-campaign variable by that campaign's Atlas campaigns
  (``<campaign>`` and ``<campaign>/<run>``), every other one by all its options for that
  campaign ("All"), read by the variable's own query with the campaign fixed;
- a panel whose SQL does not filter by the campaign variable is refused: its rows could come
  from any campaign;
- rows and panels repeated by a variable become one copy per value (Grafana repeats them at
  render time, from variables the public copy no longer has);
- the time range is absolute, the campaign's first to last record (``v_contexts``), and the
  time picker is offered only where a panel filters by time.

The copies are uploaded with Grafana's dashboards API and shared with its public-dashboards
API (``GrafanaClient``); each share gets an access token from ``secrets.token_hex`` on the
deployment that publishes it, so nobody can compute it, and ``revoke`` deletes a share, which
ends its token at once.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import re
import secrets
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import dashboards
from dashboards.expand import _VAR, Variable, macros

PUBLIC_TAG = "public"
CAMPAIGN_VARIABLES = ("campaign", "atlas_campaign")  # a published dashboard filters by one of these
# macros that make a panel depend on the dashboard's time range
_TIME_MACROS = re.compile(r"\$__(?:timeFilter|timeFrom|timeTo|timeGroup|timeGroupAlias|unixEpochFilter)\(")


class PublishError(ValueError):
    """Bad input or a dashboard that cannot be published: one line naming the culprit."""


class GrafanaError(RuntimeError):
    """Grafana answered with an error (or not at all): one line, never the credentials."""


@dataclass(frozen=True)
class Window:
    first: datetime
    last: datetime
    records: int

    def time_range(self) -> tuple[datetime, datetime]:
        """The dashboard's absolute range: from the hour of the first record (the hourly
        rollups count the hours that start in the range) to the minute after the last."""
        start = self.first.astimezone(timezone.utc).replace(minute=0, second=0, microsecond=0)
        end = self.last.astimezone(timezone.utc).replace(second=0, microsecond=0) + timedelta(minutes=1)
        return start, end


def campaign_window(conn, campaign: str) -> Window:
    """The campaign's first and last record from v_contexts (never the records)."""
    row = conn.execute("SELECT min(first_started), max(last_started), coalesce(sum(records), 0) FROM v_contexts "
                       "WHERE campaign = %s", (campaign,)).fetchone()
    if row is None or row[0] is None or not row[2]:
        raise PublishError(f"dashboards publish: campaign {campaign!r} has no records in the store")
    return Window(row[0], row[1], int(row[2]))


def public_uid(uid: str, campaign: str) -> str:
    """The public copy's dashboard uid: the original's, "-public-" and 8 hex digits of the
    campaign's sha256 (a name, not a secret: the copy needs a login; the share's access token
    is the secret). At most 40 characters, Grafana's limit."""
    out = f"{uid}-public-{hashlib.sha256(campaign.encode()).hexdigest()[:8]}"
    assert len(out) <= 40, out
    return out


def uses_time(data: dict[str, Any]) -> bool:
    return any(_TIME_MACROS.search(t.get("rawSql", "")) for p in dashboards.panel_list(data) for t in p.get("targets", []))


def _campaign_variable(data: dict[str, Any]) -> str:
    names = [v["name"] for v in data.get("templating", {}).get("list", [])]
    for n in CAMPAIGN_VARIABLES:
        if n in names:
            return n
    raise PublishError(f"{data['uid']}: no campaign variable ({' or '.join(CAMPAIGN_VARIABLES)}): it cannot be "
                       "restricted to one campaign")


def _refers(text: str, name: str) -> bool:
    return re.search(rf"\$\{{{name}(?:[:}}.])|\[\[{name}(?::\w+)?\]\]|\${name}\b", text) is not None


def resolve_variables(conn, data: dict[str, Any], campaign: str, window: Window) -> dict[str, Variable]:
    """Each template variable of ``data`` with what the public copy fixes it to (in the
    dashboard's order, so a chained variable sees the values before it): the campaign, its
    Atlas campaigns, or every option of the variable's query for that campaign over the window."""
    start, end = window.time_range()
    out: dict[str, Variable] = {}
    for v in data.get("templating", {}).get("list", []):
        name, multi, include_all = v["name"], v.get("multi", False), v.get("includeAll", False)
        if name == "campaign":
            out[name] = Variable((campaign,), (campaign,), multi=multi, include_all=include_all)
            continue
        options = tuple(str(r[0]) for r in conn.execute(macros(substitute_sql(v["query"], out), start, end)).fetchall()
                        if r[0] is not None)
        if name == "atlas_campaign":
            # the testbed's Atlas campaigns are <campaign>/<run>; a real one is named as the campaign
            own = tuple(o for o in options if o == campaign or o.startswith(campaign + "/"))
            values = own if multi or not own else own[-1:]  # single-valued: the latest run
            out[name] = Variable(values, own, multi=multi, include_all=include_all)
        else:
            out[name] = Variable(("$__all",), options, multi=multi, include_all=include_all)
    return out


# characters Grafana reads as the start of a variable or macro ($name, ${name}, [[name]],
# $__timeFilter(...)), wherever they stand, inside an SQL string literal too
_GRAFANA_SYNTAX = re.compile(r"[$\\[\]{}\\\\]")


def sql_literal(value: str) -> str:
    """``value`` as one SQL string literal that Grafana leaves as it is: quotes doubled (what
    its ``sqlstring`` format does) and, when the value holds any of ``$ [ ] { } \\``, a
    Unicode-escape literal (U&'...') with those characters as escapes: a campaign called
    ``$__timeFilter(x)`` would otherwise be rewritten by Grafana's macro engine."""
    quoted = value.replace("'", "''")
    if not _GRAFANA_SYNTAX.search(value):
        return f"'{quoted}'"
    return "U&'" + _GRAFANA_SYNTAX.sub(lambda m: f"\\{ord(m.group(0)):04X}", quoted) + "'"


def substitute_sql(sql: str, variables: dict[str, Variable]) -> str:
    """Template variables in SQL as Grafana puts them in (each value a quoted literal, joined by
    ','; ``csv`` and ``raw`` unquoted), each literal made by ``sql_literal``; other names stay."""

    def sub(m: re.Match) -> str:
        name, fmt = m.group(1) or m.group(2) or m.group(4), m.group(3) or m.group(6)
        if name not in variables:
            return m.group(0)
        v = variables[name]
        values = v.selected()
        if fmt in ("csv", "raw") or (fmt in (None, "") and len(values) == 1 and not (v.multi or v.include_all)):
            if any(_GRAFANA_SYNTAX.search(x) or not re.fullmatch(r"[\w.:/-]*", x) for x in values):
                raise PublishError(f"${name}: value {values!r} cannot stand unquoted in SQL")
            return ",".join(values)
        return ",".join(sql_literal(x) for x in values)

    return _VAR.sub(sub, sql)


def substitute_text(text: str, variables: dict[str, Variable]) -> str:
    """Template variables in a title, description or link as Grafana shows them: values joined
    by ', '; ``queryparam`` as ``var-<name>=<value>`` pairs and ``percentencode`` percent-encoded
    (links); other names stay."""

    def sub(m: re.Match) -> str:
        name, fmt = m.group(1) or m.group(2) or m.group(4), m.group(3) or m.group(6)
        if name not in variables:
            return m.group(0)
        values = variables[name].selected()
        if fmt == "queryparam":
            return "&".join(f"var-{name}={urllib.parse.quote(v, safe='')}" for v in values)
        if fmt == "percentencode":
            return urllib.parse.quote(",".join(values), safe="")
        return ", ".join(values)

    return _VAR.sub(sub, text)


def _links(node: Any, variables: dict[str, Variable]) -> None:
    """Every ``links`` list below ``node`` (dashboard, panel and data links) without those into
    the instance (/d/...: the public cannot follow them, they lead to a login), the others'
    titles and URLs with the variables' values."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "links" and isinstance(v, list):
                node[k] = [{**lk, **{f: substitute_text(lk[f], variables) for f in ("title", "url")
                                      if isinstance(lk.get(f), str)}}
                           for lk in v if isinstance(lk, dict) and lk.get("type") != "dashboards"
                           and "/d/" not in str(lk.get("url", ""))]
            else:
                _links(v, variables)
    elif isinstance(node, list):
        for v in node:
            _links(v, variables)


def _substitute(panel: dict[str, Any], variables: dict[str, Variable]) -> dict[str, Any]:
    p = copy.deepcopy(panel)
    for key in ("title", "description"):
        if isinstance(p.get(key), str):
            p[key] = substitute_text(p[key], variables)
    for t in p.get("targets", []):
        if "rawSql" in t:
            t["rawSql"] = substitute_sql(t["rawSql"], variables)
    p["panels"] = [_substitute(child, variables) for child in p.get("panels", [])] if "panels" in p else None
    if p["panels"] is None:
        del p["panels"]
    _links(p, variables)
    p.pop("repeat", None)
    p.pop("repeatDirection", None)
    p.pop("maxPerRow", None)
    return p


def _one(variables: dict[str, Variable], name: str, value: str) -> dict[str, Variable]:
    v = variables[name]
    return {**variables, name: Variable((value,), v.options, multi=v.multi, include_all=v.include_all)}


def _expand_repeats(panels: list[dict[str, Any]], variables: dict[str, Variable]) -> list[dict[str, Any]]:
    """The top-level panels with every repeated row and panel unrolled, one copy per selected
    value of its variable, and every variable substituted; copies get fresh ids (the originals
    keep theirs: links name panels by id) and stack down."""
    sections: list[list[dict[str, Any]]] = []  # a row and the panels under it (or loose panels)
    for p in panels:
        if p.get("type") == "row" or not sections:
            sections.append([p])
        else:
            sections[-1].append(p)
    next_id = max([p.get("id", 0) for p in panels] + [c.get("id", 0) for p in panels for c in p.get("panels", [])]) + 1
    out: list[dict[str, Any]] = []
    y = 0

    def fresh(p: dict[str, Any], first: bool) -> dict[str, Any]:
        nonlocal next_id
        if not first:
            p["id"] = next_id
            next_id += 1
        return p

    for section in sections:
        head = section[0]
        row_var = head.get("repeat") if head.get("type") == "row" else None
        values = variables[row_var].selected() if row_var else (None,)
        for i, value in enumerate(values):
            env = _one(variables, row_var, value) if row_var else variables
            top = min((q.get("gridPos", {}).get("y", 0) for q in section), default=0)
            height = 0
            copies: list[dict[str, Any]] = []
            for q in section:  # in the dashboard's order (a row first)
                pvar = q.get("repeat") if q.get("type") != "row" else None
                pvalues = env[pvar].selected() if pvar else (None,)
                for j, pv in enumerate(pvalues):
                    copies.append(fresh(_substitute(q, _one(env, pvar, pv) if pvar else env), i == 0 and j == 0))
            if any(q.get("repeat") for q in section if q.get("type") != "row"):
                # Grafana lays repeated panels side by side and moves the rest down: flow the
                # section's panels in order through the dashboard's 24 columns
                x = line = line_h = 0
                for c in copies:
                    g = c.setdefault("gridPos", {"x": 0, "y": 0, "w": 24, "h": 8})
                    w = 24 if c.get("type") == "row" else min(24, g.get("w", 12))
                    if x + w > 24 or c.get("type") == "row":
                        line, x, line_h = line + line_h, 0, 0
                    g["x"], g["y"] = x, y + line
                    x, line_h = (24 if c.get("type") == "row" else x + w), max(line_h, g.get("h", 8))
                height = line + line_h
            else:
                for c in copies:
                    g = c.setdefault("gridPos", {"x": 0, "y": 0, "w": 24, "h": 1})
                    g["y"] = y + g.get("y", 0) - top
                    height = max(height, g["y"] + g.get("h", 0) - y)
            out += copies
            y += height
    return out


def public_copy(data: dict[str, Any], campaign: str, variables: dict[str, Variable], window: Window) -> dict[str, Any]:
    """The public copy of dashboard ``data`` for ``campaign``: no template variables, the
    campaign and the other variables' values as literals in the SQL, an absolute time range.
    Raises PublishError if a panel does not filter by the campaign or still refers to a variable."""
    cvar = _campaign_variable(data)
    for p in dashboards.panel_list(data):
        for t in p.get("targets", []):
            if not _refers(t.get("rawSql", ""), cvar):
                raise PublishError(f"{data['uid']}: panel {p['title']!r} does not filter by ${cvar}: "
                                   "its rows could come from any campaign")
    out = copy.deepcopy(data)
    out["uid"] = public_uid(data["uid"], campaign)
    out["title"] = f"{data['title']}: {campaign}"
    out["tags"] = [*data.get("tags", []), PUBLIC_TAG]
    out["templating"] = {"list": []}
    out["panels"] = _expand_repeats(data.get("panels", []), variables)
    start, end = window.time_range()
    out["time"] = {"from": start.strftime("%Y-%m-%dT%H:%M:%S.000Z"), "to": end.strftime("%Y-%m-%dT%H:%M:%S.000Z")}
    out["timepicker"] = {**data.get("timepicker", {}), "hidden": not uses_time(data)}
    out["refresh"] = ""
    top = {"links": out.get("links", [])}  # the panels' links were done when they were substituted
    _links(top, variables)
    out["links"] = top["links"]
    annotations = out.get("annotations", {}).get("list", [])
    for a in annotations:
        if "rawSql" in a.get("target", {}):
            a["target"]["rawSql"] = substitute_sql(a["target"]["rawSql"], variables)
    names = [v["name"] for v in data.get("templating", {}).get("list", [])]
    text = json.dumps({k: v for k, v in out.items() if k != "title"})  # Grafana shows the title as it is
    if left := [n for n in names if _refers(text, n)]:
        raise PublishError(f"{out['uid']}: still refers to variable(s) {', '.join(left)} after substitution")
    return out


def build_public(conn, campaign: str) -> tuple[list[dict[str, Any]], list[str]]:
    """(the public copies of the published dashboards for ``campaign``, notes on those left
    out: a dashboard whose campaign variable has no value for it, e.g. QuicSocks without Atlas
    results)."""
    window = campaign_window(conn, campaign)
    built = {d["uid"]: d for d in dashboards.build().values()}
    copies, skipped = [], []
    for uid in dashboards.PUBLISHED:
        data = built[uid]
        variables = resolve_variables(conn, data, campaign, window)
        if not variables[_campaign_variable(data)].selected():
            skipped.append(f"{uid}: no {_campaign_variable(data)} of {campaign!r} in the store, not published")
            continue
        copies.append(public_copy(data, campaign, variables, window))
    return copies, skipped


def share_config(data: dict[str, Any], access_token: str | None = None) -> dict[str, Any]:
    """What POST /api/dashboards/uid/<uid>/public-dashboards takes for a public copy: a fresh
    access token (32 hex digits, what Grafana accepts) unless one is kept, the time picker only
    where a panel filters by time, no annotations."""
    return {"uid": data["uid"], "dashboardUid": data["uid"], "accessToken": access_token or secrets.token_hex(16),
            "isEnabled": True, "annotationsEnabled": False, "timeSelectionEnabled": uses_time(data)}


# --- Grafana's HTTP API -----------------------------------------------------------------------


class GrafanaClient:
    """Grafana 11's dashboards API (POST /api/dashboards/db, GET/DELETE /api/dashboards/uid/<uid>)
    and public-dashboards API (GET/POST /api/dashboards/uid/<uid>/public-dashboards, PATCH and
    DELETE .../public-dashboards/<public uid>, GET /api/dashboards/public-dashboards), with a
    service-account token (Bearer) or a user and password (Basic). Error messages never carry
    the credentials."""

    def __init__(self, url: str, *, token: str | None = None, user: str | None = None, password: str | None = None,
                 timeout: float = 30.0):
        if not url.startswith(("http://", "https://")):
            raise PublishError(f"Grafana URL {url!r}: give http(s)://host[:port]/")
        self.url = url.rstrip("/")
        if token:
            self._auth = f"Bearer {token}"
        elif user and password:
            self._auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        else:
            raise PublishError("Grafana credentials: set DNSCAMP_GRAFANA_API_TOKEN (a service account's token) or "
                               "DNSCAMP_GRAFANA_API_USER and DNSCAMP_GRAFANA_API_PASSWORD")
        self.timeout = timeout

    def __repr__(self) -> str:  # never the credentials
        return f"GrafanaClient({self.url!r})"

    def _call(self, method: str, path: str, body: Any = None, *, missing_ok: bool = False) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Authorization": self._auth, "Accept": "application/json",
                                              **({"Content-Type": "application/json"} if data else {})})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:  # noqa: S310 - http(s) checked above
                text = r.read()
        except urllib.error.HTTPError as exc:
            if missing_ok and exc.code == 404:
                return None
            try:
                msg = json.loads(exc.read() or b"{}").get("message", "")
            except ValueError:
                msg = ""
            raise GrafanaError(f"Grafana {method} {path}: HTTP {exc.code}{': ' + msg if msg else ''}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise GrafanaError(f"Grafana at {self.url}: {getattr(exc, 'reason', exc)}") from None
        return json.loads(text) if text.strip() else None

    def put_dashboard(self, data: dict[str, Any]) -> dict[str, Any]:
        body = {"dashboard": {**data, "id": None}, "overwrite": True, "message": "dnscamp dashboards publish"}
        return self._call("POST", "/api/dashboards/db", body)

    def delete_dashboard(self, uid: str) -> None:
        self._call("DELETE", f"/api/dashboards/uid/{urllib.parse.quote(uid)}", missing_ok=True)

    def get_share(self, dashboard_uid: str) -> dict[str, Any] | None:
        return self._call("GET", f"/api/dashboards/uid/{urllib.parse.quote(dashboard_uid)}/public-dashboards",
                          missing_ok=True)

    def create_share(self, dashboard_uid: str, config: dict[str, Any]) -> dict[str, Any]:
        body = {k: v for k, v in config.items() if k != "dashboardUid"}
        return self._call("POST", f"/api/dashboards/uid/{urllib.parse.quote(dashboard_uid)}/public-dashboards", body)

    def update_share(self, dashboard_uid: str, share_uid: str, changes: dict[str, Any]) -> dict[str, Any]:
        return self._call("PATCH", f"/api/dashboards/uid/{urllib.parse.quote(dashboard_uid)}/public-dashboards/"
                                   f"{urllib.parse.quote(share_uid)}", changes)

    def delete_share(self, dashboard_uid: str, share_uid: str) -> None:
        self._call("DELETE", f"/api/dashboards/uid/{urllib.parse.quote(dashboard_uid)}/public-dashboards/"
                             f"{urllib.parse.quote(share_uid)}")

    def list_shares(self) -> list[dict[str, Any]]:
        out, page = [], 1
        while True:
            r = self._call("GET", f"/api/dashboards/public-dashboards?perpage=100&page={page}")
            items = r.get("publicDashboards") or []
            out += items
            if not items or len(out) >= r.get("totalCount", 0):
                return out
            page += 1


@dataclass(frozen=True)
class Published:
    dashboard_uid: str
    title: str
    access_token: str
    new_token: bool

    def url(self, base: str) -> str:
        return f"{base.rstrip('/')}/public-dashboards/{self.access_token}"


def publish(grafana: GrafanaClient, copies: list[dict[str, Any]]) -> list[Published]:
    """Upload the public copies (``build_public``; overwriting earlier ones) and share each: a
    copy already shared keeps its token (its link stays valid) and is enabled, with the time
    picker set as ``share_config`` says; a new share gets a fresh token."""
    out = []
    for data in copies:
        grafana.put_dashboard(data)
        config = share_config(data)
        if (have := grafana.get_share(data["uid"])) is not None:
            grafana.update_share(data["uid"], have["uid"], {"isEnabled": True, "annotationsEnabled": False,
                                                            "timeSelectionEnabled": config["timeSelectionEnabled"]})
            out.append(Published(data["uid"], data["title"], have["accessToken"], False))
        else:
            made = grafana.create_share(data["uid"], config)
            out.append(Published(data["uid"], data["title"], made.get("accessToken", config["accessToken"]), True))
    return out


def revoke(grafana: GrafanaClient, target: str, *, campaign: bool = False) -> list[str]:
    """Delete the share of dashboard ``target`` (a public copy's uid), or with ``campaign`` the
    shares of every public copy of campaign ``target``: their tokens stop working at once (a
    later publish makes new ones). Returns the dashboard uids whose share was deleted."""
    uids = [public_uid(u, target) for u in dashboards.PUBLISHED] if campaign else [target]
    shares = {s["dashboardUid"]: s for s in grafana.list_shares()}
    gone = [u for u in uids if u in shares]
    if not gone:
        what = f"campaign {target!r} has no public dashboard" if campaign else f"{target!r} is not a shared dashboard"
        raise PublishError(f"dashboards revoke: {what} on {grafana.url}")
    for u in gone:
        grafana.delete_share(u, shares[u]["uid"])
    return gone


def mask(token: str) -> str:
    """An access token as lists and logs show it: enough to tell two apart, not to use one."""
    return "…" + token[-4:]
