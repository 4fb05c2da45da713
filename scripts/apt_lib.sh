# Shared by scripts/setup.sh and bench_polybench/setup.sh (source it; it runs nothing itself):
# install missing Debian packages with apt-get, running `apt-get update` once, only when one is
# missing.
#
#   install_missing "gcc gcc" "- libomp-14-dev"   # entries "COMMAND PACKAGE"
#
# COMMAND is a program the package provides (checked with `command -v`); write "-" for a
# package with no program of its own (a library), which is then checked with `dpkg -s`.

log() { printf 'setup: %s\n' "$*" >&2; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    log "need root to run: $*"
    return 1
  fi
}

APT_UPDATED=0
apt_install() {
  if ! command -v apt-get >/dev/null 2>&1; then
    log "missing system packages ($*) and no apt-get: install them by hand"
    return 1
  fi
  if [ "$APT_UPDATED" -eq 0 ]; then
    log "apt-get update"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    APT_UPDATED=1
  fi
  log "apt-get install $*"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
}

install_missing() {
  local entry cmd pkg
  local missing=()
  for entry in "$@"; do
    read -r cmd pkg <<<"$entry"
    if [ "$cmd" != "-" ]; then
      command -v "$cmd" >/dev/null 2>&1 && continue
    elif dpkg -s "$pkg" >/dev/null 2>&1; then
      continue
    fi
    missing+=("$pkg")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    apt_install "${missing[@]}"
  fi
}
