#!/usr/bin/env bash
# Prepare a machine to build, run and test polyflow. Idempotent, and quick when nothing is missing:
#   1. Debian packages from SYSTEM_PACKAGES that are missing (apt-get update only if one is);
#   2. .venv, created with Python 3.11 if it does not exist;
#   3. `pip install -e '.[test]'` into .venv when pyproject.toml changed since the last install
#      (the stamp file .venv/.polyflow-setup-stamp holds its hash and the repository path).
# Pip may warn about '/opt/pypi-more' locations; that is harmless.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

VENV="$ROOT/.venv"
STAMP="$VENV/.polyflow-setup-stamp"

# ---------------------------------------------------------------------------------------------
# System packages (Debian). One entry per package: "COMMAND PACKAGE".
# COMMAND is a program the package provides (checked with `command -v`); write "-" for a
# package with no program of its own (a library), which is then checked with `dpkg -s`.
# ---- add new system packages here ----
SYSTEM_PACKAGES=(
  "gcc gcc"
  "make make"
  # Planned for the benchmark peers (see DESIGN.md, "Peers for benchmarks"):
  # "clang-14 clang-14"
  # "- libpolly-14-dev"
  # "- libomp-14-dev"
)
# ---- end of system packages ----
# ---------------------------------------------------------------------------------------------

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

# 1. System packages.
missing=()
for entry in "${SYSTEM_PACKAGES[@]}"; do
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

# 2. The virtual environment, with Python 3.11.
find_python311() {
  local candidate
  for candidate in python3.11 python3; do
    if command -v "$candidate" >/dev/null 2>&1 &&
      "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
      command -v "$candidate"
      return 0
    fi
  done
  return 1
}

if [ ! -x "$VENV/bin/python" ]; then
  if ! PY311="$(find_python311)"; then
    apt_install python3.11 python3.11-venv
    PY311="$(find_python311)"
  fi
  log "creating .venv with $PY311"
  if ! "$PY311" -m venv "$VENV"; then
    # Debian's own python3.11 keeps ensurepip in a separate package.
    rm -rf "$VENV"
    apt_install python3.11-venv
    "$PY311" -m venv "$VENV"
  fi
  rm -f "$STAMP"
fi

# 3. The package and its test dependencies, when pyproject.toml changed since the last install.
want="$(sha256sum pyproject.toml | cut -d' ' -f1) $ROOT"
have="$(cat "$STAMP" 2>/dev/null || true)"
if [ "$want" != "$have" ] || [ ! -x "$VENV/bin/polyflow" ] || [ ! -x "$VENV/bin/pytest" ]; then
  log "pip install -e '.[test]' (pyproject.toml changed or first install; a minute or two when new)"
  pip_log="$VENV/.pip-install.log"
  if ! "$VENV/bin/python" -m pip install --disable-pip-version-check -e '.[test]' >"$pip_log" 2>&1; then
    grep -v "is ignored: it is neither a file nor a directory" "$pip_log" >&2 || true
    log "pip install failed (full log: $pip_log)"
    exit 1
  fi
  printf '%s\n' "$want" >"$STAMP"
fi
