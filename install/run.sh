#!/usr/bin/env bash
# Runs the install steps (install/NN-*.sh) in order. Each step is idempotent and quick when
# what it installs is already there; together they take a fresh Debian 12 machine (root,
# package registries reachable) to everything `make demo` and `make test` need.
#   install/run.sh demo   what `make demo` runs: the steps whose "# for:" line names demo
#   install/run.sh [test] everything (`make deps`, `make test`): every step, all of each step
# Each step reads DNSCAMP_INSTALL_FOR (demo or test) to leave out what only the tests and the
# fleet use (the test extra of requirements.lock, docker-compose, cron, socat, tflint, checkov).
# What no step can install (root, apt) is checked first, one line naming the command to run.
set -euo pipefail
cd "$(dirname "$0")/.."
source install/lib.sh
target=${1:-test}
case "$target" in
  demo|test) ;;
  *) echo "usage: install/run.sh [demo|test]" >&2; exit 2 ;;
esac
check_prereqs || exit 2
export DNSCAMP_INSTALL_FOR=$target
total=$SECONDS
for step in install/[0-9][0-9]-*.sh; do
  wanted=$(step_targets "$step")
  if [[ " $wanted " != *" $target "* ]]; then
    echo "== install: ${step#install/}: skipped (for: $wanted)"
    continue
  fi
  start=$SECONDS
  echo "== install: ${step#install/}"
  bash "$step"
  echo "   (${step#install/}: $((SECONDS - start)) s)"
done
echo "== install ($target): $((SECONDS - total)) s"
