"""-O3 end to end: OpenMP loops from `schedule-parallelize`, linked with libiomp5, against gcc -O2.

Each program runs with OMP_NUM_THREADS=1 and 2 and prints what gcc -O2's build prints: exactly,
unless a floating-point reduction was parallelized (the build's notes say so), then to a relative
tolerance of 1e-9. Also: the JIT path, the stage's fallback when the pass fails, and the CLI
switches of the -O3 stage.
"""

from __future__ import annotations

import os
import re
import subprocess
import types
from pathlib import Path
from typing import Any

import islpy as isl
import numpy as np
import pytest
from mlir import ir

import polyflow
from bench_polybench import HARNESS_DIR, KERNELS_DIR
from polyflow.cli import options_from_args, parse_args
from polyflow.schedule.parallelize import bounded_trip_count, bounded_work, choose_parallel_loops
from polyflow.toolchain import openmp_library_dir

pytestmark = pytest.mark.skipif(
    openmp_library_dir() is None, reason="the intel-openmp wheel (libiomp5) is not installed"
)

O3 = polyflow.Options(opt_level=3)
REORDERED = "reorders a floating-point"

PROGRAMS = {
    # Parallel outer loops, a reduction inside them, an outer time loop with parallel inner ones.
    "matvec_stencil": """#include <stdio.h>
#define N 200
static double A[N][N], x[N], y[N], u[2][N];
void matvec(int n, double A[N][N], double x[N], double y[N]) {
  for (int i = 0; i < n; i++) {
    y[i] = 0.0;
    for (int j = 0; j < n; j++) y[i] += A[i][j] * x[j];
  }
}
void smooth(int steps, int n, double u[2][N]) {
  for (int t = 0; t < steps; t++)
    for (int i = 1; i < n - 1; i++)
      u[(t + 1) % 2][i] = (u[t % 2][i - 1] + u[t % 2][i] + u[t % 2][i + 1]) / 3.0;
}
int main(void) {
  for (int i = 0; i < N; i++) {
    x[i] = (i % 7) * 0.25;
    u[0][i] = i % 5;
    for (int j = 0; j < N; j++) A[i][j] = ((i * j) % 11) * 0.125 - 0.5;
  }
  matvec(N, A, x, y);
  smooth(10, N, u);
  for (int i = 0; i < N; i += 17) printf("%.17g %.17g\\n", y[i], u[0][i]);
  return 0;
}
""",
    # A float sum over a whole array (a parallel reduction) and an integer one (exact).
    "reductions": """#include <stdio.h>
double total(int n, double *a) {
  double s = 0.0;
  for (int i = 0; i < n; i++) s += a[i] * 0.5;
  return s;
}
long checksum(int n, int a[n]) {
  long s = 3;
  for (int i = 0; i < n; i++) s += (long)a[i] * (i % 13);
  return s;
}
int main(void) {
  static double a[10000];
  static int b[10000];
  for (int i = 0; i < 10000; i++) { a[i] = 1.0 / (i + 1); b[i] = i % 101 - 50; }
  printf("%.17g %ld\\n", total(10000, a), checksum(10000, b));
  return 0;
}
""",
    # Two C pointers may be one array: the copy must not run in parallel (a[i+1] = a[i] chains).
    "aliasing": """#include <stdio.h>
void shift(int n, double *dst, double *src) {
  for (int i = 0; i < n; i++) dst[i + 1] = src[i] * 2.0;
}
int main(void) {
  static double a[1001];
  for (int i = 0; i < 1001; i++) a[i] = i % 3;
  shift(1000, a, a);
  double s = 0.0;
  for (int i = 0; i < 1001; i++) s += a[i] * (i + 1);
  printf("%.17g %.17g %.17g\\n", s, a[1000], a[500]);
  return 0;
}
""",
    # A loop too short to share out and a loop-carried recurrence: both stay sequential.
    "sequential": """#include <stdio.h>
void prefix(int n, double a[4][1000]) {
  for (int r = 0; r < 4; r++)
    for (int i = 1; i < n; i++) a[r][i] += a[r][i - 1];
}
int main(void) {
  static double a[4][1000];
  for (int r = 0; r < 4; r++) for (int i = 0; i < 1000; i++) a[r][i] = (r + i) % 9 * 0.1;
  prefix(1000, a);
  printf("%.17g %.17g\\n", a[0][999], a[3][999]);
  return 0;
}
""",
    # A recurrence along each row whose state is reset per row (deriche's filter): the rows are
    # parallel once the state left after the last row, which nothing reads, is not carried.
    "row_recurrence": """#include <stdio.h>
#define H 64
#define W 300
void filter(int h, int w, double in[H][W], double out[H][W]) {
  double y1, y2, x1;
  for (int i = 0; i < h; i++) {
    y1 = 0.0; y2 = 0.0; x1 = 0.0;
    for (int j = 0; j < w; j++) {
      out[i][j] = 0.5 * in[i][j] + 0.25 * x1 + 0.125 * y1 - 0.0625 * y2;
      x1 = in[i][j];
      y2 = y1;
      y1 = out[i][j];
    }
  }
}
int main(void) {
  static double in[H][W], out[H][W];
  for (int i = 0; i < H; i++) for (int j = 0; j < W; j++) in[i][j] = (i * 7 + j * 3) % 17 * 0.5;
  filter(H, W, in, out);
  for (int i = 0; i < H; i += 9) printf("%.17g %.17g\\n", out[i][W - 1], out[i][W / 2]);
  return 0;
}
""",
}
POLYBENCH = ["gemm", "atax", "jacobi-2d", "covariance", "deriche"]
# ("aliasing": its sized copy runs in parallel; its call, on overlapping pointers, takes the other)
EXPECT_PARALLEL = {"aliasing", "matvec_stencil", "reductions", "row_recurrence", *POLYBENCH}


def _run(exe: Path, threads: int) -> str:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    proc = subprocess.run([str(exe)], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _numbers(text: str) -> list[float]:
    return [float(t) for t in re.findall(r"-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|nan|inf", text)]


def _assert_same_output(ours: str, gcc: str, *, reordered: bool) -> None:
    if not reordered:
        assert ours == gcc
        return
    assert re.sub(r"[-\d.eE+]+", "#", ours) == re.sub(r"[-\d.eE+]+", "#", gcc)
    np.testing.assert_allclose(_numbers(ours), _numbers(gcc), rtol=1e-9, atol=1e-12)


def _build_and_compare(src: Path, tmp_path: Path, flags: list[str], options: polyflow.Options):
    exe = tmp_path / "prog"
    report = polyflow.build_program(src, exe, options=options)
    gcc = tmp_path / "prog.gcc"
    subprocess.run(["gcc", "-O2", *flags, str(src), "-o", str(gcc), "-lm"], check=True)
    expected = _run(gcc, 1)
    reordered = any(REORDERED in warning for warning in report.warnings)
    for threads in (1, 2):
        _assert_same_output(_run(exe, threads), expected, reordered=reordered)
    return report


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_programs_at_o3_match_gcc(name: str, tmp_path: Path) -> None:
    src = tmp_path / f"{name}.c"
    src.write_text(PROGRAMS[name])
    report = _build_and_compare(src, tmp_path, [], O3)
    assert not report.fallbacks, report.fallbacks
    assert not [w for w in report.warnings if "not fully optimized" in w], report.warnings
    assert report.parallel == (name in EXPECT_PARALLEL)


def test_aliasing_pointers_run_sequentially_when_they_overlap(tmp_path: Path) -> None:
    src = tmp_path / "alias.c"
    src.write_text(PROGRAMS["aliasing"])
    out = tmp_path / "alias.mlir"
    polyflow.build_program(src, out, options=O3, emit="affine-opt")
    text = out.read_text()

    def function(name: str) -> str:
        found = re.search(rf"func\.func private @{re.escape(name)}\(.*?\n  \}}", text, re.S)
        assert found is not None, name
        return found.group(0)

    # C pointers: sized at run time; the copy for overlapping ones keeps C's order
    assert "call @shift.sized" in function("shift") and "call @shift.pointers" in function("shift")
    assert "affine.parallel" in function("shift.sized")
    assert "affine.for" in function("shift.pointers")
    assert "affine.parallel" not in function("shift.pointers")


@pytest.mark.parametrize("kernel", POLYBENCH)
def test_polybench_mini_at_o3_matches_gcc(kernel: str, tmp_path: Path) -> None:
    flags = [f"-I{HARNESS_DIR}", "-DMINI_DATASET"]
    # min_parallel_work 0: MINI's loops are too small to fork for; the parallel code is tested
    options = O3.model_copy(
        update={
            "include_dirs": (str(HARNESS_DIR),),
            "defines": ("MINI_DATASET",),
            "min_parallel_work": 0,
        }
    )
    report = _build_and_compare(KERNELS_DIR / f"{kernel}.c", tmp_path, flags, options)
    assert f"kernel_{kernel.replace('-', '_')}" in report.compiled
    assert report.parallel


@pytest.mark.parametrize("kernel", ["lu", "cholesky"])
def test_blocked_factorizations_run_parallel_tiles_and_match_gcc(
    kernel: str, tmp_path: Path
) -> None:
    # MEDIUM: their 1.2 MB matrices are tiled (at MINI they fit in cache and stay untiled)
    flags = [f"-I{HARNESS_DIR}", "-DMEDIUM_DATASET"]
    options = O3.model_copy(
        update={"include_dirs": (str(HARNESS_DIR),), "defines": ("MEDIUM_DATASET",)}
    )
    report = _build_and_compare(KERNELS_DIR / f"{kernel}.c", tmp_path, flags, options)
    assert report.parallel
    assert "polyflow.parallel_tiles" in "".join(report.schedules.values())


def test_index_split_floyd_warshall_runs_parallel_and_matches_gcc(tmp_path: Path) -> None:
    # MEDIUM (N = 500): i and j are split at k, the pieces of i run in parallel
    flags = [f"-I{HARNESS_DIR}", "-DMEDIUM_DATASET"]
    options = O3.model_copy(
        update={"include_dirs": (str(HARNESS_DIR),), "defines": ("MEDIUM_DATASET",)}
    )
    report = _build_and_compare(KERNELS_DIR / "floyd-warshall.c", tmp_path, flags, options)
    assert "kernel_floyd_warshall" in report.parallel_functions
    assert "sequence" in report.schedules["kernel_floyd_warshall"]
    unsplit = options.model_copy(update={"index_split": False})
    report = _build_and_compare(KERNELS_DIR / "floyd-warshall.c", tmp_path, flags, unsplit)
    assert "kernel_floyd_warshall" not in report.parallel_functions


def test_index_split_on_variable_length_arrays_matches_gcc(tmp_path: Path) -> None:
    # int and double (fmin) floyd-warshall on n x n VLAs, next to other functions; untiled (with
    # the arrays' extent unknown, tiling takes the band, and tiled bands are not split)
    src = Path(__file__).parent / "programs" / "floyd_warshall.c"
    report = _build_and_compare(src, tmp_path, [], O3.model_copy(update={"tile": False}))
    for kernel in ("kernel_floyd_warshall", "kernel_floyd_double"):
        assert "sequence" in report.schedules[kernel]
        assert kernel in report.parallel_functions


# seidel-2d at SMALL (115 KB) stays in source order: skewing does not pay off in cache
@pytest.mark.parametrize(
    "kernel,size", [("jacobi-2d", "SMALL"), ("seidel-2d", "MEDIUM"), ("fdtd-2d", "SMALL")]
)
def test_wavefronts_of_stencil_tiles_match_gcc(kernel: str, size: str, tmp_path: Path) -> None:
    flags = [f"-I{HARNESS_DIR}", f"-D{size}_DATASET"]
    options = O3.model_copy(
        update={
            "include_dirs": (str(HARNESS_DIR),),
            "defines": (f"{size}_DATASET",),
            "wavefront": True,
            "min_parallel_work": 0,  # SMALL's wavefront blocks are below the default
        }
    )
    report = _build_and_compare(KERNELS_DIR / f"{kernel}.c", tmp_path, flags, options)
    assert f"kernel_{kernel.replace('-', '_')}" in report.parallel_functions, report.notes


def test_no_parallel_reductions_runs_no_reduction_in_parallel(tmp_path: Path) -> None:
    src = tmp_path / "reductions.c"
    src.write_text(PROGRAMS["reductions"])
    options = O3.model_copy(update={"parallel_reductions": False})
    report = _build_and_compare(src, tmp_path, [], options)  # bit-exact with gcc -O2
    assert not report.parallel and not report.report.select(kind="float-reduction")
    # with -fassociative-math the sequential float sum is reassociated (vectorized), not parallel
    options = options.model_copy(update={"associative_math": True})
    report = polyflow.build_program(src, tmp_path / "assoc", options=options)
    assert not report.parallel
    assert [r.function for r in report.report.select(kind="float-reduction")] == ["total"]


def test_by_default_float_reductions_keep_cs_order(tmp_path: Path) -> None:
    # C's semantics without -ffast-math: the float sum stays sequential and bit-exact with
    # gcc -O2 (_build_and_compare compares exactly), the integer one runs in parallel
    src = tmp_path / "reductions.c"
    src.write_text(PROGRAMS["reductions"])
    report = _build_and_compare(src, tmp_path, [], O3)
    assert report.parallel_functions == ["checksum"]
    assert not any(REORDERED in w for w in report.warnings)


@pytest.mark.parametrize("flag", ["associative_math", "fast_math"])
def test_reassociated_float_sums_warn_and_do_not_depend_on_the_threads(
    flag: str, tmp_path: Path
) -> None:
    src = tmp_path / "reductions.c"
    src.write_text(PROGRAMS["reductions"])
    exe = tmp_path / "prog"
    report = polyflow.build_program(src, exe, options=O3.model_copy(update={flag: True}))
    (warning,) = [w for w in report.warnings if REORDERED in w]
    assert warning.startswith(f"{src}:4:") and "'total'" in warning
    assert sorted(report.parallel_functions) == ["checksum", "total"]
    outputs = {_run(exe, threads) for threads in (1, 2, 3, 4)}
    assert len(outputs) == 1, outputs  # the same bits for every thread count


def test_parallel_only_below_o3_is_off(tmp_path: Path) -> None:
    src = tmp_path / "matvec.c"
    src.write_text(PROGRAMS["matvec_stencil"])
    assert not polyflow.build_program(src, tmp_path / "o2", options=polyflow.Options()).parallel
    off = O3.model_copy(update={"parallel": False})
    assert not polyflow.build_program(src, tmp_path / "seq", options=off).parallel


def test_jit_runs_parallel_loops_and_reductions() -> None:
    source = """
void matvec(int n, double A[n][n], double x[n], double y[n]) {
  for (int i = 0; i < n; i++) {
    y[i] = 0.0;
    for (int j = 0; j < n; j++) y[i] += A[i][j] * x[j];
  }
}
double dot(int n, double *a, double *b) {
  double s = 0.0;
  for (int i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}
"""
    rng = np.random.default_rng(0)
    matvec = polyflow.compile_c(source, "matvec", options=O3)
    assert "affine.parallel" in matvec.mlir("affine-opt")
    n = 150
    A, x, y = rng.random((n, n)), rng.random(n), np.zeros(n)
    matvec(n, A, x, y)
    np.testing.assert_allclose(y, A @ x, rtol=1e-12)

    assert 'reduce ("addf")' not in polyflow.compile_c(source, "dot", options=O3).mlir("affine-opt")
    dot = polyflow.compile_c(source, "dot", options=O3.model_copy(update={"associative_math": True}))
    assert 'reduce ("addf")' in dot.mlir("affine-opt")
    assert any(REORDERED in warning for warning in dot.warnings)
    a, b = rng.random(50_000), rng.random(50_000)
    np.testing.assert_allclose(dot(50_000, a, b), a @ b, rtol=1e-9)


def test_failing_parallelization_keeps_the_sequential_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from polyflow.schedule import parallelize

    def broken(*args: object, **kwargs: object) -> int:
        raise RuntimeError("boom")

    monkeypatch.setattr(parallelize, "parallelize", broken)
    src = tmp_path / "matvec.c"
    src.write_text(PROGRAMS["matvec_stencil"])
    report = _build_and_compare(src, tmp_path, [], O3)
    assert not report.parallel
    assert any("parallelization failed" in w and "boom" in w for w in report.warnings)


def _fake_scheduling(monkeypatch: pytest.MonkeyPatch, **overrides: Any) -> None:
    """Stand-ins for the scheduling steps: one empty scop per function, a one-band schedule,
    a code generator that changes nothing (the orchestration is under test, not the steps)."""
    import polyflow.schedule as stage

    schedule = isl.Schedule.from_domain(isl.UnionSet("{ S0[i] : 0 <= i < 4 }"))
    deps = types.SimpleNamespace(validity=isl.UnionMap("{ }"))
    steps: dict[str, Any] = {
        "extract_scops": lambda fn, *, expand_scalars: [
            (
                types.SimpleNamespace(statements=(), arrays={}),
                types.SimpleNamespace(arrays={}, ops=(fn,)),
            )
        ],
        "compute_dependences": lambda scop, **_: deps,
        "schedule_scop": lambda scop, deps, *, options, **_: schedule,
        "check_schedule_legal": lambda schedule, validity: True,
        "tile_schedule": lambda schedule, **_: schedule,
        "describe_schedule": str,
        "generate": lambda region, scop, schedule, dependences, **_: None,
    }
    for name, value in {**steps, **overrides}.items():
        monkeypatch.setattr(stage, name, value)


def _matvec(tmp_path: Path) -> Path:
    src = tmp_path / "matvec.c"
    src.write_text(PROGRAMS["matvec_stencil"])
    return src


NO_SPLIT = O3.model_copy(update={"split": False})


def test_stage_records_schedule_trees(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_scheduling(monkeypatch)
    report = _build_and_compare(_matvec(tmp_path), tmp_path, [], NO_SPLIT)
    assert report.parallel and set(report.schedules) == {"matvec", "smooth"}
    assert report.schedules["matvec"].startswith("# scop 0\n")
    assert not [n for n in report.notes if "not available" in n], report.notes
    polyflow.build_program(_matvec(tmp_path), tmp_path / "s.txt", options=NO_SPLIT, emit="schedule")
    assert "# function smooth\n# scop 0\n" in (tmp_path / "s.txt").read_text()


def test_failing_code_generation_keeps_the_raised_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(
        region: object, scop: object, schedule: object, dependences: object, **_: object
    ) -> None:
        raise RuntimeError("codegen bug")

    _fake_scheduling(monkeypatch, generate=broken)
    report = _build_and_compare(_matvec(tmp_path), tmp_path, [], NO_SPLIT)
    assert any("code generation failed" in w and "codegen bug" in w for w in report.warnings)
    assert report.parallel and not report.schedules  # still parallelized, from the raised code


def test_unschedulable_scop_keeps_its_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_schedule(scop: object, deps: object, *, options: object, **_: object) -> None:
        raise ValueError("isl gave up")

    _fake_scheduling(monkeypatch, schedule_scop=no_schedule)
    report = _build_and_compare(_matvec(tmp_path), tmp_path, [], NO_SPLIT)
    assert not [w for w in report.warnings if "not fully optimized" in w], report.warnings
    assert "matvec: scop 0: source order kept: ValueError: isl gave up" in report.notes
    assert report.parallel and not report.schedules


def test_emit_schedule_and_affine_opt(tmp_path: Path) -> None:
    src = tmp_path / "matvec.c"
    src.write_text(PROGRAMS["matvec_stencil"])
    polyflow.build_program(src, tmp_path / "out.mlir", options=O3, emit="affine-opt")
    assert "affine.parallel" in (tmp_path / "out.mlir").read_text()
    polyflow.build_program(src, tmp_path / "out.txt", options=O3, emit="schedule")
    assert (tmp_path / "out.txt").read_text().startswith("#")


def test_cli_switches_parse_into_options() -> None:
    options = options_from_args(parse_args(["build", "k.c", "-O3"]))
    assert options.opt_level == 3 and options.schedule
    assert not options_from_args(parse_args(["build", "k.c", "-O3", "--no-schedule"])).schedule
    assert options.tile and options.split and options.parallel
    assert options.parallel_reductions and options.tile_sizes is None and options.wavefront
    assert not options_from_args(parse_args(["build", "k.c", "-O3", "--no-wavefront"])).wavefront
    assert options.index_split
    assert not options_from_args(
        parse_args(["build", "k.c", "-O3", "--no-index-split"])
    ).index_split
    assert options.micro_kernels
    assert not options_from_args(
        parse_args(["build", "k.c", "-O3", "--no-micro-kernels"])
    ).micro_kernels
    options = options_from_args(
        parse_args(
            [
                "build",
                "k.c",
                "-O3",
                "--no-tile",
                "--no-split",
                "--no-parallel",
                "--no-parallel-reductions",
                "--tile-sizes",
                "32,32,8",
                "--schedule-preset",
                "feautrier",
                "--fusion",
                "max",
                "--min-parallel-trip",
                "4",
                "--emit=schedule",
            ]
        )
    )
    assert not (options.tile or options.split or options.parallel or options.parallel_reductions)
    assert options.tile_sizes == (32, 32, 8)
    assert options.schedule_preset == "feautrier" and options.fusion == "max"
    assert options.min_parallel_trip == 4
    assert parse_args(["build", "k.c", "--emit=affine-opt"]).emit == "affine-opt"
    assert not options_from_args(parse_args(["build", "k.c", "--no-schedule"])).schedule


@pytest.mark.parametrize("bad", ["32,x", "0,8", ""])
def test_cli_rejects_bad_tile_sizes(bad: str) -> None:
    with pytest.raises(SystemExit):
        parse_args(["build", "k.c", "--tile-sizes", bad])


TILE_NEST = """
func.func @tiles(%n: index, %A: memref<?xf64>) {
  affine.for %t = 0 to %n step 32 {
    affine.for %i = affine_map<(d0) -> (d0)>(%t) to min affine_map<(d0)[s0] -> (d0 + 32, s0)>(%t)[%n] {
      affine.for %j = affine_map<(d0) -> (d0 floordiv 2)>(%i) to affine_map<(d0) -> (d0 floordiv 2 + 8)>(%i) step 3 {
        %x = affine.load %A[%j] : memref<?xf64>
        affine.store %x, %A[%i] : memref<?xf64>
      }
    }
  }
  return
}
"""


def test_bounded_work_sees_through_tile_bounds() -> None:
    with ir.Context():
        module = ir.Module.parse(TILE_NEST)
        fn = module.body.operations[0].operation
        tile = fn.regions[0].blocks[0].operations[0].operation
        point = tile.regions[0].blocks[0].operations[0].operation
        inner = point.regions[0].blocks[0].operations[0].operation
        assert bounded_trip_count(tile) is None  # 0 to %n
        assert bounded_trip_count(point) == 32  # %t to min(%t + 32, %n)
        assert bounded_trip_count(inner) == 3  # 8 values, step 3
        assert bounded_work(point) == 96 and bounded_work(tile) is None


# A row loop that upstream's analysis sees carrying A[i - 1] but that claims to be independent
# (as isl's mark would), around a column loop: only the selection logic is under test here.
CLAIMED_INDEPENDENT = """
func.func @f(%A: memref<64x8192xf64>) {
  affine.for %i = 1 to 64 {
    affine.for %r = 0 to REPEAT {
      affine.for %j = 0 to 8192 {
        %v = affine.load %A[%i - 1, %j] : memref<64x8192xf64>
        affine.store %v, %A[%i, %j] : memref<64x8192xf64>
      }
    }
  } {polyflow.independent}
  return
}
"""


@pytest.mark.parametrize(("repeat", "outer_chosen"), [(1, True), (100, False)])
def test_isl_independent_loops_only_replace_parallel_loops_inside_them(
    repeat: int, outer_chosen: bool
) -> None:
    # With 63 x 1 outer iterations the column loop may fork: the marked row loop takes its
    # place. With 63 x 100 it may not, and then the marked loop adds no parallelism either.
    with ir.Context():
        module = ir.Module.parse(CLAIMED_INDEPENDENT.replace("REPEAT", str(repeat)))
        fn = module.body.operations[0].operation
        rows = fn.regions[0].blocks[0].operations[0].operation
        chosen = choose_parallel_loops(fn, parallel_reductions=True, min_trip=8)
        assert [loop for loop, _ in chosen] == ([rows] if outer_chosen else [])


# doitgen's shape: for each (r, q), tiles of p over a row of 160 (5 tiles of 32 columns, each
# summing over 160 rows), the sum kept in one shared row, so only the tile loop is parallel.
REPEATED_TILES = """
func.func @f(%nr: index, %nq: index, %np: index, %A: memref<150x140x160xf64>,
             %C: memref<160x160xf64>, %sum: memref<160xf64>) {
  affine.for %r = 0 to %nr {
    affine.for %q = 0 to %nq {
      affine.for %pt = 0 to %np step 32 {
        affine.for %s = 0 to %np {
          affine.for %p = affine_map<(d0) -> (d0)>(%pt) to min affine_map<(d0)[s0] -> (d0 + 32, s0)>(%pt)[%np] {
            %a = affine.load %A[%r, %q, %s] : memref<150x140x160xf64>
            %c = affine.load %C[%s, %p] : memref<160x160xf64>
            %m = arith.mulf %a, %c : f64
            %o = affine.load %sum[%p] : memref<160xf64>
            %n = arith.addf %o, %m : f64
            affine.store %n, %sum[%p] : memref<160xf64>
          }
        }
      }
      affine.for %p = 0 to %np {
        %v = affine.load %sum[%p] : memref<160xf64>
        affine.store %v, %A[%r, %q, %p] : memref<150x140x160xf64>
      }
    }
  }
  return
}
"""


def test_a_small_nest_forked_on_each_outer_iteration_stays_sequential() -> None:
    """doitgen's column tiles (5 of them, 25 600 iterations per fork, forked 21 000 times) ran
    40% slower on two threads than on one: a nest that small inside sequential loops is not
    forked; the tile loop's trips come from its point loop's array extent."""
    with ir.Context():
        module = ir.Module.parse(REPEATED_TILES)
        fn = module.body.operations[0].operation
        rows = fn.regions[0].blocks[0].operations[0].operation
        tiles = rows.regions[0].blocks[0].operations[0].operation.regions[0].blocks[0]
        tile_loop = tiles.operations[0].operation
        assert bounded_work(tile_loop) == 5 * 160 * 32
        kept: list[tuple[ir.Operation, str]] = []
        chosen = choose_parallel_loops(
            fn, parallel_reductions=True, min_trip=8, kept_sequential=kept
        )
        assert chosen == []
        reasons = [reason for _, reason in kept]
        assert any("forked on each of more than 64 iterations" in r for r in reasons), reasons
        # forked 4 times only (the loops around it run twice each), the same nest is parallel
        once = ir.Module.parse(
            REPEATED_TILES.replace("%r = 0 to %nr", "%r = 0 to 2").replace(
                "%q = 0 to %nq", "%q = 0 to 2"
            )
        )
        fn = once.body.operations[0].operation
        rows = fn.regions[0].blocks[0].operations[0].operation
        tiles = rows.regions[0].blocks[0].operations[0].operation.regions[0].blocks[0]
        chosen = choose_parallel_loops(fn, parallel_reductions=True, min_trip=1)
        assert [loop for loop, _ in chosen] == [tiles.operations[0].operation]
