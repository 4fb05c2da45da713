"""The machine code is compiled for: the facts that size generated code (SIMD register width,
cache sizes, cores), detected once for this host and otherwise taken from a model of the CPU
named by `-march=` (the instruction set: the register width) and `-mtune=` (the caches).

As in gcc: `-march=native` compiles for this host's instruction set, `-mtune=native` sizes tiles
for this host's caches; `-mtune` defaults to `-march`. Named CPUs and the generic x86-64 target
('') use the model `GENERIC_CACHES` (the x86-64 cores polyflow is tuned on: 32 KiB L1 data,
512 KiB L2, 64-byte lines). The facts are part of every compile-cache key, so a result compiled
for one machine is never handed to another.
"""

from __future__ import annotations

import hashlib
import os
import platform
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path


@dataclass(frozen=True)
class Caches:
    """Per-core data cache sizes in bytes, and the cache line."""

    l1_data: int
    l2: int
    line: int


GENERIC_CACHES = Caches(l1_data=32 * 1024, l2=512 * 1024, line=64)

# LLVM CPU names by SIMD register width (a name matches when it contains one of these).
_AVX512_CPUS = (
    "avx512",
    "cascadelake",
    "cooperlake",
    "cannonlake",
    "icelake",
    "tigerlake",
    "sapphirerapids",
    "graniterapids",
    "znver4",
    "znver5",
    "x86-64-v4",
)
_AVX2_CPUS = (
    "haswell",
    "broadwell",
    "skylake",
    "alderlake",
    "raptorlake",
    "meteorlake",
    "znver1",
    "znver2",
    "znver3",
    "bdver4",
    "x86-64-v3",
)


@dataclass(frozen=True)
class Target:
    """What code is generated for: `march` and `mtune` as given, the SIMD register width the
    instruction set has, the caches tiles are sized for, and the cores of this host."""

    march: str
    mtune: str
    vector_bits: int
    caches: Caches
    cores: int

    def fingerprint(self) -> dict[str, str]:
        """What a compile-cache key holds of the target: its facts, and for 'native' the host
        CPU's model and feature flags (two hosts with equal facts may still differ in ISA)."""
        facts = {
            "march": self.march,
            "mtune": self.mtune,
            "vector_bits": str(self.vector_bits),
            **{f"cache_{k}": str(v) for k, v in asdict(self.caches).items()},
        }
        if "native" in (self.march, self.mtune):
            facts["host_cpu"] = host_cpu_fingerprint()
        return facts


def target_of(march: str, mtune: str = "") -> Target:
    """The target for `-march=march -mtune=mtune` (mtune '' = as march)."""
    tune = mtune or march
    return Target(
        march=march,
        mtune=mtune,
        vector_bits=vector_register_bits(march),
        caches=host_caches() if tune == "native" else GENERIC_CACHES,
        cores=host_cores(),
    )


def vector_register_bits(march: str) -> int:
    """The SIMD register width code built for `march` runs with: the host's for 'native'
    (from /proc/cpuinfo), 128 (SSE2) for the generic x86-64 target ''."""
    if march == "native":
        flags = _host_flags()
        if "avx512f" in flags:
            return 512
        return 256 if "avx2" in flags or "avx" in flags else 128
    name = march.lower()
    if any(cpu in name for cpu in _AVX512_CPUS):
        return 512
    if any(cpu in name for cpu in _AVX2_CPUS):
        return 256
    return 128


@cache
def host_caches() -> Caches:
    """This host's per-core caches (from sysfs), the generic model where it says nothing."""
    found: dict[str, int] = {}
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = _bytes((index / "size").read_text().strip())
            line = int((index / "coherency_line_size").read_text().strip())
        except (OSError, ValueError):
            continue
        if level == "1" and kind in ("Data", "Unified"):
            found["l1_data"], found["line"] = size, line
        elif level == "2":
            found["l2"] = size
    return Caches(**{**asdict(GENERIC_CACHES), **found})


@cache
def host_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@cache
def host_cpu_fingerprint() -> str:
    """The host CPU's model and feature flags, hashed: what `-march=native` compiles for."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.machine()
    wanted = [ln for ln in text.splitlines() if ln.startswith(("model name", "flags"))][:2]
    return hashlib.sha256("\n".join(wanted).encode()).hexdigest()[:16]


@cache
def _host_flags() -> frozenset[str]:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            line = next((ln for ln in cpuinfo if ln.startswith("flags")), "")
    except OSError:
        return frozenset()
    return frozenset(line.split(":", 1)[-1].split())


def _bytes(text: str) -> int:
    """`32K`, `1M`, `512` as bytes."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if text and text[-1].upper() in units:
        return int(text[:-1]) * units[text[-1].upper()]
    return int(text)
