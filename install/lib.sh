# Shared helpers for install steps (sourced).
# apt_install PKG...: installs the packages that are missing; runs `apt-get update` once per
# machine-day only when something is missing. Waits for the dpkg lock instead of failing.
apt_install() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "   apt: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  local stamp=/var/lib/apt/periodic/dnscamp-update-$(date +%Y%m%d)
  if [ ! -e "$stamp" ]; then
    apt-get -o DPkg::Lock::Timeout=900 update -qq
    mkdir -p "$(dirname "$stamp")" && touch "$stamp"
  fi
  apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
cache_dir() { echo "${XDG_CACHE_HOME:-$HOME/.cache}/dnscamp"; }
