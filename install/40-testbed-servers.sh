#!/usr/bin/env bash
# for: demo test
# parallel: yes
# Testbed servers: Unbound (recursive resolvers), Caddy (web sites), kdig (independent
# DNS checker), certutil (NSS dbs for Chromium/Firefox), openssl; CoreDNS 1.15.0 built from its
# Go module (TOOLCHAIN.md: ~3 min, ~1.4 GB peak RSS, 111 MB binary), cached in
# ${XDG_CACHE_HOME:-$HOME/.cache}/dnscamp/bin/coredns-1.15.0 and built only when missing.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
[ "$(id -u)" -eq 0 ] || { echo "install: must run as root (apt)"; exit 2; }

apt_install unbound caddy knot-dnsutils libnss3-tools openssl ca-certificates

COREDNS_VERSION=1.15.0
BIN="$(cache_dir)/bin"
TARGET="$BIN/coredns-$COREDNS_VERSION"
mkdir -p "$BIN"
if [ -x "$TARGET" ] && "$TARGET" -version >/dev/null 2>&1; then
  echo "   coredns $COREDNS_VERSION: cached at $TARGET"
  exit 0
fi

# CoreDNS 1.15 needs go >= 1.24: the one on the machine, else go1.24 from the Go module proxy (lib.sh)
GO=$(ensure_go) || exit 2
echo "   coredns $COREDNS_VERSION: building from its Go module with $("$GO" version) (~3 min, -p 2)"
export GOFLAGS=-mod=mod GOMAXPROCS=2 GOTOOLCHAIN="${GOTOOLCHAIN:-auto}"
work="$(cache_dir)/build/coredns-$COREDNS_VERSION"
rm -rf "$work"; mkdir -p "$work"
dir=$("$GO" mod download -json "github.com/coredns/coredns@v$COREDNS_VERSION" \
      | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
[ -n "$dir" ] && [ -d "$dir" ] || { echo "install: go mod download of coredns failed"; exit 1; }
cp -r "$dir/." "$work/"
chmod -R u+w "$work"
(cd "$work" && "$GO" build -p 2 -trimpath -ldflags "-s -w" -o "$TARGET.tmp" .)
mv "$TARGET.tmp" "$TARGET"
rm -rf "$work"
"$TARGET" -version | head -1
