"""Two first-time `dnscamp ingest` on a fresh DNSCAMP_HOME at once: both
used to fail in initdb. Now the second waits for the first's initialisation (a file lock),
role/database creation and migrations are serialised (advisory locks), and both succeed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import psycopg
import pytest

from db import embedded

pytestmark = pytest.mark.local
ROOT = Path(__file__).resolve().parents[2]
DNSCAMP = str(ROOT / ".venv" / "bin" / "dnscamp")
PING = ROOT / "tests" / "fixtures" / "results" / "v1" / "ping.jsonl"


def test_two_first_time_ingests_at_once_both_succeed():
    base = Path(tempfile.mkdtemp(prefix="dnscamp-conc-"))
    base.chmod(0o755)
    home = base / "home"
    env = {k: v for k, v in os.environ.items() if k != "DNSCAMP_DATABASE_URL"}
    env["DNSCAMP_HOME"] = str(home)
    try:
        procs = [subprocess.Popen([DNSCAMP, "ingest", "--json", str(PING)], env=env, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
        outs = [p.communicate(timeout=180) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], [err for _, err in outs]
        stats = [json.loads(out) for out, _ in outs]
        lines = len(PING.read_text().splitlines())
        assert sum(s["ingested"] for s in stats) == lines  # stored once, whoever came first
        assert all(s["ingested"] + s["duplicates"] == lines for s in stats)
        c = embedded.Cluster(home / "pg")
        with psycopg.connect(c.url(embedded.SUPERUSER, "dnscamp")) as conn:
            assert conn.execute("SELECT count(*), count(DISTINCT id) FROM results").fetchone() == (lines, lines)
    finally:
        subprocess.run([DNSCAMP, "db", "down"], env=env, capture_output=True, timeout=60)
        shutil.rmtree(base)
