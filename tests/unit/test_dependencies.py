"""Declared dependencies (pyproject.toml) versus what the code imports.

- every third-party import is declared: the product's code (dnscamp, vantage_agent, db,
  collectors, testbed, atlas) by ``dependencies``; tests and benchmarks also by the ``test`` extra;
- every declared distribution is imported somewhere, or NOT_IMPORTED says why it is declared;
- a product dependency imported only by tests/benchmarks belongs in the ``test`` extra.

The distribution behind an import comes from the installed environment
(importlib.metadata.packages_distributions), not from a hand-kept table.
Run ``.venv/bin/python -m tests.unit.test_dependencies`` to print the problems.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import PackageNotFoundError, distribution, packages_distributions
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("dnscamp", "vantage_agent", "db", "collectors", "testbed", "atlas", "dashboards")
DEV = ("tests", "bench")
# Declared but imported by nothing, and why (a reason, or the declaration goes).
NOT_IMPORTED = {
    "httpx": "dnspython's DoH backend: dns.query.https (vantage_agent/pageload/stub.py) needs it",
    "h2": "HTTP/2 for httpx (dnspython's DoH)",
    "getdns": "the getdns engine (vantage_agent/dns/getdns_engine.py)",
}
UNUSED_EXTRAS: dict[str, str] = {}


def norm(name: str) -> str:
    """PEP 503 normalised distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def declared(pyproject: Path) -> dict[str, set[str]]:
    """{"": product dependencies, extra: its dependencies} as normalised names."""
    proj = tomllib.loads(pyproject.read_text())["project"]
    groups = {"": proj.get("dependencies", []), **proj.get("optional-dependencies", {})}
    return {g: {norm(re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", r).group(1)) for r in reqs}
            for g, reqs in groups.items()}


def imports(root: Path, dirs: tuple[str, ...]) -> dict[Path, set[str]]:
    """Absolute imports (dotted module names) of every .py file under ``dirs``."""
    out: dict[Path, set[str]] = {}
    for d in dirs:
        for f in sorted((root / d).rglob("*.py")):
            mods = out.setdefault(f, set())
            for n in ast.walk(ast.parse(f.read_bytes(), str(f))):
                if isinstance(n, ast.Import):
                    mods.update(a.name for a in n.names)
                elif isinstance(n, ast.ImportFrom) and n.level == 0 and n.module:
                    mods.add(n.module)
    return out


def _providers(module: str, pd: dict[str, list[str]]) -> set[str]:
    """Distributions that provide ``module``; inside a shared namespace (ripe.atlas.*) the one
    whose files hold the module's path."""
    dists = pd.get(module.split(".")[0], [])
    if len(dists) > 1:
        prefix = module.replace(".", "/")
        exact = [d for d in dists if any(str(p).startswith(prefix) for p in (distribution(d).files or []))]
        dists = exact or dists
    return {norm(d) for d in dists}


def problems(root: Path = ROOT, product: tuple[str, ...] = PRODUCT, dev: tuple[str, ...] = DEV,
             not_imported: dict[str, str] = NOT_IMPORTED, unused_extras: dict[str, str] = UNUSED_EXTRAS) -> list[str]:
    decl = declared(root / "pyproject.toml")
    runtime, test = decl.get("", set()), decl.get("test", set())
    pd = packages_distributions()
    files = imports(root, product + dev)
    # first-party: the packages, and the benchmark scripts that tests put on sys.path (bench/*.py)
    first_party = set(product) | set(dev) | {f.stem for d in dev for f in (root / d).glob("*.py")}
    out: list[str] = []
    used_by: dict[str, set[str]] = {}  # distribution -> "product" / "dev"
    for f, mods in files.items():
        rel = f.relative_to(root)
        is_test = rel.parts[0] in dev or f.name.startswith("test_") or f.name == "conftest.py"
        allowed = runtime | test if is_test else runtime
        for m in sorted(mods):
            top = m.split(".")[0]
            # scripts (bench/, testbed/linkem/) import their sibling modules by bare name
            sibling = (f.parent / f"{top}.py").exists() or (f.parent / top / "__init__.py").exists()
            if top in sys.stdlib_module_names or top in first_party or sibling or top == "__future__":
                continue
            dists = _providers(m, pd)
            if not dists:
                out.append(f"{rel}: imports {m}, which no installed distribution provides")
                continue
            for d in dists:
                used_by.setdefault(d, set()).add("dev" if is_test else "product")
            if not dists & allowed:
                where = "the test extra" if is_test else "dependencies"
                out.append(f"{rel}: imports {m} ({', '.join(sorted(dists))}), not declared in {where} of pyproject.toml")
    for d in sorted(runtime | test):
        if d in not_imported:
            continue
        if d not in used_by:
            out.append(f"pyproject.toml: {d} is declared but imported by nothing (remove it, or say why in NOT_IMPORTED)")
        elif d in runtime and used_by[d] == {"dev"}:
            out.append(f"pyproject.toml: {d} is imported only by tests/benchmarks: move it to the test extra")
    for extra, deps in decl.items():
        if extra not in ("", "test") and extra not in unused_extras:
            for d in sorted(deps - set(used_by)):
                out.append(f"pyproject.toml: {d} (extra {extra}) is imported by nothing")
    return out


def locked(lock: Path) -> dict[str, dict]:
    """requirements.lock: {name: {"version", "hashes", "build_only"}} (pip-compile's format)."""
    out: dict[str, dict] = {}
    cur = None
    for line in lock.read_text().splitlines():
        m = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", line)
        if m:
            cur = out[norm(m.group(1))] = {"version": m.group(2), "hashes": 0, "via": []}
        elif cur and line.strip().startswith("--hash=sha256:"):
            cur["hashes"] += 1
        elif cur and line.startswith("    #"):
            cur["via"].append(line.strip("# ").strip())
    for e in out.values():
        e["build_only"] = bool(e["via"]) and all("build-system.requires" in v or v == "via" for v in e["via"])
    return out


def test_lock_pins_every_declared_version_with_hashes():
    lock = locked(ROOT / "requirements.lock")
    proj = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for req in proj["dependencies"] + [r for g in proj["optional-dependencies"].values() for r in g]:
        m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^]]*\])?==(\S+)", req)
        assert m, f"pyproject.toml: {req!r} is not pinned with =="
        name, version = norm(m.group(1)), m.group(3)
        assert name in lock, f"requirements.lock lacks {name}: run `make lock`"
        assert lock[name]["version"] == version, f"requirements.lock has {name}=={lock[name]['version']}, " \
                                                 f"pyproject.toml {version}: run `make lock`"
    assert all(e["hashes"] >= 1 for e in lock.values()), [n for n, e in lock.items() if not e["hashes"]]
    assert "setuptools" in lock  # the build backend, for the editable install without build isolation


def test_the_venv_has_the_locked_versions():
    # what the tests run on is what the lock installs (install/20-python.sh); build-only pins
    # (setuptools) are not runtime state
    wrong = []
    for name, e in locked(ROOT / "requirements.lock").items():
        if e["build_only"]:
            continue
        try:
            have = distribution(name).version
        except PackageNotFoundError:
            have = None
        if have != e["version"]:
            wrong.append(f"{name}: installed {have}, locked {e['version']}")
    assert not wrong, "the venv differs from requirements.lock (run make deps): " + "; ".join(wrong)


def test_imports_match_declared_dependencies():
    found = problems()
    assert not found, "\n".join(found)


def test_every_not_imported_reason_names_a_declared_distribution():
    decl = declared(ROOT / "pyproject.toml")
    assert set(NOT_IMPORTED) <= decl[""] | decl["test"]
    for d in NOT_IMPORTED:
        try:
            distribution(d)
        except PackageNotFoundError:
            pytest.fail(f"{d} is declared but not installed: run install/20-python.sh")


def test_the_check_finds_undeclared_and_unused(tmp_path):
    # a product module importing websocket (websocket-client) and pydantic, a test importing
    # pytest; declared: pydantic and orjson (unused), test extra empty
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\ndependencies = ["pydantic==2", "orjson"]\n'
                                             '[project.optional-dependencies]\ntest = []\n')
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text("import websocket\nfrom pydantic import BaseModel\nfrom . import x\n"
                                             "import json\nfrom pkg import sib\nimport helper\n")
    (tmp_path / "pkg" / "helper.py").write_text("")  # a sibling module imported by bare name
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("import pytest\nimport not_a_module_anywhere\n")
    found = problems(tmp_path, product=("pkg",), dev=("tests",), not_imported={})
    assert "pkg/mod.py: imports websocket (websocket-client), not declared in dependencies of pyproject.toml" in found
    assert "tests/test_a.py: imports pytest (pytest), not declared in the test extra of pyproject.toml" in found
    assert "tests/test_a.py: imports not_a_module_anywhere, which no installed distribution provides" in found
    assert any(p.startswith("pyproject.toml: orjson is declared but imported by nothing") for p in found)
    assert not any("pydantic" in p or "imports json" in p or "sib" in p or "helper" in p for p in found), found


if __name__ == "__main__":
    print("\n".join(problems()) or "dependencies: every import declared, every declaration used")
