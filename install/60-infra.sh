#!/usr/bin/env bash
# for: test
# The cloud fleet's tools, for `dnscamp fleet` and the tests (the demo uses none of them, so
# `install/run.sh demo` skips this step): Terraform or OpenTofu (found, never installed here:
# neither is in Debian or the Go module proxy in a usable form) and the hashicorp/aws provider
# mirror (found by dnscamp/fleet/toolchain.py, reported when absent); tflint from the Go module
# proxy, checkov in its own venv (it pins its own boto3), Debian's cloud-init for `cloud-init schema`.
# Everything cached under ${XDG_CACHE_HOME:-$HOME/.cache}/dnscamp; quick when already there.
set -euo pipefail
cd "$(dirname "$0")/.."
source install/lib.sh
[ "$(id -u)" -eq 0 ] || { echo "install: must run as root (apt)"; exit 2; }

TFLINT_VERSION=0.61.0   # on proxy.golang.org (core rules; the AWS ruleset cannot be fetched here)
CHECKOV_VERSION=3.3.30
BIN="$(cache_dir)/bin"
mkdir -p "$BIN"

apt_install cloud-init python3-venv

# Terraform/OpenTofu and the provider mirror: prerequisites of `dnscamp fleet` only. Missing,
# they are named here (one line, with what to do) and `make deps` goes on, because `make demo`
# and every other layer need neither; the fleet's tests then fail naming them (tests/tools.py),
# never a silent pass.
if tf=$(command -v tofu || command -v terraform); then
  echo "   $(basename "$tf"): $(TF_CLI_CONFIG_FILE=/dev/null "$tf" version 2>/dev/null | head -1) at $tf"
else
  prereq_fail "tofu or terraform >= 1.6 on PATH (for dnscamp fleet and tests/local/test_infra_modules.py)" \
    "install OpenTofu (https://opentofu.org/docs/intro/install/) or Terraform" || true
fi
# The provider mirror: found the way `dnscamp fleet` finds it (and cached by it).
if mirror=$(.venv/bin/python -c 'from dnscamp.fleet.toolchain import provider_mirror as m; p = m(); print(p or "")' 2>/dev/null) && [ -n "$mirror" ]; then
  echo "   hashicorp/aws provider mirror: $mirror"
else
  prereq_fail "a filesystem mirror of registry.terraform.io/hashicorp/aws (no registry access here)" \
    "terraform providers mirror <dir> on a connected machine, copy it here, export DNSCAMP_TF_PLUGIN_DIR=<dir>" || true
fi

# tflint from the Go module proxy, cached by version.
if [ -x "$BIN/tflint-$TFLINT_VERSION" ]; then
  echo "   tflint $TFLINT_VERSION: cached at $BIN/tflint-$TFLINT_VERSION"
else
  GO=$(ensure_go) || exit 2
  echo "   tflint $TFLINT_VERSION: go install from the Go module proxy with $("$GO" version) (~2 min)"
  gobin="$(cache_dir)/build/tflint-$TFLINT_VERSION"
  rm -rf "$gobin" && mkdir -p "$gobin"
  GOBIN="$gobin" GOFLAGS=-mod=mod GOMAXPROCS=2 "$GO" install -p 2 -trimpath -ldflags "-s -w" \
    "github.com/terraform-linters/tflint@v$TFLINT_VERSION"
  mv "$gobin/tflint" "$BIN/tflint-$TFLINT_VERSION" && rm -rf "$gobin"
fi
ln -sf "tflint-$TFLINT_VERSION" "$BIN/tflint"

# checkov in its own venv (its pinned boto3/botocore would clash with the project's).
venv="$(cache_dir)/checkov-$CHECKOV_VERSION"
if [ -x "$venv/bin/checkov" ]; then
  echo "   checkov $CHECKOV_VERSION: cached in $venv"
else
  echo "   checkov $CHECKOV_VERSION: pip install into $venv (~1 min)"
  rm -rf "$venv" && python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "checkov==$CHECKOV_VERSION"
fi
ln -sf "$venv/bin/checkov" "$BIN/checkov"
