"""dnscamp/fleet/toolchain.py: terraform/tofu from PATH or a one-line error, the provider mirror
found by searching (never a fixed path), the project's own CLI config, and the env every call gets."""

from __future__ import annotations

import json

import hcl2
import pytest

from dnscamp.fleet import toolchain

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    # the search result is cached in the dnscamp cache dir: a per-test one, and no override
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("DNSCAMP_TF_PLUGIN_DIR", raising=False)


def _exe(folder, name, body="#!/bin/sh\n"):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(body)
    (folder / name).chmod(0o755)
    return folder / name


def _mirror(root, packed=False):
    aws = root / "registry.terraform.io" / "hashicorp" / "aws"
    if packed:
        _exe(aws, "terraform-provider-aws_5.100.0_linux_amd64.zip")
    else:
        _exe(aws / "5.100.0" / "linux_amd64", "terraform-provider-aws_v5.100.0_x5")
    return root


def test_no_terraform_on_path_is_one_line_naming_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(toolchain.ToolchainError) as err:
        toolchain.find_terraform()
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("neither tofu nor terraform on PATH")
    assert "install/60-infra.sh" in msg and ">= 1.6" in msg


def test_tofu_is_preferred_and_terraform_is_found_alone(monkeypatch, tmp_path):
    bin_ = tmp_path / "bin"
    tf = _exe(bin_, "terraform")
    monkeypatch.setenv("PATH", str(bin_))
    assert toolchain.find_terraform() == ("terraform", tf.resolve())
    tofu = _exe(bin_, "tofu")
    assert toolchain.find_terraform() == ("tofu", tofu.resolve())


@pytest.mark.parametrize("packed", [False, True])
def test_mirror_is_found_by_a_walk_and_cached(monkeypatch, tmp_path, packed):
    root = tmp_path / "image"
    mirror = _mirror(root / "opt" / "tf-plugins", packed)
    (root / "usr" / "share" / "doc").mkdir(parents=True)  # a decoy tree without a mirror
    assert toolchain.provider_mirror(roots=[root]) == mirror
    cached = tmp_path / "cache" / "dnscamp" / "terraform" / "plugin-dir"
    assert cached.read_text().strip() == str(mirror)

    # the default search reads the cache first: no walk of the machine
    monkeypatch.setattr(toolchain, "_walk", lambda *a: pytest.fail("walked despite the cache"))
    assert toolchain.provider_mirror() == mirror


def test_a_stale_cache_and_an_empty_search_give_none(monkeypatch, tmp_path):
    cached = tmp_path / "cache" / "dnscamp" / "terraform" / "plugin-dir"
    cached.parent.mkdir(parents=True)
    cached.write_text(str(tmp_path / "gone") + "\n")
    monkeypatch.setattr(toolchain, "_IMPLIED", ())
    monkeypatch.setattr(toolchain, "_SEARCH_ROOTS", (str(tmp_path / "nothing-here"),))
    assert toolchain.provider_mirror() is None
    # a provider deeper than the search depth is not a mirror layout anyone installs
    _mirror(tmp_path / "a" / "b" / "c" / "d" / "e")
    assert toolchain.provider_mirror(roots=[tmp_path / "a"]) is None


def test_env_override_wins_and_is_checked(monkeypatch, tmp_path):
    mirror = _mirror(tmp_path / "mine")
    monkeypatch.setenv("DNSCAMP_TF_PLUGIN_DIR", str(mirror))
    assert toolchain.provider_mirror() == mirror
    monkeypatch.setenv("DNSCAMP_TF_PLUGIN_DIR", str(tmp_path))
    with pytest.raises(toolchain.ToolchainError, match="DNSCAMP_TF_PLUGIN_DIR=.* holds no registry.terraform.io/hashicorp/aws"):
        toolchain.provider_mirror()


def test_cli_config_uses_the_mirror_for_aws_and_direct_for_the_rest(monkeypatch, tmp_path):
    mirror = _mirror(tmp_path / "m")
    monkeypatch.setenv("DNSCAMP_TF_PLUGIN_DIR", str(mirror))
    path = toolchain.cli_config()
    assert path == tmp_path / "cache" / "dnscamp" / "terraform" / "cli.tfrc"
    conf = hcl2.loads(path.read_text())
    assert conf["disable_checkpoint"] is True
    (inst,) = conf["provider_installation"]
    unquote = json.loads  # python-hcl2 keeps string literals quoted
    assert unquote(inst["filesystem_mirror"][0]["path"]) == str(mirror)
    assert [unquote(s) for s in inst["filesystem_mirror"][0]["include"]] == ["registry.terraform.io/hashicorp/aws"]
    assert [unquote(s) for s in inst["direct"][0]["exclude"]] == ["registry.terraform.io/hashicorp/aws"]
    # no mirror: a config that only installs directly (and still makes no checkpoint calls)
    conf = hcl2.loads(toolchain.cli_config_text(None))
    (inst,) = conf["provider_installation"]
    assert set(inst) - {"__is_block__"} == {"direct"} and conf["disable_checkpoint"] is True


def test_run_passes_plugin_dir_to_init_and_the_project_env(monkeypatch, tmp_path):
    mirror = _mirror(tmp_path / "m")
    monkeypatch.setenv("DNSCAMP_TF_PLUGIN_DIR", str(mirror))
    monkeypatch.setenv("TF_CLI_CONFIG_FILE", str(tmp_path / ".terraformrc-that-does-not-exist"))
    # a stand-in terraform that reports its argv and the env it was given
    keys = ["TF_CLI_CONFIG_FILE", "TF_IN_AUTOMATION", "TF_INPUT", "CHECKPOINT_DISABLE", "EXTRA"]
    script = (f'#!/usr/bin/env python3\nimport json, os, sys\nKEYS = {keys!r}\n'
              'print(json.dumps({"argv": sys.argv[1:], "env": {k: v for k, v in os.environ.items() '
              'if k in KEYS}}))\n')
    _exe(tmp_path / "bin", "terraform", script)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    out = json.loads(toolchain.run(["init", "-backend=false"], cwd=tmp_path, env_extra={"EXTRA": "1"}).stdout)
    assert out["argv"] == ["init", f"-plugin-dir={mirror}", "-backend=false"]
    assert out["env"] == {"TF_CLI_CONFIG_FILE": str(toolchain.cli_config()), "TF_IN_AUTOMATION": "1",
                          "TF_INPUT": "0", "CHECKPOINT_DISABLE": "1", "EXTRA": "1"}
    assert json.loads(toolchain.run(["validate"], cwd=tmp_path).stdout)["argv"] == ["validate"]
