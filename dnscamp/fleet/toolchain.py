"""Finding and running Terraform (or OpenTofu) with the project's own CLI config.

Nothing here assumes where the tools live: the binary comes from PATH, the hashicorp/aws provider
from a filesystem mirror that is searched for (there is no registry access on the machines this
runs on, and the machine-wide TF_CLI_CONFIG_FILE may point at a file that does not exist).
No credentials are read or added here: the provider finds them through the AWS standard chain."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from dnscamp.errors import UsageError
from vantage_agent.paths import cache_dir

PROVIDER = "registry.terraform.io/hashicorp/aws"
# Terraform's implied local mirror directories (CLI config docs, "Implied Local Mirror
# Directories"), then the roots a machine image puts shared tools under.
_IMPLIED = ("~/.terraform.d/plugins", "~/.local/share/terraform/plugins",
            "/usr/local/share/terraform/plugins", "/usr/share/terraform/plugins")
_SEARCH_ROOTS = ("/opt", "/usr/local", "/usr/share", "/usr/lib", "/srv", "/var/lib", "~")
_SEARCH_DEPTH = 4  # /opt/<x>/registry.terraform.io is depth 2; deeper trees are not mirrors
_SKIP = {"proc", "sys", "dev", "node_modules", ".git", "__pycache__", "site-packages", "dnscamp"}
INSTALL_HINT = "install/60-infra.sh"


class ToolchainError(UsageError):
    """Terraform/OpenTofu or its provider is missing: one line saying what to install."""


def find_terraform() -> tuple[str, Path]:
    """("tofu" | "terraform", absolute path) from PATH; tofu is preferred when both exist."""
    for name in ("tofu", "terraform"):
        exe = shutil.which(name)
        if exe:
            return name, Path(exe).resolve()
    raise ToolchainError("neither tofu nor terraform on PATH: install OpenTofu >= 1.6 or Terraform >= 1.6 "
                         f"(a fleet prerequisite; {INSTALL_HINT} checks for it)")


def is_mirror(folder: Path) -> bool:
    """Does ``folder`` hold registry.terraform.io/hashicorp/aws in either mirror layout
    (unpacked: <version>/<os_arch>/terraform-provider-aws_*, packed: terraform-provider-aws_*.zip)?"""
    aws = folder / PROVIDER
    return aws.is_dir() and (any(aws.glob("*/*/terraform-provider-aws_*")) or any(aws.glob("terraform-provider-aws_*.zip")))


def _walk(roots: Iterable[Path], depth: int) -> Path | None:
    """Breadth-first search for a directory named registry.terraform.io that is a mirror."""
    level = [r for r in roots if r.is_dir()]
    for _ in range(depth + 1):
        nxt: list[Path] = []
        for d in level:
            if d.name == "registry.terraform.io" and is_mirror(d.parent):
                return d.parent
            try:
                nxt += [c for c in d.iterdir() if c.name not in _SKIP and c.is_dir() and not c.is_symlink()]
            except OSError:  # unreadable directory: not ours to look into
                continue
        level = nxt
    return None


def _cache_file() -> Path:
    return cache_dir() / "terraform" / "plugin-dir"


def provider_mirror(roots: Sequence[str | Path] | None = None) -> Path | None:
    """The folder holding registry.terraform.io/hashicorp/aws/..., or None when none is found.

    $DNSCAMP_TF_PLUGIN_DIR wins (and is not second-guessed beyond checking it is a mirror); then the
    cached result of an earlier search; then Terraform's implied mirror dirs; then a shallow walk
    of ``roots`` (default: where machine images put shared tools). A found folder is cached."""
    env = os.environ.get("DNSCAMP_TF_PLUGIN_DIR")
    if env:
        if not is_mirror(Path(env)):
            raise ToolchainError(f"DNSCAMP_TF_PLUGIN_DIR={env} holds no {PROVIDER} provider")
        return Path(env)
    cached = _cache_file()
    if roots is None and cached.is_file():
        hit = Path(cached.read_text().strip())
        if is_mirror(hit):
            return hit
    implied = [Path(p).expanduser() for p in _IMPLIED] if roots is None else []
    found = next((p for p in implied if is_mirror(p)), None) or _walk(
        [Path(r).expanduser() for r in (_SEARCH_ROOTS if roots is None else roots)], _SEARCH_DEPTH)
    if found is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_text(f"{found}\n")
    return found


def cli_config_text(mirror: Path | None) -> str:
    """The CLI config: the AWS provider from the mirror (when there is one), everything else direct;
    no checkpoint calls (no network needed for version checks)."""
    if mirror is None:
        return "disable_checkpoint = true\n\nprovider_installation {\n  direct {}\n}\n"
    return (
        "disable_checkpoint = true\n\n"
        "provider_installation {\n"
        "  filesystem_mirror {\n"
        f"    path    = {json.dumps(str(mirror))}\n"
        f"    include = [{json.dumps(PROVIDER)}]\n"
        "  }\n"
        "  direct {\n"
        f"    exclude = [{json.dumps(PROVIDER)}]\n"
        "  }\n"
        "}\n"
    )


def cli_config() -> Path:
    """The project's Terraform CLI config file under the dnscamp cache dir (rewritten when it differs)."""
    path = cache_dir() / "terraform" / "cli.tfrc"
    text = cli_config_text(provider_mirror())
    if not path.is_file() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return path


def tf_env(env_extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of every terraform/tofu call: this process's (so the AWS standard chain
    still works) plus the project's CLI config and non-interactive switches."""
    env = dict(os.environ)
    env.update(TF_CLI_CONFIG_FILE=str(cli_config()), TF_IN_AUTOMATION="1", TF_INPUT="0", CHECKPOINT_DISABLE="1")
    env.update(env_extra or {})
    return env


def run(args: Sequence[str], cwd: str | Path, env_extra: Mapping[str, str] | None = None, check: bool = True,
        capture: bool = True) -> subprocess.CompletedProcess[str]:
    """``tofu|terraform ARGS`` in ``cwd``; ``init`` gets ``-plugin-dir=<mirror>`` when a mirror exists.
    ``capture=False`` lets output stream to the terminal (plan/apply). ``check`` raises
    CalledProcessError on a non-zero exit, as subprocess.run does."""
    _, exe = find_terraform()
    argv = [str(exe), *args]
    if args and args[0] == "init" and not any(a.startswith("-plugin-dir") for a in args):
        mirror = provider_mirror()
        if mirror is not None:
            argv.insert(2, f"-plugin-dir={mirror}")
    return subprocess.run(argv, cwd=cwd, env=tf_env(env_extra), check=check, text=True, capture_output=capture)


def tee(args: Sequence[str], cwd: str | Path, env_extra: Mapping[str, str] | None = None,
        out=None) -> subprocess.CompletedProcess[str]:
    """``tofu|terraform ARGS`` with stdout and stderr merged, streamed line by line to ``out``
    (default sys.stdout) as it runs and also returned, so a caller can both show a long apply as
    it goes and read its errors (a held state lock, a stale plan). Never raises on exit codes."""
    import sys

    _, exe = find_terraform()
    argv = [str(exe), *args]
    if args and args[0] == "init" and not any(a.startswith("-plugin-dir") for a in args):
        mirror = provider_mirror()
        if mirror is not None:
            argv.insert(2, f"-plugin-dir={mirror}")
    sink = out or sys.stdout
    lines: list[str] = []
    with subprocess.Popen(argv, cwd=cwd, env=tf_env(env_extra), text=True, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT) as p:
        assert p.stdout is not None
        for line in p.stdout:
            lines.append(line)
            sink.write(line)
            sink.flush()
    return subprocess.CompletedProcess(argv, p.returncode, "".join(lines), "")
