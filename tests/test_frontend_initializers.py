"""Large numeric file-scope tables are left out of the parse of a build (`initializers.py`);
everything else reaches pycparser as written, and the build still agrees with gcc."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from difftest import build_with_gcc, run_program
from fuzz.many_functions import generate_large_initializer

import polyflow
from polyflow.frontend.initializers import MIN_ELIDED_CHARS, elide_large_initializers

BIG = ", ".join(str(k * 7919 % 100003) for k in range(MIN_ELIDED_CHARS // 4))
BIG_LINES = ",\n".join(", ".join(str(k + r) for k in range(40)) for r in range(60))


def test_a_large_table_becomes_zero_and_keeps_its_lines_and_columns() -> None:
    text = f"static const unsigned t[] = {{{BIG_LINES}}}; int after;\nint x;\n"
    out = elide_large_initializers(text)
    assert out.count("\n") == text.count("\n")
    assert "t[] = {0" in out  # the declarator (and its unknown extent) as written
    old_last, new_last = text.splitlines()[59], out.splitlines()[59]
    assert new_last.index("}; int after;") == old_last.index("}; int after;")
    assert len(out) < len(text) // 10


def test_small_symbolic_and_local_initializers_are_kept() -> None:
    small = "int a[4] = {1, 2, 3, 4};\n"
    symbolic = f"enum {{ K = 3 }};\nint b[] = {{{BIG}, K}};\n"
    local = f"void f(void) {{ static const int c[] = {{{BIG}}}; }}\n"
    designated = f"int d[] = {{[0] = 1, {BIG}}};\n"
    string = 'const char *s = "{ = {";\n'
    for text in (small, symbolic, local, designated, string):
        assert elide_large_initializers(text) == text


def test_two_tables_and_nested_rows() -> None:
    rows = ", ".join("{" + ", ".join(str(k) for k in range(32)) + "}" for _ in range(64))
    text = f"int m[64][32] = {{{rows}}};\ndouble v[] = {{{BIG}}};\nint z = 1;\n"
    out = elide_large_initializers(text)
    assert out == "int m[64][32] = {0};\ndouble v[] = {0};\nint z = 1;\n"


def test_a_program_with_a_large_table_builds_and_agrees_with_gcc(tmp_path: Path) -> None:
    source = tmp_path / "table.c"
    source.write_text(generate_large_initializer(64))
    report = polyflow.build_program(
        source, tmp_path / "pf", options=polyflow.Options(opt_level=3), cache=None
    )
    assert report.compiled == ["mix"]
    expected = run_program(build_with_gcc(source, tmp_path / "gcc"))
    actual = run_program(report.output)
    assert actual.returncode == expected.returncode == 0
    assert actual.stdout == expected.stdout


def test_the_jit_still_reads_the_table(tmp_path: Path) -> None:
    values = [k * 7919 % 100003 for k in range(MIN_ELIDED_CHARS // 4)]
    source = (
        f"static const int table[{len(values)}] = {{{', '.join(map(str, values))}}};\n"
        "void take(int n, int *out) { for (int i = 0; i < n; i++) out[i] = table[i] + 1; }\n"
    )
    kernel = polyflow.compile_c(source, "take")
    out = np.zeros(len(values), dtype=np.int32)
    kernel(len(values), out)
    assert out.tolist() == [v + 1 for v in values]
