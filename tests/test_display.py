"""polyflow.display: the per-loop table and the renderers on hand-made reports (escaping,
options), the MLIR lexer on the real IR of every stage, `polyflow.show` in plain and ANSI
modes, and the rich reprs of a real TC function and a real `compile_c` result (whose results
are checked against NumPy and gcc -O2)."""

from __future__ import annotations

import ctypes
import html
import io
import re
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pygments.token import Error

import polyflow
import polyflow.tc as tc
from polyflow.display import (
    KernelView,
    highlight_ansi,
    highlight_html,
    lexer_for,
    loop_rows,
    options_diff,
    render_html,
    render_markdown,
    show,
)
from polyflow.errors import SourcePosition
from polyflow.options import Options
from polyflow.report import CompileReport, Remark

ANSI = re.compile(r"\x1b\[[0-9;]*m")
STAGES = ["mlir", "affine", "affine-opt", "llvm-dialect"]


def remark(kind: str, line: int, column: int = 3, *, stage: str = "raising",
           severity: str = "remark", message: str = "", function: str = "f",
           **data: Any) -> Remark:  # fmt: skip
    return Remark(stage, kind, severity, message or kind, function,  # type: ignore[arg-type]
                  SourcePosition("k.c", line, column), data)  # fmt: skip


def loop(line: int, column: int = 3, *, raised: bool = True, reason: str | None = None,
         function: str = "f") -> Remark:  # fmt: skip
    return remark("loop", line, column, function=function, raised=raised, reason=reason,
                  construct="for")  # fmt: skip


# ----- the per-loop table


def test_rows_say_per_loop_what_was_raised_tiled_parallel_and_why_not() -> None:
    report = CompileReport(
        [
            loop(3), loop(4, 5),
            loop(9, reason="a for loop made a while loop by a break", raised=False),
            remark("unraised", 10, 7, reason="subscript 0 is not affine", construct="load"),
            remark("rescheduled", 3, stage="schedule"),
            remark("tiled", 3, stage="schedule", sizes=[32, 64], wavefront=False),
            remark("parallel-loop", 3, stage="schedule"),
            remark("micro-kernel", 4, 5, stage="schedule", rows=6, vectors=2, lanes=8,
                   element="f64"),
        ]
    )  # fmt: skip
    rows = loop_rows(report, main_file="k.c")
    table = [(r.where, r.raised, r.parallel, r.tiled, r.micro_kernel) for r in rows]
    assert table == [
        ("3:3", "yes", "yes", "32x64", "no"),
        ("4:5", "yes", "no", "no", "6 rows x 2 vectors of 8 f64"),
        ("9:3", "no", "-", "-", "-"),
    ]
    assert rows[2].why_not == [
        "a for loop made a while loop by a break",
        "load: subscript 0 is not affine",
    ]


def test_nests_share_one_row_and_schedule_remarks_before_a_loop_find_it() -> None:
    report = CompileReport(
        [
            loop(4), loop(5, 5), loop(6, 7, raised=False, reason="a call"),
            # a scop's remarks stand at its first statement, here `s = 0;` on line 3
            remark("tiled", 3, stage="schedule", sizes=[4, 32, 32], wavefront=True),
            remark("untiled", 3, stage="schedule", severity="note", message="nest untiled"),
        ]
    )  # fmt: skip
    rows = loop_rows(report, main_file="k.c", nests=[("f", 4, 3, 8)])
    assert len(rows) == 1
    row = rows[0]
    assert (row.where, row.raised, row.tiled) == ("4:3", "2 of 3 loops", "4x32x32 (wavefront)")
    assert row.why_not == ["6:7: a call", "nest untiled"]


def test_without_the_polyhedral_stage_the_schedule_columns_say_off() -> None:
    rows = loop_rows(CompileReport([loop(3)]), polyhedral=False)
    assert (rows[0].parallel, rows[0].tiled, rows[0].micro_kernel) == ("off (-O3)",) * 3


def test_a_reduction_kept_sequential_says_why_unless_reassociation_is_on() -> None:
    report = CompileReport([remark("loop", 3, raised=True, reductions=["add"])])
    [row] = loop_rows(report)
    assert row.parallel == "no: reduction"
    assert row.why_not == [
        "its loops carry a reduction (add): a floating-point one runs in parallel only with "
        "-fassociative-math or -ffast-math"
    ]
    [row] = loop_rows(report, reassociation=True)
    assert (row.parallel, row.why_not) == ("no", [])


def test_gpu_kernels_run_their_loops_on_the_gpu() -> None:
    report = CompileReport(
        [
            loop(3),
            remark("gpu-kernel", 3, stage="gpu", message="kernel: loops mapped"),
            remark("gpu-resources", 3, stage="gpu", message="30 registers"),
            remark("gpu-loop-not-mapped", 3, stage="gpu", message="a reduction: in each thread"),
        ]
    )
    [row] = loop_rows(report)
    assert (row.parallel, row.why_not) == ("GPU kernel", ["a reduction: in each thread"])


def test_a_function_left_unraised_gets_a_row_with_the_reason() -> None:
    report = CompileReport(
        [remark("not-raised", 2, 1, severity="warning", function="g", reason="it has a goto")]
    )
    [row] = loop_rows(report)
    assert (row.function, row.raised, row.why_not) == ("g", "no", ["it has a goto"])


# ----- options and the renderers


def test_options_diff_names_only_what_differs_from_the_defaults() -> None:
    assert options_diff(Options()) == {}
    assert options_diff(None) == {}
    diff = options_diff(Options(opt_level=3, tile_sizes=(32, 32), fusion="max"))
    assert diff == {"opt_level": 3, "fusion": "max", "tile_sizes": (32, 32)}


def hostile_view() -> KernelView:
    """A view whose every text holds HTML and Markdown syntax."""
    report = CompileReport(
        [
            loop(3, function="<script>f</script>", raised=False, reason="a | b & <c>"),
            remark("unused", 1, severity="warning", function="<script>f</script>",
                   message="x < y & <blink>on</blink>"),
        ]
    )  # fmt: skip
    return KernelView(
        name="<script>alert(1)</script>",
        language="c",
        signature="void f(int n, double A[n] /* <img src=x> */)",
        details=["A: <array> & more"],
        report=report,
        stages={"mlir": 'func.func @f() attributes {s = "<em>"}', "llvm-dialect": "llvm.return"},
        options=Options(opt_level=3, defines=("X=<1>",)),
        source="void f(int n, double A[n] /* <img src=y> */) { for (;;) {} }",
        file="k.c",
    )


def test_html_escapes_every_text() -> None:
    page = render_html(hostile_view())
    for tag in ("<script>", "<blink>", "<img", "<em>", "<array>", "<c>", "<1>"):
        assert tag not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "a | b &amp; &lt;c&gt;" in page  # the reason, in the table
    assert "x &lt; y &amp; &lt;blink&gt;on&lt;/blink&gt;" in page  # the warning
    assert "defines=(&#x27;X=&lt;1&gt;&#x27;,)" in page  # the options differing from defaults


def test_html_has_the_loop_table_options_and_a_block_per_stage() -> None:
    page = render_html(hostile_view())
    header = re.search(r'<table class="polyflow-loops".*?</thead>', page, re.S)
    assert header is not None
    assert re.findall(r"<th[^>]*>([^<]*)</th>", header.group(0)) == [
        "function", "where", "raised", "parallel", "tiled", "micro-kernel", "why not",
    ]  # fmt: skip
    assert "opt_level=3" in page and "fusion" not in page
    blocks = re.findall(r'<details id="(polyflow-[0-9a-f]+)-([\w-]+)">', page)
    assert [stage for _, stage in blocks] == ["mlir", "llvm-dialect"]
    uid = blocks[0][0]
    for stage in ("mlir", "llvm-dialect"):
        assert f'<a href="#{uid}-{stage}">{stage}</a>' in page  # the links to the stages


def test_long_stages_are_cut_with_a_pointer_to_show() -> None:
    text = "".join(f"%{k} = arith.constant {k} : index\n" for k in range(3000))
    view = KernelView(name="f", language="c", signature="void f(void)", stages={"mlir": text})
    page = render_html(view)
    assert "%10 = arith.constant 10 : index" in html.unescape(re.sub(r"<[^>]+>", "", page))
    left = int(re.search(r"… (\d+) more lines", page).group(1))  # type: ignore[union-attr]
    assert 0 < left < 3000
    assert "polyflow.show(fn, &#x27;mlir&#x27;)" in page


def test_markdown_is_a_compact_equivalent_with_its_cells_escaped() -> None:
    text = render_markdown(hostile_view())
    lines = text.splitlines()
    header = lines.index("| function | where | raised | parallel | tiled | micro-kernel | why not |")
    row = lines[header + 2]
    assert row.count(" | ") == 6  # seven cells: the reason's | is escaped
    assert r"a \| b & \<c\>" in row and r"\<script\>f\</script\>" in row
    assert "- warning: " in text and "`opt_level=3`" in text
    assert "Stages: `mlir`, `llvm-dialect`" in text
    assert "func.func" not in text  # the IR itself is left to show()


def test_options_are_left_out_where_the_view_does_not_know_them() -> None:
    view = KernelView(name="f_grad", language="c", signature="void f_grad(void)",
                      report=CompileReport())  # fmt: skip
    assert "Options" not in render_html(view) and "Options" not in render_markdown(view)
    view.options = Options()
    assert "<b>Options</b>: the defaults" in render_html(view)


def test_a_view_before_any_compile_says_so() -> None:
    view = KernelView(name="mm", language="tc", signature="def mm(float(M) A) -> (B)",
                      status="not specialized yet: call it")  # fmt: skip
    page = render_html(view)
    assert "not specialized yet: call it" in page and "polyflow-loops" not in page
    assert "*not specialized yet: call it*" in render_markdown(view)


# ----- real kernels: the lexers, the reprs, show()

MATMUL = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(i,j) +=! A(i,k) * B(k,j) }"

C_SOURCE = """\
void smooth(int n, double A[n][n], double B[n][n], double *total) {
  for (int t = 0; t < 2; t++) {
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++)
        B[i][j] = 0.25 * (A[i - 1][j] + A[i + 1][j] + A[i][j - 1] + A[i][j + 1]);
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++)
        A[i][j] = B[i][j];
  }
  double s = 0;
  for (int i = 0; i < n; i++) {
    if (A[i][1] > 0.75) break;
    s += A[i][1];
  }
  *total = s;
}
"""


@pytest.fixture(scope="module")
def mm() -> Any:
    """The TC matmul, called once on 24x16 @ 16x20 (checked against NumPy)."""
    fn = tc.define(MATMUL)
    rng = np.random.default_rng(5)
    a = rng.standard_normal((24, 16), dtype=np.float32)
    b = rng.standard_normal((16, 20), dtype=np.float32)
    np.testing.assert_allclose(fn(a, b), a @ b, rtol=1e-4, atol=1e-5)
    return fn


def smooth_inputs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = 12
    a = np.fromfunction(lambda i, j: ((i * 7 + j * 3) % 10) / 10.0, (n, n))
    return a, np.zeros((n, n)), np.zeros(1)


@pytest.fixture(scope="module")
def smooth(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The C kernel compiled at -O3, its results checked against gcc -O2's build of it."""
    tmp: Path = tmp_path_factory.mktemp("gcc")
    (tmp / "k.c").write_text(C_SOURCE)
    library = tmp / "libk.so"
    subprocess.run(
        ["gcc", "-O2", "-shared", "-fPIC", "-o", str(library), str(tmp / "k.c")], check=True
    )
    lib = ctypes.CDLL(str(library))
    fn = polyflow.compile_c(C_SOURCE, "smooth", options={"opt_level": 3})
    ours, theirs = smooth_inputs(), smooth_inputs()
    fn(12, *ours)
    lib.smooth(ctypes.c_int(12), *(ctypes.c_void_p(a.ctypes.data) for a in theirs))
    for got, want in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(got, want)
    return fn


def error_tokens(text: str, language: str) -> list[str]:
    """The text around each token the lexer could not read."""
    tokens = list(lexer_for(language).get_tokens(text))
    return [
        "".join(v for _, v in tokens[max(0, k - 5) : k + 3])
        for k, (kind, _) in enumerate(tokens)
        if kind in Error
    ]


def test_the_lexers_read_every_stage_of_a_tc_kernel(mm: Any) -> None:
    assert list(mm._last.stages) == STAGES
    for stage in STAGES:
        assert error_tokens(mm.mlir(stage), stage) == [], stage
    # the gradient's module (compiled apart: it becomes the function's last compile)
    rng = np.random.default_rng(1)
    args = (rng.standard_normal((4, 3), dtype=np.float32),
            rng.standard_normal((3, 5), dtype=np.float32))  # fmt: skip
    assert error_tokens(tc.define(MATMUL).mlir("grad", *args), "grad") == []
    assert error_tokens(MATMUL, "tc") == []


def test_the_lexers_read_every_stage_of_a_c_kernel(smooth: Any, tmp_path: Path) -> None:
    assert list(smooth.stages) == STAGES
    for stage in STAGES:
        assert error_tokens(smooth.mlir(stage), stage) == [], stage
    assert error_tokens(C_SOURCE, "c") == []
    # LLVM IR (the `llvm` stage of a build): Pygments' LLVM lexer
    (tmp_path / "k.c").write_text(C_SOURCE)
    polyflow.build_program(tmp_path / "k.c", tmp_path / "k.ll", emit="llvm",
                           options=Options(opt_level=3), cache=None)  # fmt: skip
    llvm = (tmp_path / "k.ll").read_text()
    assert "define " in llvm
    assert error_tokens(llvm, "llvm") == []


def test_the_lexers_read_the_gpu_stages_of_a_cuda_build() -> None:
    fn = tc.define(MATMUL, target="cuda")
    rng = np.random.default_rng(2)
    a = rng.standard_normal((8, 4), dtype=np.float32)
    b = rng.standard_normal((4, 6), dtype=np.float32)
    np.testing.assert_allclose(fn.emulate(a, b), a @ b, rtol=1e-5, atol=1e-6)
    stages = fn._last.stages
    assert {"gpu", "ptx"} <= set(stages)
    for stage, text in stages.items():
        assert error_tokens(text, stage) == [], stage


def test_the_mlir_lexer_tells_ops_values_types_and_attributes_apart() -> None:
    text = '%0 = arith.addf %a, %b_1 : vector<16xf32> loc("k.c":3:5)\n^bb0: // done'
    kinds = {v: str(t) for t, v in lexer_for("mlir").get_tokens(text) if v.strip()}
    assert kinds["arith.addf"] == "Token.Name.Builtin"
    assert kinds["%b_1"] == "Token.Name.Variable"
    assert kinds["16x"] == kinds["f32"] == "Token.Keyword.Type"
    assert kinds['"k.c"'] == "Token.Literal.String.Double"
    assert kinds["^bb0"] == "Token.Name.Label"
    assert kinds["// done"] == "Token.Comment.Single"


def test_tc_repr_shows_the_signature_ranges_loops_options_and_stages(mm: Any) -> None:
    page = mm._repr_html_()
    assert "polyflow-loops" in page
    assert "last call: M=24, K=16, N=20 (C: 24x20)" in page
    assert "output C: f32(M, N)" in page
    assert "march=&#x27;native&#x27;" in page
    for stage in STAGES:
        assert f'-{stage}"><summary><code>{stage}</code>' in page
    text = ANSI.sub("", re.sub(r"<[^>]+>", "", page))
    assert "def mm(float(M,K) A, float(K,N) B) -&gt; (C)" in text
    markdown = mm._repr_markdown_()
    assert "| mm | 1:45 | yes |" in markdown


def test_tc_repr_before_a_call_says_it_is_not_specialized_yet() -> None:
    fn = tc.define(MATMUL)
    page = fn._repr_html_()
    assert "not specialized yet" in page and "polyflow-loops" not in page
    assert "line 1: C: i in 0:M, j in 0:N, k in 0:K" in page
    assert "not specialized yet" in fn._repr_markdown_()


def test_c_repr_has_one_row_per_loop_nest(smooth: Any) -> None:
    markdown = smooth._repr_markdown_()
    rows = [line for line in markdown.splitlines() if line.startswith("| smooth |")]
    assert len(rows) == 2, markdown  # the sweeps (one nest from line 2), the loop with a break
    assert rows[0].startswith("| smooth | 2:3 | yes |")
    assert rows[1].startswith("| smooth | 11:3 | no |") and "while loop" in rows[1]
    assert "void smooth(int n, double A[n][n], double B[n][n], double *total)" in markdown
    assert "A: double array, shape (n, n)" in markdown
    page = smooth._repr_html_()
    assert "polyflow-loops" in page and "<summary>source</summary>" in page
    assert "isl schedule tree of <code>smooth</code>" in page
    for stage in STAGES:
        assert f"<code>{stage}</code>" in page


def test_show_prints_plain_text_where_stdout_is_no_terminal(
    smooth: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    show(smooth, "affine")
    out = capsys.readouterr().out
    assert out == smooth.mlir("affine").rstrip("\n") + "\n"
    polyflow.show(smooth)  # the attribute of the package; affine-opt by default
    assert capsys.readouterr().out.strip() == smooth.mlir("affine-opt").strip()


def test_show_colours_for_a_terminal(mm: Any) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Terminal()
    show(mm, "affine-opt", file=out)
    coloured = out.getvalue()
    assert "\x1b[" in coloured
    assert ANSI.sub("", coloured).strip() == mm.mlir("affine-opt").strip()
    forced = io.StringIO()
    show("llvm.return", color=True, file=forced)
    assert "\x1b[" in forced.getvalue()


def test_show_takes_ir_text_and_guesses_its_language(capsys: pytest.CaptureFixture[str]) -> None:
    llvm = "define void @f() {\n  ret void\n}\n"
    show(llvm, color=True)
    coloured = capsys.readouterr().out
    assert ANSI.sub("", coloured) == llvm
    assert coloured == highlight_ansi(llvm, "llvm")
    assert "<pre" in highlight_html(llvm, "llvm")


def test_show_names_the_stages_there_are(mm: Any, smooth: Any) -> None:
    for fn in (mm, smooth):
        with pytest.raises(ValueError, match=r"has no stage 'afine': the stages available are "
                           r"mlir, affine, affine-opt, llvm-dialect"):  # fmt: skip
            show(fn, "afine")
    with pytest.raises(ValueError, match="has not run yet"):
        show(tc.define(MATMUL), "affine")
    with pytest.raises(TypeError, match=r"anything with .mlir.stage.\) or IR text, got int"):
        show(3)
