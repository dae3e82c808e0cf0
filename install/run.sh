#!/usr/bin/env bash
# Runs the install steps (install/NN-*.sh) in order. Each step is idempotent and quick when
# what it installs is already there; together they take a fresh Debian 12 machine (root,
# package registries reachable) to everything `make demo` and `make test` need.
#   install/run.sh demo   what `make demo` runs: the steps whose "# for:" line names demo
#   install/run.sh [test] everything (`make deps`, `make test`): every step, all of each step
# Each step reads DNSCAMP_INSTALL_FOR (demo or test) to leave out what only the tests and the
# fleet use (the test extra of requirements.lock, docker-compose, cron, socat, tflint, checkov).
# Consecutive steps marked "# parallel: yes" run at the same time (their output is printed when
# each ends): one's downloads and apt unpacking overlap the other's compiling, and the two builds
# fill each other's single-threaded phases (Go's link, cargo's last crates). apt_install
# (lib.sh) takes a lock, so their apt calls queue.
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
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
group=()  # the parallel steps started and not yet waited for

# wait_group: wait for every started parallel step, print its output and time; fails when one did
wait_group() {
  local failed=0 entry step pid start rc
  for entry in "${group[@]}"; do
    IFS='|' read -r step pid start <<< "$entry"
    rc=0; wait "$pid" || rc=$?
    echo "== install: ${step#install/} (ran in parallel)"
    cat "$logs/${step#install/}.log"
    if [ "$rc" -ne 0 ]; then
      echo "   (${step#install/}: failed, exit $rc)"; failed=1
    else
      echo "   (${step#install/}: $(( $(date +%s) - start )) s, in parallel)"
    fi
  done
  group=()
  return $failed
}

for step in install/[0-9][0-9]-*.sh; do
  wanted=$(step_targets "$step")
  if [[ " $wanted " != *" $target "* ]]; then
    echo "== install: ${step#install/}: skipped (for: $wanted)"
    continue
  fi
  if grep -q '^# parallel: yes$' "$step"; then
    echo "== install: ${step#install/}: started (parallel)"
    bash "$step" > "$logs/${step#install/}.log" 2>&1 &
    group+=("$step|$!|$(date +%s)")
    continue
  fi
  ((${#group[@]})) && { wait_group || exit 1; }
  start=$SECONDS
  echo "== install: ${step#install/}"
  bash "$step"
  echo "   (${step#install/}: $((SECONDS - start)) s)"
done
((${#group[@]})) && { wait_group || exit 1; }
echo "== install ($target): $((SECONDS - total)) s"
