#!/usr/bin/env bash
# Runs every install step (install/NN-*.sh) in order. Each step is idempotent and quick when
# what it installs is already there; together they take a fresh Debian 12 machine (root,
# package registries reachable) to everything `make demo` and `make test` need.
# What no step can install (root, apt) is checked first, one line naming the command to run.
set -euo pipefail
cd "$(dirname "$0")/.."
source install/lib.sh
check_prereqs || exit 2
for step in install/[0-9][0-9]-*.sh; do
  start=$SECONDS
  echo "== install: ${step#install/}"
  bash "$step"
  echo "   (${step#install/}: $((SECONDS - start)) s)"
done
