"""The views never fail on stored data.

Every hostile corpus and every v1 fixture is ingested into a fresh database, then every view
in db/views/ (listed from the directory: a new view is covered) is read in full through
psycopg, as a researcher would. Refused lines of the strict-types corpus must sit in
quarantine with a reason naming the field; rows stored before records v1 became strict
(inserted directly) must not make a view raise either."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import psycopg
import pytest

from collectors.ingest import ingest
from db.views import all_views

pytestmark = pytest.mark.local
RESULTS = Path(__file__).resolve().parent.parent / "fixtures" / "results"
HOSTILE, V1 = RESULTS / "hostile", RESULTS / "v1"


def _read_every_view(url: str) -> dict[str, int]:
    rows = {}
    with psycopg.connect(url) as conn:
        for view in all_views():
            rows[view] = len(conn.execute(f"SELECT * FROM {view}").fetchall())  # noqa: S608 (names from the repo)
    return rows


def test_every_view_reads_the_hostile_corpus(empty_db):
    files = sorted(HOSTILE.glob("*.jsonl"))
    assert HOSTILE / "types.jsonl" in files
    stats = ingest([*files, V1], empty_db)
    rows = _read_every_view(empty_db)
    assert set(rows) >= {"v_ping", "v_dns_query", "v_page_load", "v_results", "v_failures"}

    cases = {}
    for n, line in enumerate((HOSTILE / "types.jsonl").read_text().splitlines(), 1):
        rec = json.loads(line)
        cases[n] = (rec["id"], rec["env"]["case"], rec["env"]["expect"])
    with psycopg.connect(empty_db) as conn:
        quarantined = dict(
            conn.execute(
                "SELECT line, reason FROM quarantine WHERE source_file = %s", (str((HOSTILE / "types.jsonl").resolve()),)
            ).fetchall()
        )
        stored = {r[0] for r in conn.execute("SELECT id::text FROM results WHERE campaign = 'hostile-types'")}
        accepted = {i for i, _, expect in cases.values() if expect is None}
        assert stored == accepted
        for n, (_, name, expect) in cases.items():
            if expect is not None:
                assert quarantined.get(n, "").startswith(f"{expect}: "), (name, quarantined.get(n))
        assert len(quarantined) == sum(e is not None for _, _, e in cases.values())
        # what the old views could not compute (overflowing sums and differences, free-form
        # values of another type) is NULL, the rest is still there
        ids = {name: i for i, name, _ in cases.values()}
        big = conn.execute(
            "SELECT total_bytes, total_packets, total_ip_bytes, total_ms, query_bytes_sent FROM v_dns_query WHERE id = %s",
            (ids["dns-max-counters"],),
        ).fetchone()
        assert big == (None, None, None, (2**63 - 1) / 1e6, 2**63 - 1)
        ping = conn.execute("SELECT rtt_avg_ms, rtt_max_ms FROM v_ping WHERE id = %s", (ids["rtt-huge-finite"],)).fetchone()
        assert ping == (1.7e308, 1.7e308)
        pl = dict(conn.execute(
            "SELECT id::text, (ttfb_ms, doc_dns_ms, doc_connect_ms, doc_tls_ms, stub_queries)::text FROM v_page_load "
            "WHERE id = ANY(%s::uuid[])",
            ([ids[n] for n in ("pl-navigation-strings", "pl-navigation-overflow", "pl-stub-queries-float")],),
        ).fetchall())
        assert pl == {ids["pl-navigation-strings"]: "(,,,,)", ids["pl-navigation-overflow"]: "(,,,1e+308,)",
                      ids["pl-stub-queries-float"]: "(214.19999999925494,59.90000000037253,136,135.90000000037253,)"}
    assert stats.ingested >= len(accepted)


# Bodies that the models before records v1 became strict accepted (pydantic's lax mode, no
# bounds): rows like these may sit in a store that was filled before migration 0007.
LEGACY = {
    "ping": {"target": "t", "protocol": "icmp", "count": 3, "interval_ms": "10", "timeout_ms": 1000,
             "sent": 3.0, "received": "3", "rtts_ms": [-1e308, "15", 1e308], "port": True},
    "dns_query": {"transport": "dot", "address": "a", "port": 853.0, "qname": "q.", "policy": "fresh",
                  "idle_timeout_s": "10", "timeout_s": 5, "max_attempts": 1.0, "attempts": True,
                  "t_start": -9223372036854775808, "t_connected": 9223372036854775807, "t_tls_done": 3.0,
                  "t_query_sent": "5", "t_response": 9223372036854775807, "connection_reused": "false",
                  "access_rtt_ms": 1e-320, "http_status": 99999999999, "response_size": -1,
                  "wire_basis": "tcp_info", "query_bytes_sent": 9223372036854775807,
                  "query_bytes_received": 9223372036854775807, "query_packets_sent": 2147483647,
                  "query_packets_received": 2147483647, "handshake_packets_sent": 2147483647,
                  "cache_warmed": "maybe", "answers": ["x"], "sequence": 1e3},
    "page_load": {"url": "u", "browser": "firefox", "dns_mode": "system", "dns_transport": "system", "http": "h2",
                  "timeout_s": "15", "viewport": [1, 1], "plt_ms": "391.5", "unique_hostnames": 2.0,
                  "dns_lookups": True, "har_valid": "yes", "dns_transport_verified": 1,
                  "navigation": {"responseStart": "fast", "domainLookupStart": -1.7e308, "domainLookupEnd": 1.7e308,
                                 "connectStart": [1], "connectEnd": {"a": 1}, "secureConnectionStart": 1e-320,
                                 "domContentLoadedEventStart": "@1e400"},
                  "stub": {"queries": 3.5, "overhead_us_p50": "x"}},
}


def test_views_read_rows_stored_before_strict_records(empty_db):
    # Straight into the table (as the owner): these rows bypass today's models on purpose.
    with psycopg.connect(empty_db) as conn:
        for kind, body in LEGACY.items():
            conn.execute(
                "INSERT INTO results (id, schema, kind, campaign, run, vantage_id, provider, started_at, status, env, body) "
                "VALUES (%s, 'dnscamp.result/1', %s, 'legacy', 'r', 'v', 'local', '2026-01-01T00:00:00Z', 'ok', "
                "'{}'::jsonb, %s::jsonb)",
                (uuid.uuid4(), kind, json.dumps(body).replace('"@1e400"', "1e400")),  # beyond a double
            )
    rows = _read_every_view(empty_db)
    assert rows["v_ping"] == rows["v_dns_query"] == rows["v_page_load"] == 1
    with psycopg.connect(empty_db) as conn:
        assert conn.execute("SELECT sent, received, port, rtt_avg_ms FROM v_ping").fetchone() == (None, 3, None, 5.0)
        assert conn.execute("SELECT t_start, t_tls_done, total_bytes, exchange_rtt_multiple FROM v_dns_query").fetchone() == (
            -9223372036854775808, None, None, None)
