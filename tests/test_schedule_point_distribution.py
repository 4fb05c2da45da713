"""`Options.point_distribution` (polyflow/schedule/tiling.py, `_distribute_innermost_point_loop`):
in a time-tiled stencil of several statements, the innermost point loop runs once per
statement, so each is a plain sweep LLVM vectorizes. Programs print gcc -O2's digits with it
on and off, on 1 and 2 threads, at sizes that are not multiples of a tile and smaller than one;
where a later statement feeds an earlier one at the same outer point, nothing is distributed."""

from __future__ import annotations

from pathlib import Path

import pytest
from difftest import check_program_against_gcc, tiled_bands

import polyflow
from polyflow.options import Options

JACOBI_2D = """// polyflow: compiled=jacobi
#include <stdio.h>
#define N 203
static double A[N][N], B[N][N];
static void jacobi(int steps, int n) {
  for (int t = 0; t < steps; t++) {
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++)
        B[i][j] = 0.2 * (A[i][j] + A[i][j - 1] + A[i][j + 1] + A[i + 1][j] + A[i - 1][j]);
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++)
        A[i][j] = 0.2 * (B[i][j] + B[i][j - 1] + B[i][j + 1] + B[i + 1][j] + B[i - 1][j]);
  }
}
int main(void) {
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {
      A[i][j] = ((double)i * (j + 2) + 2) / N;
      B[i][j] = ((double)i * (j + 3) + 3) / N;
    }
  jacobi(STEPS, SIZE);
  for (int i = 0; i < N; i++)
    for (int j = i % 5; j < N; j += 5) printf("%.17g\\n", A[i][j]);
  return 0;
}
"""

FDTD_2D = """// polyflow: compiled=fdtd
#include <stdio.h>
#define NX 123
#define NY 131
static double ex[NX][NY], ey[NX][NY], hz[NX][NY], fict[40];
static void fdtd(int steps) {
  for (int t = 0; t < steps; t++) {
    for (int j = 0; j < NY; j++) ey[0][j] = fict[t];
    for (int i = 1; i < NX; i++)
      for (int j = 0; j < NY; j++) ey[i][j] = ey[i][j] - 0.5 * (hz[i][j] - hz[i - 1][j]);
    for (int i = 0; i < NX; i++)
      for (int j = 1; j < NY; j++) ex[i][j] = ex[i][j] - 0.5 * (hz[i][j] - hz[i][j - 1]);
    for (int i = 0; i < NX - 1; i++)
      for (int j = 0; j < NY - 1; j++)
        hz[i][j] = hz[i][j] - 0.7 * (ex[i][j + 1] - ex[i][j] + ey[i + 1][j] - ey[i][j]);
  }
}
int main(void) {
  for (int t = 0; t < 40; t++) fict[t] = t;
  for (int i = 0; i < NX; i++)
    for (int j = 0; j < NY; j++) {
      ex[i][j] = ((double)i * (j + 1)) / NX;
      ey[i][j] = ((double)i * (j + 2)) / NY;
      hz[i][j] = ((double)i * (j + 3)) / NX;
    }
  fdtd(37);
  for (int i = 0; i < NX; i++)
    for (int j = i % 4; j < NY; j += 4) printf("%.17g %.17g\\n", ex[i][j], hz[i][j]);
  return 0;
}
"""

HEAT_3D = """// polyflow: compiled=heat
#include <stdio.h>
#define N 21
static double A[N][N][N], B[N][N][N];
static void heat(int steps) {
  for (int t = 1; t <= steps; t++) {
    for (int i = 1; i < N - 1; i++)
      for (int j = 1; j < N - 1; j++)
        for (int k = 1; k < N - 1; k++)
          B[i][j][k] = 0.125 * (A[i + 1][j][k] - 2.0 * A[i][j][k] + A[i - 1][j][k])
                     + 0.125 * (A[i][j + 1][k] - 2.0 * A[i][j][k] + A[i][j - 1][k])
                     + 0.125 * (A[i][j][k + 1] - 2.0 * A[i][j][k] + A[i][j][k - 1]) + A[i][j][k];
    for (int i = 1; i < N - 1; i++)
      for (int j = 1; j < N - 1; j++)
        for (int k = 1; k < N - 1; k++)
          A[i][j][k] = 0.125 * (B[i + 1][j][k] - 2.0 * B[i][j][k] + B[i - 1][j][k])
                     + 0.125 * (B[i][j + 1][k] - 2.0 * B[i][j][k] + B[i][j - 1][k])
                     + 0.125 * (B[i][j][k + 1] - 2.0 * B[i][j][k] + B[i][j][k - 1]) + B[i][j][k];
  }
}
int main(void) {
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      for (int k = 0; k < N; k++) A[i][j][k] = B[i][j][k] = (double)(i + j + (N - k)) * 10 / N;
  heat(23);
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      for (int k = 0; k < N; k++) printf("%.17g\\n", A[i][j][k]);
  return 0;
}
"""

# S0 at j reads what S1 wrote at j - 1 in the same t and i: one loop per statement would read
# it before it is written, so the band keeps its statements together.
FEEDBACK = """// polyflow: compiled=feedback
#include <stdio.h>
#define N 201
static double A[N][N], B[N][N];
static void feedback(int steps) {
  for (int t = 0; t < steps; t++)
    for (int i = 0; i < N; i++)
      for (int j = 1; j < N; j++) {
        A[i][j] = 0.5 * A[i][j] + 0.25 * B[i][j - 1];
        B[i][j] = 0.5 * B[i][j] + 0.25 * A[i][j];
      }
}
int main(void) {
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {
      A[i][j] = (i * 3 + j) % 7;
      B[i][j] = (i + 5 * j) % 11;
    }
  feedback(30);
  for (int i = 0; i < N; i++)
    for (int j = i % 5; j < N; j += 5) printf("%.17g %.17g\\n", A[i][j], B[i][j]);
  return 0;
}
"""



# The arrays are just over the footprint below which a stencil keeps its source order (256 KiB);
# there the default sizes would leave it untiled: the tests give sizes (odd ones: partial tiles
# everywhere), and 32 where the grid is smaller than a tile.
TILES = (5, 7, 9)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(
    ("name", "program", "tiles"),
    [
        ("jacobi_odd", JACOBI_2D.replace("STEPS", "29").replace("SIZE", "N"), TILES),
        ("jacobi_small", JACOBI_2D.replace("STEPS", "5").replace("SIZE", "20"), (32,)),
        ("fdtd", FDTD_2D, TILES),
        ("heat", HEAT_3D, (4, 6, 5, 8)),
        ("feedback", FEEDBACK, TILES),
    ],
)
def test_stencils_print_gccs_digits(
    tmp_path: Path, name: str, program: str, tiles: tuple[int, ...], threads: int
) -> None:
    src = tmp_path / f"{name}.c"
    src.write_text(program)
    for distribute in (True, False):
        options = Options(
            opt_level=3, threads=threads, tile_sizes=tiles, point_distribution=distribute
        )
        check_program_against_gcc(src, tmp_path / f"run-{distribute}", options)


@pytest.mark.parametrize(
    ("name", "program", "expected"),
    [
        ("jacobi", JACOBI_2D.replace("STEPS", "29").replace("SIZE", "N"), True),
        ("fdtd", FDTD_2D, True),
        ("feedback", FEEDBACK, False),
    ],
)
def test_the_report_says_where_the_innermost_loop_runs_per_statement(
    tmp_path: Path, name: str, program: str, expected: bool
) -> None:
    src = tmp_path / f"{name}.c"
    src.write_text(program)
    built = polyflow.build_program(
        src, tmp_path / f"{name}.mlir", options=Options(opt_level=3, tile_sizes=TILES), emit="affine-opt"
    )
    (band,) = [data for data in tiled_bands(built) if len(data["sizes"]) >= 3]  # type: ignore[arg-type]
    assert band["distributed"] is expected
    messages = [r.message for r in built.report.select(kind="tiled")]
    assert any("innermost loop per statement" in m for m in messages) is expected
    off = polyflow.build_program(
        src,
        tmp_path / f"{name}-off.mlir",
        options=Options(opt_level=3, tile_sizes=TILES, point_distribution=False),
        emit="affine-opt",
    )
    assert not any(data["distributed"] for data in tiled_bands(off))


def test_each_statement_gets_its_own_innermost_loop(tmp_path: Path) -> None:
    src = tmp_path / "jacobi.c"
    src.write_text(JACOBI_2D.replace("STEPS", "29").replace("SIZE", "N"))
    innermost = {}
    for distribute in (True, False):
        out = tmp_path / f"jacobi-{distribute}.mlir"
        polyflow.build_program(
            src,
            out,
            options=Options(
                opt_level=3, parallel=False, tile_sizes=TILES, point_distribution=distribute
            ),
            emit="affine-opt",
        )
        innermost[distribute] = _stores_per_innermost_loop(out.read_text(), "jacobi.affine")
    assert innermost[False] and max(innermost[False]) == 2  # both statements in one loop
    assert innermost[True] and max(innermost[True]) == 1


def _stores_per_innermost_loop(text: str, function: str) -> list[int]:
    """For each `affine.for` of `function` with no loop inside, the stores it holds."""
    from mlir import ir

    from polyflow.ir.contexts import new_context

    loops = ("affine.for", "affine.parallel", "scf.for", "scf.parallel")
    with new_context():
        module = ir.Module.parse(text)
        (fn,) = [
            op.operation
            for op in module.body.operations
            if op.operation.name == "func.func"
            and ir.StringAttr(op.operation.attributes["sym_name"]).value == function
        ]
        found: list[int] = []

        def visit(op: ir.Operation) -> ir.WalkResult:
            if op.name == "affine.for":
                inner, stores = [], []

                def look(o: ir.Operation) -> ir.WalkResult:
                    if o != op and o.name in loops:
                        inner.append(o)
                    elif o.name == "affine.store":
                        stores.append(o)
                    return ir.WalkResult.ADVANCE

                op.walk(look)
                if not inner and stores:
                    found.append(len(stores))
            return ir.WalkResult.ADVANCE

        fn.walk(visit)
    return found


def test_the_vector_loop_of_a_distributed_stencil_gets_long_tiles(tmp_path: Path) -> None:
    from polyflow.schedule.tiling import MAX_STENCIL_ROW_TILE, stencil_row_tile
    from polyflow.target import GENERIC_CACHES, Caches

    zen4 = Caches(l1_data=32 * 1024, l2=1024 * 1024, line=64)
    assert stencil_row_tile(32, 8, zen4) == 256  # rows of 2 KiB at most
    assert stencil_row_tile(32, 4, zen4) == 512
    assert stencil_row_tile(32, 8, GENERIC_CACHES) == 256  # 32 x 256 x 8 B: an eighth of 512 KiB
    assert stencil_row_tile(32, 8, Caches(l1_data=32 * 1024, l2=256 * 1024, line=64)) == 128
    assert stencil_row_tile(8, 1, zen4) == MAX_STENCIL_ROW_TILE
    sapphire_rapids = Caches(l1_data=48 * 1024, l2=2048 * 1024, line=64)
    assert stencil_row_tile(32, 8, sapphire_rapids) == 512  # 4 KiB rows with a 2 MiB L2
    src = tmp_path / "jacobi.c"
    src.write_text(JACOBI_2D.replace("STEPS", "29").replace("SIZE", "N"))
    sizes = {}
    for distribute in (True, False):
        built = polyflow.build_program(
            src,
            tmp_path / f"jacobi-{distribute}.mlir",
            # interleave off: without distribution it would lengthen the row tiles instead
            options=Options(opt_level=3, point_distribution=distribute, interleave=False),
            emit="affine-opt",
        )
        (band,) = tiled_bands(built)
        sizes[distribute] = band["sizes"]
    assert sizes[True] == [32, 32, stencil_row_tile(32, 8, GENERIC_CACHES)]
    assert sizes[False] == [32, 32, 32]
    check_program_against_gcc(src, tmp_path / "run", Options(opt_level=3))


def test_statements_run_in_source_order_past_nine() -> None:
    import islpy as isl

    from polyflow.schedule.tiling import _statement_number

    ctx = isl.Context()
    names = ["S10", "S2", "S0", "S9"]
    ordered = sorted(
        (isl.Set.read_from_str(ctx, f"{{ {n}[i] : 0 <= i < 3 }}") for n in names),
        key=_statement_number,
    )
    assert [s.get_tuple_name() for s in ordered] == ["S0", "S2", "S9", "S10"]
