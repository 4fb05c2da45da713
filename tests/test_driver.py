"""The build driver: splicing compiled functions into the C program, trampolines back, fallbacks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import polyflow
from polyflow.drivers.c_splice import find_function_body


def build_and_run(
    tmp_path: Path, source: str
) -> tuple[polyflow.drivers.build.BuildReport, str, str]:  # type: ignore[name-defined]
    src = tmp_path / "prog.c"
    src.write_text(source)
    report = polyflow.build_program(src, tmp_path / "prog")
    gcc = tmp_path / "prog.gcc"
    subprocess.run(["gcc", "-O2", str(src), "-o", str(gcc), "-lm"], check=True)
    ours = subprocess.run(
        [str(tmp_path / "prog")], capture_output=True, text=True, check=True
    ).stdout
    theirs = subprocess.run([str(gcc)], capture_output=True, text=True, check=True).stdout
    return report, ours, theirs


def test_compiled_code_calls_static_c_function_with_arrays(tmp_path: Path) -> None:
    source = """#include <stdio.h>
static double pick(int k, double *row, int n) {
  switch (k % 3) { case 0: return row[0]; case 1: return row[n - 1]; default: return row[n / 2]; }
}
void kernel(int n, double A[n][n], double *out) {
  for (int i = 0; i < n; i++) out[i] = pick(i, A[0], n) + pick(i + 1, out, n);
}
int main(void) {
  double A[4][4], out[4] = {1, 2, 3, 4};
  for (int i = 0; i < 4; i++) for (int j = 0; j < 4; j++) A[i][j] = i * 4 + j;
  kernel(4, A, out);
  printf("%g %g %g %g\\n", out[0], out[1], out[2], out[3]);
  return 0;
}
"""
    report, ours, theirs = build_and_run(tmp_path, source)
    # `A[0]` (a row) is not an array variable: kernel stays with the C compiler, and says why.
    assert "kernel" in report.fallbacks and ours == theirs
    report, ours, theirs = build_and_run(
        tmp_path, source.replace("pick(i, A[0], n)", "pick(i, out, n)")
    )
    assert report.compiled == ["kernel"] and report.fallbacks.keys() == {"pick"}
    assert ours == theirs


def test_function_made_by_a_macro_is_compiled_from_the_preprocessed_unit(tmp_path: Path) -> None:
    source = """#include <stdio.h>
#define MAKE_SCALE(name, f) void name(int n, double *a) { for (int i = 0; i < n; i++) a[i] *= f; }
MAKE_SCALE(triple, 3.0)
void twice(int n, double *a) { for (int i = 0; i < n; i++) a[i] *= 2.0; }
int main(void) { double a[3] = {1, 2, 3}; triple(3, a); twice(3, a); printf("%g %g %g\\n", a[0], a[1], a[2]); return 0; }
"""
    report, ours, theirs = build_and_run(tmp_path, source)
    # triple's body is not in the file as written: the splice works on the preprocessed unit
    assert report.compiled == ["triple", "twice"] and not report.fallbacks
    assert ours == theirs == "6 12 18\n"


def test_global_declared_after_its_user(tmp_path: Path) -> None:
    source = """#include <stdio.h>
extern double weights[4];
double apply(int i) { return weights[i] * 2.0; }
double weights[4] = {1, 2, 3, 4};
int main(void) { printf("%g\\n", apply(3)); return 0; }
"""
    report, ours, theirs = build_and_run(tmp_path, source)
    assert ours == theirs == "8\n"
    assert report.compiled == ["apply"]  # the extern declaration makes it visible in time
    # Reached only through a callee, a global may be declared after its (indirect) user.
    transitive = """#include <stdio.h>
double apply(int i);
double outer(int i) { return apply(i) + 1.0; }
double weights[4] = {1, 2, 3, 4};
double apply(int i) { return weights[i] * 2.0; }
int main(void) { printf("%g %g\\n", outer(3), apply(1)); return 0; }
"""
    report, ours, theirs = build_and_run(tmp_path, transitive)
    assert ours == theirs == "9 4\n"
    assert report.compiled == ["apply"]
    assert "it uses 'weights', which is declared after it" in report.fallbacks["outer"]


def test_find_function_body_skips_comments_strings_and_prototypes() -> None:
    source = 'int f(int x);\nint f(int x) /* { */ {\n  const char *s = "}"; // }\n  return x + (s[0] == 0);\n}\n'
    span = find_function_body(source, "f", 2)
    assert span is not None
    assert source[span.open_brace] == "{" and source[span.close_brace] == "}"
    assert source[span.close_brace + 1 :] == "\n"
    assert find_function_body(source, "f", 1) is None  # line 1 holds only the prototype


def test_openmp_functions_names_the_c_functions_that_fork() -> None:
    from polyflow.drivers.objects import openmp_functions

    llvm_ir = """define void @__polyflow_kernel_a(ptr %0) {
  call void (ptr, i32, ptr, ...) @__kmpc_fork_call(ptr @1, i32 1, ptr @kernel_a.affine..omp_par)
  ret void
}
define void @__polyflow_init(ptr %0) {
  ret void
}
define internal void @kernel_a.affine..omp_par(ptr %0) {
  ret void
}
declare void @__kmpc_fork_call(ptr, i32, ptr, ...)
"""
    assert openmp_functions(llvm_ir) == ["kernel_a"]
    assert openmp_functions("") == []


def test_stages_can_be_written_with_their_source_locations(tmp_path: Path) -> None:
    """`--debug-locations`: the IR maps back to source lines (the loop is on line 3)."""
    source = tmp_path / "k.c"
    source.write_text(
        "void kernel(int n, double a[64]) {\n  int i;\n  for (i = 0; i < n; i++)\n"
        "    a[i] = a[i] * 2.0;\n}\n"
    )
    plain, located = tmp_path / "plain.mlir", tmp_path / "located.mlir"
    options = polyflow.Options(opt_level=3)
    polyflow.build_program(source, plain, options=options, emit="affine-opt")
    polyflow.build_program(
        source,
        located,
        options=options.model_copy(update={"debug_locations": True}),
        emit="affine-opt",
    )
    assert "loc(" not in plain.read_text()
    assert f'loc("{source}":3:' in located.read_text()
    cli = subprocess.run(
        [sys.executable, "-m", "polyflow", "build", str(source), "--emit=affine",
         "--debug-locations", "-o", "-"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert f'loc("{source}":4:' in cli.stdout


def test_parallel_executables_run_without_the_virtual_environment(tmp_path: Path) -> None:
    """An -O3 program with OpenMP loops carries its OpenMP runtime: moved elsewhere and run
    with an empty environment it still runs, and it names no library path of this checkout."""
    source = tmp_path / "scale.c"
    source.write_text(
        "#include <stdio.h>\n"
        "void scale(int n, double a[100000]) {\n"
        "  for (int i = 0; i < n; i++) a[i] = 2 * a[i] + i;\n}\n"
        "static double a[100000];\n"
        "int main(void) { scale(100000, a); printf(\"%.1f\\n\", a[99999]); return 0; }\n"
    )
    exe = tmp_path / "built" / "scale"
    exe.parent.mkdir()
    report = polyflow.build_program(source, exe, options=polyflow.Options(opt_level=3))
    assert report.parallel_functions == ["scale"]
    dynamic = subprocess.run(["readelf", "-d", str(exe)], capture_output=True, text=True).stdout
    assert "RUNPATH" not in dynamic and "RPATH" not in dynamic and "libiomp5" not in dynamic
    moved = tmp_path / "elsewhere" / "scale"
    moved.parent.mkdir()
    exe.rename(moved)
    for threads in ("1", "2"):
        run = subprocess.run(
            [str(moved)], capture_output=True, text=True, env={"OMP_NUM_THREADS": threads}
        )
        assert run.returncode == 0 and run.stdout == "99999.0\n", run.stderr


def test_a_spliced_file_that_cc_rejects_is_built_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the file with the compiled bodies cut out is polyflow's; were cc to reject it (as it did
    # `&p->bits` of a bit-field), the file as the user wrote it is compiled by cc alone
    import polyflow.drivers.build as build

    real_splice = build.splice
    monkeypatch.setattr(
        build, "splice", lambda *args, **kwargs: real_splice(*args, **kwargs) + "\n#error cut\n"
    )
    source = """#include <stdio.h>
void scale(int n, double *a) { for (int i = 0; i < n; i++) a[i] *= 3; }
int main(void) { double a[3] = {1, 2, 3}; scale(3, a); printf("%g\\n", a[0] + a[2]); return 0; }
"""
    report, ours, theirs = build_and_run(tmp_path, source)
    assert ours == theirs and report.compiled == []
    assert report.fallbacks["scale"] == "internal error in polyflow's backend"
