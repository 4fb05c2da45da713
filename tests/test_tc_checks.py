"""Semantic checks of TC programs (polyflow/frontend/tc/checks.py): what they accept, and each
error's message and position."""

from __future__ import annotations

import pytest

from polyflow.errors import CompileError
from polyflow.frontend.tc.checks import CheckedComprehension, check_program, join
from polyflow.frontend.tc.parser import parse


def check(source: str):  # type: ignore[no-untyped-def]
    return check_program(parse(source, file="k.tc"), source=source, file="k.tc")


def position(source: str, line: int, text: str) -> tuple[int, int]:
    return line, source.splitlines()[line - 1].index(text) + 1


def test_indices_reductions_reads_and_types() -> None:
    source = "def mv(float(M,K) A, double(K) x) -> (C) {\n C(i) +=! A(i,k) * x(k) + M\n}"
    (statement,) = check(source)["mv"].statements
    assert isinstance(statement, CheckedComprehension)
    assert statement.indices == ("i",)
    assert statement.reduction_indices == ("k",)
    assert [r.tensor for r in statement.reads] == ["A", "x"]
    assert statement.element == "f64"
    definition = check(source)["mv"]
    assert definition.size_names == ("M", "K")
    assert [(t.name, t.element, t.dims) for t in definition.outputs] == [("C", "f64", None)]


@pytest.mark.parametrize(
    ("a", "b", "joined"),
    [("f32", "f64", "f64"), ("i32", "f16", "f16"), ("i8", "i64", "i64"), ("i1", "u8", "u8")],
)
def test_types_join_like_c(a: str, b: str, joined: str) -> None:
    assert join(a, b) == joined == join(b, a)


@pytest.mark.parametrize(
    ("rhs", "element"),
    [
        ("A(i) * 2", "f16"),  # an integer literal takes the tensor's type
        ("A(i) + 0.5", "f16"),  # so does a float literal, next to a float
        ("I(i) * 0.5", "f32"),  # a float literal makes an integer expression f32
        ("I(i) + 1", "i8"),
        ("exp(I(i))", "f32"),
        ("max(I(i), 3)", "i8"),
        ("A(i) > 0 ? A(i) : I(i)", "f16"),
        ("s * A(i)", "f64"),
    ],
)
def test_element_types_of_expressions(rhs: str, element: str) -> None:
    source = f"def f(half(N) A, int8(N) I, double s) -> (B) {{ B(i) = {rhs} }}"
    assert check(source)["f"].outputs[0].element == element


def test_scalar_parameters_sizes_and_dimension_sizes_are_values() -> None:
    source = "def f(float(N,M) A, float s) -> (B) { B(i) = s * A(i, M - 1) / N + A.1 }"
    (statement,) = check(source)["f"].statements
    assert isinstance(statement, CheckedComprehension)
    assert statement.reduction_indices == ()


def test_calls_take_earlier_definitions() -> None:
    source = """
    def scale(float(N) x) -> (y) { y(i) = 2 * x(i) }
    def twice(float(N) x) -> (t, z) {
      t = scale(x)
      z = scale(t)
    }
    """
    checked = check(source)
    assert [t.element for t in checked["twice"].outputs] == ["f32", "f32"]


BAD = [
    ("def f(float(N) A) -> (B) { B(i) = C(i) }", "unknown tensor or function 'C'", 1, "C(i) }"),
    ("def f(float(N) A) -> (B) { B(i) = A(i, j) }", "'A' has 1 dimension(s), accessed with 2", 1,
     "A(i, j)"),
    ("def f(float(N) A) -> (B) { A(i) = B(i) }", "cannot write input 'A'", 1, "A(i) ="),
    ("def f(float(N) A) -> (B) { C(i) = A(i) }", "unknown tensor 'C': only the outputs", 1, "C(i)"),
    ("def f(float(N) A) -> (B) { B(i) = A(k) }",
     "index 'k' appears only on the right-hand side of '='", 1, "k) }"),
    ("def f(float(N,M) A) -> (B) { B(i) += B(i) * A(i,k) }",
     "'B' is reduced with '+=' and also read on the right-hand side", 1, "B(i) * A"),
    ("def f(float(N) A) -> (B) { B(i) = A(i) where j in 0:N }",
     "unknown index 'j': the statement does not use it", 1, "j in"),
    ("def f(float(N) A) -> (B) { B(i) = A(i) where i in 0:i }",
     "a range bound may use sizes and constants, not index 'i'", 1, "i }"),
    ("def f(float(N) A) -> (B) { B(i) = A(0.5) }", "a subscript must be an integer", 1, "0.5"),
    ("def f(float(N) A) -> (B) { B(i) = A(i * i) }", "a subscript must be affine", 1, "i * i"),
    ("def f(float(N) A, float(N) X) -> (B) { B(i) = A(X(i)) }", "a subscript must be an integer",
     1, "X(i)"),
    ("def f(float(N) A) -> (B) { B(i) = A }", "tensor 'A' needs 1 subscript(s)", 1, "A }"),
    ("def f(float(N) A) -> (B) { B(i) = exp(A(i), 2) }", "'exp' takes 1 argument(s), given 2", 1,
     "exp("),
    ("def f(float(N) A) -> (B) { B(i) = A(i) % 2 }", "'%' takes integers", 1, "% 2"),
    ("def f(float(N) A) -> (B) { B(i, i) = A(i) }", "index 'i' appears twice", 1, "i) ="),
    ("def f(float(N) A) -> (B) { B(N) = A(0) }", "'N' is not an index", 1, "N) ="),
    ("def f(float(N) A) -> (B, C) { B(i) = A(i) }", "output 'C' is never written", 1, "C) {"),
    ("def f(float(N) A, float(N) A) -> (B) { B(i) = A(i) }", "'A' is declared twice", 1,
     "float(N) A)"),
    ("def f(float(N) A) -> (B) { B(i) = A.1 }", "there is no 'A.1'", 1, "A.1"),
    ("def f(float(N) A) -> (B) { B = g(A) }", "unknown definition 'g'", 1, "B ="),
    ("def g(float(N) x) -> (y) { y(i) = x(i) }\ndef f(float(N,M) A) -> (B) { B = g(A) }",
     "'g' takes a rank-1 tensor for 'x', given 'A' of rank 2", 2, "A) }"),
    ("def g(float(N) x) -> (y) { y(i) = x(i) }\ndef f(double(N) A) -> (B) { B = g(A) }",
     "'g' takes f32 for 'x', given 'A' of f64", 2, "A) }"),
    ("def g(float(N) x) -> (y) { y(i) = x(i) }\ndef f(float(N) A) -> (B) { B = g(A, A) }",
     "'g' takes 1 argument(s), given 2", 2, "B ="),
    ("def g(float(N) x) -> (y) { y(i) = x(i) }\ndef g(float(N) x) -> (y) { y(i) = x(i) }",
     "definition 'g' is defined twice", 2, "def"),
]  # fmt: skip


@pytest.mark.parametrize(("source", "message", "line", "marker"), BAD)
def test_semantic_errors_name_the_problem_and_its_position(
    source: str, message: str, line: int, marker: str
) -> None:
    with pytest.raises(CompileError) as caught:
        check(source)
    error = caught.value
    assert message in error.message
    assert (error.file, error.line, error.column) == ("k.tc", *position(source, line, marker))
    assert error.format().splitlines()[-1] == " " * (error.column - 1) + "^"
