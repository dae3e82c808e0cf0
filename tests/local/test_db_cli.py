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


def test_tuning_is_added_once_and_an_operators_value_kept():
    """`db up` gives a new cluster dnscamp's settings (db/embedded.py `tuning`: memory and
    planner), adds them to an older cluster's postgresql.conf at its next start (replacing the
    256 MB that dnscamp's initdb wrote before), and keeps a value an operator set."""
    import os
    import shutil
    import tempfile

    from db import embedded

    base = Path(tempfile.mkdtemp(prefix="dnscamp-tuning-"))  # under /tmp: the service user (as root) reaches it
    base.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "DNSCAMP_DATABASE_URL"}
    env["DNSCAMP_HOME"] = str(base / "home")

    def db(*args):
        r = subprocess.run([DNSCAMP, "db", *args], capture_output=True, text=True, timeout=120, env=env)
        assert r.returncode == 0, (args, r.stderr)
        return r.stdout.strip()

    def shown() -> dict[str, str]:
        return {k: db("psql", "-At", "-c", f"SHOW {k}") for k in want}

    want = embedded.tuning()
    assert want["shared_buffers"] != "256MB" or embedded._memory_bytes() < 1 << 30  # sized to the machine
    conf = base / "home" / "pg" / "data" / "postgresql.conf"
    ours = "".join(f"{k} = {v}\n" for k, v in want.items())
    try:
        db("up")
        assert shown() == want
        db("down")
        assert conf.read_text().count(ours) == 1
        # a cluster as dnscamp made it before these settings
        old = conf.read_text().replace(ours, "").replace("max_connections = 50\n", "max_connections = 50\nshared_buffers = 256MB\n")
        conf.write_text(old)
        db("up")
        text = conf.read_text()
        assert text.count(ours) == 1 and "shared_buffers = 256MB" not in text  # added back, once
        assert shown() == want
        db("down")
        conf.write_text(text.replace("random_page_cost = 3\n", "random_page_cost = 1.1  # the operator's\n"))
        db("up")
        assert shown() == {**want, "random_page_cost": "1.1"}
        assert "random_page_cost = 3" not in conf.read_text()
    finally:
        subprocess.run([DNSCAMP, "db", "down"], capture_output=True, timeout=120, env=env)
        shutil.rmtree(base, ignore_errors=True)
