"""The one options model, shared by the CLI, the Python API, the cache key and the REST API.

Each field is the one place its name, default and help text are written: the command line's
flags (`polyflow/cli.py`) and the service's request schema (`server/app.py`) are derived from
it. `json_schema_extra` says how a field shows on the command line where the derivation alone
cannot tell (`flags`, `metavar`, `c_only` for fields of C builds, `group` for the -O3 stage's
switches, `cli: False` for fields the command line does not offer, `kind` where the type alone
does not say how the flag reads).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

# The pipeline's stages whose text can be kept (pipeline.STAGE_NAMES, in order) ...
PipelineStage = Literal["mlir", "affine", "grad", "affine-opt", "gpu", "llvm-dialect", "llvm"]
# ... and what `polyflow build --emit` can write: those, the schedule trees, the PTX of a CUDA
# build's kernels, an object, a program.
EmitStage = Literal[PipelineStage, "schedule", "ptx", "header", "obj", "asm", "exe"]


# The GPU architectures PTX can be made for (NVPTX's, from Volta on).
GPU_ARCHS = ("sm_70", "sm_72", "sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_120")


def _cli(**how: Any) -> dict[str, Any]:
    return how


_GRAD_SPEC = re.compile(r"[A-Za-z_]\w*(:[A-Za-z_]\w*(,[A-Za-z_]\w*)*)?")


def grad_spec(spec: str) -> tuple[str, tuple[str, ...] | None]:
    """A `grad` entry as (function, its active arguments; None: the default ones)."""
    name, _, active = spec.partition(":")
    return name, (tuple(a for a in active.split(",") if a) if active else None)


_POLYHEDRAL = _cli(group="scheduling: the polyhedral stage (-O3)")
_DEBUGGING = "debugging and reports"
_GPU = "the GPU (--target=cuda)"


class Options(BaseModel):
    """Validated, frozen and hashable compile options; create once and hand to every stage."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    opt_level: int = Field(
        default=2,
        ge=0,
        le=3,
        description="0: no LLVM optimization, no raising; 1-2: raising to affine and LLVM -O3; "
        "3: also the polyhedral stage (isl scheduling, tiling, parallelization, micro-kernels)",
        json_schema_extra=_cli(flags=["-O"], metavar="LEVEL"),
    )
    target: Literal["cpu", "cuda"] = Field(
        default="cpu",
        description="what the code runs on: 'cpu' (OpenMP loops, vector micro-kernels) or "
        "'cuda' (parallel loop nests as GPU kernels, PTX; see --gpu-emulate)",
    )
    march: str = Field(
        default="",
        description="target CPU for LLVM and the C compiler ('' = generic x86-64, 'native' = this machine)",
        json_schema_extra=_cli(flags=["-march", "--march"], metavar="CPU"),
    )
    mtune: str = Field(
        default="",
        description="CPU whose caches tiles are sized for ('' = as march; 'native' = this "
        "machine's caches; any other: the generic model, polyflow/target.py)",
        json_schema_extra=_cli(flags=["-mtune", "--mtune"], metavar="CPU"),
    )
    raise_affine: bool = Field(
        default=True,
        description="raise loops, ifs and array accesses to the affine dialect (the 'affine' "
        "stage); it runs when this is true and opt_level >= 1",
    )
    functions: tuple[str, ...] | None = Field(
        default=None,
        description="only these functions go through MLIR (None = every function that can)",
        json_schema_extra=_cli(c_only=True, metavar="NAME,..."),
    )
    include_dirs: tuple[str, ...] = Field(
        default=(),
        description="directories searched for #include files",
        json_schema_extra=_cli(flags=["-I"], metavar="DIR", c_only=True),
    )
    defines: tuple[str, ...] = Field(
        default=(),
        description="preprocessor definitions, NAME or NAME=VALUE",
        json_schema_extra=_cli(flags=["-D"], metavar="NAME[=VALUE]", c_only=True),
    )
    cc: str = Field(
        default="cc",
        description="the system C compiler used for the rest of the program and linking",
        json_schema_extra=_cli(c_only=True),
    )
    cflags: tuple[str, ...] = Field(
        default=(),
        description="extra flags for the system C compiler (the Python API's; the command line "
        "passes its own flags to polyflow)",
        json_schema_extra=_cli(cli=False),
    )
    fast_math: bool = Field(
        default=False,
        description="-ffast-math, as clang means it: floating-point ops may be reassociated "
        "and assume no NaNs, infinities or signed zeros (LLVM's 'fast' flags); implies "
        "-fassociative-math",
        json_schema_extra=_cli(flags=["--fast-math"]),
    )
    associative_math: bool = Field(
        default=False,
        description="-fassociative-math: floating-point sums and products may be reordered "
        "(reductions run in parallel and vectorized with partial sums, deterministically for "
        "a build; results may differ in the last bits, each such loop is named in a warning). "
        "Off: C's order, as gcc and clang without fast-math",
        json_schema_extra=_cli(flags=["--associative-math"]),
    )
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
        json_schema_extra=_POLYHEDRAL,
    )
    schedule_preset: Literal["pluto", "isl", "feautrier"] = Field(
        default="pluto",
        description="isl scheduler settings: 'pluto' (PPCG/Pluto-like: maximal band depth and "
        "coincidence, no whole-component scheduling), 'isl' (isl's defaults), 'feautrier'",
        json_schema_extra=_POLYHEDRAL,
    )
    fusion: Literal["max", "min", "smart"] = Field(
        default="smart",
        description="how much the scheduler fuses: 'max' (serialize_sccs=0, fuse everything "
        "legal), 'min' (separate strongly connected components), 'smart' (fuse only what "
        "shares data: producers with consumers, and independent nests that read one large "
        "array in the same order)",
        json_schema_extra=_POLYHEDRAL,
    )
    tile: bool = Field(
        default=True, description="tile permutable bands", json_schema_extra=_POLYHEDRAL
    )
    tile_sizes: tuple[int, ...] | None = Field(
        default=None,
        description="tile size per band dimension (the last repeats); None: chosen from the "
        "cache size and the element type",
        json_schema_extra={**_POLYHEDRAL, "metavar": "N,N,..."},
    )
    tile_second_level: bool = Field(
        default=False, description="tile the tiles once more (for the L2/L3 cache)",
        json_schema_extra=_POLYHEDRAL,
    )
    wavefront: bool = Field(
        default=True,
        description="with `parallel`, run tile bands with no parallel tile loop (time-tiled "
        "stencils) as wavefronts of blocks of 2x2 tiles, so that blocks run in parallel",
        json_schema_extra=_POLYHEDRAL,
    )
    diamond: bool = Field(
        default=True,
        description="with `wavefront`, cut a time-tiled stencil's time and first space loop "
        "into diamonds where the dependences allow (jacobi-2d, fdtd-2d; not seidel-2d's "
        "in-place update), so that the tiles of a time band start together and the threads "
        "stay busy",
        json_schema_extra=_POLYHEDRAL,
    )
    point_distribution: bool = Field(
        default=True,
        description="in a time-tiled (skewed) tile band of several statements, run the "
        "innermost point loop once per statement where the dependences allow it, so that each "
        "is a plain sweep the vectorizer takes (jacobi-2d's two statements, fdtd-2d's three)",
        json_schema_extra=_POLYHEDRAL,
    )
    interleave: bool = Field(
        default=True,
        description="where the innermost loop of a band is a recurrence (each iteration waits "
        "for the one before: seidel-2d, adi's sweeps) and the loop around it gives independent "
        "rows, run those rows side by side in the innermost loop, skewed where they depend on "
        "each other, so the core overlaps their chains; where it is a float sum along a "
        "contiguous loop (bicg, mvt, trisolv; in C's order or, with -ffast-math, not), unroll "
        "8 rows and jam them into it",
        json_schema_extra=_POLYHEDRAL,
    )
    row_strips: bool = Field(
        default=True,
        description="where consecutive loop nests each run along rows that no dependence "
        "crosses, each a recurrence along the rows (adi's forward and backward sweeps), run them "
        "strip by strip: 8 rows at a time through all of them, those rows "
        "unrolled and jammed into each nest's loop, so that their chains overlap and the "
        "strip's data stays in cache from one nest to the next",
        json_schema_extra=_POLYHEDRAL,
    )
    align_vector_loops: bool = Field(
        default=True,
        description="run each vectorized innermost loop's vectors from where its unit-stride "
        "store is aligned to the vector size (a whole vector at each end where iterations may "
        "run twice, else a few scalar iterations first): a row from element 1 of a "
        "page-aligned array otherwise splits every other vector access across two cache lines "
        "(stencils: heat-3d, fdtd-2d); in a sweep that reads no array it writes, the aligned "
        "vectors then load each row read around the element once and shift it across lanes for "
        "the neighbours (jacobi-2d)",
        json_schema_extra=_POLYHEDRAL,
    )
    index_split: bool = Field(
        default=True,
        description="cut a loop whose carried dependences all start or end at one iteration "
        "into the iterations before, at and after it, so the pieces run in parallel or "
        "vectorize (floyd-warshall's i and j at k)",
        json_schema_extra=_POLYHEDRAL,
    )
    split: bool = Field(
        default=True,
        description="split statements the way Polygeist does (reduction right-hand sides with "
        "several access patterns get their own statement and a scratchpad)",
        json_schema_extra=_POLYHEDRAL,
    )
    parallel: bool = Field(
        default=True, description="turn loops without loop-carried dependences into OpenMP loops",
        json_schema_extra=_POLYHEDRAL,
    )
    parallel_reductions: bool = Field(
        default=True,
        description="parallelize reduction loops: integer ones always, floating-point ones "
        "with -fassociative-math or -ffast-math only (false: no reduction runs in parallel)",
        json_schema_extra=_POLYHEDRAL,
    )
    micro_kernels: bool = Field(
        default=True,
        description="rewrite contraction nests (C[i][j] += A[i][k] * B[k][j] and the like) "
        "into register-blocked vector code that keeps a block of C in registers across k",
        json_schema_extra=_POLYHEDRAL,
    )
    micro_kernel_rows: int = Field(
        default=6,
        ge=1,
        le=16,
        description="rows of the output block a micro-kernel keeps in registers (MR)",
        json_schema_extra=_POLYHEDRAL,
    )
    micro_kernel_vectors: int = Field(
        default=2,
        ge=1,
        le=8,
        description="vector registers per row of that block (NR = this x the vector width)",
        json_schema_extra=_POLYHEDRAL,
    )
    unroll: int | None = Field(
        default=None,
        ge=1,
        le=16,
        description="unroll each innermost loop this many times after scheduling (the same "
        "iterations in the same order, the rest in a loop after); with --target=cuda, the "
        "loops over shared-memory tiles (where it divides the tile); none: LLVM's choice on "
        "the CPU, 8 on the GPU; 1: not unrolled by polyflow",
        json_schema_extra=_POLYHEDRAL,
    )
    micro_kernel_transposed: Literal["auto", "on", "off"] = Field(
        default="auto",
        description="run a micro-kernel's vectors along a loop of another subscript of the "
        "output than its last (a convolution's output channels instead of its columns; the "
        "reads along it packed first): auto where that fills more vector lanes and each "
        "packed element serves enough blocks to repay its copy",
        json_schema_extra=_POLYHEDRAL,
    )
    contraction_tile_rows: int = Field(
        default=384,
        ge=1,
        description="rows of a contraction's tile for the micro-kernels (polyflow/schedule/"
        "tiling.py says how these three were measured)",
        json_schema_extra=_POLYHEDRAL,
    )
    contraction_tile_columns: int = Field(
        default=64,
        ge=1,
        description="columns of a contraction's tile for the micro-kernels",
        json_schema_extra=_POLYHEDRAL,
    )
    contraction_tile_depth_bytes: int = Field(
        default=1024,
        ge=1,
        description="depth of a contraction's tile, in bytes of its element type",
        json_schema_extra=_POLYHEDRAL,
    )
    wavefront_block: int = Field(
        default=2,
        ge=1,
        description="tiles per dimension of the blocks a wavefront runs in parallel (along "
        "the parallel loop of a 3-D stencil, whose rows stay whole, single tiles)",
        json_schema_extra=_POLYHEDRAL,
    )
    isl_max_operations: int = Field(
        default=1_000_000,
        ge=0,
        description="the base isl operation budget (roughly one per microsecond here); each isl "
        "step of the polyhedral stage gets a multiple of it (dependences 0.5x, scheduling 5x, "
        "tiling 2x, AST 2x, ...; polyflow/poly/budget.py), and a region whose step runs "
        "out falls back to a cheaper analysis or keeps its code; 0: unbounded",
        json_schema_extra=_POLYHEDRAL,
    )
    compile_timeout: float | None = Field(
        default=None,
        gt=0,
        description="seconds the polyhedral stage may spend on one function (a last resort "
        "where isl's operation counts bound the time too loosely); a function past it keeps "
        "its raised code, with a warning, and the result is never stored in the compile cache",
        json_schema_extra=_POLYHEDRAL,
    )
    threads: int | None = Field(
        default=None,
        ge=1,
        description="OpenMP threads every parallel loop runs with (None: decided when the "
        "program runs, by OMP_NUM_THREADS, else one per core)",
        json_schema_extra=_POLYHEDRAL,
    )
    min_parallel_trip: int = Field(
        default=8,
        ge=1,
        description="do not parallelize loops known to run fewer iterations than this",
        json_schema_extra=_POLYHEDRAL,
    )
    min_parallel_work: int = Field(
        default=8192,  # schedule/parallelize.py's MIN_PARALLEL_WORK
        ge=0,
        description="do not parallelize a loop nest known to run fewer innermost iterations "
        "than this in all (forking and joining the threads would cost more), nor one forked "
        "on each of many outer iterations that runs fewer than 8 times this; a nest whose "
        "count is known only when it runs counts it first, and runs sequentially below this "
        "(0: no such check)",
        json_schema_extra=_POLYHEDRAL,
    )
    tuned: bool = Field(
        default=True,
        description="use the options `polyflow tune` found best for this kernel on this machine, "
        "where the tuning database (POLYFLOW_TUNING_DB, else next to the compile cache) holds "
        "them; the report says so. --no-tuned: the options as given",
        json_schema_extra=_POLYHEDRAL,
    )
    # ----- the GPU (target "cuda"; see polyflow/gpu_map)
    block: tuple[int, ...] | None = Field(
        default=None,
        description="threads per block along x, y, z for the GPU kernels (None: 256; 32,8; "
        "32,4,2 by the depth of the mapped loop nest, shrunk to smaller loops)",
        json_schema_extra=_cli(metavar="X[,Y[,Z]]", group=_GPU),
    )
    grid: tuple[int, ...] | None = Field(
        default=None,
        description="at most this many blocks along x, y, z (None: as many as the loops need, "
        "up to CUDA's limits); blocks then loop over the rest",
        json_schema_extra=_cli(metavar="X[,Y[,Z]]", group=_GPU),
    )
    gpu_register_tile: tuple[int, ...] | None = Field(
        default=None,
        description="points each GPU thread computes along x, y of a reduction's band, its "
        "partial sums in registers and each value it loads serving them all (None: 4,4; 4,2; "
        "2,2; 2,1, the first that leaves a wave of blocks; 1: one point)",
        json_schema_extra=_cli(metavar="X[,Y]", group=_GPU),
    )
    gpu_arch: str = Field(
        default="sm_90",
        description="the GPU architecture PTX is generated for (sm_XY, e.g. sm_80, sm_90)",
        json_schema_extra=_cli(metavar="SM", group=_GPU),
    )
    shared_memory: int = Field(
        default=48 * 1024,
        ge=0,
        le=228 * 1024,
        description="bytes of shared memory a GPU kernel may use per block for tiles of arrays "
        "its threads read with reuse (0: no promotion to shared memory)",
        json_schema_extra=_cli(metavar="BYTES", group=_GPU),
    )
    gpu_emulate: bool = Field(
        default=False,
        description="run the GPU kernels on the CPU instead (blocks and threads as loops, "
        "barriers honoured): checks a CUDA build where there is no GPU",
        json_schema_extra=_cli(group=_GPU),
    )
    gpu_device_arrays: bool = Field(
        default=False,
        description="the compiled functions receive their arrays in GPU memory (the Python "
        "API's CUDA callables): all their memory work runs on the GPU, a function without a "
        "parallel loop as one single-thread kernel",
        json_schema_extra=_cli(cli=False),
    )
    grad: tuple[str, ...] | None = Field(
        default=None,
        description="differentiate function NAME in reverse mode: it gets NAME_grad, each "
        "active argument followed by its shadow (Enzyme's convention), the seed of a float "
        "result last; ':a,b' names the active arguments (default: every float array and "
        "float scalar); repeat for several functions",
        json_schema_extra=_cli(kind="append", metavar="NAME[:ARG,...]"),
    )
    checkpoint_steps: int | None = Field(
        default=None,
        ge=0,
        description="gradients: a top-level loop whose adjoint would tape every iteration "
        "(a time loop that overwrites its arrays) is checkpointed instead: the forward sweep "
        "snapshots the arrays it writes every K iterations, the adjoint runs each segment "
        "again from its snapshot and tapes only that segment. None: where sizes are known, "
        "the tapes would take 8 MiB or more and it at least halves that, with K near "
        "sqrt(iterations x state / tape per iteration); 0: never; K: every such loop, "
        "segments of K iterations",
        json_schema_extra=_cli(metavar="K"),
    )
    debug_info: bool = Field(
        default=False,
        description="-g: line tables for the functions compiled through MLIR (each instruction "
        "keeps its C line), so that gdb, perf and sanitizers show source lines",
        json_schema_extra=_cli(flags=["-g", "--debug-info"], group=_DEBUGGING),
    )
    debug_locations: bool = Field(
        default=False,
        description="print MLIR stages with each op's source location (loc(\"file.c\":line:col)), "
        "which maps the IR back to source lines",
        json_schema_extra=_cli(group=_DEBUGGING),
    )

    @field_validator("tile_sizes")
    @classmethod
    def _positive_tiles(cls, sizes: tuple[int, ...] | None) -> tuple[int, ...] | None:
        if sizes is not None and (not sizes or min(sizes) <= 0):
            raise ValueError("tile sizes must be one or more positive integers")
        return sizes

    @field_validator("block", "grid")
    @classmethod
    def _three_positive(cls, sizes: tuple[int, ...] | None) -> tuple[int, ...] | None:
        if sizes is None:
            return None
        if not 1 <= len(sizes) <= 3 or min(sizes) <= 0:
            raise ValueError("give one to three positive sizes (x, y, z)")
        return sizes

    @field_validator("gpu_register_tile")
    @classmethod
    def _register_tile(cls, sizes: tuple[int, ...] | None) -> tuple[int, ...] | None:
        if sizes is not None and (not 1 <= len(sizes) <= 2 or not all(1 <= s <= 8 for s in sizes)):
            raise ValueError("give one or two points per thread (x, y), each 1 to 8")
        return sizes

    @field_validator("block")
    @classmethod
    def _cuda_block(cls, sizes: tuple[int, ...] | None) -> tuple[int, ...] | None:
        if sizes is None:
            return None
        threads = 1
        for size in sizes:
            threads *= size
        if threads > 1024 or max(sizes[:2]) > 1024 or (len(sizes) == 3 and sizes[2] > 64):
            shape = ",".join(str(s) for s in sizes)
            raise ValueError(
                f"block {shape} has {threads} threads: a CUDA block has at most 1024 "
                "(and at most 64 along z)"
            )
        return sizes

    @field_validator("grad")
    @classmethod
    def _grad_specs(cls, specs: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if specs is None:
            return None
        for spec in specs:
            if not _GRAD_SPEC.fullmatch(spec):
                raise ValueError(
                    f"'{spec}' is not a function to differentiate: give NAME, or NAME:ARG,... "
                    "naming its active arguments"
                )
        return specs

    @field_validator("gpu_arch")
    @classmethod
    def _known_arch(cls, arch: str) -> str:
        if arch not in GPU_ARCHS:
            raise ValueError(
                f"unknown GPU architecture '{arch}' (known: {', '.join(GPU_ARCHS)})"
            )
        return arch

    @classmethod
    def of(cls, options: Options | Mapping[str, Any] | None) -> Options:
        """`options` as an `Options`: as given, made from a dict of its fields (a ValueError
        names a field that is unknown or out of range), or the defaults for None."""
        if options is None:
            return cls()
        if isinstance(options, Options):
            return options
        if isinstance(options, Mapping):
            return cls(**options)  # pydantic's ValidationError is a ValueError
        raise TypeError(f"options must be an Options or a dict, not {type(options).__name__}")

    @property
    def reassociation(self) -> bool:
        """Whether floating-point arithmetic may be reordered (-fassociative-math or
        -ffast-math)."""
        return self.fast_math or self.associative_math

    @property
    def raising_enabled(self) -> bool:
        """Whether the `affine` stage raises (`raise_affine` and `opt_level >= 1`) or passes
        through."""
        return self.raise_affine and self.opt_level >= 1


# What the TC API (`polyflow.tc.define`, `polyflow tc`) compiles with unless told otherwise: kernels
# are called in this process, so -O3 for this machine.
TC_DEFAULTS: dict[str, Any] = {"opt_level": 3, "march": "native"}
# `polyflow build`: the polyhedral stage unless the user asks for less (-O2: raising and LLVM;
# -O0: the C compiler alone). The library's Options() keeps -O2, whose compile is quicker.
BUILD_DEFAULTS: dict[str, Any] = {"opt_level": 3}
