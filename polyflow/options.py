"""The one options model, shared by the CLI, the Python API, the cache key and the REST API."""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

EmitStage = Literal[
    "mlir", "affine", "affine-opt", "schedule", "llvm-dialect", "llvm", "obj", "exe"
]


class Options(BaseModel):
    """Validated, frozen and hashable compile options; create once and hand to every stage."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    opt_level: int = Field(
        default=2,
        ge=0,
        le=3,
        description="0: no LLVM optimization; 1-3: LLVM -O3 (3 adds polyhedral passes once they exist)",
    )
    target: Literal["cpu", "cuda"] = Field(
        default="cpu",
        description="what the code runs on: 'cpu' (OpenMP loops, vector micro-kernels); "
        "'cuda' is refused until the GPU backend exists",
    )
    march: str = Field(
        default="",
        description="target CPU for LLVM and the C compiler ('' = generic x86-64, 'native' = this machine)",
    )
    raise_affine: bool = Field(
        default=True,
        description="raise loops, ifs and array accesses to the affine dialect (the 'affine' "
        "stage); it runs when this is true and opt_level >= 1",
    )
    functions: tuple[str, ...] | None = Field(
        default=None,
        description="only these functions go through MLIR (None = every function that can)",
    )
    include_dirs: tuple[str, ...] = ()
    defines: tuple[str, ...] = Field(
        default=(), description="preprocessor definitions, NAME or NAME=VALUE"
    )
    cc: str = Field(
        default="cc",
        description="the system C compiler used for the rest of the program and linking",
    )
    cflags: tuple[str, ...] = Field(default=(), description="extra flags for the system C compiler")
    fp_contract: Literal["off", "fast"] = Field(
        default="fast",
        description="fuse a*b+c into fused multiply-adds where the target has them "
        "('fast', gcc's default for GNU C) or never ('off', bit-exact with separate * and +)",
    )

    # ----- the polyhedral stage (opt_level 3; see polyflow/schedule/CONTRACT.md)
    schedule: bool = Field(
        default=True,
        description="at opt_level 3, reschedule each affine region with isl (fusion, tiling, "
        "statement splitting); false keeps the source order (parallelization still runs)",
    )
    schedule_preset: Literal["pluto", "isl", "feautrier"] = Field(
        default="pluto",
        description="isl scheduler settings: 'pluto' (PPCG/Pluto-like: maximal band depth and "
        "coincidence, no whole-component scheduling), 'isl' (isl's defaults), 'feautrier'",
    )
    fusion: Literal["max", "min", "smart"] = Field(
        default="smart",
        description="how much the scheduler fuses: 'max' (serialize_sccs=0, fuse everything "
        "legal), 'min' (separate strongly connected components), 'smart' (fuse only what "
        "shares data: producers with consumers, and independent nests that read one large "
        "array in the same order)",
    )
    tile: bool = Field(default=True, description="tile permutable bands")
    tile_sizes: tuple[int, ...] | None = Field(
        default=None,
        description="tile size per band dimension (the last repeats); None: chosen from the "
        "cache size and the element type",
    )
    tile_second_level: bool = Field(
        default=False, description="tile the tiles once more (for the L2/L3 cache)"
    )
    wavefront: bool = Field(
        default=True,
        description="with `parallel`, run tile bands with no parallel tile loop (time-tiled "
        "stencils) as wavefronts of blocks of 2x2 tiles, so that blocks run in parallel",
    )
    index_split: bool = Field(
        default=True,
        description="cut a loop whose carried dependences all start or end at one iteration "
        "into the iterations before, at and after it, so the pieces run in parallel or "
        "vectorize (floyd-warshall's i and j at k)",
    )
    split: bool = Field(
        default=True,
        description="split statements the way Polygeist does (reduction right-hand sides with "
        "several access patterns get their own statement and a scratchpad)",
    )
    parallel: bool = Field(
        default=True, description="turn loops without loop-carried dependences into OpenMP loops"
    )
    parallel_reductions: bool = Field(
        default=True,
        description="also parallelize reduction loops (reassociates floating-point sums: "
        "results may differ in the last bits)",
    )
    micro_kernels: bool = Field(
        default=True,
        description="rewrite contraction nests (C[i][j] += A[i][k] * B[k][j] and the like) "
        "into register-blocked vector code that keeps a block of C in registers across k",
    )
    isl_max_operations: int = Field(
        default=1_000_000,
        ge=0,
        description="the base isl operation budget (roughly one per microsecond here); each isl "
        "step of the polyhedral stage gets a multiple of it (dependences 2x, scheduling 5x, "
        "tiling 2x, AST 2x, ...; polyflow/poly/budget.py), and a region whose step runs "
        "out falls back to a cheaper analysis or keeps its code; 0: unbounded",
    )
    compile_timeout: float | None = Field(
        default=None,
        gt=0,
        description="seconds the polyhedral stage may spend on one function (a last resort "
        "where isl's operation counts bound the time too loosely); a function past it keeps "
        "its raised code, with a warning, and the result is never stored in the compile cache",
    )
    min_parallel_trip: int = Field(
        default=8,
        ge=1,
        description="do not parallelize loops known to run fewer iterations than this",
    )

    @property
    def raising_enabled(self) -> bool:
        """Whether the `affine` stage raises (`raise_affine` and `opt_level >= 1`) or passes
        through."""
        return self.raise_affine and self.opt_level >= 1

    def cache_key(self) -> str:
        """A stable digest of every option, for content-addressed caches."""
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()


DEFAULT_OPTIONS = Options()
