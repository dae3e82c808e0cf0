"""User-facing errors of the dnscamp CLI: one clear line, exit code 2."""

from __future__ import annotations

import sys
from typing import NoReturn


class UsageError(Exception):
    """Bad input (a malformed spec, an unknown name, a missing file): one line, names the culprit."""


def die(message: str, code: int = 2) -> NoReturn:
    sys.stderr.write(f"dnscamp: {message}\n")
    raise SystemExit(code)
