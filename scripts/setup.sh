#!/usr/bin/env bash
# Prepare a machine to build, run and test polyflow. Idempotent, and quick when nothing is missing:
#   1. Debian packages from SYSTEM_PACKAGES that are missing (apt-get update only if one is);
#   2. .venv, created with Python 3.11 if it does not exist;
#   3. `pip install -e '.[test]'` into .venv when pyproject.toml changed since the last install
#      (the stamp file .venv/.polyflow-setup-stamp holds its hash and the repository path), and
#      PyTorch's CPU build where pip finds it;
#   4. polyflow's and server's bytecode, so that every command starts without compiling Python
#      (even where PYTHONDONTWRITEBYTECODE keeps the interpreter from writing it on import).
# Pip may warn about '/opt/pypi-more' locations; that is harmless.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

VENV="$ROOT/.venv"
STAMP="$VENV/.polyflow-setup-stamp"

# shellcheck source=scripts/apt_lib.sh
source "$ROOT/scripts/apt_lib.sh"  # log, as_root, apt_install, install_missing

# ---------------------------------------------------------------------------------------------
# System packages (Debian). One entry per package: "COMMAND PACKAGE".
# COMMAND is a program the package provides (checked with `command -v`); write "-" for a
# package with no program of its own (a library), which is then checked with `dpkg -s`.
# (The benchmark peers, clang-14 with Polly and libomp, are installed by bench_polybench/setup.sh.)
# ---- add new system packages here ----
SYSTEM_PACKAGES=(
  "gcc gcc"
  "make make"
  "cmake cmake"      # tests/test_cc_driver.py: a CMake project built with polyflow-cc
  "gdb gdb"          # tests/test_cc_driver.py: -g line tables seen by the debugger
  "objcopy binutils" # polyflow cc localizes its symbols in the objects it writes
  "- postgresql"     # tests/test_tuning_db.py: the tuning database on a real PostgreSQL server
  "chromium chromium" # tests/test_explorer.py: the web explorer in headless Chromium (Playwright)
)
# ---- end of system packages ----
# ---------------------------------------------------------------------------------------------

# 1. System packages.
install_missing "${SYSTEM_PACKAGES[@]}"

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

# 3b. PyTorch for polyflow.torch and its tests: the CPU build, where pip can find it (this
#     machine's wheel directory; PyPI's default torch pulls GBs of CUDA libraries). Without it
#     the PyTorch tests skip and say why.
TORCH="torch==2.13.0+cpu"
if [ ! -d "$VENV/lib/python3.11/site-packages/torch-2.13.0+cpu.dist-info" ]; then
  log "pip install $TORCH (the CPU build; about 30 s)"
  if ! "$VENV/bin/python" -m pip install --disable-pip-version-check "$TORCH" >"$VENV/.pip-torch.log" 2>&1; then
    log "no $TORCH for this machine (see $VENV/.pip-torch.log): the PyTorch tests will skip"
  fi
fi

# 4. Bytecode for the product's modules (quiet and quick when it is already current). An import
#    that compiles polyflow's ~100 modules costs ~0.3 s on every command otherwise.
"$VENV/bin/python" -m compileall -q -j 0 polyflow server >/dev/null
