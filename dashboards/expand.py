"""A panel's SQL as Grafana 11 sends it to Postgres, for tests and benchmarks (there is no
Grafana server here). Two steps, in Grafana's order:

1. Template variables (the frontend, public/app/features/templating/template_srv.ts and the SQL
   datasources' ``interpolateVariable``): ``$var``, ``${var}``, ``${var:format}``, ``[[var]]``.
   Default format: a multi-value or include-All variable gives each value single-quoted with
   quotes doubled, joined by ','; a plain single value goes in raw. ``sqlstring`` always quotes
   that way; ``csv`` and ``raw`` join raw values by ','. "All" (``$__all``, no custom all value)
   is every option of the variable. ``$__interval`` / ``$__interval_ms`` are variables too.
2. Macros (the backend, pkg/tsdb/grafana-postgresql-datasource/macros.go): ``$__time(c)``,
   ``$__timeEpoch(c)``, ``$__timeFilter(c)`` -> ``c BETWEEN '<from>' AND '<to>'`` (RFC 3339 UTC),
   ``$__timeFrom()``, ``$__timeTo()``, ``$__timeGroup(c, iv)`` ->
   ``floor(extract(epoch from c)/<s>)*<s>`` (``$__timeGroupAlias`` adds ``AS "time"``; a
   ``$__timeGroup`` followed directly by ',' is treated as the alias form), ``$__unixEpochFilter(c)``.
   An unknown macro is an error, as in Grafana.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone

ALL = "$__all"
# template_srv.ts's variable regex: $var | [[var:fmt]] | ${var.field:fmt}
_VAR = re.compile(r"\$(\w+)|\[\[(\w+?)(?::(\w+))?\]\]|\$\{(\w+)(?:\.([^:^\}]+))?(?::([^\}]+))?\}")
_MACRO = re.compile(r"\$([_a-zA-Z0-9]+)\(([^\)]*)\)")  # macros.go's sExpr
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


class ExpandError(ValueError):
    pass


@dataclass(frozen=True)
class Variable:
    """A template variable's state: its selected values (or ``[ALL]``), every option (what All
    stands for), and whether it is multi-valued / offers All (which changes the default format)."""

    values: tuple[str, ...]
    options: tuple[str, ...] = ()
    multi: bool = True
    include_all: bool = True

    def selected(self) -> tuple[str, ...]:
        return self.options if self.values == (ALL,) else self.values


def _quote(v: str) -> str:
    return "'" + v.replace("'", "''") + "'"


def _format(var: Variable, fmt: str | None) -> str:
    values = var.selected()
    if fmt in (None, ""):
        if len(values) == 1 and not (var.multi or var.include_all):
            return values[0]
        return ",".join(_quote(v) for v in values)
    if fmt == "sqlstring":
        return ",".join(_quote(v) for v in values)
    if fmt in ("csv", "raw"):
        return ",".join(values)
    raise ExpandError(f"variable format {fmt!r} is not one the dashboards use (sqlstring, csv, raw)")


def parse_interval(text: str) -> float:
    """gtime.ParseInterval for the forms used here: <number><unit>, unit ms/s/m/h/d/w/y."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)", text.strip().strip("'"))
    if not m:
        raise ExpandError(f"cannot parse interval {text!r}")
    return float(m.group(1)) * _UNITS[m.group(2)]


def _go_number(x: float) -> str:
    """Go's %v of a float64 for the values that occur (60 -> "60", 0.5 -> "0.5")."""
    return str(int(x)) if x == int(x) else repr(x)


def _rfc3339(t: datetime) -> str:
    """Go's time.RFC3339Nano in UTC: fractional seconds without trailing zeros, 'Z'."""
    t = t.astimezone(timezone.utc)
    s = t.strftime("%Y-%m-%dT%H:%M:%S")
    if t.microsecond:
        s += ("." + f"{t.microsecond:06d}").rstrip("0")
    return s + "Z"


def interpolate(sql: str, variables: dict[str, Variable], *, interval: str = "1m") -> str:
    """Step 1: template variables (unknown names are left as they are, as Grafana does)."""
    builtins = {"__interval": Variable((interval,), multi=False, include_all=False),
                "__interval_ms": Variable((_go_number(parse_interval(interval) * 1000),), multi=False, include_all=False)}
    known = {**variables, **builtins}

    def sub(m: re.Match) -> str:
        name = m.group(1) or m.group(2) or m.group(4)
        fmt = m.group(3) or m.group(6)
        if name not in known:
            return m.group(0)
        if m.group(5):
            raise ExpandError(f"${{{name}.{m.group(5)}}}: field paths are not used by the dashboards")
        return _format(known[name], fmt)

    return _VAR.sub(sub, sql)


def macros(sql: str, time_from: datetime, time_to: datetime) -> str:
    """Step 2: the Postgres datasource's macros."""

    def evaluate(name: str, args: list[str]) -> str:
        if name in ("__time", "__timeEpoch", "__timeFilter", "__unixEpochFilter") and not args[0]:
            raise ExpandError(f"missing time column argument for macro {name}")
        if name == "__time":
            return f'{args[0]} AS "time"'
        if name == "__timeEpoch":
            return f'extract(epoch from {args[0]}) as "time"'
        if name == "__timeFilter":
            return f"{args[0]} BETWEEN '{_rfc3339(time_from)}' AND '{_rfc3339(time_to)}'"
        if name == "__timeFrom":
            return f"'{_rfc3339(time_from)}'"
        if name == "__timeTo":
            return f"'{_rfc3339(time_to)}'"
        if name in ("__timeGroup", "__timeGroupAlias"):
            if len(args) < 2:
                raise ExpandError(f"macro {name} needs time column and interval and optional fill value")
            s = _go_number(parse_interval(args[1]))
            group = f"floor(extract(epoch from {args[0]})/{s})*{s}"
            return group + (' AS "time"' if name == "__timeGroupAlias" else "")
        if name == "__unixEpochFilter":
            c = args[0]
            return f"{c} >= {int(time_from.timestamp())} AND {c} <= {int(time_to.timestamp())}"
        raise ExpandError(f"unknown macro {name!r}")

    def sub(m: re.Match) -> str:
        name = m.group(1)
        if name == "__timeGroup" and sql[m.end():m.end() + 1] == ",":  # pre-5.3 form, as macros.go
            name = "__timeGroupAlias"
        return evaluate(name, [a.strip() for a in m.group(2).split(",")])

    return _MACRO.sub(sub, sql)


def expand(sql: str, variables: dict[str, Variable], time_from: datetime, time_to: datetime,
           *, interval: str = "1m") -> str:
    """Both steps: what Postgres receives for this panel SQL, variables and time range."""
    out = macros(interpolate(sql, variables, interval=interval), time_from, time_to)
    # a variable left over, outside the string literals a value became ('it''s $0' is a value)
    if leftover := re.search(r"\$\{?\w+|\[\[\w+", re.sub(r"'(?:[^']|'')*'", "''", out)):
        raise ExpandError(f"not expanded: {leftover.group(0)!r} (an unknown variable?)")
    return out


def resolve(conn, dashboard: dict, selected: dict[str, tuple[str, ...]], time_from: datetime, time_to: datetime,
            *, interval: str = "1m") -> dict[str, Variable]:
    """Every template variable of ``dashboard`` as Grafana would hold it: its options from its
    own query (run on ``conn`` in the dashboard's order, so a chained variable sees the ones
    before it), its selection from ``selected`` (default: All)."""
    out: dict[str, Variable] = {}
    for v in dashboard.get("templating", {}).get("list", []):
        sql = expand(v["query"], out, time_from, time_to, interval=interval)
        options = tuple(str(r[0]) for r in conn.execute(sql).fetchall() if r[0] is not None)
        out[v["name"]] = Variable(tuple(selected.get(v["name"], (ALL,))), options,
                                  multi=v.get("multi", False), include_all=v.get("includeAll", False))
    return out
