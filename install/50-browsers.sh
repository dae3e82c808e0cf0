#!/usr/bin/env bash
# for: demo test
# parallel: yes
# Page-load browsers: Debian's chromium + chromium-driver and firefox-esr, Stubby
# (the DoT stub of the WWW'20 set-up, 002_6fa4cf280535d36b.txt §3.2.2), certutil (NSS dbs);
# geckodriver 0.37.1 from crates.io, built once into ${XDG_CACHE_HOME:-$HOME/.cache}/dnscamp/bin
# (~1 min 40 s on 2 cores) and reused by every clone. Nothing is downloaded at run time
# (Selenium gets the driver paths; Selenium Manager is never asked).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
[ "$(id -u)" -eq 0 ] || { echo "install: must run as root (apt)"; exit 2; }

apt_install chromium chromium-driver firefox-esr stubby libnss3-tools
echo "   browsers: $(chromium --version 2>/dev/null | head -1); $(firefox-esr --version 2>/dev/null | head -1); stubby $(stubby -V 2>/dev/null | head -1)"

GECKO_VERSION=0.37.1
BIN="$(cache_dir)/bin"
mkdir -p "$BIN"
if [ -x "$BIN/geckodriver" ] && "$BIN/geckodriver" --version 2>/dev/null | head -1 | grep -q " $GECKO_VERSION"; then
  echo "   geckodriver $GECKO_VERSION: cached at $BIN/geckodriver"
  exit 0
fi
CARGO=$(ensure_cargo) || exit 2  # cargo >= CARGO_MIN, else Debian's cargo-web (lib.sh)
echo "   geckodriver $GECKO_VERSION: cargo install into $(cache_dir) (~1 min 40 s, -j2)"
nice "$CARGO" install geckodriver --version "$GECKO_VERSION" --locked -j2 --root "$(cache_dir)" >/dev/null 2>&1 \
  || nice "$CARGO" install geckodriver --version "$GECKO_VERSION" -j2 --root "$(cache_dir)"
"$BIN/geckodriver" --version | head -1
