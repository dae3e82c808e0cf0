"""The agent the fleet installs: this checkout's wheel and lock file, built here, uploaded under
dist/<version>/ of the results bucket and handed to the instances as presigned GET URLs plus
sha256s (the instance role has no S3 Get right; user data checks the digests before installing).

The wheel is built from the committed tree (``git archive HEAD``), so what runs on the fleet is a
commit one can name; uncommitted changes are reported, not deployed."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

from dnscamp import __version__
from dnscamp.errors import UsageError

REPO = Path(__file__).resolve().parents[2]
LOCK = "requirements.lock"
# What the wheel is built from: pyproject's packages (tool.setuptools.packages.find) and its metadata.
SOURCES = ("pyproject.toml", "README.md", "dnscamp", "vantage_agent", "db", "collectors", "testbed", "atlas")
URL_TTL_S = 7 * 24 * 3600  # the longest a SigV4 presigned URL may live; temporary credentials end it sooner


class ArtifactError(UsageError):
    """The agent cannot be built or uploaded (one line)."""


@dataclass(frozen=True)
class Artifact:
    path: Path
    sha256: str

    @property
    def name(self) -> str:
        return self.path.name


@dataclass(frozen=True)
class AgentBuild:
    version: str
    commit: str | None
    dirty: bool
    wheel: Artifact
    lock: Artifact

    def key(self, a: Artifact) -> str:
        """dist/<version>/<first 16 hex of the wheel's sha256>/<file>: one folder per build, so
        re-applying the same build reuses its objects and two builds never overwrite each other."""
        return f"dist/{self.version}/{self.wheel.sha256[:16]}/{a.name}"


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _git(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, check=False)


def build(workdir: Path) -> AgentBuild:
    """Build the wheel (``pip wheel --no-deps``) of this checkout's HEAD and take its lock file."""
    workdir.mkdir(parents=True, exist_ok=True)
    src = workdir / "src"
    head = _git("rev-parse", "HEAD")
    if head.returncode == 0:
        commit = head.stdout.decode().strip()
        tar = _git("archive", "--format=tar", "HEAD", *[s for s in SOURCES if (REPO / s).exists()], LOCK)
        if tar.returncode != 0:
            raise ArtifactError(f"git archive HEAD failed: {tar.stderr.decode().strip()[:300]}")
        with tarfile.open(fileobj=io.BytesIO(tar.stdout)) as t:
            t.extractall(src, filter="data")
        dirty = bool(_git("status", "--porcelain", "--", *SOURCES, LOCK).stdout.strip())
    else:  # not a git checkout (an unpacked release): build the tree as it is
        commit, dirty, src = None, False, REPO
    out = workdir / "wheel"
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
                        "-w", str(out), str(src)], capture_output=True, text=True, check=False)
    wheels = sorted(out.glob("dnscamp-*.whl"))
    if p.returncode != 0 or not wheels:
        raise ArtifactError(f"pip wheel failed: {(p.stderr or p.stdout).strip().splitlines()[-1:] or ['no wheel']}")
    lock = src / LOCK
    if not lock.is_file():
        raise ArtifactError(f"{LOCK} missing from the checkout: the agent is installed from it (--require-hashes)")
    return AgentBuild(version=__version__, commit=commit, dirty=dirty,
                      wheel=Artifact(wheels[-1], sha256(wheels[-1])), lock=Artifact(lock, sha256(lock)))


def coredns() -> Artifact:
    """The CoreDNS binary the whoami server runs: the one install/40-testbed-servers.sh builds
    (PATH, then dnscamp's bin dir), linux/amd64 like the instances."""
    import shutil

    from vantage_agent.paths import bin_dir

    exe = shutil.which("coredns", path=os.pathsep.join([os.environ.get("PATH", ""), str(bin_dir())]))
    if exe is None:
        raise ArtifactError(f"coredns not found (PATH, {bin_dir()}): run install/40-testbed-servers.sh; "
                            "the whoami server (fleet.whoami_zone) runs it")
    return Artifact(Path(exe), sha256(Path(exe)))


def _put(s3, bucket: str, key: str, a: Artifact) -> str:
    """Upload ``a`` to ``key`` unless the same bytes are there; a presigned GET URL of it."""
    try:
        have = s3.head_object(Bucket=bucket, Key=key).get("Metadata", {}).get("sha256")
    except s3.exceptions.ClientError:
        have = None
    if have != a.sha256:
        s3.upload_file(str(a.path), bucket, key, ExtraArgs={"Metadata": {"sha256": a.sha256}})
    return s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=URL_TTL_S)


def upload_coredns(s3, bucket: str, a: Artifact) -> dict[str, str]:
    return {"coredns_url": _put(s3, bucket, f"dist/coredns/{a.sha256[:16]}/coredns", a), "coredns_sha256": a.sha256}


def upload(s3, bucket: str, b: AgentBuild) -> dict[str, str]:
    """Put the wheel and lock under dist/ (unless the same bytes are there) and return the
    Terraform variables: presigned GET URLs and sha256s."""
    urls = {what: _put(s3, bucket, b.key(a), a) for what, a in (("wheel", b.wheel), ("lock", b.lock))}
    return {"agent_wheel_url": urls["wheel"], "agent_wheel_sha256": b.wheel.sha256,
            "agent_lock_url": urls["lock"], "agent_lock_sha256": b.lock.sha256, "agent_version": b.version}
