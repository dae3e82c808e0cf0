#!/usr/bin/env bash
# for: demo test
# Build the dnscamp link emulator (testbed/linkem) and install the binary into the user cache:
#   ${XDG_CACHE_HOME:-$HOME/.cache}/dnscamp/bin/linkem
# Idempotent and quick when nothing changed (cargo's incremental check + compare before copy).
# Also installs the tools the NFQUEUE backend and its self-test call: iptables, ethtool.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
crate="$here/testbed/linkem"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/dnscamp"
export CARGO_TARGET_DIR="$cache/linkem-target"
bin_dir="$cache/bin"

need_pkgs=()
command -v iptables >/dev/null 2>&1 || need_pkgs+=(iptables)
command -v ip >/dev/null 2>&1 || need_pkgs+=(iproute2)
command -v ethtool >/dev/null 2>&1 || need_pkgs+=(ethtool)
if ((${#need_pkgs[@]})); then
    if [ "$(id -u)" = 0 ]; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get -o DPkg::Lock::Timeout=600 update -q >/dev/null || true
        apt-get -o DPkg::Lock::Timeout=600 install -y -q "${need_pkgs[@]}" >/dev/null
    else
        echo "30-linkem: missing ${need_pkgs[*]} (run as root to install them)" >&2
    fi
fi

CARGO=$(ensure_cargo) || exit 2  # cargo >= CARGO_MIN, else Debian's cargo-web (lib.sh)

mkdir -p "$bin_dir" "$CARGO_TARGET_DIR"
(cd "$crate" && "$CARGO" build --release --locked -j2 --quiet)

src="$CARGO_TARGET_DIR/release/linkem"
dst="$bin_dir/linkem"
if ! cmp -s "$src" "$dst"; then
    install -m 0755 "$src" "$dst.tmp.$$"
    mv -f "$dst.tmp.$$" "$dst"
    echo "30-linkem: installed $dst"
else
    echo "30-linkem: $dst up to date"
fi
