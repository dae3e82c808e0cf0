"""The testbed's own ASN database: the probes' prefixes in pyasn's IPASN text format, which
atlas.discovery.AsnDb reads as it reads a real one."""

from __future__ import annotations

from pathlib import Path


def write_asn_db(path: str | Path, prefixes: dict[str, int]) -> Path:
    """Write a pyasn IPASN text file (the testbed's own ASN database)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["; dnscamp testbed IPASN database (prefix<TAB>asn)"]
    lines += [f"{p}\t{a}" for p, a in sorted(prefixes.items())]
    path.write_text("\n".join(lines) + "\n")
    return path
