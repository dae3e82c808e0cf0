"""`dnscamp db ...` against the session's embedded store."""

import json
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.local
DNSCAMP = str(Path(__file__).resolve().parents[2] / ".venv" / "bin" / "dnscamp")


def run(*args):
    return subprocess.run([DNSCAMP, *args], capture_output=True, text=True, timeout=120)


def test_up_status_url_psql(db_url):
    r = run("db", "up")
    assert r.returncode == 0, r.stderr
    r = run("db", "status", "--json")
    assert r.returncode == 0, r.stderr  # exit 0 only when it connected
    st = json.loads(r.stdout)
    assert st["running"] and st["revision"] == st["latest"] and st["results"] >= 0
    r = run("db", "url", "--role", "reader")
    assert r.returncode == 0 and "dnscamp_reader@" in r.stdout
    r = run("db", "psql", "--role", "reader", "-At", "-c", "SELECT count(*) >= 0 FROM v_results")
    assert r.returncode == 0 and r.stdout.strip() == "t", r.stderr
    r = run("db", "url", "--role", "admin")
    assert r.returncode == 2 and "unknown role 'admin'" in r.stderr
