"""Experiment 1: head-of-line blocking over one connection (003_b61199a6a5b37f70.txt §3,
Fig. 2: Poisson arrivals at 10 queries/s, unique names, one query in 25 delayed 1,000 ms at
the server; "DNS via UDP is hardly affected", TLS and HTTP/1.1 show "knock-on effects" on the
queries behind the delayed one, HTTP/2 "a similar insensitivity to delayed queries as with UDP").

Ours: the dns_query kind's open-loop mode (vantage_agent/dns/load.py) against the testbed's
ISP resolver (CoreDNS frontends -> Unbound -> the testbed hierarchy). Every query asks a fresh
random label under one of 25 base names; 24 are under ``hol.test`` (answered at once by the
authoritative server) and one under ``slow.hol.test``, whose authoritative server answers after
1,000 ms (testbed/services/dns_hierarchy.py): the delay is real and behind the recursion, where
the paper's was in the (stub) resolver itself. Two specs: ``hol`` (Do53, DoT, DoH over HTTP/2,
DoH3, DoQ) and ``hol-h1`` (DoH over HTTP/1.1, which cannot multiplex: libcurl queues a query until
the connection is free; the paper pipelined instead, which blocks the same way in order).

The table: the distribution of the resolution times (``total_ms``, from the query's scheduled
arrival to its parsed answer) of the *undelayed* queries per transport, the share of them
slower than ``BLOCKED_MS`` (a quarter of the delay; an unblocked resolution on the fiber
profile takes tens of ms), the delayed queries' own median, and the verdict: a transport is
"blocked" when at least ``BLOCKED_SHARE`` of its undelayed queries are that slow.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable

from dnscamp.experiments.common import fetch_rows, fmt, no_records, table
from testbed.services.dns_hierarchy import HOL_DELAY_MS, HOL_SLOW_ZONE
from vantage_agent.dns import registry as dns_registry
from vantage_agent.stats import percentile

SPECS = ("hol", "hol-h1")
PAPER_REF = "003_b61199a6a5b37f70.txt §3 (Fig. 2)"
SLOW_ZONE = HOL_SLOW_ZONE + "."
DELAY_MS = float(HOL_DELAY_MS)
BLOCKED_MS = DELAY_MS / 4
BLOCKED_SHARE = 0.05
ORDER = ("do53", "dot", "doh-h1.1", "doh-h2", "doh3", "doq")
# What the paper found per transport (None: beyond the paper) and the words for it.
PAPER = {"do53": False, "dot": True, "doh-h1.1": True, "doh-h2": False, "doh3": None, "doq": None}
PAPER_WORDS = {False: "unaffected", True: "blocked behind the slow query", None: "beyond the paper"}

SQL = """SELECT campaign, transport, http_version, qname, status, total_ms
         FROM v_dns_query WHERE campaign = %s AND run = %s"""


def label(row: dict) -> str:
    """The transport as the table names it: DoH split by HTTP version (the ``hol-h1`` campaign
    asked for HTTP/1.1; a failed query records no version, so the campaign decides)."""
    t = row["transport"]
    if t not in dns_registry.TRANSPORTS or not dns_registry.transport(t).chooses_http_version:
        return t
    h1 = row.get("http_version") == "1.1" or str(row.get("campaign", "")).startswith("exp-hol-h1")
    return f"{t}-h1.1" if h1 else f"{t}-h2"


def delayed(qname: str | None) -> bool:
    return bool(qname) and (qname if qname.endswith(".") else qname + ".").endswith("." + SLOW_ZONE)


def summarize(rows: Iterable[dict]) -> dict[str, dict[str, Any]]:
    """Per transport: the undelayed queries' n (answered), percentiles and max, the share slower
    than BLOCKED_MS, the delayed queries' n and median, failures by status."""
    groups: dict[str, dict[str, list]] = defaultdict(lambda: {"fast": [], "slow": [], "failed": []})
    for r in rows:
        g = groups[label(r)]
        if r["status"] != "ok" or r.get("total_ms") is None:
            g["failed"].append((r["status"], delayed(r.get("qname"))))
        else:
            g["slow" if delayed(r.get("qname")) else "fast"].append(float(r["total_ms"]))
    out = {}
    for key, g in groups.items():
        fast = g["fast"]
        failures: dict[str, int] = defaultdict(int)
        for st, slow in g["failed"]:
            failures[f"{st}{' (delayed)' if slow else ''}"] += 1
        out[key] = {
            "n": len(fast), "p50": percentile(fast, 50), "p90": percentile(fast, 90), "p99": percentile(fast, 99),
            "max": max(fast, default=None),
            "blocked_share": sum(x > BLOCKED_MS for x in fast) / len(fast) if fast else None,
            "delayed_n": len(g["slow"]), "delayed_p50": percentile(g["slow"], 50),
            "failures": dict(sorted(failures.items())),
        }
    return out


def blocked(s: dict[str, Any]) -> bool | None:
    return None if s["blocked_share"] is None else s["blocked_share"] >= BLOCKED_SHARE


def verdict(key: str, s: dict[str, Any]) -> str:
    ours, paper = blocked(s), PAPER.get(key)
    if ours is None:
        return "no data"
    if paper is None:
        return "beyond the paper"
    return "reproduced" if ours == paper else "not reproduced"


def _order(key: str) -> int:
    return ORDER.index(key) if key in ORDER else 99


def render(summary: dict[str, dict[str, Any]]) -> str:
    rows = []
    for key in sorted(summary, key=_order):
        s = summary[key]
        share = None if s["blocked_share"] is None else f"{100 * s['blocked_share']:.1f} %"
        fails = ", ".join(f"{k} {v}" for k, v in s["failures"].items()) or "none"
        rows.append([key, s["n"], s["p50"], s["p90"], s["p99"], s["max"], share, s["delayed_n"], s["delayed_p50"],
                     fails, PAPER_WORDS[PAPER.get(key)], verdict(key, s)])
    head = ["transport", "n", "p50 ms", "p90 ms", "p99 ms", "max ms", f"> {BLOCKED_MS:g} ms", "delayed n",
            "delayed p50 ms", "failures", f"paper ({PAPER_REF})", "verdict"]
    return "\n".join([
        f"Head-of-line blocking: resolution times of the undelayed queries, Poisson 10/s over one connection, "
        f"1 name in 25 delayed {DELAY_MS:,.0f} ms at the authoritative server (paper: {PAPER_REF})",
        table(head, rows),
        f"A transport counts as blocked when >= {100 * BLOCKED_SHARE:g} % of its undelayed queries take over "
        f"{BLOCKED_MS:g} ms (an unblocked resolution takes tens of ms).", "",
        *sentences(summary)])


def sentences(summary: dict[str, dict[str, Any]]) -> list[str]:
    out = []
    for key in sorted(summary, key=_order):
        s = summary[key]
        v, paper = verdict(key, s), PAPER.get(key)
        if v == "no data":
            out.append(f"- {key}: no answered undelayed query.")
            continue
        ours = "blocked" if blocked(s) else "unaffected"
        nums = (f"undelayed p50 {fmt(s['p50'])} ms, p99 {fmt(s['p99'])} ms, "
                f"{100 * s['blocked_share']:.1f} % over {BLOCKED_MS:g} ms (n = {s['n']:,})")
        if paper is None:
            out.append(f"- {key}: {ours} ({nums}); the paper did not measure it.")
        else:
            out.append(f"- {key}: {v}: the paper saw it {PAPER_WORDS[paper]}; ours is {ours} ({nums}).")
    return out


def analyse(conn, runs: dict[str, str]) -> str:
    rows = fetch_rows(conn, SQL, runs)
    return render(summarize(rows)) if rows else no_records("hol: no dns_query records", runs)
