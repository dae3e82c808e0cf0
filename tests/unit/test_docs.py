"""Docs are tested (STYLE.md §12): generated references are current, taxonomies documented."""

import collections
import re
import subprocess
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
    """`make test` (what CI runs) runs linkem's cargo tests before pytest."""
    import subprocess

    out = subprocess.run(["make", "-n", "test"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    cargo = next(i for i, line in enumerate(lines) if "cargo test --locked" in line)
    assert lines[cargo].startswith("cd testbed/linkem && ")
    assert cargo < next(i for i, line in enumerate(lines) if "-m pytest" in line)


# --- no file names how the work was organised or a location on one machine ----------------------
# Scanned: every tracked text file of these kinds, but the test fixtures' data and the vendored
# schemas (upstream text, kept byte for byte).
SCANNED_SUFFIXES = {".py", ".md", ".toml", ".sql", ".sh", ".tf", ".yaml", ".yml", ".json"}
NOT_SCANNED = ("tests/fixtures/", "dashboards/schema/", "vantage_agent/pageload/har-1.2.schema.json")

# (a) A machine's own paths: its workspace folder, a user's home (root's or one under /home) and
# a named file or folder in /tmp. A doc says `$DNSCAMP_HOME`, `~/.cache/dnscamp`, a path
# relative to the checkout or `mktemp -d`, not where one machine kept its copy. The only /tmp
# names allowed are the ones the project itself uses at run time, each said below.
MACHINE_PATH = re.compile(r"(?<![\w.$}~/-])(?:/wor[k]/|/root/(?=[\w.])|/home/\w[\w.-]*/|/tmp/[\w.{}$-]+)")
PROJECT_TMP = {
    "/tmp/runtime-{os.getuid": "db/embedded.py: the XDG_RUNTIME_DIR the Postgres wheel asks for",
    "/tmp/dnscamp": "docker-compose.yml: the collector container's copy of the source",
}
# (b) How the work was organised: the word issue, session, round or stop (or its plural) and a
# number, with a space, a hyphen or a '#' between; a session called earlier, previous, later,
# this or that. Not flagged: a number before
# the word ("6 rounds"), an option (--rounds 2), a number with decimals (the paper rounds 33.33),
# zero (QUIC sessions 0), an upstream project's issue ("ripe-atlas-cousteau issue #43") and a test
# run's or a protocol's session ("this test session", "session ticket").
ORGANISATION = re.compile(
    r"(?<![-\w])(?:issue|session|round|stop)s?[ _-]?#?[1-9]\d*(?![.,]\d)(?!\w)"
    r"|\b(?:earlier|previous|later|this|that) sessions?\b(?!['’]s island| ticket| resumption)",
    re.IGNORECASE,
)
UPSTREAM_ISSUE = re.compile(r"\b\w[\w.]*(?:-[\w.]+)+ issues? #\d+")


def scan_text(text: str) -> list[tuple[int, str, str]]:
    """(line number, 'path' or 'organisation', the words) for each offence in ``text``."""
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        for m in MACHINE_PATH.finditer(line):
            if m.group() not in PROJECT_TMP:
                found.append((n, "path", m.group()))
        for m in ORGANISATION.finditer(UPSTREAM_ISSUE.sub("", line)):
            found.append((n, "organisation", m.group()))
    return found


def scanned_files(root: Path) -> list[str]:
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, text=True,
                             check=True).stdout.split("\0")
    return sorted(f for f in tracked if f and Path(f).suffix in SCANNED_SUFFIXES
                  and not f.startswith(NOT_SCANNED) and (root / f).is_file())


def offenders(root: Path, files: list[str]) -> list[str]:
    """'file:line: kind: words', one per offence, in file order."""
    out = []
    for f in files:
        text = (root / f).read_text(encoding="utf-8", errors="replace")
        out += [f"{f}:{n}: {kind}: {words}" for n, kind, words in scan_text(text)]
    return out


def test_no_file_names_how_the_work_was_organised_or_a_machine_path():
    found = offenders(ROOT, scanned_files(ROOT))
    per_folder = collections.Counter(line.split("/", 1)[0] if "/" in line.split(":", 1)[0] else "."
                                     for line in found)
    summary = ", ".join(f"{folder}: {n}" for folder, n in sorted(per_folder.items()))
    assert not found, f"{len(found)} offences ({summary}):\n" + "\n".join(found)


def test_the_scanner_catches_planted_examples(tmp_path):
    # The planted words are put together here so that this file does not hold them itself.
    iss, ses, rnd, stp = "iss" + "ue", "ses" + "sion", "ro" + "und", "st" + "op"
    s = "/"
    tmp = s + "tmp/"
    planted = [
        f"as {iss} 12 asked", f"({iss} 2 §7)", f"{iss}s 16 and 19", f"the {iss}-3 targets", f"{ses} 3",
        f"until {ses} 13 it", f"{rnd} 2 of the bench", f"{stp} 29", f"an earlier {ses}", f"Before this {ses} (x)",
        f"data in {tmp}big10m", f"`flock {tmp}dc-testbed.lock make`", f"seeds in {s}work/shared/seeds",
        f"under {s}root/.local/share/dnscamp", f"DNSCAMP_HOME={tmp}h make", f"in {s}home/alice/src",
    ]
    clean = [
        "6 rounds of 10 queries", "bench.py --rounds 2", "the paper rounds 33.33 to 33.3",
        "no QUIC session to the origin (h2)", "ripe-atlas-cousteau issue #43",
        "the last session ticket", "this test session's tally", "$DNSCAMP_HOME/spool", "~/.cache/dnscamp/bin",
        "a venv under /root (0700)", "under /tmp: the service user", "https://example.org/work/x",
        'os.environ.setdefault("XDG_RUNTIME_DIR", f"/tmp/runtime-{os.getuid()}")',
        "cp -r /src /tmp/dnscamp && pip install /tmp/dnscamp", "seed 001 (`001_3c494309ab66be23.txt`)",
        "round-trip 2 ms", "a stop-gap", "session-resumption 1-RTT",
    ]
    (tmp_path / "planted.md").write_text("\n".join(planted + clean) + "\n")
    found = offenders(tmp_path, ["planted.md"])
    assert [int(line.split(":")[1]) for line in found] == list(range(1, len(planted) + 1)), "\n".join(found)
    assert found[0] == f"planted.md:1: organisation: {iss} 12"
    assert found[10] == f"planted.md:11: path: {tmp}big10m"
