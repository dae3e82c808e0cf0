#!/usr/bin/env bash
# `make lock`: re-resolve requirements.lock from pyproject.toml (all extras, the build backend,
# sha256 hashes). pip-compile keeps the versions already in requirements.lock unless a pin in
# pyproject.toml moved; it runs from its own venv (pip-tools is not a dependency of dnscamp).
set -euo pipefail
cd "$(dirname "$0")/.."
source install/lib.sh
tools=${DNSCAMP_PIPTOOLS_VENV:-$(cache_dir)/pip-tools}
[ -x "$tools/bin/pip-compile" ] || { python3 -m venv "$tools" && "$tools/bin/pip" install -q pip-tools==7.6.2; }
"$tools/bin/pip-compile" --quiet --generate-hashes --allow-unsafe --all-build-deps --extra test \
  --strip-extras --no-emit-index-url --no-emit-find-links -o requirements.lock pyproject.toml
echo "   requirements.lock: $(grep -c '^[A-Za-z0-9]' requirements.lock) pinned distributions"
