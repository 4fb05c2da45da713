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


def test_loops_of_functions_left_to_the_c_compiler_say_why(server: Server) -> None:
    source = (
        "#include <stdio.h>\n"
        "void show(int n, double a[n]) {\n"
        "  for (int i = 0; i < n; i++)\n"
        '    printf("%f\\n", a[i]);\n'
        "}\n"
        "void twice(int n, double a[n]) { for (int i = 0; i < n; i++) a[i] *= 2; }\n"
        "int main(void) {\n"
        "  double a[8] = {0};\n"
        "  for (int r = 0; r < 3; r++) { twice(8, a); show(8, a); }\n"
        "  return 0;\n"
        "}\n"
    )
    request = {"language": "c", "source": source, "options": {"opt_level": 3}, "explore": True}
    status, body = server.compile(request)
    assert status == 200, body
    loops = {(loop["function"], loop["line"]): loop for loop in body["explore"]["loops"]}
    assert list(loops) == [("show", 3), ("twice", 6), ("main", 9)]
    assert loops["show", 3]["badges"] == [] and loops["show", 3]["why_not"] == [
        "'show' is not compiled: call to 'printf', which is not a function of this file or of "
        "math.h (at 4:5)"
    ]
    assert "raised" in loops["twice", 6]["badges"]
    assert loops["main", 9]["column"] == 3
    assert loops["main", 9]["why_not"][0].startswith("main is not compiled")


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


def test_for_cuda_the_loops_mapped_to_blocks_and_threads_are_parallel(server: Server) -> None:
    request = {
        "language": "c",
        "source": EXAMPLE_C,
        "entry": "matmul",
        "target": "cuda",
        "emit": ["affine-opt", "gpu"],
        "explore": True,
    }
    status, body = server.compile(request)
    assert status == 200, body
    explore = body["explore"]
    assert set(explore["stages"]) == {"affine-opt", "gpu"}
    axes = {
        loop["line"]: loop["details"].get("gpu_axis")
        for loop in explore["loops"]
        if loop["function"] == "matmul"
    }
    assert axes == {2: "y", 3: "x", 4: None}
    # the other functions are not compiled for this request, and their loops say so
    (stencil_time,) = [loop for loop in explore["loops"] if loop["line"] == 9]
    assert stencil_time["why_not"] == ["'stencil' is not compiled: the request's entry is 'matmul'"]
    assert "parallel" in _loop(explore, 2)["badges"] and "parallel" not in _loop(explore, 4)["badges"]
    host = base64.b64decode(body["artifacts"]["host.mlir"]).decode()
    assert "gpu.launch_func" in host and not re.search(r"(?<![\w.])loc\(", host)


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
        "grad": None,
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


@pytest.mark.parametrize("compile_timeout", [None, 60.0])
def test_the_polyhedral_stage_records_dependences_only_when_asked(
    compile_timeout: float | None,
) -> None:
    """polyflow.schedule.recording_dependences: each scop's dependences by function symbol,
    also from the forked process that schedules under --compile-timeout; nothing outside it."""
    from polyflow.drivers.compile import compile_module
    from polyflow.drivers.sources import c_module
    from polyflow.options import Options
    from polyflow.schedule import recording_dependences, timer

    options = Options(opt_level=3, compile_timeout=compile_timeout)

    def schedule() -> None:
        cmod = c_module(EXAMPLE_C, "<input>", options, only=("stencil",))
        with cmod.context:
            compile_module(cmod.module, options, produce="ir", stop_after="affine-opt", cache=None)

    with recording_dependences() as recorded:
        schedule()
    (symbol,) = [name for name, scops in recorded.items() if scops]
    assert symbol.startswith("stencil")
    (scop,) = recorded[symbol]
    assert scop["statements"] == {"S0": [11, 7], "S1": [13, 7]}
    assert {d["kind"] for d in scop["dependences"]} == {"flow", "anti", "output"}
    assert scop["left_out"] == 0
    assert timer.dependences is None
    schedule()  # not recording: nothing kept
    assert timer.dependences is None


RUN_C = r"""#include <stdio.h>
#define N 160
static double A[N][N], B[N][N], C[N][N];

void matmul(double A[N][N], double B[N][N], double C[N][N]) {
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      for (int k = 0; k < N; k++)
        C[i][j] += A[i][k] * B[k][j];
}

int main(void) {
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {
      A[i][j] = (i * j % 7) / 7.0;
      B[i][j] = (i + j) % 5 - 2.0;
    }
  matmul(A, B, C);
  double sum = 0;
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) sum += C[i][j] * (i + 1) - C[j][i] * j;
  printf("%.12g %.12g\n", sum, C[N - 1][N - 2]);
  return 0;
}
"""
KEY = {"Authorization": "Bearer sesame"}


@pytest.fixture(scope="module")
def runner(start_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Server:  # noqa: F811
    """A service that runs submitted code, with an API key and 3 s per run."""
    keys = tmp_path_factory.mktemp("keys") / "keys"
    keys.write_text("sesame\n")
    keys.chmod(0o600)
    return start_server(
        "--workers", "1", "--allow-run", "--api-key-file", str(keys),
        env={"POLYFLOW_SERVE_RUN_SECONDS": "3"},
    )  # fmt: skip


def _run(server: Server, body: dict[str, Any], **kw: Any) -> tuple[int, Any]:
    status, _, payload = server.call("POST", "/v1/run", body, **kw)
    return status, json.loads(payload)


def test_running_needs_allow_run(server: Server) -> None:
    status, body = _run(server, {"language": "c", "source": RUN_C})
    assert status == 403 and "--allow-run" in body["detail"]


def test_a_c_program_runs_against_gcc(runner: Server) -> None:
    status, body = _run(runner, {"language": "c", "source": RUN_C}, headers=KEY)
    assert status == 200, body
    assert body["baseline"] == "gcc -O3 -march=native"
    assert body["outputs_match"] is True, body
    assert body["polyflow_ms"] > 0 and body["baseline_ms"] > 0 and body["runs"] == 3
    assert body["speedup"] == pytest.approx(body["baseline_ms"] / body["polyflow_ms"])


def test_a_tc_definition_runs_against_numpy(runner: Server) -> None:
    source = EXAMPLE_TC + (
        "def pool(float(N,C,H,W) I) -> (O) {\n"
        "  O(n, c, i, j) max=! I(n, c, 2 * i + a, 2 * j + b) where a in 0:2, b in 0:2\n}\n"
    )
    for entry, sizes in (("mm", {"M": 96, "N": 64, "K": 80}), ("pool", {"N": 2, "C": 3, "H": 8, "W": 6})):
        request = {"language": "tc", "source": source, "entry": entry, "sizes": sizes}
        status, body = _run(runner, request, headers=KEY)
        assert status == 200, body
        assert body["baseline"] == "numpy" and body["outputs_match"] is True, body
        assert body["polyflow_ms"] > 0 and body["baseline_ms"] > 0


def test_what_cannot_run_is_refused_with_a_reason(runner: Server) -> None:
    status, body = _run(runner, {"language": "c", "source": EXAMPLE_C}, headers=KEY)
    assert status == 422 and "main()" in body["detail"][0]["message"]
    status, body = _run(runner, {"language": "tc", "source": EXAMPLE_TC}, headers=KEY)
    assert status == 422 and "sizes" in body["detail"][0]["message"]
    forever = "int main(void) {\n  volatile long n = 0;\n  for (;;) n++;\n}\n"
    status, body = _run(runner, {"language": "c", "source": forever}, headers=KEY)
    assert status == 504 and "3 s per run" in body["detail"], body


def test_the_explorer_endpoints_need_a_key(runner: Server) -> None:
    request = {"language": "c", "source": EXAMPLE_C, "emit": ["affine"], "explore": True}
    status, _, _ = runner.call("POST", "/v1/compile", request)
    assert status == 401
    status, _, raw = runner.call("POST", "/v1/compile", request, headers=KEY)
    assert status == 200
    key = json.loads(raw)["key"]
    assert runner.call("GET", f"/v1/results/{key}")[0] == 401
    assert runner.call("GET", f"/v1/results/{key}", headers=KEY)[0] == 200
    assert runner.call("POST", "/v1/run", {"language": "c", "source": RUN_C})[0] == 401
    # the page itself needs no key
    assert runner.call("GET", "/")[0] == 200


def test_below_o3_each_loop_says_the_polyhedral_stage_did_not_run(server: Server) -> None:
    request = {"language": "c", "source": EXAMPLE_C, "options": {"opt_level": 2}, "explore": True}
    status, body = server.compile(request)
    assert status == 200, body
    outer = _loop(body["explore"], 2)
    assert outer["badges"] == ["raised"]
    assert any("runs at -O3 (this compile: -O2)" in reason for reason in outer["why_not"])
    assert body["explore"]["dependences"] == {} and body["explore"]["schedule_trees"] == {}


def test_locations_are_read_through_aliases_names_fusions_and_call_sites() -> None:
    from server.explore import split_locations

    printed = "\n".join(
        [
            '#loc1 = loc("<input>":3:5)',
            "module {",
            '  %0 = "x.op"() {note = "a loc(1) in a string"} : () -> i32 loc(#loc1)',
            '  %1 = arith.addi %0, %0 : i32 loc("S3"(#loc2))',
            "  %2 = arith.muli %0, %0 : i32 loc(fused[unknown, #loc3])",
            '  %3 = memref.alloc() : memref<4xi32> loc(callsite("<input>":9:2 at #loc1))',
            '  scf.if %c loc("other.h":1:1) {',
            "    x.y loc(unknown)",
            "  } else {",
            "  } loc(#loc2)",
            "} loc(unknown)",
            '#loc2 = loc("<input>":7:11)',
            '#loc3 = loc("<input>":8:1 to 8:9)',
        ]
    )
    text, lines = split_locations(printed, ["<input>"])
    assert text.split("\n") == [
        "module {",
        '  %0 = "x.op"() {note = "a loc(1) in a string"} : () -> i32',
        "  %1 = arith.addi %0, %0 : i32",
        "  %2 = arith.muli %0, %0 : i32",
        "  %3 = memref.alloc() : memref<4xi32>",
        "  scf.if %c {",
        "    x.y",
        "  } else {",
        "  }",
        "}",
    ]
    position = [None if p is None else (p["line"], p["column"]) for p in lines]
    assert position == [None, (3, 5), (7, 11), (8, 1), (9, 2), (7, 11), None, (7, 11), (7, 11), None]
