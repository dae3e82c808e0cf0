"""Docs are tested (STYLE.md §12): generated references are current, taxonomies documented."""

import re
from pathlib import Path

import pytest

from db.views import all_views
from dnscamp import docgen
from vantage_agent import errors

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]


def test_cli_reference_matches_help():
    assert docgen.CLI_MD.read_text() == docgen.cli_markdown(), "docs/cli.md is stale: run `make docs`"


def test_every_command_has_a_section():
    text = docgen.CLI_MD.read_text()
    for path in docgen.commands():
        assert f"\n## {' '.join(['dnscamp', *path])}\n" in text


def test_records_schema_is_current():
    assert docgen.SCHEMA_JSON.read_text() == docgen.schema_json(), "docs/records.schema.json is stale: run `make docs`"


def test_every_status_is_documented():
    text = (ROOT / "docs" / "records.md").read_text()
    for status in errors.statuses():
        assert f"`{status}`" in text, f"status {status!r} missing from docs/records.md"


def test_every_view_is_documented():
    docs = "".join(p.read_text() for p in (ROOT / "docs").glob("*.md"))
    for view in all_views():
        assert f"`{view}`" in docs, f"view {view} is not documented in docs/*.md"


def test_readme_names_the_two_commands_and_ci_runs_make_test():
    readme = (ROOT / "README.md").read_text()
    assert "make demo" in readme and "make test" in readme
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_make_test_runs_linkems_rust_tests():
    """`make test` (what CI runs) runs linkem's cargo tests before pytest (issue 12 §9)."""
    import subprocess

    out = subprocess.run(["make", "-n", "test"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    cargo = next(i for i, line in enumerate(lines) if "cargo test --locked" in line)
    assert lines[cargo].startswith("cd testbed/linkem && ")
    assert cargo < next(i for i, line in enumerate(lines) if "-m pytest" in line)
