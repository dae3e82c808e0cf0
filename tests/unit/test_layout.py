"""The layering rule of ARCHITECTURE.md: no folder imports dnscamp/ (dnscamp is the top),
and the vantage agent stands alone (it runs on EC2 without the store)."""

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]


def imports_of(folder: str) -> list[tuple[str, str]]:
    out = []
    for f in (ROOT / folder).rglob("*.py"):
        tree = ast.parse(f.read_text(), str(f))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                out.extend((str(f.relative_to(ROOT)), a.name) for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                out.append((str(f.relative_to(ROOT)), node.module))
    return out


@pytest.mark.parametrize("folder", ["vantage_agent", "db", "collectors", "testbed", "atlas", "dashboards"])
def test_nothing_imports_dnscamp(folder):
    if not (ROOT / folder).exists():
        pytest.fail(f"{folder}/ is missing")
    bad = [(f, m) for f, m in imports_of(folder) if m == "dnscamp" or m.startswith("dnscamp.")]
    assert not bad, f"{folder} imports dnscamp: {bad}"


def test_vantage_agent_does_not_need_the_store():
    bad = [(f, m) for f, m in imports_of("vantage_agent") if m.split(".")[0] in ("db", "collectors", "sqlalchemy", "alembic")]
    assert not bad, bad


# --- issue 12 §11: the agent ships alone -----------------------------------------------------
# vantage_agent/ is what gets installed on a cloud vantage: no testbed/ and no tests/ there. It
# learns the testbed's resolvers, CA and logs from the testbed description (ctx.testbed,
# `dnscamp testbed info --json`), and test scaffolding lives under tests/.
NOT_SHIPPED = ("testbed", "tests")
PRODUCT = ("vantage_agent", "dnscamp", "db", "collectors", "atlas", "testbed")
DYNAMIC_IMPORTS = ("import_module", "__import__", "find_spec")


def _top(name: str) -> str:
    return name.split(".")[0]


def dynamic_imports_of(folder: str) -> list[tuple[str, str]]:
    """importlib.import_module / __import__ / find_spec calls with a literal module name."""
    out = []
    for f in (ROOT / folder).rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str):
                fn = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if fn in DYNAMIC_IMPORTS:
                    out.append((str(f.relative_to(ROOT)), node.args[0].value))
    return out


def test_vantage_agent_never_imports_testbed_or_tests():
    """At module level, inside functions, or by name (importlib): none of them."""
    found = imports_of("vantage_agent") + dynamic_imports_of("vantage_agent")
    bad = sorted({(f, m) for f, m in found if _top(m) in NOT_SHIPPED})
    assert not bad, f"vantage_agent/ imports what is not installed on a vantage: {bad}"


def _module_names(folder: str) -> dict[str, Path]:
    out = {}
    for f in (ROOT / folder).rglob("*.py"):
        parts = f.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


def _references(f: Path) -> set[str]:
    """Dotted module names a product file uses: absolute and relative imports (``from . import
    x`` -> package.x) and registry strings (``"vantage_agent.pageload.firefox"``, ``"mod:attr"``)."""
    parts = f.relative_to(ROOT).with_suffix("").parts
    package = parts[:-1]
    refs: set[str] = set()
    for node in ast.walk(ast.parse(f.read_text(), str(f))):
        if isinstance(node, ast.Import):
            refs.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = list(package[: len(package) - node.level + 1]) if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            refs.add(mod)
            refs.update(f"{mod}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("vantage_agent."):
            refs.add(node.value.split(":", 1)[0])
    return refs


def test_no_test_scaffolding_in_vantage_agent():
    """Every module under vantage_agent/ is used by the product (an import or a registry entry
    in a product folder); a module only tests/ or bench/ use is scaffolding: it lives in tests/."""
    modules = _module_names("vantage_agent")
    used: set[str] = set()
    for folder in PRODUCT:
        for name, f in _module_names(folder).items():
            used.update(r for r in _references(f) if r != name)
    orphans = sorted(m for m, f in modules.items() if f.name != "__init__.py" and m not in used)
    assert not orphans, f"modules under vantage_agent/ that no product code uses (test scaffolding? move it to tests/): {orphans}"


AGENT_ALONE = r'''
import importlib, importlib.abc, json, pkgutil, sys, tempfile
from pathlib import Path

attempts = []


class Blocker(importlib.abc.MetaPathFinder):
    """testbed/ and tests/ are not installed on a vantage: record and refuse every import."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("testbed", "tests"):
            attempts.append(name)
            raise ImportError(f"{name} is not installed on a vantage")
        return None


sys.meta_path.insert(0, Blocker())
import vantage_agent

for m in pkgutil.walk_packages(vantage_agent.__path__, "vantage_agent."):
    importlib.import_module(m.name)

from vantage_agent.dns import catalog
from vantage_agent.kind import RunContext
from vantage_agent.pageload import dnsmode
from vantage_agent.pageload.kind import FrontendLogs, find_ca

tb = json.loads(sys.argv[1])
out = {}
cat = catalog.Catalog.load(testbed=tb, resolv_conf=Path("/nonexistent"))
ep = cat.endpoint("testbed-isp", "doq")
out["catalog"] = [ep.address, ep.port, ep.tls_name, ep.ca_file]
with tempfile.TemporaryDirectory() as d:
    ca = Path(d) / "ca.pem"
    ca.write_text("pem")
    tb["services"]["ca_file"] = str(ca)
    out["ca"] = find_ca(None, tb) == str(ca)
    with dnsmode.setup(dnsmode.parse("do53:public", testbed=tb), Path(d)) as ds:
        out["resolv_conf"] = Path(ds.resolv_conf).read_text().split("nameserver ")[1].split()[0]
out["dot"] = dnsmode.parse("dot:isp", testbed=tb).resolver.label()
out["logs"] = [str(p) for p in FrontendLogs(tb).paths]
out["attempts"] = attempts
print(json.dumps(out))
'''


def test_agent_runs_with_a_testbed_description_and_no_testbed_package(tmp_path):
    """Import every vantage_agent module with testbed/ and tests/ unimportable, then resolve the
    testbed's resolvers, CA and query logs from a description alone (addresses that are not the
    testbed's own plan, so nothing can come from testbed/plan.py)."""
    import json
    import subprocess
    import sys

    def frontend(name, addr, tls):
        return {"name": name, "query_log": f"/run/{name}.log", "endpoints": {
            "do53": {"address": addr, "port": 53}, "dot": {"address": addr, "port": 853, "tls_name": tls},
            "doq": {"address": addr, "port": 8853, "tls_name": tls}}}

    tb = {"up": True, "services": {"running": True, "ca_file": "/absent/ca.pem", "resolvers": {
        "isp": frontend("testbed-isp", "192.0.2.11", "isp.example"),
        "public": frontend("testbed-public", "198.51.100.22", "pub.example")}}}
    p = subprocess.run([sys.executable, "-c", AGENT_ALONE, json.dumps(tb)], cwd=tmp_path, capture_output=True,
                       text=True, timeout=120, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)})
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out == {
        "catalog": ["192.0.2.11", 8853, "isp.example", "/absent/ca.pem"],
        "ca": True,
        "resolv_conf": "198.51.100.22",
        "dot": "isp.example@192.0.2.11",
        "logs": ["/run/testbed-isp.log", "/run/testbed-public.log"],
        "attempts": [],
    }


# --- atlas/ and testbed/ stand below the store ---------------------------------------------------
# atlas/ holds definitions, parsing and analysis by measurement type: no store writes (those are
# collectors/atlas_store.py), no emulated probes (testbed/atlas_probes/) and nothing of the CLI.
# testbed/ builds the emulated Internet and writes files (the Atlas-like probes' RIPE Atlas JSON):
# it never reaches into the store or the CLI. Module-level, function-level and by-name imports all count.
BELOW = {"atlas": ("collectors", "db", "testbed", "dnscamp"), "testbed": ("collectors", "db", "dnscamp")}


def layering_violations(root: Path, folder: str, forbidden: tuple[str, ...]) -> list[tuple[str, str]]:
    """(file, module) of every import under root/folder whose top-level package is forbidden."""
    out = []
    for f in sorted((root / folder).rglob("*.py")):
        rel = str(f.relative_to(root))
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str):
                fn = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if fn in DYNAMIC_IMPORTS:
                    names = [node.args[0].value]
            out.extend((rel, n) for n in names if _top(n) in forbidden)
    return out


@pytest.mark.parametrize("folder", sorted(BELOW))
def test_atlas_and_testbed_import_nothing_above_them(folder):
    bad = layering_violations(ROOT, folder, BELOW[folder])
    assert not bad, f"{folder}/ imports what stands above it ({', '.join(BELOW[folder])}): {bad}"


PLANTS = (  # (code, the module the check must name)
    ("from {top}.x import y\n", "{top}.x"),
    ("def f():\n    import {top}\n", "{top}"),
    ("import importlib\nimportlib.import_module('{top}.x')\n", "{top}.x"),
)


@pytest.mark.parametrize("folder,top,code,module", [
    (folder, top, code, module) for folder, tops in sorted(BELOW.items()) for top in tops for code, module in PLANTS
])
def test_the_layering_check_finds_a_planted_violation(tmp_path, folder, top, code, module):
    (tmp_path / folder / "sub").mkdir(parents=True)
    (tmp_path / folder / "ok.py").write_text("import collections\nfrom vantage_agent import errors\nfrom atlas_x import y\n")
    assert layering_violations(tmp_path, folder, BELOW[folder]) == []  # names that only start alike pass
    (tmp_path / folder / "sub" / "bad.py").write_text(code.format(top=top))
    assert layering_violations(tmp_path, folder, BELOW[folder]) == [(f"{folder}/sub/bad.py", module.format(top=top))]


# A measurement unit never migrates the store: the caller does (`dnscamp db up`, `dnscamp campaign
# run` before its units when a kind ``needs_store``). Checked over every module the kind registry names.
def migrations_in(f: Path) -> list[str]:
    """Imports of the migration module (db.migrate, or migrate from db) in file f."""
    out = []
    for node in ast.walk(ast.parse(f.read_text(), str(f))):
        if isinstance(node, ast.Import):
            out.extend(a.name for a in node.names if a.name.startswith("db.migrat"))
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith("db.migrat"):
                out.append(node.module)
            elif node.module == "db":
                out.extend(f"db.{a.name}" for a in node.names if a.name.startswith("migrat"))
    return out


def test_no_measurement_kind_migrates_the_store():
    from dnscamp.kinds import KINDS

    for name, target in KINDS.items():
        f = ROOT / (target.partition(":")[0].replace(".", "/") + ".py")
        if not f.exists():
            f = f.with_suffix("") / "__init__.py"
        assert not migrations_in(f), f"kind {name} ({f.relative_to(ROOT)}) migrates the store: {migrations_in(f)}"


def test_the_migration_check_finds_a_planted_one(tmp_path):
    f = tmp_path / "kind.py"
    f.write_text("from db import engine\n\ndef run():\n    from db import engine, migrate\n")
    assert migrations_in(f) == ["db.migrate"]
    f.write_text("import db.migrate\nfrom db.migrate import upgrade\n")
    assert migrations_in(f) == ["db.migrate", "db.migrate"]
    f.write_text("from db import engine\nimport migrate_helpers\n")
    assert migrations_in(f) == []
