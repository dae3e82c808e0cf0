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


# --- the agent ships alone -----------------------------------------------------
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


# --- transport and browser capabilities live with their driver ---------------------------------
# What a transport, browser or page-load DNS mode can do is an attribute of its driver, asked
# through the registry (vantage_agent/dns/registry.py: registry.transport(name).uses_url, ...;
# pageload/registry.py; pageload/dnsmode.py: MODES). Comparing a name literal elsewhere to decide
# behaviour spreads one transport's knowledge over the code base (STYLE.md, anti-patterns).
TRANSPORT_NAMES = frozenset({"do53", "do53-tcp", "dot", "doh", "doh3", "doq"})
BROWSER_NAMES = frozenset({"firefox", "chromium"})
CAPABILITY_SCANNED = ("vantage_agent", "dnscamp", "testbed", "collectors", "bench", "atlas", "db", "dashboards")
# The drivers and the registries: the only modules that may compare transport or browser names.
DRIVER_MODULES = frozenset({
    "vantage_agent/dns/registry.py", "vantage_agent/dns/_common.py", "vantage_agent/dns/_stream.py",
    "vantage_agent/dns/do53.py", "vantage_agent/dns/dot.py", "vantage_agent/dns/doh.py",
    "vantage_agent/dns/doh3.py", "vantage_agent/dns/doq.py", "vantage_agent/dns/getdns_engine.py",
    "vantage_agent/pageload/registry.py", "vantage_agent/pageload/firefox.py", "vantage_agent/pageload/chromium.py",
})
_COMPARING = (ast.Eq, ast.NotEq, ast.In, ast.NotIn)


def _name_literals(node: ast.AST, names: frozenset[str]) -> list[str]:
    """The names among ``node`` if it is a string constant or a tuple / list / set of them."""
    if isinstance(node, ast.Constant) and node.value in names:
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in names]
    return []


def name_comparisons(source: str, filename: str = "<source>", names: frozenset[str] = TRANSPORT_NAMES) -> list[str]:
    """``file:line: literal`` for every ``==`` / ``!=`` / ``in`` / ``not in`` with a name
    literal on either side, and every ``match`` case on one."""
    out = []
    for node in ast.walk(ast.parse(source, filename)):
        found: list[str] = []
        if isinstance(node, ast.Compare) and any(isinstance(op, _COMPARING) for op in node.ops):
            for side in (node.left, *node.comparators):
                found += _name_literals(side, names)
        elif isinstance(node, ast.MatchValue):
            found += _name_literals(node.value, names)
        out += [f"{filename}:{node.lineno}: {n!r}" for n in found]
    return out


def transport_comparisons(root: Path = ROOT, folders: tuple[str, ...] = CAPABILITY_SCANNED,
                          names: frozenset[str] = TRANSPORT_NAMES) -> list[str]:
    out = []
    for folder in folders:
        for f in sorted((root / folder).rglob("*.py")):
            rel = f.relative_to(root).as_posix()
            if rel not in DRIVER_MODULES:
                out += name_comparisons(f.read_text(), rel, names)
    return out


def test_no_transport_name_comparisons_outside_the_drivers():
    bad = transport_comparisons()
    assert not bad, ("transport names compared outside the drivers and registries (ask "
                     f"registry.transport(name) for the capability instead): {bad}")


def test_no_browser_name_comparisons_outside_the_browsers():
    bad = transport_comparisons(names=BROWSER_NAMES)
    assert not bad, ("browser names compared outside the browser modules and their registry (ask "
                     f"pageload.registry.get(name) for the capability instead): {bad}")


@pytest.mark.parametrize("planted", [
    'if transport == "doh":\n    pass\n',
    'x = t != "do53"\n',
    'if mode.transport in ("doq", "doh3"):\n    pass\n',
    'ok = "dot" not in transports\n',
    'if t in ["doh", "doh3"]:\n    pass\n',
    'match t:\n    case "doq":\n        pass\n',
])
def test_transport_comparison_check_finds_a_planted_one(tmp_path, planted):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "clean.py").write_text(
        'PORTS = {"doh": 443}\nkey = registry.transport("doh").uses_url\nt = "doq"\nok = mode == other\n')
    assert transport_comparisons(tmp_path, ("pkg",)) == []
    (tmp_path / "pkg" / "planted.py").write_text(planted)
    found = transport_comparisons(tmp_path, ("pkg",))
    assert found and all(f.startswith("pkg/planted.py:") for f in found), found


def test_browser_comparison_check_finds_a_planted_one(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "planted.py").write_text('if "firefox" in browsers:\n    pass\n')
    assert transport_comparisons(tmp_path, ("pkg",), BROWSER_NAMES) == ["pkg/planted.py:1: 'firefox'"]


def test_a_driver_module_may_compare_transport_names(tmp_path):
    (tmp_path / "vantage_agent" / "dns").mkdir(parents=True)
    (tmp_path / "vantage_agent" / "dns" / "registry.py").write_text('if t == "doh":\n    pass\n')
    assert transport_comparisons(tmp_path, ("vantage_agent",)) == []


def _project_packages() -> set[str]:
    """Top-level folders of this repository that hold Python code."""
    return {p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".") and any(p.rglob("*.py"))}


def test_vantage_agent_imports_nothing_of_the_project_outside_itself():
    """It ships alone to a cloud vantage: no folder of this repository but its own."""
    others = _project_packages() - {"vantage_agent"}
    found = imports_of("vantage_agent") + dynamic_imports_of("vantage_agent")
    bad = sorted({(f, m) for f, m in found if _top(m) in others})
    assert not bad, f"vantage_agent/ imports other folders of the project: {bad}"


# --- no import cycles inside a folder -----------------------------------------------------------
# An import inside a function counts like one at the top: a cycle hidden in a function body is
# still two modules that cannot be understood (or moved) one without the other.


def _module_files(root: Path, package: str) -> dict[str, Path]:
    out = {}
    for f in (root / package).rglob("*.py"):
        parts = f.relative_to(root).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


def _imported_modules(name: str, f: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of ``modules`` that ``f`` (module ``name``) imports anywhere in its body:
    ``import a.b``, ``from a import b`` (a.b when it is a module, else a), relative imports and
    literal ``__import__`` / ``import_module`` names."""
    package = name.split(".") if f.name == "__init__.py" else name.split(".")[:-1]

    def known(dotted: str) -> str | None:
        parts = dotted.split(".")
        for n in range(len(parts), 0, -1):
            if ".".join(parts[:n]) in modules:
                return ".".join(parts[:n])
        return None

    found: set[str | None] = set()
    for node in ast.walk(ast.parse(f.read_text(), str(f))):
        if isinstance(node, ast.Import):
            found.update(known(a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            mod = ".".join([*base, *([node.module] if node.module else [])])
            for a in node.names:
                found.add(f"{mod}.{a.name}" if f"{mod}.{a.name}" in modules else known(mod))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            fn = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if fn in ("import_module", "__import__"):
                found.add(known(node.args[0].value))
    return {m for m in found if m and m != name}


def import_cycles(root: Path, package: str) -> list[list[str]]:
    """The import cycles among the modules of ``package`` (strongly connected components of its
    import graph with more than one module), each sorted, in sorted order."""
    modules = _module_files(root, package)
    graph = {m: _imported_modules(m, f, modules) for m, f in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan; the folders are shallow enough for recursion
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for m in sorted(graph):
        if m not in index:
            visit(m)
    return sorted(cycles)


@pytest.mark.parametrize("package", ["dnscamp", "vantage_agent", "db", "collectors", "atlas", "testbed", "dashboards"])
def test_no_import_cycles(package):
    cycles = import_cycles(ROOT, package)
    assert not cycles, f"modules of {package}/ that import each other (at module level or in functions): {cycles}"


def test_the_cycle_check_finds_a_cycle_through_a_function_body(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("import os\n\n\ndef later():\n    from pkg.sub import b\n    return b\n")
    (pkg / "sub" / "b.py").write_text("from .. import c\n")
    (pkg / "c.py").write_text("import importlib\nimportlib.import_module('pkg.a')\n")
    (pkg / "d.py").write_text("from pkg import a, c\n")  # imports the cycle, is not in it
    assert import_cycles(tmp_path, "pkg") == [["pkg.a", "pkg.c", "pkg.sub.b"]]
    (pkg / "a.py").write_text("import os\n")
    assert import_cycles(tmp_path, "pkg") == []


# --- Typer command functions are called by Typer only ------------------------------------------
# A command function is the CLI's face (options, echo, exit codes); Python that needs what it
# does calls the service beneath it (dnscamp.campaign, dnscamp.experiments, ...), never the
# command: outside dnscamp/commands/ and dnscamp/cli.py no module names one (tests run commands
# through Typer's CliRunner or a subprocess).
TYPER_DECORATORS = ("command", "callback")


def _literal_import(node: ast.AST) -> str | None:
    """``__import__("a.b", ...)`` / ``import_module("a.b")``: the module name."""
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        fn = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if fn in ("import_module", "__import__") and isinstance(node.args[0].value, str):
            return node.args[0].value
    return None


def command_functions(root: Path, commands: str = "dnscamp.commands", cli: str = "dnscamp.cli") -> set[tuple[str, str]]:
    """(module, function) of every Typer command: functions decorated ``@app.command(...)`` /
    ``@app.callback(...)`` in the commands package, and those that the CLI module registers
    with ``app.command("name")(module.function)``."""
    out: set[tuple[str, str]] = set()
    for name, f in _module_files(root, commands.replace(".", "/")).items():
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for d in node.decorator_list:
                    call = d.func if isinstance(d, ast.Call) else d
                    if isinstance(call, ast.Attribute) and call.attr in TYPER_DECORATORS:
                        out.add((name, node.name))
    cli_file = root / (cli.replace(".", "/") + ".py")
    aliases: dict[str, str] = {}  # local name -> module, for `from dnscamp.commands import x`
    tree = ast.parse(cli_file.read_text(), str(cli_file))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    for node in ast.walk(tree):
        # app.command("name")(<module>.<function>)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Call) \
                and isinstance(node.func.func, ast.Attribute) and node.func.func.attr in TYPER_DECORATORS \
                and node.args and isinstance(node.args[0], ast.Attribute):
            target = node.args[0]
            module = _literal_import(target.value) or (aliases.get(target.value.id) if isinstance(target.value, ast.Name) else None)
            if module and module.startswith(commands + "."):
                out.add((module, target.attr))
    return out


def command_function_uses(f: Path, commands: set[tuple[str, str]]) -> list[str]:
    """Where ``f`` names one of ``commands``: imported by name, or as an attribute of an
    imported commands module (``campaign.run_cmd``, ``dnscamp.commands.campaign.run_cmd``)."""
    modules = {m for m, _ in commands}
    found = []
    tree = ast.parse(f.read_text(), str(f))
    local_modules: dict[str, str] = {}  # local name -> commands module
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                if (node.module, a.name) in commands:
                    found.append(f"line {node.lineno}: from {node.module} import {a.name}")
                elif f"{node.module}.{a.name}" in modules:
                    local_modules[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name in modules and a.asname:  # without one, the dotted name itself is used
                    local_modules[a.asname] = a.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            owner = ast.unparse(node.value)
            module = local_modules.get(owner) or (owner if owner in modules else None) or _literal_import(node.value)
            if module and (module, node.attr) in commands:
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_calls_a_typer_command_function():
    commands = command_functions(ROOT)
    assert ("dnscamp.commands.campaign", "run_cmd") in commands and ("dnscamp.commands.dns", "dns_command") in commands
    bad = {}
    for folder in (*PRODUCT, "dashboards", "infra", "bench", "tests"):  # tests drive commands through Typer
        for name, f in _module_files(ROOT, folder).items():
            if name == "dnscamp.cli" or name == "dnscamp.commands" or name.startswith("dnscamp.commands."):
                continue
            if uses := command_function_uses(f, commands):
                bad[str(f.relative_to(ROOT))] = uses
    assert not bad, f"Typer command functions called from outside dnscamp/commands and dnscamp/cli.py: {bad}"


def test_the_command_check_finds_a_command_called_from_python(tmp_path):
    (tmp_path / "app" / "commands").mkdir(parents=True)
    for init in ("app/__init__.py", "app/commands/__init__.py"):
        (tmp_path / init).write_text("")
    (tmp_path / "app" / "commands" / "run.py").write_text(
        "import typer\napp = typer.Typer()\n\n\n@app.command('go')\ndef go_cmd(n: int = 1):\n    pass\n\n\n"
        "def helper():\n    pass\n\n\ndef plain_command():\n    pass\n")
    (tmp_path / "app" / "cli.py").write_text(
        "import typer\nfrom app.commands import run\napp = typer.Typer()\napp.add_typer(run.app)\n"
        "app.command('plain')(__import__('app.commands.run', fromlist=['x']).plain_command)\n")
    commands = command_functions(tmp_path, "app.commands", "app.cli")
    assert commands == {("app.commands.run", "go_cmd"), ("app.commands.run", "plain_command")}
    user = tmp_path / "app" / "user.py"
    for text, n in [
        ("def f():\n    from app.commands.run import go_cmd\n    go_cmd(n=2)\n", 1),
        ("from app.commands import run\nrun.plain_command()\n", 1),
        ("import app.commands.run\napp.commands.run.go_cmd()\n", 1),
        ("import app.commands.run as r\nprint(r.go_cmd)\n", 1),
        ("from app.commands.run import helper\nfrom app.commands import run\nrun.helper()\n", 0),
    ]:
        user.write_text(text)
        assert len(command_function_uses(user, commands)) == n, text


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


# --- atlas/ and testbed/ stand below the store, testbed/ below atlas/ -----------------------------
# atlas/ holds definitions, parsing and analysis by measurement type: no store writes (those are
# collectors/atlas_store.py), no emulated probes (testbed/atlas_probes/) and nothing of the CLI.
# testbed/ builds the emulated Internet and writes files (the Atlas-like probes' RIPE Atlas JSON,
# written by vantage_agent/atlas_json.py, the floor both stand on): it never reaches into atlas/,
# the store or the CLI. Module-level, function-level and by-name imports all count.
BELOW = {"atlas": ("collectors", "db", "testbed", "dnscamp"), "testbed": ("atlas", "collectors", "db", "dnscamp")}


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


# A measurement unit never migrates the store: the caller does (`dnscamp db up`, the ingest step of
# `dnscamp campaign run`). Checked over every module the kind registry names.
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


# --- a measurement unit never writes the store -----------------------------------------------------
# Units leave files: records in the spool, raw files in artifacts/ (the atlas kind: its RIPE Atlas
# JSON and the bundle beside it, atlas/bundle.py). The campaign's ingest step stores them
# (collectors/, db/). So no kind's module, nor any module of its own folder it imports (in a
# function body too), imports collectors/ or db/; what it imports from atlas/ and testbed/ stands
# below the store already (BELOW above).
STORE = ("collectors", "db")


def store_imports(root: Path, module: str) -> list[tuple[str, str]]:
    """(module, imported name) of every collectors/ or db/ import in ``module`` and in the
    modules of its top-level folder that it imports, directly or through each other."""
    modules = _module_files(root, module.split(".")[0])
    seen: set[str] = set()
    todo, out = [module], set()
    while todo:
        m = todo.pop()
        if m in seen or m not in modules:
            continue
        seen.add(m)
        out.update((m, name) for _, name in module_references(modules[m]) if _top(name) in STORE)
        todo.extend(_imported_modules(m, modules[m], modules))
    return sorted(out)


def test_no_measurement_kind_imports_the_store():
    from dnscamp.kinds import KINDS

    assert "atlas" in KINDS
    for name, target in KINDS.items():
        module = target.partition(":")[0]
        assert module in _module_files(ROOT, module.split(".")[0]), f"kind {name}: no module {module}"
        bad = store_imports(ROOT, module)
        assert not bad, f"kind {name} ({module}) reaches the store (its results go to files for the ingest): {bad}"


def test_the_store_import_check_finds_a_planted_one(tmp_path):
    pkg = tmp_path / "dnscamp"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "kind.py").write_text("from atlas import bundle\nfrom dnscamp import measure\n")
    (pkg / "measure.py").write_text("import json\n")
    (pkg / "service.py").write_text("from collectors import atlas_bundle\n")  # not imported by the kind
    assert store_imports(tmp_path, "dnscamp.kind") == []
    (pkg / "measure.py").write_text("import json\n\n\ndef later():\n    from . import service\n")
    assert store_imports(tmp_path, "dnscamp.kind") == [("dnscamp.service", "collectors"),
                                                        ("dnscamp.service", "collectors.atlas_bundle")]
    (pkg / "measure.py").write_text("import json\n")
    (pkg / "kind.py").write_text("def run():\n    from db import engine\n")
    assert store_imports(tmp_path, "dnscamp.kind") == [("dnscamp.kind", "db"), ("dnscamp.kind", "db.engine")]
