"""The RIPE Atlas API key: from $RIPE_ATLAS_KEY or a key file; never printed or logged.

The key is wrapped in ``ApiKey`` whose ``repr``/``str`` are redacted, so it cannot leak
through a log line, a traceback's locals or an f-string by accident; only ``reveal()`` (used
when building the HTTP header) gives the secret.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

ENV = "RIPE_ATLAS_KEY"
ENV_FILE = "RIPE_ATLAS_KEY_FILE"
_SHAPE = re.compile(r"^[A-Za-z0-9-]{8,128}$")


class KeyError_(Exception):
    """No usable key (the message never contains the key)."""


class ApiKey:
    __slots__ = ("_secret",)

    def __init__(self, secret: str):
        self._secret = secret

    def reveal(self) -> str:
        return self._secret

    def __repr__(self) -> str:
        return "ApiKey(<redacted>)"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return repr(self)

    def __reduce__(self):  # never pickled into a spool or a subprocess by accident
        raise TypeError("ApiKey cannot be pickled")


def load_key(key_file: str | Path | None = None, *, required: bool = True) -> ApiKey | None:
    """Order: --key-file, $RIPE_ATLAS_KEY, $RIPE_ATLAS_KEY_FILE."""
    secret: str | None = None
    where = ""
    path = Path(key_file) if key_file else (Path(os.environ[ENV_FILE]) if os.environ.get(ENV_FILE) else None)
    if key_file:
        secret, where = _read(path), f"key file {path}"  # type: ignore[arg-type]
    elif os.environ.get(ENV):
        secret, where = os.environ[ENV].strip(), f"${ENV}"
    elif path:
        secret, where = _read(path), f"key file {path}"
    if not secret:
        if required:
            raise KeyError_(f"no RIPE Atlas API key: set ${ENV} or pass --key-file (a file holding only the key)")
        return None
    if not _SHAPE.match(secret):
        raise KeyError_(f"the RIPE Atlas API key from {where} does not look like a key (letters, digits, dashes)")
    return ApiKey(secret)


def _read(path: Path) -> str:
    try:
        st = path.stat()
        text = path.read_text().strip()
    except OSError as exc:
        raise KeyError_(f"key file {path}: {exc.strerror}") from None
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        import sys

        sys.stderr.write(f"dnscamp: warning: key file {path} is readable by others (chmod 600 it)\n")
    return text


def redact(text: str, key: ApiKey | None) -> str:
    """Remove the key from any text before it is shown (e.g. an API error echoing headers)."""
    if key is None:
        return text
    return text.replace(key.reveal(), "<redacted>")
