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


# --- db/ owns the store: no arrow from db/ up to collectors/, migrations run frozen code --------
# A migration upgrades through its revision as it was written: it imports the stdlib, its
# libraries and db/migrations/ (the frozen view SQL and db/migrations/frozen/), never live code
# (which changes with later revisions) and never another migration by importlib.
MIGRATIONS = ROOT / "db" / "migrations" / "versions"
PROJECT = ("vantage_agent", "dnscamp", "db", "collectors", "atlas", "testbed", "dashboards", "infra", "tests", "bench")
MIGRATION_MAY_IMPORT = ("db.migrations.views", "db.migrations.frozen")


def module_references(f: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in ``f``: module level or inside functions, ``import x``
    and ``from x import y`` (also ``from x import module``: x.y), and importlib / __import__ /
    find_spec / spec_from_file_location calls with a literal name or path."""
    out = []
    for node in ast.walk(ast.parse(f.read_text(), str(f))):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module))
            out.extend((node.lineno, f"{node.module}.{a.name}") for a in node.names)
        elif isinstance(node, ast.Call) and node.args:
            fn = _callee(node)
            arg = node.args[-1] if fn == "spec_from_file_location" else node.args[0]  # a file path / a name
            if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
                continue
            if fn in DYNAMIC_IMPORTS:
                out.append((node.lineno, arg.value))
            elif fn == "spec_from_file_location":
                out.append((node.lineno, arg.value.removesuffix(".py").replace("/", ".")))
    return out


def _callee(node: ast.Call) -> str:
    return node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")


def db_imports_collectors(f: Path) -> list[tuple[int, str]]:
    return [(n, m) for n, m in module_references(f) if _top(m) == "collectors"]


def migration_violations(f: Path) -> list[tuple[int, str]]:
    """What a migration file may not import: project code outside db/migrations/'s frozen
    modules, and any migration (``db.migrations.versions...``, by import or importlib)."""
    bad = []
    for n, m in module_references(f):
        if "migrations.versions" in m or "migrations/versions" in m:
            bad.append((n, m))
        elif _top(m) in PROJECT and not any(m == ok or m.startswith(ok + ".") for ok in MIGRATION_MAY_IMPORT):
            bad.append((n, m))
    return bad


def test_db_never_imports_collectors():
    bad = {str(f.relative_to(ROOT)): v for f in (ROOT / "db").rglob("*.py") if (v := db_imports_collectors(f))}
    assert not bad, f"db/ imports collectors/ (the writer takes a parsed batch as plain data): {bad}"


def test_migrations_import_only_frozen_code():
    bad = {f.name: v for f in sorted(MIGRATIONS.glob("*.py")) if (v := migration_violations(f))}
    assert not bad, f"migrations importing live code or another migration (freeze it in db/migrations/frozen/): {bad}"


def test_frozen_modules_import_no_live_code():
    """What a migration imports is frozen too: db/migrations/frozen/ imports only frozen code."""
    bad = {f.name: v for f in sorted((ROOT / "db" / "migrations" / "frozen").glob("*.py")) if (v := migration_violations(f))}
    assert not bad, bad


@pytest.mark.parametrize("line", [
    "from collectors.ingest import x",
    "import collectors.ingest",
    "def f():\n    from collectors import ingest\n",
    "import importlib\nm = importlib.import_module('collectors.parse')",
    "m = __import__('collectors')",
])  # fmt: skip
def test_the_db_check_catches_a_planted_import(tmp_path, line):
    f = tmp_path / "planted.py"
    f.write_text(line + "\n")
    assert db_imports_collectors(f), line
    (tmp_path / "clean.py").write_text("import psycopg\nfrom db.writer import encode\n")
    assert db_imports_collectors(tmp_path / "clean.py") == []


@pytest.mark.parametrize("line", [
    "from collectors.ingest import split",
    "def _backfill(conn):\n    from collectors.ingest import content_hash\n",
    "from db.records import loads",
    "from db.writer.encode import canonical_json",
    "import importlib\n_0017 = importlib.import_module('db.migrations.versions.0017_dashboard_rollups')",
    "import importlib.util\ns = importlib.util.spec_from_file_location('m', 'db/migrations/versions/0012_compact_store.py')",
    "from db.migrations.versions import x",
])  # fmt: skip
def test_the_migration_check_catches_a_planted_import(tmp_path, line):
    f = tmp_path / "0099_planted.py"
    f.write_text(line + "\n")
    assert migration_violations(f), line
    (tmp_path / "0100_clean.py").write_text(
        "import json\nimport sqlalchemy as sa\nfrom alembic import op\nimport orjson\n"
        "from db.migrations.views import create_view\nfrom db.migrations.frozen.m0012 import RESULTS_VIEW_SQL\n"
        "from db.migrations.frozen import m0017 as _0017\n"
    )  # fmt: skip
    assert migration_violations(tmp_path / "0100_clean.py") == []
