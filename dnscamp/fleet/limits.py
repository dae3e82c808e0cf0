"""What the fleet's names and counts may be, from one file: infra/modules/limits.json.

The spec's validation (dnscamp/spec.py), the preflight (dnscamp/fleet/preflight.py) and the
Terraform modules' variable validations all apply these rules; the modules repeat the numbers
in variables.tf (Terraform before 1.9, and OpenTofu, refuse a validation that reads a file),
and tests/unit/test_fleet_limits.py holds them equal to the file. The file itself lives beside
this module (dnscamp/fleet/limits.json) and infra/modules/limits.json is a symbolic link to it:
the agent's wheel is built from the Python packages only, and an instance must load the spec
by the same rules the operator validated it with.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

LIMITS_FILE = Path(__file__).with_name("limits.json")
INSTANCE_ID_MAX = 19  # "i-" and 17 hex digits (EC2's long ids)


@lru_cache(maxsize=1)
def limits() -> dict[str, Any]:
    return json.loads(LIMITS_FILE.read_text())


def _rule(kind: str) -> dict[str, Any]:
    return limits()[kind]


def id_problem(kind: str, value: str) -> str | None:
    """Why ``value`` cannot be a ``kind`` ("campaign", "vantage" or "region") of a fleet, or None."""
    rule = _rule(kind)
    if len(value) > rule["max_length"]:
        return f"{value!r} is {len(value)} characters, at most {rule['max_length']} for a fleet ({rule['why']})"
    if not re.fullmatch(rule["pattern"], value):
        return f"{value!r} does not match {rule['pattern']} ({rule['why']})"
    return None


def max_instances_per_region() -> int:
    return int(_rule("instances_per_region")["max"])


def max_instances_total() -> int:
    return int(_rule("instances_total")["max"])


def bucket_problem(name: str) -> str | None:
    """Why S3 would refuse ``name`` as a bucket name, or None (S3's rules for general purpose buckets)."""
    rule = _rule("s3_bucket")
    if not re.fullmatch(rule["pattern"], name):
        return f"{name!r} is not an S3 bucket name (3-63 characters of a-z, 0-9, '.' and '-', a letter or digit at each end)"
    if ".." in name:
        return f"{name!r} is not a valid S3 bucket name (no '..')"
    if re.fullmatch(r"\d+\.\d+\.\d+\.\d+", name):
        return f"{name!r} is not a valid S3 bucket name (shaped like an IP address)"
    for p in rule["reserved_prefixes"]:
        if name.startswith(p):
            return f"{name!r} is not a valid S3 bucket name (the prefix {p!r} is reserved by S3)"
    for s in rule["reserved_suffixes"]:
        if name.endswith(s):
            return f"{name!r} is not a valid S3 bucket name (the suffix {s!r} is reserved by S3)"
    return None


def derived_names(campaign: str, vantage: str, region: str, *, index: int | None = None,
                  instance_id: str | None = None) -> dict[str, str]:
    """The names the vantage module and the agent build from the ids (templates in limits.json):
    by default for the last instance index and the longest instance id."""
    index = max_instances_per_region() - 1 if index is None else index
    instance_id = instance_id or "i-" + "f" * (INSTANCE_ID_MAX - 2)
    values = {"campaign": campaign, "vantage": vantage, "region": region, "index": index, "instance_id": instance_id}
    return {what: n["template"].format(**values) for what, n in limits()["names"].items() if isinstance(n, dict)}


def aws_name_problem(what: str, name: str) -> str | None:
    """Why AWS would refuse ``name`` as the derived name ``what`` (a key of limits.json's names), or None."""
    rule = limits()["names"][what]
    size = len(name.encode()) if what.endswith("_key") or what.endswith("_prefix") else len(name)
    if size > rule["max_length"]:
        return f"{what} {name!r} would be {size} characters, AWS accepts at most {rule['max_length']}"
    if not re.fullmatch(rule["allowed"], name):
        return f"{what} {name!r} has characters AWS does not accept there ({rule['allowed']})"
    if (p := rule.get("refused_prefix")) and name.startswith(p):
        return f"{what} {name!r} starts with {p!r}, which AWS refuses"
    return None


def names_problems(campaign: str, vantage: str, region: str) -> list[str]:
    """Every derived name of (campaign, vantage, region) that AWS would refuse, one reason each."""
    out = []
    for what, name in derived_names(campaign, vantage, region).items():
        if (p := aws_name_problem(what, name)) is not None:
            out.append(p)
    return out


def longest_names() -> dict[str, int]:
    """The length of each derived name for the longest ids the limits allow."""
    top = {k: "a" * _rule(k)["max_length"] for k in ("campaign", "vantage", "region")}
    return {what: len(name) for what, name in derived_names(top["campaign"], top["vantage"], top["region"]).items()}
