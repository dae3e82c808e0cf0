# Shared helpers for install steps (sourced).
# apt_install PKG...: installs the packages that are missing; runs `apt-get update` once per
# machine-day only when something is missing. Waits for the dpkg lock instead of failing, and
# holds a lock of its own so that steps run in parallel (run.sh) queue their apt calls and the
# day's `apt-get update` runs once.
apt_install() {
  local missing=()
  _apt_missing "$@"
  [ ${#missing[@]} -eq 0 ] && return 0
  local state=${DNSCAMP_APT_STATE:-/var/lib/apt/periodic}  # the lock and the day's update stamp
  mkdir -p "$state"
  (
    flock 9
    missing=()
    _apt_missing "$@"  # again: a parallel step may have installed them meanwhile
    [ ${#missing[@]} -eq 0 ] && exit 0
    echo "   apt: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    stamp=$state/dnscamp-update-$(date +%Y%m%d)
    if [ ! -e "$stamp" ]; then
      apt-get -o DPkg::Lock::Timeout=900 update -qq
      touch "$stamp"
    fi
    apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  ) 9> "$state/dnscamp-apt.lock"
}
# _apt_missing PKG...: appends to the caller's `missing` the packages dpkg does not have installed
_apt_missing() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
}
cache_dir() { echo "${XDG_CACHE_HOME:-$HOME/.cache}/dnscamp"; }

# step_targets STEP: the targets a step serves, from its "# for: demo test" line (run.sh runs a
# step for a target it names); a step without the line is an error, not run by default.
step_targets() {
  local t
  t=$(sed -n 's/^# for: *//p' "$1" | head -1)
  [ -n "$t" ] || { echo "install: $1 has no '# for:' line (demo, test or both)" >&2; return 2; }
  echo "$t"
}
# for_demo: this install is `make demo`'s (install/run.sh demo), which leaves out test-only parts
for_demo() { [ "${DNSCAMP_INSTALL_FOR:-test}" = demo ]; }

# --- toolchains ------------------------------------------------------------------------------
# Each toolchain the install needs is either installed here from the registries (apt, the Go
# module proxy) or reported as a missing prerequisite in ONE line naming the command to run.
GO_MIN=1.24            # CoreDNS 1.15.0's go.mod
GO_TOOLCHAIN=1.24.13   # fetched from the Go module proxy when no go >= GO_MIN is found
CARGO_MIN=1.78         # testbed/linkem/Cargo.lock version 4

# version_ge A B: A >= B as versions (1.24.13 >= 1.24)
version_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -1)" = "$2" ]; }

# prereq_fail WHAT FIX: the one-line message of a missing prerequisite (stderr), status 2
prereq_fail() { echo "install: missing prerequisite: $1: run: $2" >&2; return 2; }

# _first_at_least MIN CMD...: prints the first CMD whose `CMD version` is >= MIN, else status 1;
# LAST_FOUND holds the versions seen (for the message)
_first_at_least() {
  local min=$1 c v; shift; LAST_FOUND=""
  for c in "$@"; do
    [ -n "$c" ] && [ -x "$c" ] || continue
    v=$(GOTOOLCHAIN=local "$c" version 2>/dev/null | grep -o -E '[0-9]+\.[0-9]+(\.[0-9]+)?' | head -1)
    LAST_FOUND="$LAST_FOUND ${c}=${v:-?}"
    [ -n "$v" ] && version_ge "$v" "$min" && { echo "$c"; return 0; }
  done
  return 1
}

# find_go: a go >= GO_MIN on PATH, in $DNSCAMP_GO_DIRS (default /usr/local/go/bin) or the
# toolchain cached by ensure_go; prints its path
find_go() {
  local d cands=("$(command -v go || true)")
  for d in ${DNSCAMP_GO_DIRS-/usr/local/go/bin} "$(cache_dir)/go-$GO_TOOLCHAIN/bin"; do cands+=("$d/go"); done
  _first_at_least "$GO_MIN" "${cands[@]}"
}

require_go() {
  find_go || prereq_fail "Go >= $GO_MIN for CoreDNS (found:${LAST_FOUND:- none})" \
    "apt-get install -y golang-go && bash install/40-testbed-servers.sh (it fetches go$GO_TOOLCHAIN from the Go module proxy)"
}

# ensure_go: find_go, else the official go$GO_TOOLCHAIN toolchain from the Go module proxy
# (golang.org/toolchain, what GOTOOLCHAIN=auto uses), downloaded by any go, e.g. Debian 12's
# golang-go 1.19, into the cache. Prints the go to use.
ensure_go() {
  find_go && return 0
  local boot dir dest arch
  boot=$(command -v go || true)
  if [ -z "$boot" ]; then apt_install golang-go >&2; boot=$(command -v go || echo /usr/bin/go); fi
  arch=$(dpkg --print-architecture 2>/dev/null || echo amd64)
  echo "   go: fetching go$GO_TOOLCHAIN (golang.org/toolchain) from the Go module proxy with $("$boot" version)" >&2
  dir=$(GOTOOLCHAIN=local GOFLAGS=-mod=mod "$boot" mod download -json "golang.org/toolchain@v0.0.1-go$GO_TOOLCHAIN.linux-$arch" \
        | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
  if [ -n "$dir" ] && [ -d "$dir" ]; then
    dest="$(cache_dir)/go-$GO_TOOLCHAIN"
    rm -rf "$dest.tmp" && mkdir -p "$(cache_dir)" && cp -r "$dir" "$dest.tmp"
    chmod -R u+w "$dest.tmp" && chmod +x "$dest.tmp"/bin/* "$dest.tmp"/pkg/tool/*/*  # module zips keep no modes
    rm -rf "$dest" && mv "$dest.tmp" "$dest"
  fi
  require_go
}

# find_cargo: a cargo >= CARGO_MIN on PATH, in ~/.cargo/bin or Debian's (cargo-web puts it in /usr/bin)
find_cargo() {
  _first_at_least "$CARGO_MIN" "$(command -v cargo || true)" "$HOME/.cargo/bin/cargo" ${DNSCAMP_CARGO_DIRS-/usr/local/cargo/bin/cargo /usr/bin/cargo}
}

require_cargo() {
  find_cargo || prereq_fail "cargo >= $CARGO_MIN for linkem and geckodriver (found:${LAST_FOUND:- none})" \
    "apt-get install -y cargo-web rustc-web"
}

# ensure_cargo: find_cargo, else Debian 12's cargo-web/rustc-web (Rust 1.8x+, bookworm-security;
# the plain `cargo` package is Rust 1.63, too old for Cargo.lock v4). Prints the cargo to use.
ensure_cargo() {
  find_cargo && return 0
  [ "$(id -u)" -eq 0 ] && apt_install cargo-web rustc-web >&2
  require_cargo
}

# check_prereqs: what no install step can provide, checked before any step runs
check_prereqs() {
  [ "$(id -u)" -eq 0 ] || { prereq_fail "root (apt, network namespaces)" "sudo make deps"; return; }
  command -v apt-get >/dev/null && command -v dpkg-query >/dev/null \
    || { prereq_fail "a Debian 12 system with apt (this install uses Debian's packages)" "make deps on Debian 12 (bookworm)"; return; }
  grep -q -E '^VERSION_CODENAME=bookworm' /etc/os-release 2>/dev/null \
    || echo "install: warning: not Debian 12 (bookworm): package names and versions may differ" >&2
  return 0
}
