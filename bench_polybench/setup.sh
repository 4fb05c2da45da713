#!/usr/bin/env bash
# Install the benchmark suite's peer compilers when missing (idempotent, quick when present):
# clang-14 with Polly (clang-14, libpolly-14-dev) and LLVM's OpenMP runtime (libomp-14-dev, for
# the polly-par configuration). apt-get update runs only when something is missing.
# `make bench` and `make bench-mini` run it; scripts/setup.sh (polyflow itself) does not need it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/apt_lib.sh
source "$ROOT/scripts/apt_lib.sh"  # log, as_root, apt_install, install_missing

BENCH_PACKAGES=(
  "clang-14 clang-14"
  "- libpolly-14-dev"
  "- libomp-14-dev"
)
install_missing "${BENCH_PACKAGES[@]}"
