"""The quarantine: a line that is not stored is a row of ``quarantine`` (file, line, reason, raw
text; unique on file + line), and the rest of its file goes on. A quarantined line that later
ingests or matches the stored record (the file was fixed) has its row deleted: the table holds
open problems only.
"""

from __future__ import annotations

import psycopg

_QUARANTINE = (
    "INSERT INTO quarantine (source_file, line, reason, raw) VALUES (%s, %s, %s, %s) "
    "ON CONFLICT (source_file, line) DO UPDATE SET reason = EXCLUDED.reason, raw = EXCLUDED.raw, "
    "quarantined_at = now() WHERE (quarantine.reason, quarantine.raw) IS DISTINCT FROM (EXCLUDED.reason, EXCLUDED.raw)"
)


def quarantine_text(raw: bytes) -> str:
    """A line as quarantine.raw (text): bytes that are not UTF-8, and NUL, written as \\xNN."""
    return raw.decode("utf-8", "backslashreplace").replace("\x00", "\\x00")


def id_conflict(rid: str, stored: tuple, digest: bytes) -> str:
    """The reason of a line whose record ``rid`` is stored (``stored``: content hash, file,
    line) with another content hash than the line's (``digest``)."""
    return (
        f"id_conflict: record {rid} is stored with content hash {stored[0].hex()} "
        f"(from {stored[1]}:{stored[2]}); this line's is {digest.hex()}"
    )


def add(cur: psycopg.Cursor, bad: list[tuple[str, int, str, str]]) -> None:
    """Quarantine rows (file, line, reason, raw); a line's row is refreshed when its reason or raw text changed."""
    cur.executemany(_QUARANTINE, bad)


def resolve(cur: psycopg.Cursor, source: str, fine: list[int]) -> None:
    """Delete the quarantine rows of lines that now ingested (one range probe per batch)."""
    cur.execute(
        "SELECT line FROM quarantine WHERE source_file = %s AND line BETWEEN %s AND %s",
        (source, min(fine), max(fine)),
    )
    fixed = {r[0] for r in cur.fetchall()} & set(fine)
    if fixed:
        cur.execute("DELETE FROM quarantine WHERE source_file = %s AND line = ANY(%s)", (source, sorted(fixed)))
