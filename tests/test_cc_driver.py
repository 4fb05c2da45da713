"""`polyflow cc` / `polyflow-cc`, a drop-in C compiler: a project of several units, a header
and a static library built with gcc's command line and with make, each program checked
against its gcc -O2 build."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from polyflow.drivers.cc import parse_cc_args

KERN_H = """void scale(int n, double *a, double s);
double dot(int n, const double *a, const double *b);
"""
KERN_C = """#include "kern.h"
void scale(int n, double *a, double s) {
  for (int i = 0; i < n; i++) a[i] *= s;
}
double dot(int n, const double *a, const double *b) {
  double t = 0;
  for (int i = 0; i < n; i++) t += a[i] * b[i];
  return t;
}
"""
MAIN_C = """#include <stdio.h>
#include "kern.h"
static double a[100000], b[100000];
int main(void) {
  for (int i = 0; i < 100000; i++) { a[i] = i % 7; b[i] = (i % 3) * 0.5; }
  scale(100000, a, 2.0);
  printf("%.3f\\n", dot(100000, a, b));
  return 0;
}
"""
MAKEFILE = """CC = {cc}
CFLAGS = -O3 -MD
prog: main.o libkern.a
\t$(CC) -o $@ main.o -L. -lkern
libkern.a: kern.o
\tar rcs $@ $^
-include main.d kern.d
"""


def _cc() -> list[str]:
    return [sys.executable, "-m", "polyflow", "cc"]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for name, text in (("kern.h", KERN_H), ("kern.c", KERN_C), ("main.c", MAIN_C)):
        (tmp_path / name).write_text(text)
    subprocess.run(["gcc", "-O2", "main.c", "kern.c", "-o", "ref"], cwd=tmp_path, check=True)
    return tmp_path


def _run(exe: Path) -> str:
    # an empty environment: the program needs nothing of this checkout at run time
    env = {"OMP_NUM_THREADS": "2"}
    return subprocess.run([str(exe)], capture_output=True, text=True, env=env, check=True).stdout


def test_objects_are_ordinary_objects(project: Path) -> None:
    subprocess.run([*_cc(), "-O3", "-c", "kern.c", "-o", "kern.o"], cwd=project, check=True)
    symbols = subprocess.run(["nm", "kern.o"], cwd=project, capture_output=True, text=True).stdout
    assert " T scale\n" in symbols and " T dot\n" in symbols  # under their own names
    libs = subprocess.run(
        [sys.executable, "-m", "polyflow", "config", "--libs"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    subprocess.run(["gcc", "main.c", "kern.o", "-o", "mixed", *libs], cwd=project, check=True)
    assert _run(project / "mixed") == _run(project / "ref")


def test_several_sources_and_a_static_library(project: Path) -> None:
    subprocess.run([*_cc(), "-O3", "main.c", "kern.c", "-o", "prog"], cwd=project, check=True)
    assert _run(project / "prog") == _run(project / "ref")
    subprocess.run([*_cc(), "-O3", "-c", "main.c", "kern.c"], cwd=project, check=True)
    subprocess.run(["ar", "rcs", "libkern.a", "kern.o"], cwd=project, check=True)
    subprocess.run([*_cc(), "main.o", "-L.", "-lkern", "-o", "fromlib"], cwd=project, check=True)
    assert _run(project / "fromlib") == _run(project / "ref")


def test_a_shared_library_loads_from_python(project: Path) -> None:
    import ctypes

    subprocess.run(
        [*_cc(), "-O3", "-fPIC", "-shared", "kern.c", "-o", "libkern.so"], cwd=project, check=True
    )
    lib = ctypes.CDLL(str(project / "libkern.so"))
    lib.dot.restype = ctypes.c_double
    values = (ctypes.c_double * 4)(1, 2, 3, 4)
    assert lib.dot(4, values, values) == 30.0


def test_make_builds_and_rebuilds_on_a_header_change(project: Path) -> None:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    cc = " ".join(_cc())
    (project / "Makefile").write_text(MAKEFILE.format(cc=cc))
    subprocess.run(["make", "-s"], cwd=project, check=True, capture_output=True)
    assert _run(project / "prog") == _run(project / "ref")
    assert "kern.h" in (project / "kern.d").read_text()  # -MD wrote the dependencies
    os.utime(project / "kern.h", (2e9, 2e9))  # a header newer than every object
    again = subprocess.run(
        ["make", "-n"], cwd=project, check=True, capture_output=True, text=True
    ).stdout
    assert "kern.c" in again and "main.c" in again  # both units include it


def test_modes_polyflow_leaves_to_cc(project: Path) -> None:
    pre = subprocess.run(
        [*_cc(), "-E", "kern.c"], cwd=project, capture_output=True, text=True, check=True
    )
    assert "void scale(int n, double *a, double s)" in pre.stdout
    subprocess.run([*_cc(), "-O0", "-c", "kern.c", "-o", "plain.o"], cwd=project, check=True)
    symbols = subprocess.run(["nm", "plain.o"], cwd=project, capture_output=True, text=True).stdout
    assert "__polyflow_" not in symbols  # -O0: cc alone
    version = subprocess.run(
        [sys.executable, "-m", "polyflow", "--version"], capture_output=True, text=True
    )
    assert version.returncode == 0 and version.stdout.startswith("polyflow ")


def test_the_command_line_is_sorted_as_gcc_reads_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLYFLOW_FLAGS", "--no-schedule")
    cmd = parse_cc_args(
        ["-O3", "-c", "a.c", "-o", "a.o", "-I", "inc", "-DX=1", "-Wall", "-MD", "-MF", "a.d",
         "-lm", "-Wl,-O1", "-march=native", "-ffast-math", "b.o"]
    )  # fmt: skip
    assert cmd.sources == ["a.c"] and cmd.inputs == ["b.o"] and cmd.output == "a.o"
    assert cmd.compile_only and not cmd.cc_only
    assert cmd.polyflow_args == ["-O3", "-Iinc", "-DX=1", "-march=native", "-ffast-math",
                                 "--no-schedule"]  # fmt: skip
    assert cmd.cc_flags == ["-O3", "-Wall", "-march=native", "-ffast-math"]
    assert cmd.link_flags == ["-lm", "-Wl,-O1"]
    assert cmd.dependency_flags == ["-MD", "-MF", "a.d"]
    # POLYFLOW_FLAGS override the build's flags, for polyflow only
    monkeypatch.setenv("POLYFLOW_FLAGS", "-O3")
    under_o2 = parse_cc_args(["-O2", "-c", "a.c"])
    assert under_o2.polyflow_args == ["-O2", "-O3"] and under_o2.cc_flags == ["-O2"]
    monkeypatch.delenv("POLYFLOW_FLAGS")
    # gcc's levels: none is -O0 (cc alone), -Ofast is -O3 -ffast-math, -Og debuggable code
    assert parse_cc_args(["-c", "a.c"]).polyflow_args == ["-O0"]
    assert parse_cc_args(["-Ofast", "-c", "a.c"]).polyflow_args == ["-O3", "-ffast-math"]
    assert parse_cc_args(["-Og", "-c", "a.c"]).polyflow_args == ["-O0"]
    assert parse_cc_args(["-Os", "-c", "a.c"]).cc_flags == ["-Os"]


def test_flags_that_change_what_c_means_leave_the_unit_to_cc(project: Path) -> None:
    built = subprocess.run(
        [*_cc(), "-O3", "-fwrapv", "-c", "kern.c", "-o", "wrapv.o"],
        cwd=project,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "-fwrapv may change what the C means" in built.stderr
    symbols = subprocess.run(["nm", "wrapv.o"], cwd=project, capture_output=True, text=True).stdout
    assert " T scale" in symbols and "__polyflow_" not in symbols
    iso = parse_cc_args(["-O3", "-std=c99", "-c", "kern.c"])
    assert "-ffp-contract=off" in iso.polyflow_args and "-std=c99" in iso.cc_flags
    assert not parse_cc_args(["-O3", "-fPIC", "-c", "kern.c"]).meaning_flags
    # flags that change the sizes of long, pointers or long double
    for flag in ("-m32", "-mx32", "-mlong-double-64", "-mlong-double-128"):
        assert parse_cc_args(["-O3", flag, "-c", "kern.c"]).meaning_flags == [flag]
    assert not parse_cc_args(["-O3", "-m64", "-mavx2", "-c", "kern.c"]).meaning_flags


def test_a_unit_polyflow_cannot_parse_is_cc_s(project: Path) -> None:
    # GNU C polyflow's parser does not read (__typeof__); gcc builds it
    (project / "gnu.c").write_text(
        "int twice(int x) { __typeof__(x) y = x; return y * 2; }\n"
        "void scale(int n, double *a) { for (int i = 0; i < n; i++) a[i] *= twice(1); }\n"
    )
    built = subprocess.run(
        [*_cc(), "-O3", "-c", "gnu.c", "-o", "gnu.o"], cwd=project, capture_output=True, text=True
    )
    assert built.returncode == 0, built.stderr
    assert "polyflow cannot compile this unit" in built.stderr
    symbols = subprocess.run(["nm", "gnu.o"], cwd=project, capture_output=True, text=True).stdout
    assert " T twice" in symbols and " T scale" in symbols
    # C that cc rejects too: cc's error, exit 1
    (project / "bad.c").write_text("int f(void) { return 1 +; }\n")
    bad = subprocess.run(
        [*_cc(), "-O3", "-c", "bad.c"], cwd=project, capture_output=True, text=True
    )
    assert bad.returncode == 1 and "error" in bad.stderr and "Traceback" not in bad.stderr


def test_a_forced_include_leaves_the_command_to_cc() -> None:
    # a header polyflow's parse would not see could change what the compiled functions mean
    assert parse_cc_args(["-O3", "-include", "config.h", "-c", "a.c"]).cc_only
    assert parse_cc_args(["-O3", "-MD", "-MQ", "a.o", "-c", "a.c"]).dependency_flags == [
        "-MD",
        "-MQ",
        "a.o",
    ]


def test_assembly_of_the_whole_unit(project: Path) -> None:
    subprocess.run([*_cc(), "-O3", "-S", "kern.c"], cwd=project, check=True)
    text = (project / "kern.s").read_text()
    assert "\nscale:" in text and "\n__polyflow_scale:" in text  # cc's and llc's parts
    subprocess.run(["gcc", "-c", "kern.s", "-o", "kern.o"], cwd=project, check=True)
    libs = subprocess.run(
        [sys.executable, "-m", "polyflow", "config", "--libs"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    subprocess.run(["gcc", "main.c", "kern.o", "-o", "fromasm", *libs], cwd=project, check=True)
    assert _run(project / "fromasm") == _run(project / "ref")
    # with -g: cc's part carries the debug information, and it stays valid DWARF
    subprocess.run([*_cc(), "-O3", "-g", "-S", "kern.c"], cwd=project, check=True)
    subprocess.run(["gcc", "-c", "kern.s", "-o", "kern.o"], cwd=project, check=True)
    dwarf = subprocess.run(
        ["objdump", "--dwarf=info", "kern.o"], cwd=project, capture_output=True, text=True
    )
    assert dwarf.returncode == 0 and "Warning" not in dwarf.stderr + dwarf.stdout


def test_debug_info_gives_source_lines_in_compiled_functions(project: Path) -> None:
    subprocess.run([*_cc(), "-O2", "-g", "-c", "kern.c", "-o", "kern.o"], cwd=project, check=True)
    lines = subprocess.run(
        ["objdump", "--dwarf=decodedline", "kern.o"], capture_output=True, text=True, cwd=project
    ).stdout
    # the loop body of scale (line 3) and of dot (line 7), in the MLIR-compiled code
    rows = [r.split() for r in lines.splitlines() if r.startswith("kern.c")]
    assert {"3", "7"} <= {r[1] for r in rows if len(r) > 2}
    assert "polyflow-build-" not in lines  # cc's part names the source, not the spliced copy
    if shutil.which("gdb") is None:
        return
    subprocess.run([*_cc(), "-O2", "-g", "main.c", "kern.o", "-o", "dbg"], cwd=project, check=True)
    gdb = subprocess.run(
        ["gdb", "-batch", "-ex", "break kern.c:3", "-ex", "run", "-ex", "bt", "./dbg"],
        cwd=project,
        capture_output=True,
        text=True,
    ).stdout
    assert "kern.c:3" in gdb


OPENMP_C = """#include <stdio.h>
#include <omp.h>
static double a[4096];
void fill(int n, double *x) {
#pragma omp parallel for
  for (int i = 0; i < n; i++) x[i] = i * 0.5;
}
void scale(int n, double *x) {
#pragma GCC ivdep
  for (int i = 0; i < n; i++) x[i] = 3 * x[i] + 1;
}
int main(void) {
  int threads = 0;
  fill(4096, a);
  scale(4096, a);
#pragma omp parallel
  {
#pragma omp atomic
    threads++;
  }
  printf("%.2f %d\\n", a[4095], threads == omp_get_max_threads());
  return 0;
}
"""


def test_openmp_pragmas_stay_with_cc_on_one_runtime(tmp_path: Path) -> None:
    (tmp_path / "omp.c").write_text(OPENMP_C)
    subprocess.run(["gcc", "-O2", "-fopenmp", "omp.c", "-o", "ref"], cwd=tmp_path, check=True)
    built = subprocess.run(
        [*_cc(), "-O3", "-fopenmp", "omp.c", "-o", "prog"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "function 'fill' is left to the C compiler: '#pragma omp parallel for'" in built.stderr
    assert "'scale'" not in built.stderr  # compiled: its ivdep is a hint polyflow reads
    assert _run(tmp_path / "prog") == _run(tmp_path / "ref")
    # gcc's GOMP_* calls run on the runtime polyflow links: one thread pool, no libgomp
    needed = subprocess.run(["ldd", "prog"], cwd=tmp_path, capture_output=True, text=True).stdout
    assert "libgomp" not in needed


def test_pragmas_that_change_the_code_are_never_dropped() -> None:
    from polyflow.frontend.c_pragmas import pragma_verdict

    assert pragma_verdict("omp parallel for reduction(+:s)").verdict == "cc"
    assert pragma_verdict("STDC FP_CONTRACT OFF").verdict == "cc"
    assert pragma_verdict('GCC optimize("O0")').verdict == "cc"
    assert pragma_verdict("pack(push, 1)").verdict == "cc"
    assert pragma_verdict("GCC ivdep").verdict == "note"
    assert pragma_verdict("scop").verdict == "note"
    assert pragma_verdict('GCC diagnostic ignored "-Wall"').verdict == "quiet"
    from polyflow.drivers.sources import c_module
    from polyflow.options import Options

    packed = (
        "#pragma pack(push, 1)\nstruct s { char c; double x; };\n#pragma pack(pop)\n"
        "void scale(int n, double *a) {\n  for (int i = 0; i < n; i++) a[i] *= 2;\n}\n"
    )
    cmod = c_module(packed, "packed.c", Options(opt_level=3))
    assert (
        "scale" in cmod.skipped
        and "pragma pack(push, 1)' at line 1" in cmod.skipped["scale"].reason
    )


def test_calls_to_functions_of_other_units_go_through_trampolines(tmp_path: Path) -> None:
    # scale_all calls weight and report_error, defined in another unit, declared in a header
    files = {
        "lib.h": "double weight(int, double x);\nvoid report_error(int code);\n",
        "lib.c": '#include <stdio.h>\n#include "lib.h"\n'
        "double weight(int i, double x) { return x * (i % 3) + 1.0; }\n"
        'void report_error(int code) { printf("error %d\\n", code); }\n',
        "k.c": '#include "lib.h"\n'
        "double scale_all(int n, double *a) {\n"
        "  double s = 0;\n"
        "  if (n < 0) { report_error(1); return 0; }\n"
        "  for (int i = 0; i < n; i++) { a[i] = a[i] * 2; s += weight(i, a[i]); }\n"
        "  return s;\n}\n"
        # a macro's statement wrapper is no loop: not counted among the unit's loop functions
        "int checked(int n) { do { if (n < 0) return 1; } while (0); return 0; }\n",
        "main.c": "#include <stdio.h>\ndouble scale_all(int n, double *a);\n"
        "int main(void) { double a[1000]; for (int i = 0; i < 1000; i++) a[i] = i * 0.25;\n"
        '  printf("%.6f\\n", scale_all(1000, a)); scale_all(-1, a); return 0; }\n',
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    subprocess.run(["gcc", "-O2", "main.c", "lib.c", "k.c", "-o", "ref"], cwd=tmp_path, check=True)
    report = tmp_path / "units.jsonl"
    built = subprocess.run(
        [*_cc(), "-O3", "main.c", "lib.c", "k.c", "-o", "prog"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "POLYFLOW_CC_REPORT": str(report)},
    )
    assert "scale_all" not in built.stderr  # compiled, not left to cc
    assert _run(tmp_path / "prog") == _run(tmp_path / "ref")
    units = {Path(u["unit"]).name: u for u in map(json.loads, report.read_text().splitlines())}
    assert units["k.c"]["compiled"] == ["checked", "scale_all"]
    assert units["k.c"]["loop_functions"] == ["scale_all"] == units["k.c"]["optimized"]
    # units without loops are cc's at once (the MLIR path is not even started)
    assert units["lib.c"]["status"] == "cc" and units["lib.c"]["reason"] == "no loops"


def test_static_functions_of_the_same_name_in_two_units(tmp_path: Path) -> None:
    # polyflow's entries (__polyflow_work) are local to each object and each assembly file
    for unit in ("a", "b"):
        (tmp_path / f"{unit}.c").write_text(
            "static void work(int n, double *x) { for (int i = 0; i < n; i++) x[i] += 1; }\n"
            f"double run_{unit}(int n, double *x) {{\n"
            "  work(n, x); double s = 0; for (int i = 0; i < n; i++) s += x[i]; return s;\n}\n"
        )
    (tmp_path / "m.c").write_text(
        "#include <stdio.h>\ndouble run_a(int, double *); double run_b(int, double *);\n"
        "int main(void) { double x[10] = {0}; double a = run_a(10, x);\n"
        '  printf("%f %f\\n", a, run_b(10, x)); return 0; }\n'
    )
    subprocess.run(["gcc", "-O2", "m.c", "a.c", "b.c", "-o", "ref"], cwd=tmp_path, check=True)
    for flag, suffix in (("-c", "o"), ("-S", "s")):
        subprocess.run([*_cc(), "-O3", flag, "a.c", "b.c"], cwd=tmp_path, check=True)
        subprocess.run(
            [*_cc(), "m.c", f"a.{suffix}", f"b.{suffix}", "-o", f"prog-{suffix}"],
            cwd=tmp_path,
            check=True,
        )
        assert _run(tmp_path / f"prog-{suffix}") == _run(tmp_path / "ref")


def test_a_polybench_style_harness_in_its_own_unit() -> None:
    # examples/project: harness.c times the kernels of kernels.c, declared in kernels.h
    import tempfile

    project = Path(__file__).resolve().parent.parent / "examples" / "project"
    with tempfile.TemporaryDirectory() as tmp:
        sources = [str(project / "harness.c"), str(project / "kernels.c")]
        subprocess.run(["gcc", "-O2", *sources, "-o", f"{tmp}/ref"], check=True)
        built = subprocess.run(
            [*_cc(), "-O3", *sources, "-o", f"{tmp}/prog"],
            capture_output=True,
            text=True,
            check=True,
        )
        assert "'gemm'" not in built.stderr and "'jacobi_2d'" not in built.stderr

        def checksums(exe: str) -> dict[str, float]:
            out = subprocess.run([exe, "120"], capture_output=True, text=True, check=True).stdout
            return {
                line.split(":")[0]: float(line.split(":")[1])
                for line in out.splitlines()
                if line.startswith("checksum")
            }

        expected, actual = checksums(f"{tmp}/ref"), checksums(f"{tmp}/prog")
        assert expected.keys() == actual.keys() == {"checksum gemm", "checksum jacobi_2d"}
        for key, value in expected.items():
            assert actual[key] == pytest.approx(value, rel=1e-12), key


GOMP_USER_C = """#include <omp.h>
double gomp_sum(int n, const double *x) {
  double s = 0;
#pragma omp parallel for reduction(+:s)
  for (int i = 0; i < n; i++) s += x[i];
  return s;
}
int gomp_threads(void) {
  int t = 0;
#pragma omp parallel
  {
#pragma omp single
    t = omp_get_num_threads();
  }
  return t;
}
"""
COEXIST_PY = """import ctypes, numpy as np
gomp = ctypes.CDLL("./libgomp_user.so")  # libgomp first, as PyTorch's CPU wheels load it
gomp.gomp_sum.restype = ctypes.c_double
x = np.arange(100000, dtype=np.float64)
before = gomp.gomp_sum(len(x), x.ctypes.data_as(ctypes.c_void_p))
kern = ctypes.CDLL("./libscale.so")  # polyflow's parallel loops on libiomp5
a = np.ones((4000, 300))
kern.scale_rows(4000, 300, a.ctypes.data_as(ctypes.c_void_p), ctypes.c_double(3.0))
after = gomp.gomp_sum(len(x), x.ctypes.data_as(ctypes.c_void_p))
print(before == after == 4999950000.0, a.sum() == 3600000.0, gomp.gomp_threads())
"""


def test_a_library_loads_into_a_process_that_runs_libgomp(tmp_path: Path) -> None:
    (tmp_path / "gomp_user.c").write_text(GOMP_USER_C)
    (tmp_path / "scale.c").write_text(
        "void scale_rows(int n, int m, double a[n][m], double s) {\n"
        "  for (int i = 0; i < n; i++) for (int j = 0; j < m; j++) a[i][j] *= s;\n}\n"
    )
    (tmp_path / "coexist.py").write_text(COEXIST_PY)
    subprocess.run(
        ["gcc", "-O2", "-fopenmp", "-shared", "-fPIC", "gomp_user.c", "-o", "libgomp_user.so"],
        cwd=tmp_path,
        check=True,
    )
    subprocess.run(
        [*_cc(), "-O3", "-shared", "-fPIC", "scale.c", "-o", "libscale.so"],
        cwd=tmp_path,
        check=True,
    )
    needed = subprocess.run(["ldd", "libscale.so"], cwd=tmp_path, capture_output=True, text=True)
    assert "libiomp5" in needed.stdout  # it does run parallel loops
    done = subprocess.run(
        [sys.executable, "coexist.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "2"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "2"]  # one setting for both runtimes


def test_polyflow_build_links_several_files(project: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "polyflow", "build", "main.c", "kern.c", "-o", "prog"],
        cwd=project,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert _run(project / "prog") == _run(project / "ref")


CMAKE_LISTS = """cmake_minimum_required(VERSION 3.13)
project(kern C)
set(CMAKE_C_STANDARD 11)
add_library(kern STATIC kern.c)
add_executable(prog main.c)
target_link_libraries(prog kern)
enable_testing()
add_test(NAME prog COMMAND prog)
"""


def test_cmake_builds_with_polyflow_cc(project: Path) -> None:
    # CMake's compiler identification and ABI checks run polyflow-cc; then a library, a program
    # and ctest, with CMAKE_C_STANDARD's -std=gnu11 and the build type's -O3
    if shutil.which("cmake") is None:
        pytest.skip("cmake is not installed (scripts/setup.sh installs it)")
    (project / "CMakeLists.txt").write_text(CMAKE_LISTS)
    (project / "cc.sh").write_text(f'#!/bin/sh\nexec {shlex.join(_cc())} "$@"\n')
    (project / "cc.sh").chmod(0o755)
    build = project / "build"
    configure = subprocess.run(
        ["cmake", "-S", ".", "-B", "build", f"-DCMAKE_C_COMPILER={project / 'cc.sh'}",
         "-DCMAKE_BUILD_TYPE=Release"],
        cwd=project, capture_output=True, text=True,
    )  # fmt: skip
    assert configure.returncode == 0, configure.stdout + configure.stderr
    assert "The C compiler identification is GNU" in configure.stdout
    subprocess.run(["cmake", "--build", "build"], cwd=project, check=True, capture_output=True)
    tests = subprocess.run(["ctest"], cwd=build, capture_output=True, text=True)
    assert tests.returncode == 0 and "100% tests passed" in tests.stdout
    assert _run(build / "prog") == _run(project / "ref")
    symbols = subprocess.run(
        ["nm", str(build / "libkern.a")], capture_output=True, text=True
    ).stdout
    assert " T scale" in symbols and " t __polyflow_scale" in symbols  # compiled, local entry


TEMPLATE_C = """int FUNCTION(vec, scale) (TYPE(vec) * a, const BASE x) {
  const size_t N = a->size;
  const size_t stride = a->stride;
  size_t i;
  for (i = 0; i < N; i++) a->data[i * stride] *= x;
  return 0;
}
BASE FUNCTION(vec, sum) (const BASE *x, int n) {
  BASE s = 0;
  for (int i = 0; i < n; i++) s += x[i];
  return s;
}
"""
INSTANCES_C = """#include <stddef.h>
typedef struct { size_t size; size_t stride; double *data; } vec;
typedef struct { size_t size; size_t stride; float *data; } vec_float;
#define CONCAT2(a,b) a ## _ ## b
#define FUNCTION(dir,name) CONCAT2(dir,name)
#define TYPE(dir) dir
#define BASE double
#include "template.c"
#undef BASE
#undef FUNCTION
#undef TYPE
#define CONCAT3(a,b,c) a ## _ ## b ## _ ## c
#define FUNCTION(dir,name) CONCAT3(dir,float,name)
#define TYPE(dir) dir ## _float
#define BASE float
#include "template.c"
"""
INSTANCES_MAIN_C = """#include <stdio.h>
#include <stddef.h>
typedef struct { size_t size; size_t stride; double *data; } vec;
typedef struct { size_t size; size_t stride; float *data; } vec_float;
int vec_scale(vec *a, double x); int vec_float_scale(vec_float *a, float x);
double vec_sum(const double *x, int n); float vec_float_sum(const float *x, int n);
int main(void) {
  double d[10]; float f[10];
  for (int i = 0; i < 10; i++) { d[i] = i; f[i] = i; }
  vec a = {5, 2, d}; vec_float b = {10, 1, f};
  vec_scale(&a, 3); vec_float_scale(&b, 0.5f);
  printf("%f %f\\n", vec_sum(d, 10), vec_float_sum(f, 10));
  return 0;
}
"""


def test_template_instances_from_an_included_c_file(tmp_path: Path) -> None:
    # GSL's way: one .c template included per element type, the names made by macros; the
    # bodies are found in the preprocessed unit, which cc then compiles spliced
    for name, text in (
        ("template.c", TEMPLATE_C), ("instances.c", INSTANCES_C), ("main.c", INSTANCES_MAIN_C)
    ):  # fmt: skip
        (tmp_path / name).write_text(text)
    subprocess.run(["gcc", "-O2", "main.c", "instances.c", "-o", "ref"], cwd=tmp_path, check=True)
    report = tmp_path / "units.jsonl"
    subprocess.run(
        [*_cc(), "-O3", "-g", "main.c", "instances.c", "-o", "prog"],
        cwd=tmp_path,
        check=True,
        env={**os.environ, "POLYFLOW_CC_REPORT": str(report)},
    )
    assert _run(tmp_path / "prog") == _run(tmp_path / "ref")
    units = {Path(u["unit"]).name: u for u in map(json.loads, report.read_text().splitlines())}
    unit = units["instances.c"]
    every = ["vec_float_scale", "vec_float_sum", "vec_scale", "vec_sum"]
    assert unit["loop_functions"] == unit["compiled"] == unit["optimized"] == every
    lines = subprocess.run(
        ["objdump", "--dwarf=decodedline", "prog"], cwd=tmp_path, capture_output=True, text=True
    ).stdout
    assert "template.c" in lines  # the instances' line tables name the template's lines


def test_a_crash_of_polyflow_costs_the_unit_its_optimization_not_the_build(
    project: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    # native code that aborts the process (an MLIR assertion) while compiling kern.c: the unit
    # is compiled in a forked child, so cc builds it instead
    import polyflow.drivers.build as build
    from polyflow.drivers import cc
    from polyflow.options import Options

    monkeypatch.setattr(build, "build_program", lambda *args, **kwargs: os.abort())
    monkeypatch.chdir(project)
    assert not cc._compile_unit("kern.c", "kern.o", Options(opt_level=3))
    assert "polyflow's compile of it crashed" in capfd.readouterr().err
    symbols = subprocess.run(["nm", "kern.o"], capture_output=True, text=True).stdout
    assert " T scale" in symbols and " T dot" in symbols


def test_the_link_keeps_the_order_of_archives_and_flags(project: Path) -> None:
    # libtool links a shared library from convenience archives between --whole-archive and
    # --no-whole-archive (GSL's libgsl.so): moved after them, no member would be taken
    subprocess.run(
        [*_cc(), "-O3", "-fPIC", "-c", "kern.c", "-o", "kern.o"], cwd=project, check=True
    )
    subprocess.run(["ar", "rcs", "libconv.a", "kern.o"], cwd=project, check=True)
    subprocess.run(
        [*_cc(), "-O3", "-shared", "-fPIC", "-o", "libwhole.so",
         "-Wl,--whole-archive", "libconv.a", "-Wl,--no-whole-archive"],
        cwd=project,
        check=True,
    )  # fmt: skip
    symbols = subprocess.run(
        ["nm", "-D", "--defined-only", "libwhole.so"], cwd=project, capture_output=True, text=True
    ).stdout
    assert " T scale" in symbols and " T dot" in symbols
    cmd = parse_cc_args(["a.c", "-Wl,--whole-archive", "x.a", "-Wl,--no-whole-archive", "-lm"])
    assert cmd.link_order == [0, "-Wl,--whole-archive", "x.a", "-Wl,--no-whole-archive", "-lm"]


MAT_H = """#ifndef MAT_H
#define MAT_H
typedef struct { int rows, cols; double *data; } Mat;
static inline double mat_get(const Mat *m, int i, int j) { return m->data[i * m->cols + j]; }
static inline void mat_set(Mat *m, int i, int j, double v) { m->data[i * m->cols + j] = v; }
static inline double mat_diag(const Mat *m, int i) { return mat_get(m, i, i); }
inline double mat_trace(const Mat *m) {
  double t = 0;
  for (int i = 0; i < m->rows; i++) t += m->data[i * m->cols + i];
  return t;
}
double mat_sum(const Mat *m);
void mat_mul(const Mat *a, const Mat *b, Mat *c);
#endif
"""
MAT_SUM_C = """#include "mat.h"
extern inline double mat_trace(const Mat *m);  /* this unit holds its external definition */
double mat_sum(const Mat *m) {
  double s = 0;
  for (int i = 0; i < m->rows; i++)
    for (int j = 0; j < m->cols; j++) s += mat_get(m, i, j) - mat_diag(m, i % 2);
  return s + mat_trace(m);
}
"""
MAT_MUL_C = """#include "mat.h"
void mat_mul(const Mat *a, const Mat *b, Mat *c) {
  for (int i = 0; i < a->rows; i++)
    for (int j = 0; j < b->cols; j++) {
      double s = 0;
      for (int k = 0; k < a->cols; k++) s += mat_get(a, i, k) * mat_get(b, k, j);
      mat_set(c, i, j, s);
    }
}
"""
MAT_MAIN_C = """#include <stdio.h>
#include <stdlib.h>
#include "mat.h"
int main(void) {
  Mat a = {4, 5, malloc(20 * sizeof(double))}, b = {5, 3, malloc(15 * sizeof(double))};
  Mat c = {4, 3, malloc(12 * sizeof(double))};
  for (int i = 0; i < 20; i++) a.data[i] = (i % 7) * 0.5 - 1;
  for (int i = 0; i < 15; i++) b.data[i] = 2 - (i % 4) * 0.25;
  mat_mul(&a, &b, &c);
  printf("%.17g %.17g %.17g\\n", mat_sum(&c), mat_trace(&a), mat_sum(&a));
  return 0;
}
"""


def test_header_accessors_are_compiled_as_helpers_of_each_unit(tmp_path: Path) -> None:
    """Inline functions of a header (`mat_get`) are compiled into each unit that calls them,
    as private helpers: every unit's loops through them are compiled, no unit exports them
    (two objects link), and the program prints what gcc's build prints."""
    for name, text in (("mat.h", MAT_H), ("sum.c", MAT_SUM_C), ("mul.c", MAT_MUL_C),
                       ("main.c", MAT_MAIN_C)):  # fmt: skip
        (tmp_path / name).write_text(text)
    subprocess.run(
        ["gcc", "-O2", "main.c", "sum.c", "mul.c", "-o", "ref"], cwd=tmp_path, check=True
    )
    for unit in ("sum", "mul"):
        done = subprocess.run(
            [*_cc(), "-O3", "-c", f"{unit}.c", "-o", f"{unit}.o"],
            cwd=tmp_path, capture_output=True, text=True, check=True,
        )  # fmt: skip
        assert "left to the C compiler" not in done.stderr, done.stderr
        symbols = subprocess.run(
            ["nm", f"{unit}.o"], cwd=tmp_path, capture_output=True, text=True, check=True
        ).stdout
        assert "__polyflow_mat_get" not in symbols and " T mat_get" not in symbols
    assert (
        " t __polyflow_mat_mul"
        in subprocess.run(  # compiled, local to the object
            ["nm", "mul.o"], cwd=tmp_path, capture_output=True, text=True, check=True
        ).stdout
    )
    libs = subprocess.run(
        [sys.executable, "-m", "polyflow", "config", "--libs"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    subprocess.run(
        ["gcc", "main.c", "sum.o", "mul.o", "-o", "prog", *libs], cwd=tmp_path, check=True
    )
    assert _run(tmp_path / "prog") == _run(tmp_path / "ref")


def test_units_built_for_cuda_link_into_one_program(tmp_path: Path) -> None:
    """`polyflow cc -c` with POLYFLOW_FLAGS=--target=cuda: each object carries the CUDA runtime
    (weak symbols: the link keeps one); the program links with plain cc and, without a GPU,
    stops at start with one line."""
    unit = "void {name}(int n, double a[200][200]) {{\n  for (int i = 0; i < n; i++)\n    for (int j = 0; j < n; j++) a[i][j] += {k};\n}}\n"
    (tmp_path / "a.c").write_text(unit.format(name="add_one", k=1))
    (tmp_path / "b.c").write_text(unit.format(name="add_two", k=2))
    (tmp_path / "main.c").write_text(
        "#include <stdio.h>\nvoid add_one(int, double (*)[200]);\nvoid add_two(int, double (*)[200]);\n"
        "static double a[200][200];\n"
        'int main(void) { add_one(200, a); add_two(200, a); printf("%g\\n", a[7][9]); return 0; }\n'
    )
    env = {**os.environ, "POLYFLOW_FLAGS": "--target=cuda"}
    for name in ("a", "b"):
        subprocess.run([*_cc(), "-O3", "-c", f"{name}.c"], cwd=tmp_path, env=env, check=True)
        symbols = subprocess.run(
            ["nm", f"{name}.o"], cwd=tmp_path, capture_output=True, text=True
        ).stdout
        assert " W mgpuLaunchKernel" in symbols
    subprocess.run(["cc", "-o", "prog", "main.c", "a.o", "b.o"], cwd=tmp_path, check=True)
    run = subprocess.run([str(tmp_path / "prog")], capture_output=True, text=True)
    if run.returncode == 0:  # a machine with a GPU
        assert run.stdout == "3\n"
    else:
        assert run.returncode == 1 and run.stderr.startswith(
            "polyflow: this program runs its loops on a CUDA GPU"
        )
