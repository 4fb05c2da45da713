"""The web explorer's side of the compile service, through a real uvicorn server on loopback:
`explore` in /v1/compile (loop badges and reasons at their source lines, stages without
locations with each line's source position, dependences, statements), share links
(/v1/results/KEY), runs against gcc and NumPy (/v1/run) and API keys on all of them."""

from __future__ import annotations

import base64
import ctypes
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_server import Server, start_server  # noqa: F401  (the fixture that starts servers)

# line numbers matter: the tests name them
EXAMPLE_C = """\
void matmul(double A[256][256], double B[256][256], double C[256][256]) {
  for (int i = 0; i < 256; i++)
    for (int j = 0; j < 256; j++)
      for (int k = 0; k < 256; k++)
        C[i][j] += A[i][k] * B[k][j];
}

void stencil(int T, double a[512], double b[512]) {
  for (int t = 0; t < T; t++) {
    for (int i = 1; i < 511; i++)
      b[i] = 0.33 * (a[i - 1] + a[i] + a[i + 1]);
    for (int i = 1; i < 511; i++)
      a[i] = b[i];
  }
}

void gather(int n, int *count, double *x, double *y) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < count[i]; j++)
      y[i] += x[j];
}
"""
MATMUL_LINE = 5  # C[i][j] += A[i][k] * B[k][j]
EXAMPLE_TC = """\
def mm(float(M,K) A, float(K,N) B) -> (C) {
  C(m, n) +=! A(m, k) * B(k, n)
}
"""
STAGES = ["mlir", "affine", "affine-opt", "llvm-dialect"]


@pytest.fixture(scope="module")
def server(start_server: Any) -> Server:  # noqa: F811
    return start_server("--workers", "2")


@pytest.fixture(scope="module")
def c_answer(server: Server) -> dict[str, Any]:
    request = {
        "language": "c",
        "source": EXAMPLE_C,
        "options": {"opt_level": 3},
        "emit": STAGES,
        "explore": True,
    }
    status, body = server.compile(request)
    assert status == 200, body
    return dict(body)


def _loop(explore: dict[str, Any], line: int) -> dict[str, Any]:
    (loop,) = [loop for loop in explore["loops"] if loop["line"] == line]
    return dict(loop)


def test_each_source_loop_has_its_badges_and_reasons(c_answer: dict[str, Any]) -> None:
    explore = c_answer["explore"]
    assert explore["language"] == "c"
    assert [(loop["function"], loop["line"]) for loop in explore["loops"]] == [
        ("matmul", 2), ("matmul", 3), ("matmul", 4),
        ("stencil", 9), ("stencil", 10), ("stencil", 12),
        ("gather", 18), ("gather", 19),
    ]  # fmt: skip
    outer = _loop(explore, 2)
    assert outer["column"] == 3
    assert outer["badges"] == ["raised", "parallel", "tiled", "micro-kernel"], outer
    assert outer["details"]["tile_sizes"] and outer["details"]["micro_kernel"]
    assert _loop(explore, 4)["details"]["reductions"] == ["add"]
    assert _loop(explore, 4)["why_not"] == []
    # the stencil's time loop: raised, kept in source order (and the note says why)
    time_loop = _loop(explore, 9)
    assert time_loop["badges"][0] == "raised" and "tiled" not in time_loop["badges"]
    assert any("source order kept" in reason for reason in time_loop["why_not"]), time_loop
    # a bound loaded in the outer loop: the inner loop is not raised, and says why
    inner = _loop(explore, 19)
    assert "raised" not in inner["badges"]
    assert any(reason.startswith("not raised:") for reason in inner["why_not"]), inner
    # the schedule trees of the rescheduled function
    assert "S0[" in explore["schedule_trees"]["matmul"]


def test_the_kernels_compute_what_numpy_does(c_answer: dict[str, Any], tmp_path: Path) -> None:
    library = tmp_path / "kernel.so"
    library.write_bytes(base64.b64decode(c_answer["artifacts"]["kernel.so"]))
    matmul = ctypes.CDLL(str(library)).__polyflow_matmul
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((256, 256)), rng.standard_normal((256, 256))
    c = np.zeros((256, 256))
    pointer = ctypes.POINTER(ctypes.c_double)
    matmul.argtypes = [pointer] * 3
    matmul(*(m.ctypes.data_as(pointer) for m in (a, b, c)))
    np.testing.assert_allclose(c, a @ b, rtol=1e-12, atol=1e-12)


def test_stage_lines_map_ops_to_their_source_lines(c_answer: dict[str, Any]) -> None:
    stages = c_answer["explore"]["stages"]
    assert set(stages) == set(STAGES)
    for name in STAGES:
        text, lines = stages[name]["text"], stages[name]["lines"]
        assert not re.search(r"(?<![\w.])loc\(", text) and "#loc" not in text
        assert len(text.split("\n")) == len(lines)
        # the answer's own stages are the same text, as without `explore`
        assert c_answer["stages"][name] == text
    for name in ("affine", "affine-opt"):
        text, lines = stages[name]["text"], stages[name]["lines"]
        mulf = [lines[i] for i, line in enumerate(text.split("\n")) if "arith.mulf" in line]
        in_matmul = [p for p in mulf if p is not None and p["line"] == MATMUL_LINE]
        assert in_matmul, (name, mulf)
        assert all(p is None or p["line"] in (MATMUL_LINE, 11) for p in mulf)
        # a loop's line (`affine.for ... {`) has the loop's position, from its closing line
        fors = [lines[i] for i, line in enumerate(text.split("\n")) if "affine.for" in line]
        assert fors and all(p is not None for p in fors), name
    affine = stages["affine"]
    (outer,) = [
        affine["lines"][i]
        for i, line in enumerate(affine["text"].split("\n"))
        if "affine.for %arg3 = 0 to %0 {" in line
    ]  # the stencil's time loop
    assert outer == {"line": 9, "column": 3}


def test_dependences_of_a_stencil(c_answer: dict[str, Any]) -> None:
    explore = c_answer["explore"]
    deps = explore["dependences"]["stencil"]
    kinds = {d["kind"] for d in deps}
    assert kinds == {"flow", "anti", "output"}
    (write_then_copy,) = [
        d for d in deps if d["kind"] == "flow" and d["source_line"] == 11 and d["sink_line"] == 13
    ]
    assert "S0[" in write_then_copy["relation"] and "-> S1[" in write_then_copy["relation"]
    assert explore["statements"]["stencil"] == {
        "S0": {"line": 11, "column": 7},
        "S1": {"line": 13, "column": 7},
    }
    assert explore["dependences_truncated"] == {}


def test_a_tc_definition_has_its_statement_as_one_loop(server: Server) -> None:
    request = {
        "language": "tc",
        "source": EXAMPLE_TC,
        "sizes": {"M": 64, "N": 48, "K": 32},
        "emit": ["mlir", "affine", "affine-opt"],
        "options": {"opt_level": 3},
        "explore": True,
    }
    status, body = server.compile(request)
    assert status == 200, body
    explore = body["explore"]
    assert explore["language"] == "tc"
    (loop,) = explore["loops"]
    assert (loop["function"], loop["line"], loop["column"]) == ("mm", 2, 3)
    assert loop["badges"][0] == "raised" and "parallel" in loop["badges"]
    stage = explore["stages"]["affine"]
    mulf = [stage["lines"][i] for i, t in enumerate(stage["text"].split("\n")) if "mulf" in t]
    assert mulf and all(p == {"line": 2, "column": 3} for p in mulf)
    assert "mm" in explore["dependences"]


def test_explore_is_part_of_the_key_and_a_share_link_finds_the_request(
    server: Server, c_answer: dict[str, Any]
) -> None:
    plain = {"language": "c", "source": EXAMPLE_C, "options": {"opt_level": 3}, "emit": STAGES}
    status, body = server.compile(plain)
    assert status == 200 and body["key"] != c_answer["key"]
    assert body.get("explore") is None
    status, _, raw = server.call("GET", f"/v1/results/{body['key']}")
    assert status == 404, raw  # not compiled for the explorer
    status, _, raw = server.call("GET", f"/v1/results/{'0' * 64}")
    assert status == 404
    status, _, raw = server.call("GET", f"/v1/results/{c_answer['key']}")
    assert status == 200
    shared = json.loads(raw)
    assert shared["request"] == {
        "language": "c",
        "source": EXAMPLE_C,
        "entry": None,
        "target": "cpu",
        "options": {"opt_level": 3},
        "sizes": None,
        "emit": STAGES,
        "explore": True,
    }
    result = shared["result"]
    assert result["key"] == c_answer["key"] and result["cached"] is True
    assert result["explore"] == c_answer["explore"]
    # the same request again is a cache hit with the same explore section
    status, again = server.compile({**plain, "explore": True})
    assert status == 200 and again["cached"] is True and again["explore"] == c_answer["explore"]


def test_errors_keep_their_positions(server: Server) -> None:
    status, body = server.compile(
        {"language": "c", "source": "void f(int n) {\n  n +;\n}\n", "explore": True}
    )
    assert status == 422
    (error,) = body["detail"]
    assert error["line"] == 2 and error["column"] > 0 and error["message"]
