"""Hypothesis strategies for the fuzz suite: valid records of every kind, hostile lines, batches.

Valid records start from the fixtures (tests/fixtures/results/v1) and let hypothesis vary what
a real agent could write: ids, every text field over the whole of Unicode (line and paragraph
separators, C0/C1 controls, RTL marks, 4-byte emoji, very long strings), numbers inside and at
the edge of the documented ranges, optional fields null or absent, timestamps with offsets.
They must satisfy the records v1 contract (integers are integers, RFC 3339 with an
offset inside 2000..2100, non-negative durations, no NaN), so the store must accept every one.

Hostile lines come in two classes:
- ``MUST``: the contract says they are bad (truncated JSON, NaN/Infinity, BOM, NUL, invalid
  UTF-8, wrong types, unknown schema/kind, missing fields): ingest must quarantine them;
- ``EITHER``: the contract gives no verdict (\\u0000 or lone surrogates in JSON escapes, huge
  numbers, deep nesting, duplicated keys): accepted or quarantined, but never a crash, and if
  accepted they must read back equal and the views must still select.
"""

from __future__ import annotations

import copy
import json
import re
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from hypothesis import strategies as st

from vantage_agent import errors

V1 = Path(__file__).resolve().parents[1] / "fixtures" / "results" / "v1"
KINDS = ("ping", "dns_query", "page_load", "link_check", "atlas")
STATUSES = tuple(errors.statuses())
BASE: dict[str, list[dict]] = {
    k: [json.loads(x) for x in (V1 / f"{k}.jsonl").read_text().splitlines() if x.strip()] for k in KINDS
}

# Characters that broke or could break line framing and text round trips.
NASTY = (
    "\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x1f", "\r", "\n", "\t",
    "\\", '"', "\x7f", "\x80", "\x9f", "\u200e", "\u200f", "\u202e", "\u2066", "\ufeff", "\ufffd",
    "\U0001f600", "\U0001f469", "\u200d", "\U0010ffff", "\u0301", "\x01", "\x1b", "'", "N",
)  # fmt: skip
# Every code point a JSON string can carry and Postgres text can store: all but NUL and
# surrogates (those two are EITHER cases below).
_CHAR = st.characters(exclude_characters="\x00", exclude_categories=("Cs",))
_NASTY_OR_NOT = st.sampled_from(NASTY + ("",) * 8)


def text(min_size: int = 0, max_size: int = 8) -> st.SearchStrategy[str]:
    """Short text over all of Unicode, often with one of the NASTY characters inside (a string
    of one alphabet is one choice for hypothesis: three draws per text, not two per character)."""
    half = max_size // 2
    return st.builds(lambda a, n, b: a + n + b, st.text(_CHAR, min_size=min_size, max_size=half), _NASTY_OR_NOT,
                     st.text(_CHAR, max_size=half))  # fmt: skip


def long_text(min_size: int = 0) -> st.SearchStrategy[str]:
    """Usually short; one time in 30 a very long one (a 100 KB error message, a long unit id)."""
    long = st.builds(lambda n, c: c * n, st.integers(1_000, 100_000), st.sampled_from(("x", "\u2028", "é", "\U0001f600")))
    return st.integers(0, 29).flatmap(lambda i: long if i == 17 else text(min_size))  # not 0: hypothesis favours 0


def opt(s: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(st.none(), s)


TEXT, TEXT1 = text(), text(1)
OPT_TEXT = opt(TEXT)
TEXTS = st.lists(TEXT, max_size=3)
BOOL = st.booleans()
STYLE = st.integers(0, 2)
PORT = st.one_of(st.integers(1, 65535), st.sampled_from((1, 65535)))
INT32 = 2**31 - 1  # views cast counts to int: the edge of what a valid record may carry
# Non-negative finite floats with the edges (0, the smallest subnormal, integral values).
NONNEG = st.one_of(st.floats(0, 1e9, allow_nan=False, allow_infinity=False), st.sampled_from((0.0, 5e-324, 1.0, 1e9)))
# Strictly positive (timeouts, access RTT): from 1 µs, the finest the models document.
POS = st.one_of(st.floats(0.001, 1e9), st.sampled_from((0.001, 1.0, 1e9)))
COUNT = st.one_of(st.integers(0, INT32), st.sampled_from((0, 1, INT32)))
OPT_COUNT, OPT_NONNEG, OPT_POS = opt(COUNT), opt(NONNEG), opt(POS)
JSON_SCALAR = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**53), 2**53),
    st.floats(allow_nan=False, allow_infinity=False), text(),
)  # fmt: skip
JSON = st.recursive(
    JSON_SCALAR, lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(text(), c, max_size=3)), max_leaves=6
)
JSON_OBJ = st.dictionaries(text(), JSON, max_size=3)


_T0 = datetime(2000, 1, 2)
_SPAN_S = int((datetime(2099, 12, 30) - _T0).total_seconds())
_SECONDS, _MICROS, _OFFSET = st.integers(0, _SPAN_S), st.sampled_from((0, 1, 500_000, 999_999)), st.integers(-720, 840)
_TIMESPEC = st.sampled_from(("seconds", "milliseconds", "microseconds"))


@st.composite
def timestamps(draw) -> str:
    """RFC 3339 with an offset, safely inside 2000..2100 (a day away from either edge)."""
    t = _T0 + timedelta(seconds=draw(_SECONDS), microseconds=draw(_MICROS))
    s = t.replace(tzinfo=timezone(timedelta(minutes=draw(_OFFSET)))).isoformat(timespec=draw(_TIMESPEC))
    return s.replace("+00:00", "Z") if draw(BOOL) else s


_PROTOCOL, _RTTS, _ICMP_PORT = st.sampled_from(("icmp", "udp")), st.lists(OPT_NONNEG, max_size=6), opt(st.sampled_from((1, 53, 65535)))
_ATTEMPTS, _T_START, _DELTA = st.integers(1, 10), st.integers(0, 2**62), opt(st.integers(0, 10**12))
_VIEWPORT, _OPT_JSON_OBJ, _SEED, _COUNTS = st.integers(0, 100_000), opt(JSON_OBJ), st.integers(-(2**53), 2**53), st.lists(COUNT, max_size=3)
_UUID, _QUARTER, _FAILED = st.uuids(), st.integers(0, 3), st.sampled_from([s for s in STATUSES if s != "ok"])
_BASE = {k: st.sampled_from(v) for k, v in BASE.items()}
_KIND = st.sampled_from(KINDS)
_UNIT = opt(long_text())


def _ping(draw, b: dict) -> dict:
    protocol = draw(_PROTOCOL)
    rtts = draw(_RTTS)
    return {
        "target": draw(TEXT),
        "address": draw(OPT_TEXT),
        "protocol": protocol,
        "port": draw(PORT if protocol == "udp" else _ICMP_PORT),
        "count": max(1, len(rtts)),
        "interval_ms": draw(NONNEG),
        "timeout_ms": draw(POS),
        "sent": len(rtts),
        "received": sum(r is not None for r in rtts),
        "rtts_ms": rtts,
        "reply_kinds": ["echo" if r is not None else None for r in rtts] if draw(BOOL) else [],
    }


_MASKS: dict[int, st.SearchStrategy[int]] = {}


def vary(draw, d: dict, fields: dict[str, st.SearchStrategy]) -> dict:
    """Copy of ``d`` with a drawn subset of ``fields`` redrawn (the subset is one draw, a bit
    mask: cheap, and it shrinks towards the fixture's own values)."""
    n = len(fields)
    mask = draw(_MASKS.setdefault(n, st.integers(0, 2**n - 1)))
    d = dict(d)
    for i, (k, strat) in enumerate(fields.items()):
        if mask >> i & 1:
            d[k] = draw(strat)
    return d


_DNS = {
    "resolver": OPT_TEXT, "tls_name": OPT_TEXT, "url": OPT_TEXT, "rcode": OPT_TEXT, "alpn": OPT_TEXT,
    "address": TEXT, "qname": TEXT, "qtype": TEXT, "port": PORT, "sequence": COUNT, "answers": TEXTS,
    "idle_timeout_s": POS, "timeout_s": POS, "response_size": OPT_COUNT, "query_bytes_sent": OPT_COUNT,
    "query_packets_received": OPT_COUNT, "access_rtt_ms": OPT_POS, "max_attempts": _ATTEMPTS, "t_start": _T_START,
}  # fmt: skip


def _dns_query(draw, b: dict) -> dict:
    b = vary(draw, b, _DNS)
    b["attempts"] = min(b["attempts"], b["max_attempts"])
    if "t_start" not in _changed(b, draw):
        return b
    t0 = b["t_start"]

    def after(t: int) -> int | None:  # a phase timestamp no earlier than t, or absent
        d = draw(_DELTA)
        return None if d is None else t + d

    b["t_connected"] = b["t_tls_done"] = None
    if not b["connection_reused"]:
        b["t_connected"], b["t_tls_done"] = after(t0), after(t0)
    b["t_query_sent"] = after(t0)
    b["t_response"] = after(b["t_query_sent"] or t0)
    return b


def _changed(b: dict, draw) -> set[str]:
    """t_start was redrawn (or the phases must be redrawn to stay after it)."""
    phases = [b.get(k) for k in ("t_connected", "t_tls_done", "t_query_sent", "t_response")]
    return {"t_start"} if any(p is not None and p < b["t_start"] for p in phases) or draw(BOOL) else set()


_PAGE = {
    "url": TEXT, "dns_mode": TEXT, "final_url": OPT_TEXT, "browser_version": OPT_TEXT, "resolver": OPT_TEXT,
    "har_path": OPT_TEXT, "dns_verification": OPT_TEXT, "plt_ms": OPT_NONNEG, "first_paint_ms": OPT_NONNEG,
    "lcp_ms": OPT_NONNEG, "timeout_s": POS, "viewport": st.tuples(_VIEWPORT, _VIEWPORT).map(list),
    "hostnames": TEXTS, "unique_hostnames": COUNT, "dns_lookups": COUNT, "order": _OPT_JSON_OBJ,
}  # fmt: skip
_LINK = {
    "profile": TEXT, "link": TEXT, "backend": TEXT, "client_ns": TEXT, "client_address": TEXT,
    "server_address": TEXT, "quic_error": OPT_TEXT, "failures": TEXTS, "probes_sent": COUNT,
    "probes_received": COUNT, "probe_wire_bytes": COUNT, "rtt_ms_p5": OPT_NONNEG, "rtt_ms_p50": OPT_NONNEG,
    "quic_handshake_ms": OPT_NONNEG, "lateness_max_ms": OPT_NONNEG, "duration_s": NONNEG,
}  # fmt: skip
_ATLAS = {
    "atlas_campaign": TEXT, "link_backend": OPT_TEXT, "probes": COUNT, "discovery_correct": COUNT,
    "seed": _SEED, "discovery_wrong": _COUNTS, "summary": JSON_OBJ, "duration_s": NONNEG,
}  # fmt: skip


def _page_load(draw, b: dict) -> dict:
    return vary(draw, b, _PAGE)


def _link_check(draw, b: dict) -> dict:
    return vary(draw, b, _LINK)


def _atlas(draw, b: dict) -> dict:
    return vary(draw, b, _ATLAS)


BODY = {"ping": _ping, "dns_query": _dns_query, "page_load": _page_load, "link_check": _link_check, "atlas": _atlas}


_ENVELOPE = {"campaign": TEXT1, "run": TEXT1, "unit": _UNIT, "started_at": timestamps(), "env": JSON_OBJ}
_VANTAGE = {"id": TEXT1, "provider": TEXT1, "region": OPT_TEXT, "network_profile": OPT_TEXT}


@st.composite
def valid_record(draw, kinds=KINDS) -> dict:
    """A record dict that the records v1 contract accepts."""
    kind = draw(_KIND if kinds is KINDS else st.sampled_from(kinds))
    base = copy.deepcopy(draw(_BASE[kind]))
    rec = vary(draw, {**base, "id": str(draw(_UUID)), "status": "ok", "error": None}, _ENVELOPE)
    rec["vantage"] = vary(draw, {"id": base["vantage"]["id"], "provider": base["vantage"]["provider"]}, _VANTAGE)
    rec["body"] = BODY[kind](draw, base["body"]) if base["body"] else {}
    if draw(_QUARTER) == 0:
        rec["status"] = draw(_FAILED)
        rec["error"] = draw(long_text(1))
        if draw(BOOL):
            rec["body"] = {}  # failed before any part of the body existed
    elif not rec["body"]:
        rec["body"] = BODY[kind](draw, BASE[kind][0]["body"])
    for k in ("unit", "error", "env"):  # optional envelope fields may be absent
        if rec.get(k) in (None, {}) and draw(BOOL):
            rec.pop(k)
    return rec


def dump(rec: dict, style: int) -> bytes:
    """One JSON line: raw UTF-8, \\u-escaped ASCII or compact; never a raw newline."""
    if style == 0:
        return json.dumps(rec, ensure_ascii=False).encode()
    if style == 1:
        return json.dumps(rec, ensure_ascii=True).encode()
    return json.dumps(rec, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode()


MUST, EITHER = "must", "either"


@dataclass
class Line:
    """One generated line and what the contract says about it."""

    raw: bytes
    role: str  # "valid" | "dup" | "conflict" | MUST | EITHER | "blank"
    rec: dict | None = None  # the record of a valid/dup/conflict line (and of an accepted EITHER line)
    why: str = ""  # the hostile mutation, for the failure report
    id: str | None = None  # the record id written in ``raw`` (made unique within a batch)

    def __repr__(self) -> str:  # short: hypothesis prints whole batches
        raw = self.raw if len(self.raw) <= 240 else self.raw[:180] + b"..." + self.raw[-40:]
        return f"Line({self.role} {self.why}: {raw!r})"

    def _repr_pretty_(self, p, cycle) -> None:  # hypothesis's printer would show every field
        p.text(repr(self))


def _set_path(rec: dict, path: tuple, value) -> dict:
    rec = copy.deepcopy(rec)
    d = rec
    for p in path[:-1]:
        d = d.setdefault(p, {})
    d[path[-1]] = value
    return rec


def _float_path(rec: dict, draw) -> tuple:
    """A field whose contract type is a non-negative number, for NaN and negative values."""
    body_floats = {
        "ping": ("interval_ms", "timeout_ms"),
        "dns_query": ("timeout_s", "idle_timeout_s"),
        "page_load": ("timeout_s",),
        "link_check": ("duration_s",),
        "atlas": ("duration_s",),
    }[rec["kind"]]
    return ("body", draw(st.sampled_from(body_floats)))


def _int_path(rec: dict, draw) -> tuple:
    return ("body", draw(st.sampled_from({
        "ping": ("count", "sent"), "dns_query": ("port", "attempts", "sequence"),
        "page_load": ("unique_hostnames", "dns_lookups"), "link_check": ("probes_sent", "probe_wire_bytes"),
        "atlas": ("probes", "seed"),
    }[rec["kind"]])))  # fmt: skip


@st.composite
def hostile_line(draw) -> Line:
    rec = draw(valid_record())
    if not rec["body"]:
        rec["body"] = BODY[rec["kind"]](draw, BASE[rec["kind"]][0]["body"])
        rec["status"], rec["error"] = "ok", None
    line = _hostile(draw, rec)
    line.id = rec["id"]
    return line


def _hostile(draw, rec: dict) -> Line:
    good = dump(rec, draw(STYLE))
    how = draw(st.sampled_from((
        "truncated", "nan", "bom", "nul", "bad_utf8", "float_for_int", "string_for_int", "bool_for_int",
        "number_timestamp", "out_of_range_timestamp", "naive_timestamp", "negative_duration",
        "unknown_schema", "unknown_kind", "missing_field", "not_an_object", "wrong_container",
        "nul_escape", "lone_surrogate", "huge_int", "huge_float", "deep_nesting", "duplicate_key",
    )))  # fmt: skip
    i = draw(st.integers(0, len(good)))
    if how == "truncated":
        return Line(good[: draw(st.integers(0, len(good) - 1))] or b"{", MUST, why=how)
    if how == "nan":
        lit = draw(st.sampled_from((float("nan"), float("inf"), float("-inf"))))
        where = draw(st.sampled_from(("body", "env")))
        bad = _set_path(rec, _float_path(rec, draw), lit) if where == "body" else _set_path(rec, ("env", "x"), [lit])
        return Line(json.dumps(bad).encode(), MUST, why=f"nan in {where}")
    if how == "bom":
        return Line(b"\xef\xbb\xbf" + good, MUST, why=how)
    if how == "nul":
        return Line(good[:i] + b"\x00" + good[i:], MUST, why=how)
    if how == "bad_utf8":
        junk = draw(st.sampled_from((b"\xff", b"\xc3\x28", b"\x80", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82")))
        # Inside a JSON string (right after the campaign's opening quote) or anywhere: invalid either way.
        at = re.search(rb'"campaign": ?"', good).end() if draw(BOOL) else i
        return Line(good[:at] + junk + good[at:], MUST, why=f"{how} {junk!r}")
    if how in ("float_for_int", "string_for_int", "bool_for_int"):
        p = _int_path(rec, draw)
        v = {"float_for_int": float(draw(st.integers(1, 5))), "string_for_int": "3", "bool_for_int": True}[how]
        return Line(json.dumps(_set_path(rec, p, v)).encode(), MUST, why=f"{how} {'.'.join(p)}")
    if how == "number_timestamp":
        return Line(json.dumps({**rec, "started_at": draw(st.integers(0, 2**40))}).encode(), MUST, why=how)
    if how == "out_of_range_timestamp":
        ts = draw(st.sampled_from(("1970-01-01T00:00:00Z", "1999-12-31T00:00:00Z", "2101-01-02T00:00:00Z",
                                   "9999-12-31T23:59:59-12:00", "0001-01-01T00:00:00+14:00")))
        return Line(json.dumps({**rec, "started_at": ts}).encode(), MUST, why=f"{how} {ts}")
    if how == "naive_timestamp":
        return Line(json.dumps({**rec, "started_at": "2026-11-22T08:00:00"}).encode(), MUST, why=how)
    if how == "negative_duration":
        p = _float_path(rec, draw)
        v = -draw(st.sampled_from((5e-324, 0.5, 1e9)))
        return Line(json.dumps(_set_path(rec, p, v)).encode(), MUST, why=f"{how} {'.'.join(p)}={v}")
    if how == "unknown_schema":
        v = draw(st.sampled_from(("dnscamp.result/2", "", None, 1, "DNSCAMP.RESULT/1")))
        return Line(json.dumps({**rec, "schema": v}).encode(), MUST, why=f"{how} {v!r}")
    if how == "unknown_kind":
        k = draw(text(0, 8).filter(lambda s: s not in KINDS))
        return Line(json.dumps({**rec, "kind": k}).encode(), MUST, why=f"{how} {k!r}")
    if how == "missing_field":
        k = draw(st.sampled_from(("id", "campaign", "run", "vantage", "started_at", "status", "body", "kind")))
        return Line(json.dumps({x: v for x, v in rec.items() if x != k}).encode(), MUST, why=f"{how} {k}")
    if how == "not_an_object":
        return Line(draw(st.sampled_from((b"[]", b'"x"', b"1", b"null", b"true", b"[" + good + b"]"))), MUST, why=how)
    if how == "wrong_container":
        k = draw(st.sampled_from(("vantage", "body", "env")))
        return Line(json.dumps({**rec, k: [rec.get(k)]}).encode(), MUST, why=f"{how} {k}")
    # EITHER: no verdict in the contract; the invariant alone applies.
    if how == "nul_escape":
        return Line(json.dumps({**rec, "run": rec["run"] + "\x00"}).encode(), EITHER, rec={**rec, "run": rec["run"] + "\x00"}, why=how)
    if how == "lone_surrogate":
        raw = json.dumps(rec).replace('"run": "', '"run": "\\ud800', 1).encode()
        return Line(raw, EITHER, why=how)
    if how == "huge_int":
        v = draw(st.integers(2**63, 2**80))
        p = draw(st.sampled_from((_int_path(rec, draw), ("env", "big"))))
        bad = _set_path(rec, p, v)
        return Line(json.dumps(bad).encode(), EITHER, rec=bad, why=f"{how} {'.'.join(p)}")
    if how == "huge_float":
        bad = _set_path(rec, _float_path(rec, draw), draw(st.sampled_from((1e300, 1.7976931348623157e308))))
        return Line(json.dumps(bad).encode(), EITHER, rec=bad, why=how)
    if how == "deep_nesting":
        n = draw(st.integers(50, 400))
        raw = json.dumps({**rec, "env": {"deep": "@"}}).replace('"@"', "[" * n + "]" * n).encode()
        return Line(raw, EITHER, rec=json.loads(raw), why=f"{how} {n}")
    assert how == "duplicate_key"
    raw = json.dumps(rec)[:-1] + ', "campaign": "second"}'
    return Line(raw.encode(), EITHER, rec={**rec, "campaign": "second"}, why=how)


@st.composite
def batches(draw, min_size: int, max_size: int) -> list[Line]:
    """Lines of one file: mostly valid records of every kind, hostile lines, blank lines, exact
    duplicates and different records under an existing id. Ids are unique unless a line is
    meant to repeat one."""
    n = draw(st.integers(min_size, max_size))
    out: list[Line] = []
    used: set[str] = set()
    valid: list[Line] = []
    for _ in range(n):
        role = draw(st.sampled_from(("valid",) * 12 + ("hostile",) * 5 + ("dup", "conflict", "blank")))
        if role in ("dup", "conflict") and not valid:
            role = "valid"
        if role == "blank":
            out.append(Line(draw(st.sampled_from((b"", b" ", b"\t", b"\r"))), "blank"))
            continue
        if role == "dup":
            first = draw(st.sampled_from(valid))
            out.append(Line(first.raw, "dup", why="exact duplicate line", id=first.id))
            continue
        if role == "conflict":
            first = draw(st.sampled_from(valid))
            other = {**first.rec, "run": first.rec["run"] + "-other"}
            out.append(Line(dump(other, 0), "conflict", rec=first.rec, why="different record, same id", id=first.id))
            continue
        line = draw(valid_record()) if role == "valid" else None
        h = draw(hostile_line()) if role == "hostile" else None
        uid = uuid.UUID(line["id"] if line is not None else h.id)
        while str(uid) in used:  # a fresh id, even after shrinking made the drawn ids equal
            uid = uuid.UUID(int=(uid.int + 1) % 2**128)
        used.add(str(uid))
        if line is not None:
            line["id"] = str(uid)
        else:
            h.raw, h.id = h.raw.replace(h.id.encode(), str(uid).encode()), str(uid)
            if h.rec is not None:
                h.rec["id"] = h.id
        if line is not None:
            raw = dump(line, draw(STYLE))
            if draw(st.integers(0, 19)) == 0:
                raw += b"\r"  # CRLF line ending: JSON whitespace, still a valid record
            valid.append(Line(raw, "valid", rec=line, id=line["id"]))
            out.append(valid[-1])
        else:
            out.append(h)
    return out


class Violations:
    """Contract violations found in one example, one per kind, each with the first line
    that showed it: the failure message lists them all (no shrinking needed to read it)."""

    def __init__(self) -> None:
        self.found: dict[str, Line | None] = {}

    def check(self, ok: bool, kind: str, line: Line | None = None) -> bool:
        if not ok:
            self.found.setdefault(kind, line)
        return ok

    def raise_any(self) -> None:
        if self.found:
            raise AssertionError(
                f"{len(self.found)} kind(s) of contract violation:\n"
                + "\n".join(f"- {k}\n    e.g. {v!r}" if v is not None else f"- {k}" for k, v in self.found.items())
            )


def file_bytes(lines: list[Line], final_newline: bool = True) -> bytes:
    return b"\n".join(x.raw for x in lines) + (b"\n" if final_newline else b"")
