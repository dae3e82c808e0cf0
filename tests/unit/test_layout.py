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


@pytest.mark.parametrize("folder", ["vantage_agent", "db", "collectors", "testbed", "atlas"])
def test_nothing_imports_dnscamp(folder):
    if not (ROOT / folder).exists():
        pytest.fail(f"{folder}/ is missing")
    bad = [(f, m) for f, m in imports_of(folder) if m == "dnscamp" or m.startswith("dnscamp.")]
    assert not bad, f"{folder} imports dnscamp: {bad}"


def test_vantage_agent_does_not_need_the_store():
    bad = [(f, m) for f, m in imports_of("vantage_agent") if m.split(".")[0] in ("db", "collectors", "sqlalchemy", "alembic")]
    assert not bad, bad
