"""Print the part of requirements.lock that dnscamp itself needs, without its test extra.

`make demo` installs this part only (install/20-python.sh DNSCAMP_INSTALL_FOR=demo): the test
extra's tools (pytest, hypothesis, moto[server] with cfn-lint and sympy, python-hcl2, ...) are
never run by the demo, and `make test` installs the whole lock on top. Same versions, same
hashes: each kept block is copied from requirements.lock as it is.

A package is kept when pyproject.toml's [project] dependencies or build-system name it, or when
a kept package pulls it in (pip-compile's "# via" annotations, which list every package that
requires it). Runs on the system's Python 3.11 (tomllib), before the venv exists.

Usage: python3 install/lock_subset.py [requirements.lock [pyproject.toml]]
"""

from __future__ import annotations

import re
import sys
import tomllib

PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==")
VIA = re.compile(r"^    #(?: via|  ) +(\S.*)$")


def norm(requirement: str) -> str:
    """The normalised name of a requirement (PEP 503): ripe.atlas.cousteau = ripe-atlas-cousteau."""
    return re.sub(r"[-_.]+", "-", re.split(r"[\[=<>!~ ;(]", requirement.strip(), maxsplit=1)[0]).lower()


def blocks(lock: str) -> tuple[str, dict[str, str], dict[str, set[str]]]:
    """The header (comments before the first pin), each pin's block of text and its "via" names."""
    header, text, via, cur = [], {}, {}, None
    for line in lock.splitlines(keepends=True):
        m = PIN.match(line)
        if m:
            cur = norm(m.group(1))
            text[cur], via[cur] = line, set()
        elif not text:
            header.append(line)
        elif cur is not None and line.startswith((" ", "\t")):
            text[cur] += line
            v = VIA.match(line.rstrip("\n"))
            if v:
                via[cur].add(v.group(1))
        else:
            cur = None  # a blank line or pip-compile's "unsafe" note: no pin's text
    return "".join(header), text, via


def runtime_subset(lock: str, pyproject: dict) -> str:
    header, text, via = blocks(lock)
    wanted = {norm(r) for r in pyproject["project"]["dependencies"]}
    wanted |= {norm(r) for r in pyproject.get("build-system", {}).get("requires", [])}
    keep = {name for name in text if name in wanted}
    missing = wanted - set(text)
    if missing:
        raise SystemExit(f"lock_subset: requirements.lock lacks {sorted(missing)}: run make lock")
    while True:
        more = {name for name in text if name not in keep and any(norm(v) in keep for v in via[name])}
        if not more:
            break
        keep |= more
    return header + "".join(text[name] for name in text if name in keep)


def main(argv: list[str]) -> None:
    lock_path = argv[1] if len(argv) > 1 else "requirements.lock"
    pyproject_path = argv[2] if len(argv) > 2 else "pyproject.toml"
    with open(lock_path, encoding="utf-8") as f:
        lock = f.read()
    with open(pyproject_path, "rb") as f:
        pyproject = tomllib.load(f)
    sys.stdout.write(runtime_subset(lock, pyproject))


if __name__ == "__main__":
    main(sys.argv)
