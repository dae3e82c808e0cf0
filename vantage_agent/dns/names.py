"""Name lists: from a text file (one name per line, ``#`` comments) or from HAR files (the
unique hostnames of every request, in order of first appearance — the WWW'20 tool timed
"each unique domain in the HARs", 002_6fa4cf280535d36b.txt §3.1.2)."""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path
from typing import Iterable
from urllib.parse import urlsplit


class NamesError(ValueError):
    pass


def normalize(name: str) -> str:
    n = name.strip().lower()
    if not n:
        raise NamesError("empty name")
    if not n.endswith("."):
        n += "."
    if len(n) > 254 or any(len(label) > 63 or not label for label in n[:-1].split(".")):
        raise NamesError(f"not a DNS name: {name!r}")
    return n


def _unique(names: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for n in names:
        seen.setdefault(n, None)
    return list(seen)


def from_text(path: Path) -> list[str]:
    out = []
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as exc:
        raise NamesError(f"{path}: {exc.strerror or exc}") from None
    for i, line in enumerate(lines, 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            out.append(normalize(line.split()[0]))
        except NamesError as exc:
            raise NamesError(f"{path}:{i}: {exc}") from None
    if not out:
        raise NamesError(f"{path}: no names")
    return _unique(out)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


def from_har(har: dict) -> list[str]:
    """Unique hostnames of the requests of one HAR (``log.entries[].request.url``); IPs skipped."""
    try:
        entries = har["log"]["entries"]
    except (KeyError, TypeError):
        raise NamesError("not a HAR: no log.entries") from None
    out = []
    for e in entries:
        url = (e.get("request") or {}).get("url", "")
        host = urlsplit(url).hostname
        if host and not _is_ip(host):
            out.append(normalize(host))
    return _unique(out)


def from_har_files(paths: Iterable[Path]) -> list[str]:
    out: list[str] = []
    for p in paths:
        try:
            har = json.loads(Path(p).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise NamesError(f"{p}: {exc}") from None
        try:
            out += from_har(har)
        except NamesError as exc:
            raise NamesError(f"{p}: {exc}") from None
    return _unique(out)


def from_file(path: Path) -> list[str]:
    """A ``.har`` file (or a JSON file with ``log.entries``) → its hostnames; else a text list."""
    p = Path(path)
    if p.suffix.lower() in (".har", ".json"):
        return from_har_files([p])
    return from_text(p)
