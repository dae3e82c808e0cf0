"""What `dnscamp link apply` put on this machine's network namespace, as every record states it
(``env.link``): a fleet vantage's ``network_profile`` comes from the spec, and this says whether
that shaping was really in place when the record was made.

The state file is written by testbed/linkem/host.py (`dnscamp link`); its place is defined here,
in the agent that ships to the vantages, so both sides read one definition: one JSON file per
network namespace (namespaces share /run) under $DNSCAMP_LINK_STATE_DIR or /run/dnscamp/link,
under /run on purpose: a reboot removes the shaping and its record together.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from vantage_agent.errors import first_line


def state_dir() -> Path:
    return Path(os.environ.get("DNSCAMP_LINK_STATE_DIR") or "/run/dnscamp/link")


def netns_id() -> str:
    """This process's network namespace, as the kernel names it (the inode of /proc/self/ns/net)."""
    return f"net-{os.stat('/proc/self/ns/net').st_ino}"


def state_path() -> Path:
    return state_dir() / f"{netns_id()}.json"


def applied() -> dict[str, Any] | None:
    """The shaping in force here, for ``env.link``: profile name, backend, device, when it was
    applied; None when `dnscamp link` applied nothing in this namespace; ``{"error": ...}`` when
    the state cannot be read (a record must still be written)."""
    try:
        st = json.loads(state_path().read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        return {"error": f"{state_path()}: {first_line(exc)}"}
    if not isinstance(st, dict):
        return {"error": f"{state_path()}: not a JSON object"}
    prof = st.get("profile")
    name = prof.get("name") if isinstance(prof, dict) else prof
    return {"profile": name, "backend": st.get("backend"), "dev": st.get("dev"), "applied_at": st.get("applied_at")}
