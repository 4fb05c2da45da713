"""polyflow.remote.Client against a real `polyflow serve` on loopback (tests/test_server.py's
start-up fixture): C and TC compiles read as local results, the object file linked with a gcc
main and checked against gcc -O2, the cache key, errors at the server's line and column,
options checked before any request, API keys, retries on a real 503 (the one worker stopped with
SIGSTOP while it holds a job), and a tuning. No MLIR is loaded in the client's process."""

from __future__ import annotations

import ctypes
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import test_server

import polyflow
from polyflow.errors import CompileError
from polyflow.remote import (
    AuthenticationError,
    Client,
    InvalidRequest,
    RemoteCompileError,
    RemoteError,
    RemoteResult,
    RemoteTimeout,
    Retry,
    ServiceUnreachable,
    retry_delay,
)
from polyflow.report import CompileReport
from polyflow.toolchain import openmp_library_dir

ROOT = Path(__file__).resolve().parent.parent

# a loop nest the polyhedral stage tiles and parallelizes; its main prints every element
MATMUL = """\
void matmul(int n, double A[40][40], double B[40][40], double C[40][40]) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      C[i][j] = 0.0;
      for (int k = 0; k < n; k++)
        C[i][j] += A[i][k] * B[k][j];
    }
}
"""
MATMUL_MAIN = """\
#include <stdio.h>
static double A[40][40], B[40][40], C[40][40];
int main(void) {
  for (int i = 0; i < 40; i++)
    for (int j = 0; j < 40; j++) {
      A[i][j] = (i * 7 + j * 3) % 11 / 3.0;
      B[i][j] = (i * 5 + j) % 13 / 7.0 - 0.5;
    }
  CALL(37, A, B, C);
  for (int i = 0; i < 40; i++)
    for (int j = 0; j < 40; j++) printf("%.17g\\n", C[i][j]);
  return 0;
}
"""
MV_TC = "def mv(float(M,K) A, float(K) x) -> (C) { C(i) +=! A(i,k) * x(k) }"
SCALE = "void scale(int n, double a[100]) { for (int i = 0; i < n; i++) a[i] = 2 * a[i]; }\n"
KEY = "open-sesame"

# the service's start-up fixture of test_server.py
start_server = test_server.start_server


@pytest.fixture(scope="module")
def service(start_server: Any, tmp_path_factory: pytest.TempPathFactory) -> test_server.Server:
    """One worker and no queue: a compile that finds the worker busy is a 503 at once (what the
    retry test needs); it also runs tunings."""
    tuning_db = tmp_path_factory.mktemp("tuning") / "tuning.sqlite3"
    return start_server(
        "--workers", "1", "--max-queue", "0", "--allow-run", "--tuning-db", str(tuning_db)
    )  # fmt: skip


@pytest.fixture(scope="module")
def keyed(start_server: Any, tmp_path_factory: pytest.TempPathFactory) -> test_server.Server:
    """A service with an API key file and a small source limit."""
    keys = tmp_path_factory.mktemp("keys") / "keys"
    keys.write_text(f"# the team's key\n{KEY}\n")
    keys.chmod(0o600)
    return start_server(
        "--workers", "1", "--api-key-file", str(keys), "--max-source-bytes", "4000"
    )  # fmt: skip


@pytest.fixture
def client(service: test_server.Server, monkeypatch: pytest.MonkeyPatch) -> Iterator[Client]:
    monkeypatch.delenv("POLYFLOW_API_KEY", raising=False)
    # the worker may still be loading the compiler: a 503 until it is (retried)
    with Client(service.url, retries=60, backoff=0.2, max_backoff=1.0) as client:
        yield client


def _gcc(output: Path, *sources: str | Path, flags: tuple[str, ...] = ()) -> Path:
    done = subprocess.run(
        ["gcc", "-O2", "-o", str(output), *map(str, sources), *flags, "-lm"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return output


def _run(program: Path) -> str:
    done = subprocess.run([str(program)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_client_loads_no_mlir(service: test_server.Server) -> None:
    """`import polyflow` gives `polyflow.remote.Client`; a C and a TC compile through it load
    no MLIR in this process (the service compiles)."""
    script = (
        "import sys, polyflow\n"
        "with polyflow.remote.Client(sys.argv[1], retries=60, backoff=0.2) as client:\n"
        f"    c = client.compile_c({SCALE!r}, 'scale', emit=['affine'])\n"
        f"    t = client.tc.define({MV_TC!r}).compile(M=8, K=4)\n"
        "assert 'affine.for' in c.mlir('affine') and t.entry == 'mv'\n"
        "loaded = [m for m in sys.modules if m == 'mlir' or m.startswith('mlir.')]\n"
        "assert not loaded, loaded\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, service.url], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_a_c_kernel_compiled_remotely_links_and_agrees_with_gcc(
    client: Client, tmp_path: Path
) -> None:
    result = client.compile_c(MATMUL, "matmul", opt_level=3)
    assert isinstance(result, RemoteResult) and result.entry == "matmul"
    assert list(result.stages) == ["mlir", "affine", "affine-opt", "llvm-dialect"]
    assert "affine.for" in result.mlir("affine") and "llvm.func" in result.mlir("llvm-dialect")
    with pytest.raises(KeyError, match="stage 'llvm' not kept"):
        result.mlir("llvm")
    assert re.fullmatch(r"[0-9a-f]{64}", result.key)
    # the report is polyflow's own, with the loops' remarks at their source lines
    assert isinstance(result.report, CompileReport)
    loops = result.report.select(kind="loop", function="matmul")
    assert [r.position.line for r in loops if r.position] == [2, 3, 5]
    assert all(r.data["raised"] for r in loops)
    assert result.report.select(kind="parallel-loop") and result.warnings == []
    assert any("libiomp5" in d["message"] for d in result.diagnostics)

    obj = result.artifact("kernel.o")
    assert obj[:4] == b"\x7fELF" and obj[16] == 1  # ELF, e_type ET_REL: a relocatable object
    assert {"kernel.o", "kernel.so", "kernel.h"} <= set(result.artifacts)
    assert client.artifact(result.key, "kernel.o") == obj  # as /v1/artifacts serves it
    # the oracle: the same main around gcc -O2's matmul, and around polyflow's object
    result.save("kernel.o", tmp_path / "kernel.o")
    result.save("kernel.h", tmp_path / "kernel.h")
    (tmp_path / "theirs.c").write_text(
        MATMUL + "#define CALL(n, A, B, C) matmul(n, A, B, C)\n" + MATMUL_MAIN
    )
    (tmp_path / "ours.c").write_text(
        '#include "kernel.h"\n#define CALL(n, A, B, C) __polyflow_matmul(n, A, B, C)\n'
        + MATMUL_MAIN
    )
    runtime = openmp_library_dir()
    assert runtime is not None
    openmp = (f"-L{runtime}", f"-Wl,-rpath,{runtime}", "-liomp5")
    theirs = _run(_gcc(tmp_path / "theirs", tmp_path / "theirs.c"))
    ours = _run(_gcc(tmp_path / "ours", tmp_path / "ours.c", tmp_path / "kernel.o", flags=openmp))
    assert len(theirs.splitlines()) == 1600 and ours == theirs

    again = client.compile_c(MATMUL, "matmul", options={"opt_level": 3})
    assert again.cached and again.key == result.key and again.stages == result.stages
    # in a notebook it shows itself as a local result does: the loop table, the stages
    page = again._repr_html_()
    assert '<table class="polyflow-loops"' in page and "affine-opt" in page
    assert result.key[:12] in page and "matmul" in again._repr_markdown_()
    other = client.compile_c(MATMUL, "matmul", opt_level=2)
    assert not other.report.select(kind="parallel-loop") and other.key != result.key


def test_a_tc_definition_compiles_for_the_sizes_given(client: Client, tmp_path: Path) -> None:
    mv = client.tc.define(MV_TC)
    assert mv.name == "mv" and mv.size_names == ["K", "M"] and mv.options == {"opt_level": 3}
    with pytest.raises(ValueError, match=r"not been compiled yet: call compile\(K=..., M=...\)"):
        mv.mlir()
    with pytest.raises(ValueError, match=r"needs the size of every symbolic dimension: give M=..."):
        mv.compile(K=32)
    with pytest.raises(ValueError, match=r"mv has no size N \(its sizes: K, M\)"):
        mv.compile(K=32, M=64, N=3)
    with pytest.raises(ValueError, match="size M of mv must be a positive int, not 0"):
        mv.compile(K=32, M=0)

    first = mv.compile(M=64, K=32)
    assert first.entry == "mv" and not first.cached and mv.key == first.key
    assert "affine.for" in mv.mlir("affine") and mv.report is first.report
    reduction = [r for r in first.report.select(kind="loop") if r.data.get("reductions")]
    assert reduction and reduction[0].position is not None
    assert reduction[0].position.file == "<tc>" and reduction[0].position.line == 1
    assert "memref<64x32xf32>" in first.mlir("mlir")
    # the oracle: kernel.so's `__polyflow_mv` (a pointer to each array's data, inputs then
    # outputs) against NumPy
    runtime = openmp_library_dir()
    assert runtime is not None
    ctypes.CDLL(str(runtime / "libiomp5.so"), mode=ctypes.RTLD_GLOBAL)
    library = ctypes.CDLL(str(first.save("kernel.so", tmp_path / "mv.so")))
    rng = np.random.default_rng(29)
    A = rng.standard_normal((64, 32), dtype=np.float32)
    x = rng.standard_normal(32, dtype=np.float32)
    C = np.full(64, np.nan, dtype=np.float32)  # `+=!` initializes it
    library.__polyflow_mv.argtypes = [ctypes.c_void_p] * 3
    library.__polyflow_mv(A.ctypes.data, x.ctypes.data, C.ctypes.data)
    np.testing.assert_allclose(C, A.astype(np.float64) @ x, rtol=1e-5, atol=1e-5)
    again = mv.compile(M=64, K=32)
    assert again.cached and mv.cached and again.key == first.key
    smaller = mv.compile(M=16, K=32)
    assert not smaller.cached and smaller.key != first.key
    assert "memref<16x32xf32>" in smaller.mlir("mlir")
    # two definitions: the name says which, as polyflow.tc.define says it
    two = MV_TC + "\ndef scale(float(N) x) -> (y) { y(i) = 2 * x(i) }"
    with pytest.raises(ValueError, match="the source defines mv, scale: say which one with name="):
        client.tc.define(two)
    assert client.tc.define(two, "scale").compile(N=5).entry == "scale"


def test_a_cuda_build_gives_the_gpu_stage_and_ptx(client: Client) -> None:
    """No GPU needed: the service maps and emits PTX, which nothing here launches."""
    result = client.tc.define(MV_TC, target="cuda").compile(M=64, K=32)
    assert "gpu.launch_func" in result.mlir("gpu") and ".visible .entry" in result.mlir("ptx")
    assert {"kernels.ptx", "host.mlir"} <= set(result.artifacts)
    assert result.artifact("kernels.ptx").decode() == result.mlir("ptx")
    assert result.report.select(kind="gpu-kernel")


def test_a_c_error_is_a_compile_error_at_the_servers_line_and_column(
    client: Client, tmp_path: Path
) -> None:
    bad = "void f(int n) {\n  int x = ;\n}\n"
    with pytest.raises(CompileError) as caught:
        client.compile_c(bad)
    error = caught.value
    assert isinstance(error, RemoteCompileError) and error.status == 422
    assert (error.file, error.line, error.column) == ("<input>", 2, 11)
    assert error.message == "expected expression before ';' token"
    assert [d.position for d in error.diagnostics] == [error.position]
    # the source line and the caret come from the source sent
    assert error.format().splitlines()[1:] == ["  int x = ;", " " * 10 + "^"]
    # a file compiles under its own name, and its errors point into it
    path = tmp_path / "bad.c"
    path.write_text(bad)
    with pytest.raises(CompileError) as caught:
        client.compile_c(path=path)
    assert str(caught.value).startswith(f"{path}:2:11: error: expected expression")
    # an include the service refuses, at its line
    with pytest.raises(CompileError) as caught:
        client.compile_c('void f(void) {}\n#include "/etc/passwd"\n')
    assert (caught.value.line, caught.value.column) == (2, 1)
    assert "standard headers" in caught.value.message


def test_a_tc_error_is_found_here_before_any_request() -> None:
    # nothing listens on this port: a request would be a ServiceUnreachable
    with Client(f"http://127.0.0.1:{test_server._free_port()}", retries=0) as offline:
        with pytest.raises(CompileError) as caught:
            offline.tc.define("def f(float(N) a) -> (b) {\n  b(i) = a(j)\n}")
        assert (caught.value.line, caught.value.column) == (2, 12)
        with pytest.raises(ServiceUnreachable, match="cannot reach the compile service"):
            offline.tc.define(MV_TC).compile(M=2, K=2)


def test_bad_options_fail_before_any_request_as_the_local_api_fails() -> None:
    with Client(f"http://127.0.0.1:{test_server._free_port()}", retries=0) as offline:
        with pytest.raises(ValueError) as remote:
            offline.compile_c(SCALE, tiling=1)
        with pytest.raises(ValueError) as local:
            polyflow.compile_c(SCALE, options={"tiling": 1})
        assert str(remote.value) == str(local.value) and "tiling" in str(remote.value)
        with pytest.raises(ValueError) as remote:
            offline.compile_c(SCALE, options={"opt_level": 7})
        with pytest.raises(ValueError) as local:
            polyflow.compile_c(SCALE, options={"opt_level": 7})
        assert str(remote.value) == str(local.value) and "opt_level" in str(remote.value)
        with pytest.raises(ValueError, match="unknown stage 'affine_opt' in emit"):
            offline.compile_c(SCALE, emit=["affine_opt"])
        with pytest.raises(ValueError, match="grad=True needs entry="):
            offline.compile_c(SCALE, grad=True)
        with pytest.raises(TypeError, match="give the C source text, or a file with path="):
            offline.compile_c()


def test_an_option_the_service_refuses_is_a_value_error_naming_it(client: Client) -> None:
    with pytest.raises(ValueError) as caught:
        client.compile_c(SCALE, cc="sh")
    assert isinstance(caught.value, InvalidRequest) and caught.value.fields == ["options.cc"]
    assert "option 'cc': " in str(caught.value) and "may not be set" in str(caught.value)


def test_a_gradient_is_compiled_with_its_stage(client: Client) -> None:
    source = "double sq(int n, double x[8]) {\n  double s = 0;\n" \
        "  for (int i = 0; i < n; i++) s += x[i] * x[i];\n  return s;\n}\n"  # fmt: skip
    result = client.compile_c(source, "sq", grad=True)
    assert "sq_grad" in result.mlir("grad")
    assert "__polyflow_sq_grad" in result.artifact("kernel.h").decode()


def test_api_keys(keyed: test_server.Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POLYFLOW_API_KEY", raising=False)
    with Client(keyed.url) as anonymous, pytest.raises(PermissionError) as caught:
        anonymous.healthz()
    assert isinstance(caught.value, AuthenticationError) and caught.value.status == 401
    assert "needs an API key" in str(caught.value) and "api_key=" in str(caught.value)
    with Client(keyed.url, "wrong") as wrong, pytest.raises(AuthenticationError) as caught:
        wrong.compile_c(SCALE)
    assert "refused the API key" in str(caught.value)
    monkeypatch.setenv("POLYFLOW_API_KEY", KEY)  # the key from the environment
    with Client(keyed.url, retries=60, backoff=0.2, max_backoff=1.0) as good:
        assert good.healthz()["status"] == "ok"
        assert good.version()["polyflow"] == polyflow.__version__
        assert good.compile_c(SCALE, "scale").entry == "scale"
        with pytest.raises(RemoteError) as too_big:
            good.compile_c(SCALE + "//" + "x" * 4000)
        assert too_big.value.status == 413 and "over the limit of 4000 bytes" in str(too_big.value)
        # this service does not run code: no tuning
        with pytest.raises(RemoteError) as refused:
            good.tune(MV_TC, language="tc", sizes={"M": 4, "K": 4}, candidates=1)
        assert refused.value.status == 403 and "--allow-run" in str(refused.value)


def test_a_shared_result_is_found_by_its_key(client: Client) -> None:
    explored = client.compile_c(MATMUL, "matmul", opt_level=3, explore=True)
    shared = client.result(explored.key)
    assert shared.key == explored.key and shared.stages == explored.stages
    assert shared.request["source"] == MATMUL and shared.request["entry"] == "matmul"
    assert [r.kind for r in shared.report.remarks] == [r.kind for r in explored.report.remarks]
    with pytest.raises(RemoteError) as caught:
        client.result(client.compile_c(SCALE, "scale").key)  # compiled without explore
    assert caught.value.status == 404


def test_errors_for_unknown_results(client: Client) -> None:
    with pytest.raises(RemoteError) as caught:
        client.artifact("0" * 64, "kernel.o")
    assert caught.value.status == 404 and f"no result with key {'0' * 64}" in str(caught.value)
    with pytest.raises(RemoteError) as caught:
        client.tuning("no-such-tuning")
    assert caught.value.status == 404


def test_a_full_queue_is_retried_after_retry_after_seconds(
    service: test_server.Server, client: Client
) -> None:
    """The one worker, stopped, holds a job: compiles get a real 503 with Retry-After. A
    client that gives up says so; one that retries gets its answer once the worker goes on."""
    client.compile_c(SCALE)  # the worker is up
    (worker,) = client.healthz()["workers"]
    held = SCALE.replace("scale", "held")
    os.kill(worker, signal.SIGSTOP)
    try:
        # a request past the client's timeout: the service still compiles it (its worker,
        # stopped, now holds the job)
        with Client(service.url, timeout=1.0, retries=0) as hurried:
            with pytest.raises(RemoteTimeout, match="no answer within the client's timeout"):
                hurried.compile_c(held)
        assert client.healthz()["busy"] == [worker]

        seen: list[Retry] = []
        with Client(service.url, retries=1, on_retry=seen.append) as patient:
            with pytest.raises(RemoteError) as caught:
                patient.compile_c(SCALE.replace("scale", "waits"))
        assert caught.value.status == 503 and "busy" in str(caught.value)
        assert "gave up after 2 tries" in str(caught.value)
        assert [(r.attempt, r.delay, r.status) for r in seen] == [(1, 1.0, 503)]  # Retry-After: 1

        seen.clear()

        def go_on(retry: Retry) -> None:  # the worker goes on once the client waits
            seen.append(retry)
            os.kill(worker, signal.SIGCONT)

        with Client(service.url, retries=10, on_retry=go_on) as patient:
            result = patient.compile_c(SCALE.replace("scale", "waits"), "waits")
        assert result.entry == "waits" and seen and seen[0].status == 503
        assert seen[0].delay == 1.0
    finally:
        os.kill(worker, signal.SIGCONT)
    # the compile whose client went away finished and is cached
    assert client.compile_c(held).cached
    status, _, text = service.call("GET", "/metrics")
    served = [line for line in text.decode().splitlines() if 'status="503"' in line]
    assert status == 200 and served and float(served[0].split()[-1]) >= 2


def test_a_service_not_listening_is_retried_then_unreachable() -> None:
    seen: list[Retry] = []
    url = f"http://127.0.0.1:{test_server._free_port()}"
    with Client(url, retries=2, backoff=0.01, on_retry=seen.append) as client:
        with pytest.raises(ConnectionError) as caught:
            client.healthz()
    assert isinstance(caught.value, ServiceUnreachable)
    assert f"cannot reach the compile service at {url}" in str(caught.value)
    assert "gave up after 3 tries" in str(caught.value)
    assert [(r.attempt, r.delay, r.status) for r in seen] == [(1, 0.01, None), (2, 0.02, None)]


@pytest.mark.parametrize(
    "attempt,header,expected",
    [
        (0, None, 0.5),
        (3, None, 4.0),
        (10, None, 30.0),  # capped at max_backoff
        (0, "7", 7.0),
        (5, " 2.5 ", 2.5),  # Retry-After wins over the exponential
        (0, "-3", 0.0),
        (2, "soon", 2.0),  # unreadable: the exponential
        (0, "Wed, 21 Oct 2015 07:28:10 GMT", 10.0),  # an HTTP date, 10 s after "now"
        (0, "Wed, 21 Oct 2015 07:27:00 GMT", 0.0),  # a date past
    ],
)
def test_retry_delay(attempt: int, header: str | None, expected: float) -> None:
    now = 1445412480.0  # Wed, 21 Oct 2015 07:28:00 GMT
    got = retry_delay(attempt, header, backoff=0.5, max_backoff=30.0, now=now)
    assert got == pytest.approx(expected)


def test_a_tuning_runs_to_the_end_and_later_compiles_use_it(client: Client) -> None:
    tc = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }"
    sizes = {"M": 16, "N": 16, "K": 16}
    seen: list[str] = []
    tuning = client.tune(
        tc, language="tc", sizes=sizes, search="random", candidates=2,
        timeout=120, poll_interval=0.1, progress=lambda t: seen.append(t.status),
    )  # fmt: skip
    assert tuning.status == "done" and seen[0] == "queued" and seen[-1] == "done"
    assert isinstance(tuning.best_choices, dict) and tuning.speedup
    assert tuning.result is not None and len(tuning.result["candidates"]) == 2
    compiled = client.tc.define(tc).compile(**sizes)
    assert compiled.tuned == tuning.best_choices
    assert any("using tuned options" in d["message"] for d in compiled.diagnostics)


def test_a_tuning_past_its_timeout_is_cancelled(client: Client) -> None:
    tc = "def mm2(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }"
    with pytest.raises(TimeoutError) as caught:
        client.tune(tc, language="tc", sizes={"M": 32, "N": 32, "K": 32}, timeout=0.0)
    assert isinstance(caught.value, RemoteTimeout) and "has been cancelled" in str(caught.value)
    tune_id = caught.value.detail["id"]
    deadline = time.monotonic() + 60
    while (view := client.tuning(tune_id)).status not in ("cancelled", "done", "failed"):
        assert time.monotonic() < deadline, view
        time.sleep(0.1)  # the service has no push: poll it
    assert view.status == "cancelled"


def test_the_readme_example_runs(service: test_server.Server, tmp_path: Path) -> None:
    """The README's client example, against this service."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("### The Python client") :]
    code = re.search(r"^```py\n(.*?)^```", section, re.S | re.M)
    assert code is not None
    program = code.group(1).replace("http://localhost:8000", service.url)
    done = subprocess.run(
        [sys.executable, "-c", program],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "POLYFLOW_API_KEY": ""},
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "scale.o").read_bytes()[:4] == b"\x7fELF"
    assert json.loads(done.stdout.splitlines()[-1])["cached"] in (True, False)
