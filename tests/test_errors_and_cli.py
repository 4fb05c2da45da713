"""User errors carry file, line and column; the CLI prints them compiler-style and exits 1."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import polyflow
from polyflow.cli import main
from polyflow.errors import CompileError

BAD_SYNTAX = (
    "void k(int n, double *a) {\n  for (int i = 0; i < n; i++)\n    a[i] = a[i] * 2 +;\n}\n"
)


def test_syntax_error_has_position(tmp_path: Path) -> None:
    src = tmp_path / "bad.c"
    src.write_text(BAD_SYNTAX)
    with pytest.raises(CompileError) as info:
        polyflow.build_program(src, tmp_path / "out")
    err = info.value
    assert (err.file, err.line, err.column) == (str(src), 3, 22)
    assert "expected expression" in err.message
    lines = err.format().splitlines()
    assert lines[0].startswith(f"{src}:3:22: error: ")
    assert lines[1] == "    a[i] = a[i] * 2 +;"
    assert lines[2] == " " * 21 + "^"


def test_undeclared_identifier_is_an_error_with_position() -> None:
    with pytest.raises(CompileError) as info:
        polyflow.compile_c("int f(int n) {\n  return n + m;\n}\n", "f")
    assert (info.value.line, info.value.column) == (2, 14)
    assert "'m' undeclared" in info.value.message


def test_unsupported_entry_says_why_and_where() -> None:
    src = "int f(int n) {\n  switch (n) { case 1: return 2; }\n  return 0;\n}\n"
    with pytest.raises(CompileError) as info:
        polyflow.compile_c(src, "f")
    assert info.value.line == 2
    assert "'switch' statements are not supported" in info.value.message


def test_missing_entry_lists_the_compilable_functions() -> None:
    with pytest.raises(CompileError, match=r"no function named 'kernel'.*\bg\b"):
        polyflow.compile_c("int g(int x) { return x; }\n", "kernel")


def test_cli_prints_error_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "bad.c"
    src.write_text(BAD_SYNTAX)
    assert main(["build", str(src), "-o", str(tmp_path / "x")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{src}:3:22: error:")
    assert "Traceback" not in err


def test_cli_in_a_subprocess_has_no_traceback(tmp_path: Path) -> None:
    src = tmp_path / "bad.c"
    src.write_text(BAD_SYNTAX)
    proc = subprocess.run(
        [sys.executable, "-m", "polyflow", "build", str(src)], capture_output=True, text=True
    )
    assert proc.returncode == 1
    assert "error:" in proc.stderr and "Traceback" not in proc.stderr


def test_cli_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["build", str(tmp_path / "nope.c")]) == 1
    assert "cannot read" in capsys.readouterr().err


PROGRAM = """#include <stdio.h>
#include <stdlib.h>
#ifndef SCALE
#define SCALE 1
#endif
#include "helper.h"
static void kernel(int n, double *a) { for (int i = 0; i < n; i++) a[i] = a[i] * SCALE + OFFSET; }
static int classify(int x) { switch (x) { case 0: return 1; default: return 2; } }
int main(void) {
  double *a = malloc(4 * sizeof(double));
  for (int i = 0; i < 4; i++) a[i] = i;
  kernel(4, a);
  printf("%g %g %d\\n", a[0], a[3], classify(0));
  free(a);
  return 0;
}
"""


def _write_program(tmp_path: Path) -> Path:
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "helper.h").write_text("#define OFFSET 0.5\n")
    src = tmp_path / "prog.c"
    src.write_text(PROGRAM)
    return src


def test_cli_builds_program_with_fallback_warning_and_defines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _write_program(tmp_path)
    exe = tmp_path / "prog"
    assert (
        main(["build", str(src), "-o", str(exe), f"-I{tmp_path / 'inc'}", "-DSCALE=3", "-O3"]) == 0
    )
    err = capsys.readouterr().err
    assert (
        "warning: function 'classify' is left to the C compiler: 'switch' statements are not supported"
        in err
    )
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    assert out == "0.5 9.5 1\n"


def test_cli_emit_stages(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = _write_program(tmp_path)
    inc = f"-I{tmp_path / 'inc'}"
    assert main(["build", str(src), "--emit=mlir", inc]) == 0
    mlir = capsys.readouterr().out
    # main calls kernel(4, ...) only: the frontend marks n bound to 4 (bound_arguments.py)
    assert (
        "func.func private @kernel(%arg0: i32 {polyflow.bound_value = 4 : i32}, "
        "%arg1: memref<?xf64> {polyflow.unknown_extent})" in mlir
    )
    assert "scf.for" in mlir and "memref.load" in mlir
    assert main(["build", str(src), "--emit=llvm", "-o", str(tmp_path / "k.ll"), inc]) == 0
    assert "define void @__polyflow_kernel(i32" in (tmp_path / "k.ll").read_text()
    assert main(["build", str(src), "--emit=obj", "-o", str(tmp_path / "k.o"), inc]) == 0
    assert (tmp_path / "k.o").read_bytes()[:4] == b"\x7fELF"


def test_cli_functions_restricts_what_goes_through_mlir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _write_program(tmp_path)
    assert (
        main(["build", str(src), "--emit=mlir", "--functions=classify", f"-I{tmp_path / 'inc'}"])
        == 0
    )
    captured = capsys.readouterr()
    assert "@kernel" not in captured.out
    report = polyflow.build_program(
        src,
        tmp_path / "p",
        options=polyflow.Options(functions=("kernel",), include_dirs=(str(tmp_path / "inc"),)),
    )
    assert report.compiled == ["kernel"] and report.fallbacks == {}


def test_backend_failure_falls_back_to_the_c_compiler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import polyflow.drivers.build as driver
    import polyflow.drivers.compile as entry

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("llc failed: simulated")

    monkeypatch.setattr(entry, "run_pipeline", broken)
    src = _write_program(tmp_path)
    exe = tmp_path / "prog"
    report = driver.build_program(
        src, exe, options=polyflow.Options(include_dirs=(str(tmp_path / "inc"),))
    )
    assert report.compiled == [] and "kernel" in report.fallbacks
    assert any(
        "internal error in polyflow's backend (llc failed: simulated)" in w for w in report.warnings
    )
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    assert out == "0.5 3.5 1\n"


def _has_fused_multiply_adds(binary: Path) -> bool:
    disassembly = subprocess.run(
        ["objdump", "-d", str(binary)], capture_output=True, text=True, check=True
    ).stdout
    return "vfmadd" in disassembly


@pytest.mark.parametrize("contract,expect_fma", [("fast", True), ("off", False)])
def test_fp_contract_controls_fused_multiply_add(
    tmp_path: Path, contract: str, expect_fma: bool
) -> None:
    """Like gcc, polyflow fuses a*b+c on targets with FMA unless told not to (haswell has FMA)."""
    src = tmp_path / "axpy.c"
    src.write_text(
        "void axpy(int n, double a, double *x, double *y) { for (int i = 0; i < n; i++) y[i] = a * x[i] + y[i]; }\n"
    )
    obj = tmp_path / "axpy.o"
    argv = [
        "build",
        str(src),
        "--emit=obj",
        "-o",
        str(obj),
        "-march=haswell",
        f"-ffp-contract={contract}",
    ]
    assert main(argv) == 0
    assert _has_fused_multiply_adds(obj) == expect_fma


@pytest.mark.parametrize("contract,expect_fma", [("fast", True), ("off", False)])
def test_fp_contract_holds_for_the_rest_of_the_program_too(
    tmp_path: Path, contract: str, expect_fma: bool
) -> None:
    """The parts of a program the C compiler builds (main here) follow -ffp-contract as well."""
    src = tmp_path / "prog.c"
    src.write_text(
        "#include <stdio.h>\n#include <stdlib.h>\n"
        "static double x[64], y[64];\n"
        "void scale(int n, double a) { for (int i = 0; i < n; i++) y[i] = a * y[i]; }\n"
        "int main(int argc, char **argv) {\n"
        "  double a = argc > 1 ? atof(argv[1]) : 0.1;\n"
        "  for (int i = 0; i < 64; i++) { x[i] = i * 0.1; y[i] = a * x[i] + 1.0 / (i + 3); }\n"
        "  scale(64, a);\n"
        "  printf(\"%.17g\\n\", y[5]);\n  return 0;\n}\n"
    )
    exe = tmp_path / "prog"
    argv = ["build", str(src), "-o", str(exe), "-march=haswell", f"-ffp-contract={contract}"]
    assert main(argv) == 0
    assert _has_fused_multiply_adds(exe) == expect_fma


def test_every_option_has_one_flag_derived_from_the_model() -> None:
    """The command line is derived from `Options`: each field is a flag (unless its metadata
    says the command line does not offer it), with the model's help text and default."""
    from polyflow.cli import _build_parser, options_from_args, parse_args
    from polyflow.options import Options

    build = next(
        a for a in _build_parser()._subparsers._group_actions[0].choices.values()  # type: ignore[union-attr]
        if a.prog.endswith("build")
    )
    dests = {action.dest: action for action in build._actions}
    for name, info in Options.model_fields.items():
        extra = dict(info.json_schema_extra or {})  # type: ignore[arg-type]
        if extra.get("cli") is False:
            assert name not in dests, name
            continue
        assert name in dests, f"Options.{name} has no flag"
        assert info.description and info.description in (dests[name].help or ""), name
    # nothing given: the model's defaults, written once
    assert options_from_args(parse_args(["build", "k.c"])) == Options()
    # the tc command's own defaults (polyflow.options.TC_DEFAULTS)
    tc = options_from_args(parse_args(["tc", "k.tc"]), {"opt_level": 3, "march": "native"})
    assert tc.opt_level == 3 and tc.march == "native"
    given = options_from_args(
        parse_args(["build", "k.c", "-O3", "--no-tile", "--tile-sizes", "8,4", "-Iinc", "-DX=1"])
    )
    assert (given.opt_level, given.tile, given.tile_sizes) == (3, False, (8, 4))
    assert given.include_dirs == ("inc",) and given.defines == ("X=1",)


@pytest.mark.parametrize(
    ("argv", "flag"),
    [(["-O", "7"], "-O"), (["--min-parallel-trip", "0"], "--min-parallel-trip"),
     (["--isl-max-operations", "-1"], "--isl-max-operations"), (["--target", "gpu"], "--target")],
)  # fmt: skip
def test_option_values_the_model_refuses_are_usage_errors(
    argv: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from polyflow.cli import parse_args

    with pytest.raises(SystemExit) as exit_info:
        parse_args(["build", "k.c", *argv])
    assert exit_info.value.code == 2
    assert flag in capsys.readouterr().err


FALLBACKS = """// polyflow: compiled=scale
// polyflow: fallback=norm1,pick
#include <stdio.h>
typedef struct { double x, y; } point;

double norm1(point p) {
  return p.x + p.y;
}

int pick(int k) {
  int r = 0;
  switch (k) { case 1: r = 5; break; default: r = 7; }
  return r;
}

void scale(int n, double *a) {
  for (int i = 0; i < n; i++) a[i] *= 2;
}

int main(void) {
  point p = {1, 2};
  double a[4] = {1, 2, 3, 4};
  scale(4, a);
  printf("%g %d %g\\n", norm1(p), pick(1), a[3]);
  return 0;
}
"""


def test_a_function_left_to_cc_is_named_at_its_line_with_the_construct(tmp_path: Path) -> None:
    from difftest import check_program_against_gcc

    src = tmp_path / "fallbacks.c"
    src.write_text(FALLBACKS)
    check_program_against_gcc(src, tmp_path / "diff", polyflow.Options())
    report = polyflow.build_program(src, tmp_path / "prog")
    assert report.warnings == [
        f"{src}:6:8: warning: function 'norm1' is left to the C compiler: "
        "struct types are not supported (at 4:33)",
        f"{src}:10:5: warning: function 'pick' is left to the C compiler: "
        "'switch' statements are not supported (at 12:3)",
    ]


def test_a_define_the_file_overrides_is_a_warning(tmp_path: Path) -> None:
    src = tmp_path / "redef.c"
    src.write_text(
        "#include <stdio.h>\n#define N 100\nint a[N];\n"
        "void f(void) { for (int i = 0; i < N; i++) a[i] = i; }\n"
        'int main(void) { f(); printf("%d\\n", a[N - 1]); return 0; }\n'
    )
    options = polyflow.Options(defines=("N=1024",))
    report = polyflow.build_program(src, tmp_path / "prog", options=options)
    assert report.warnings == [
        f"{src}:2: warning: the file's #define of 'N' overrides -D N=... given to polyflow"
    ]
    run = subprocess.run([str(tmp_path / "prog")], capture_output=True, text=True, check=True)
    assert run.stdout == "99\n"  # as gcc -DN=1024 builds it: the file's N
    gcc = subprocess.run(
        ["gcc", "-O2", "-DN=1024", str(src), "-o", str(tmp_path / "gcc")], capture_output=True
    )
    assert gcc.returncode == 0
    assert subprocess.run([str(tmp_path / "gcc")], capture_output=True, text=True).stdout == "99\n"
