"""Range inference for TC (polyflow/frontend/tc/ranges.py) and the symbolic sizes it computes
with (sizes.py): ranges and output shapes of known layers, TC's rounds, errors."""

from __future__ import annotations

import pytest

from polyflow.errors import CompileError
from polyflow.frontend.tc.checks import check_program
from polyflow.frontend.tc.parser import parse
from polyflow.frontend.tc.ranges import InferredDefinition, infer_ranges, specialize
from polyflow.frontend.tc.sizes import Size, largest, smallest


def infer(source: str) -> dict[str, InferredDefinition]:
    checked = check_program(parse(source, file="k.tc"), source=source, file="k.tc")
    inferred: dict[str, InferredDefinition] = {}
    for name, definition in checked.items():
        inferred[name] = infer_ranges(definition, source=source, file="k.tc", callees=inferred)
    return inferred


def ranges_of(definition: InferredDefinition, statement: int = 0) -> dict[str, str]:
    return {i: str(r) for i, r in definition.statements[statement].ranges.items()}


def shape_of(definition: InferredDefinition, tensor: str) -> list[str]:
    return [str(s) for s in definition.shapes[tensor]]


# ----- sizes


def test_sizes_normalize_and_print_like_arithmetic() -> None:
    h, kh = Size.of("H"), Size.of("KH")
    assert h - kh + 1 == 1 + h - kh
    assert str(h - kh + 1) == "H - KH + 1"
    assert str(kh * -2 + 3) == "-2*KH + 3"
    assert (h * 4).floordiv(2) == h * 2
    assert str((h - 2).floordiv(2) + 1) == "floor(H / 2)"
    assert str((h - kh).ceildiv(3)) == "floor((H - KH + 2) / 3)"
    assert str(smallest([h, h - 1, kh])) == "min(H - 1, KH)"
    assert largest([Size.of(0), Size.of(3)]) == Size.of(3)
    assert (h - kh).floordiv(3).evaluate({"H": 11, "KH": 3}) == 2
    assert smallest([h, kh]).evaluate({"H": 5, "KH": 3}) == 3
    assert (h - kh).names() == {"H", "KH"}


# ----- inference


def test_matrix_vector_ranges_come_from_the_signature() -> None:
    mv = infer("def mv(float(M,K) A, float(K) x) -> (C) { C(i) +=! A(i,k) * x(k) }")["mv"]
    assert ranges_of(mv) == {"i": "0:M", "k": "0:K"}
    assert shape_of(mv, "C") == ["M"]


def test_convolution_output_shrinks_by_the_filter() -> None:
    source = """def conv2d(float(B,IP,H,W) in, float(OP,IP,KH,KW) weight) -> (out) {
      out(b,op,h,w) +=! in(b,ip, h + kh, w + kw) * weight(op,ip, kh,kw)
    }"""
    conv = infer(source)["conv2d"]
    assert ranges_of(conv) == {
        "b": "0:B", "op": "0:OP", "h": "0:H - KH + 1", "w": "0:W - KW + 1",
        "ip": "0:IP", "kh": "0:KH", "kw": "0:KW",
    }  # fmt: skip
    assert shape_of(conv, "out") == ["B", "OP", "H - KH + 1", "W - KW + 1"]


def test_rounds_resolve_a_stencil_filter_before_the_shifted_index() -> None:
    # Round 1: only K(k) has a single unknown index; round 2: B(i + k), with k known.
    stencil = infer("def s(float(N) B, float(K) Kf) -> (A) { A(i) +=! B(i + k) * Kf(k) }")["s"]
    assert ranges_of(stencil) == {"i": "0:N - K + 1", "k": "0:K"}


def test_indices_bounded_twice_take_the_intersection() -> None:
    both = infer("def f(float(N) A, float(M) B) -> (C) { C(i) = A(i) + B(i) }")["f"]
    assert ranges_of(both) == {"i": "0:min(M, N)"}
    same = infer("def f(float(N) A, float(N, N) B) -> (C) { C(i) = A(i) + B(i, i) }")["f"]
    assert ranges_of(same) == {"i": "0:N"}


def test_strides_divide_and_where_clauses_fix_ranges() -> None:
    source = """
    def sconv(float(N,C,H,W) I, float(F,C,KH,KW) Wt) -> (O) {
      O(n,f,h,w) +=! I(n,c, 2 * h + kh, 3 * w + kw) * Wt(f,c,kh,kw)
    }
    def maxpool(float(B,C,H,W) in) -> (out) {
      out(b,c,i,j) max=! in(b,c, 2 * i + kh, 2 * j + kw) where kh in 0:2, kw in 0:2
    }"""
    inferred = infer(source)
    assert shape_of(inferred["sconv"], "O") == [
        "N", "F", "floor((H - KH) / 2) + 1", "floor((W - KW) / 3) + 1",
    ]  # fmt: skip
    assert shape_of(inferred["maxpool"], "out") == ["B", "C", "floor(H / 2)", "floor(W / 2)"]
    assert specialize(
        inferred["sconv"], {"N": 1, "C": 2, "H": 11, "W": 13, "F": 2, "KH": 3, "KW": 3},
        source=source,
    ).shapes["O"] == (1, 2, 5, 4)  # fmt: skip


def test_later_statements_use_the_shapes_earlier_ones_inferred() -> None:
    source = """def fcrelu(float(B,I) in, float(O,I) weight, float(O) bias) -> (out) {
      out(b,o) = bias(o) where b in 0:B
      out(b,o) += in(b,i) * weight(o,i)
      out(b,o) = fmax(out(b,o), 0)
    }"""
    fcrelu = infer(source)["fcrelu"]
    assert shape_of(fcrelu, "out") == ["B", "O"]
    assert [ranges_of(fcrelu, n) for n in range(3)] == [
        {"b": "0:B", "o": "0:O"},
        {"b": "0:B", "o": "0:O", "i": "0:I"},
        {"b": "0:B", "o": "0:O"},
    ]


def test_gathers_constrain_through_their_index_tensor() -> None:
    gather = infer("def g(float(N) X, int32(A,B) I) -> (Z) { Z(i,j) = X(I(i,j)) }")["g"]
    assert ranges_of(gather) == {"i": "0:A", "j": "0:B"}


def test_calls_give_outputs_the_callee_shapes_in_the_callers_sizes() -> None:
    source = """
    def mv(float(M,K) A, float(K) x) -> (C) { C(i) +=! A(i,k) * x(k) }
    def mv2(float(P,Q) A, float(Q) x) -> (C, D) {
      C = mv(A, x)
      D(i) = 2 * C(i)
    }"""
    inferred = infer(source)["mv2"]
    assert shape_of(inferred, "C") == ["P"]
    assert shape_of(inferred, "D") == ["P"]


def test_explain_lists_shapes_and_ranges() -> None:
    mv = infer("def mv(float(M,K) A, float(K) x) -> (C) {\n C(i) +=! A(i,k) * x(k)\n}")["mv"]
    assert mv.explain() == "def mv:\n  output C: f32(M)\n  line 2: C: i in 0:M, k in 0:K"


def test_specialize_evaluates_for_actual_sizes() -> None:
    source = "def s(float(N) B, float(K) Kf) -> (A) { A(i) +=! B(i + k) * Kf(k) }"
    concrete = specialize(infer(source)["s"], {"N": 10, "K": 3}, source=source)
    assert concrete.shapes == {"B": (10,), "Kf": (3,), "A": (8,)}
    assert concrete.ranges == ({"i": (0, 8), "k": (0, 3)},)


ERRORS = [
    ("def f(float(N) A) -> (B) { B(i, j) = A(i) }", {}, "cannot infer the range of index 'j'",
     "B(i, j)"),
    ("def f(float(N) A) -> (B) { B(i) = A(i + 1) where i in 0:N }", {"N": 4},
     "'A' is read at 1..4 in dimension 0, outside 0..3", "A(i + 1)"),
    ("def s(float(N) B, float(K) Kf) -> (A) { A(i) +=! B(i + k) * Kf(k) }", {"N": 2, "K": 3},
     "'A' would have shape (0,)", "A) {"),
    ("def f(float(N) A) -> (B) { B(i) = A(i) where i in 0:N - 5 }", {"N": 4},
     "'B' would have shape (-1,)", "B) {"),
]  # fmt: skip


@pytest.mark.parametrize(("source", "sizes", "message", "marker"), ERRORS)
def test_range_errors_point_at_the_statement_or_read(
    source: str, sizes: dict[str, int], message: str, marker: str
) -> None:
    with pytest.raises(CompileError) as caught:
        for inferred in infer(source).values():
            specialize(inferred, sizes, source=source, file="k.tc")
    error = caught.value
    assert message in error.message
    assert (error.line, error.column) == (1, source.index(marker) + 1)
