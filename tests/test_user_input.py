"""What users hand in by mistake gets a one-line error, never a traceback: binary and missing
files, a C compiler that is not there, empty or mistyped sources and options; and the Python
API takes source text, UTF-8 bytes or a file (`path=`), options as `Options` or a dict, and
the only function as the default entry."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import polyflow
from polyflow import CompileError, Options
from polyflow import tc as polyflow_tc

SCALE = "void scale(int n, double a[16]) {\n  for (int i = 0; i < n; i++)\n    a[i] = 2 * a[i];\n}\n"
BINARY = bytes(range(256)) * 4


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "polyflow", *args], capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    "command",
    [
        ["build", "{binary}", "-o", "{out}"],
        ["tc", "{binary}"],
        ["build", "{missing}", "-o", "{out}"],
        ["build", "{dir}", "-o", "{out}"],
        ["tc", "{dir}"],
        ["build", "{scale}", "--cc=nosuchcc", "-o", "{out}"],
        ["build", "{empty}", "-o", "{out}"],
    ],
)
def test_the_cli_says_what_is_wrong_in_one_line(command: list[str], tmp_path: Path) -> None:
    (tmp_path / "bin.c").write_bytes(BINARY)
    (tmp_path / "scale.c").write_text(SCALE)
    (tmp_path / "empty.c").write_text("")
    paths = {
        "binary": tmp_path / "bin.c",
        "missing": tmp_path / "missing.c",
        "dir": tmp_path,
        "scale": tmp_path / "scale.c",
        "empty": tmp_path / "empty.c",
        "out": tmp_path / "out",
    }
    proc = _cli(*(arg.format(**paths) for arg in command))
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 1, proc.stderr
    first = proc.stderr.splitlines()[0]
    assert ": error: " in first and first.startswith(str(tmp_path)), proc.stderr


def test_an_internal_error_is_one_line_with_exit_3(tmp_path: Path) -> None:
    # a module of ours that fails to import stands in for any bug of ours
    (tmp_path / "polyflow_break.py").write_text("raise RuntimeError('boom')\n")
    source = tmp_path / "scale.c"
    source.write_text(SCALE)
    code = (
        "import sys, polyflow.drivers.build as b\n"
        "def broken(*a, **k):\n    import polyflow_break\n"
        "b.build_program = broken\nimport polyflow.cli as c\n"
        "c.build_program = broken\nsys.exit(c.main(sys.argv[1:]))\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.run(
        [sys.executable, "-c", code, "build", str(source), "-o", str(tmp_path / "x")],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 3 and "Traceback" not in proc.stderr, proc.stderr
    assert "internal error: RuntimeError: boom" in proc.stderr
    env["POLYFLOW_TRACEBACK"] = "1"
    proc = subprocess.run(
        [sys.executable, "-c", code, "build", str(source), "-o", str(tmp_path / "x")],
        capture_output=True,
        text=True,
        env=env,
    )
    assert "Traceback" in proc.stderr


def test_compile_c_takes_text_bytes_or_a_path(tmp_path: Path) -> None:
    path = tmp_path / "scale.c"
    path.write_text(SCALE)
    for kernel in (
        polyflow.compile_c(SCALE),
        polyflow.compile_c(SCALE.encode()),
        polyflow.compile_c(path=path),
        polyflow.compile_c(path=str(path)),
        polyflow.compile_c(path),  # a Path is a file by its type
    ):
        a = np.arange(16.0)
        kernel(16, a)
        np.testing.assert_array_equal(a, 2 * np.arange(16.0))
    # a str is source text, never a file name
    with pytest.raises(CompileError):
        polyflow.compile_c(str(path))


@pytest.mark.parametrize(
    "source,error,match",
    [
        ("", CompileError, "the source is empty"),
        ("   \n", CompileError, "the source is empty"),
        (BINARY, CompileError, "not a text file"),
        (42, TypeError, "source must be str or bytes"),
        ("int f(int x) { return x; }\nint g(int x) { return -x; }\n", CompileError,
         r"defines 2 functions: say which one with entry= \(compilable: f, g\)"),
        ("struct s { int a; };\n", CompileError, "defines no function"),
    ],
)  # fmt: skip
def test_compile_c_refuses_what_is_not_one_c_function(
    source: object, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        polyflow.compile_c(source)  # type: ignore[arg-type]


def test_compile_c_wants_source_or_path_not_both(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="not both"):
        polyflow.compile_c(SCALE, path=tmp_path / "scale.c")
    with pytest.raises(TypeError, match="not both"):
        polyflow.compile_c()


def test_options_may_be_a_dict_of_fields() -> None:
    kernel = polyflow.compile_c(SCALE, options={"opt_level": 3})
    a = np.ones(16)
    kernel(16, a)
    np.testing.assert_array_equal(a, np.full(16, 2.0))
    with pytest.raises(ValueError, match="opt_level"):
        polyflow.compile_c(SCALE, options={"opt_level": 7})
    with pytest.raises(ValueError, match="no_such_option"):
        polyflow.compile_c(SCALE, options={"no_such_option": 1})
    with pytest.raises(TypeError, match="options must be an Options or a dict"):
        polyflow.compile_c(SCALE, options=3)  # type: ignore[arg-type]
    assert Options.of({"opt_level": 1}) == Options(opt_level=1)


def test_raise_report_takes_text_or_a_path(tmp_path: Path) -> None:
    path = tmp_path / "scale.c"
    path.write_text(SCALE)
    by_text = polyflow.raise_report(SCALE)
    by_path = polyflow.raise_report(path=path)
    assert by_text.fully_affine == by_path.fully_affine == ["scale"]


def test_tc_takes_bytes_and_options_over_its_defaults() -> None:
    mv = polyflow_tc.define(
        b"def mv(float(M,K) A, float(K) x) -> (C) { C(i) +=! A(i,k) * x(k) }",
        options={"opt_level": 2},
    )
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = np.ones(4, dtype=np.float32)
    np.testing.assert_allclose(mv(a, x), a @ x, rtol=1e-6)
    with pytest.raises(CompileError, match="not a text file"):
        polyflow_tc.define(BINARY)


MIXED = (
    "float mix(float a, int b, unsigned char c, _Bool d) {\n"
    "  return a + b + c + d;\n}\n"
)


def test_scalar_arguments_are_checked_against_their_c_types() -> None:
    mix = polyflow.compile_c(MIXED)
    assert mix(1.5, 3, 2, True) == 7.5
    assert mix(np.float32(1.5), np.int64(3), np.uint8(255), 0) == 259.5
    assert mix(0, -(2**31), 0, False) == -(2.0**31)  # int's lowest value
    with pytest.raises(TypeError, match="argument 'a' of mix\\(\\) is float: expected a number, got str"):
        mix("1.5", 3, 2, True)
    with pytest.raises(TypeError, match="'b' of mix\\(\\) is int: expected an integer, got float"):
        mix(1.5, 3.0, 2, True)
    with pytest.raises(ValueError, match=r"'c' of mix\(\) is unsigned char: 300 is out of its range 0\.\.255"):
        mix(1.5, 3, 300, True)
    with pytest.raises(ValueError, match="'b' of mix\\(\\) is int: 1099511627776 is out of"):
        mix(1.5, 2**40, 2, True)
    with pytest.raises(ValueError, match="out of its range"):
        mix(1.5, 3, -1, True)
    with pytest.raises(TypeError, match="a scalar, not an array"):
        mix(np.ones(2), 3, 2, True)


def test_a_call_to_a_function_left_to_cc_says_so() -> None:
    source = (
        "double weight(double x) {\n"
        "  switch ((int)x) { case 0: return 1.0; default: return 2.0; }\n}\n"
        "double f(int n, double *a) {\n  double s = 0;\n"
        "  for (int i = 0; i < n; i++) s += a[i] * weight(a[i]);\n  return s;\n}\n"
    )
    with pytest.raises(CompileError, match="cannot compile 'f': calls 'weight', which is left"):
        polyflow.compile_c(source, "f")


# ----- random input: nothing a user can type or send ends in a traceback or a 5xx

FLAGS = [
    "-O0", "-O3", "-O9", "-march=native", "-march=", "--emit=affine", "--emit=bogus",
    "--tile-sizes", "0,-1", "--tile-sizes", "32,8", "-ffast-math", "-fno-fast-math",
    "--threads", "0", "--threads", "x", "--functions", "", "-I", "/nonexistent", "-D", "=",
    "--cc=", "--report", "--report-json", "/nonexistent/dir/r.json", "--min-parallel-trip",
    "-5", "--isl-max-operations", "1", "-o", "-", "--schedule-preset", "nope", "--no-cache",
]  # fmt: skip


def _random_source(rng: np.random.Generator) -> bytes:
    kind = rng.integers(4)
    if kind == 0:
        return rng.bytes(int(rng.integers(0, 300)))
    if kind == 1:  # C-like text with random damage
        text = bytearray(SCALE.encode() + b"int main(void) { return 0; }\n")
        for _ in range(int(rng.integers(1, 6))):
            text[int(rng.integers(len(text)))] = int(rng.integers(32, 127))
        return bytes(text)
    if kind == 2:
        return "".join(chr(int(c)) for c in rng.integers(1, 0x2FFF, 80)).encode("utf-8", "replace")
    return b""


def test_random_files_and_flags_never_end_in_a_traceback(tmp_path: Path) -> None:
    rng = np.random.default_rng(24)
    for case in range(24):
        source = tmp_path / f"case{case}.c"
        source.write_bytes(_random_source(rng))
        picks = [FLAGS[int(i)] for i in rng.integers(0, len(FLAGS), int(rng.integers(0, 4)))]
        command = "tc" if case % 6 == 5 else "build"
        args = [command, str(source), *picks]
        if command == "build" and "-o" not in picks:
            args += ["-o", str(tmp_path / f"out{case}")]
        proc = _cli(*args)
        assert "Traceback" not in proc.stderr, (args, proc.stderr[-3000:])
        assert proc.returncode in (0, 1, 2), (args, proc.returncode, proc.stderr[-2000:])


def test_random_api_input_raises_only_user_errors() -> None:
    rng = np.random.default_rng(7)
    values: list[object] = [None, 3, 2.5, [], {}, b"\xff\xfe", object(), "x" * 10]
    for case in range(20):
        source: object = _random_source(rng) if case % 2 else _random_source(rng).decode(
            "utf-8", "replace"
        )
        options = values[case % len(values)] if case % 3 == 0 else None
        entry = values[(case + 1) % len(values)] if case % 4 == 0 else None
        try:
            polyflow.compile_c(source, entry, options=options)  # type: ignore[arg-type]
        except (CompileError, TypeError, ValueError):
            pass
