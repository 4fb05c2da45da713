"""The compile service through a real uvicorn server on a loopback port (server/): compiles of C
and TC, the cache, every error status, API keys, time limits and a worker killed mid-job."""

from __future__ import annotations

import base64
import ctypes
import errno
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from polyflow.errors import CompileError
from polyflow.toolchain import openmp_library_dir
from server.hot import HotResults
from server.jobs import check_includes
from server.workers import _ran_out_of_memory

ROOT = Path(__file__).resolve().parent.parent

SCALE = "void scale(int n, double a[100]) { for (int i = 0; i < n; i++) a[i] = 2 * a[i]; }\n"
MV_TC = "def mv(float(M,K) A, float(K) x) -> (C) { C(i) +=! A(i,k) * x(k) }"


class Server:
    def __init__(self, url: str, process: subprocess.Popen[bytes]) -> None:
        self.url = url
        self.process = process

    def call(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("content-type", "application/json")
        for name, value in (headers or {}).items():
            request.add_header(name, value)
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                return response.status, dict(response.headers), response.read()
        except urllib.error.HTTPError as error:
            return error.code, dict(error.headers), error.read()

    def compile(self, body: dict[str, Any], **kw: Any) -> tuple[int, Any]:
        status, _, payload = self.call("POST", "/v1/compile", body, **kw)
        return status, json.loads(payload)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def start_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    started: list[subprocess.Popen[bytes]] = []

    def start(
        *flags: str,
        log: Path | None = None,
        env: dict[str, str] | None = None,
        kind: type[Server] = Server,
    ) -> Server:
        """A service with `flags`, its log to `log`, `env` over this environment, answering
        through a `kind` (a subclass of Server)."""
        port = _free_port()
        cache = tmp_path_factory.mktemp("cache")
        log_file = open(log, "wb") if log is not None else subprocess.DEVNULL
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "server",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--cache-dir",
                str(cache),
                *flags,
            ],
            cwd=ROOT,
            env={**os.environ, **(env or {})},
            stdout=subprocess.DEVNULL,
            stderr=log_file,
        )
        if not isinstance(log_file, int):
            log_file.close()  # the server holds its own copy
        started.append(process)
        server = kind(f"http://127.0.0.1:{port}", process)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if server.call("GET", "/v1/healthz")[0] in (200, 401):
                    return server
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.2)
        raise RuntimeError("the server did not start")

    yield start
    for process in started:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def server(start_server: Any) -> Server:
    return start_server("--workers", "2", "--max-source-bytes", "64000")


def test_version_and_health(server: Server) -> None:
    status, _, body = server.call("GET", "/v1/version")
    assert status == 200
    assert {"polyflow", "polyflow_code", "mlir", "isl", "server_code"} <= set(json.loads(body))
    status, _, body = server.call("GET", "/v1/healthz")
    assert status == 200 and len(json.loads(body)["workers"]) == 2


def test_c_compiles_to_an_object_and_a_repeat_is_a_cache_hit(server: Server) -> None:
    request = {"language": "c", "source": SCALE, "emit": ["affine"], "options": {"opt_level": 3}}
    start = time.perf_counter()
    status, first = server.compile(request)
    miss = time.perf_counter() - start
    assert status == 200, first
    assert first["cached"] is False and "affine.for" in first["stages"]["affine"]
    obj = base64.b64decode(first["artifacts"]["kernel.o"])
    assert obj[:4] == b"\x7fELF"
    start = time.perf_counter()
    status, again = server.compile({**request, "source": SCALE + "\n\n"})  # same after normalizing
    hit = time.perf_counter() - start
    assert status == 200 and again["cached"] is True and again["key"] == first["key"]
    assert hit < miss
    status, _, raw = server.call("GET", f"/v1/artifacts/{first['key']}/kernel.o")
    assert status == 200 and raw == obj


def test_the_shared_library_and_header_call_like_the_c_function(
    server: Server, tmp_path: Path
) -> None:
    source = (
        "double bias = 0.5;\n"
        # 20000 elements: enough work for the loop to fork (min_parallel_work)
        "void axpb(int n, double alpha, double x[20000], double y[20000]) {\n"
        "  for (int i = 0; i < n; i++) y[i] = alpha * x[i] + y[i] + bias;\n}\n"
    )
    status, body = server.compile({"language": "c", "source": source, "options": {"opt_level": 3}})
    assert status == 200, body
    header = base64.b64decode(body["artifacts"]["kernel.h"]).decode()
    assert (
        "void __polyflow_axpb(int, double, const void *, const void *, const void *);" in header
    ), header
    library = tmp_path / "kernel.so"
    library.write_bytes(base64.b64decode(body["artifacts"]["kernel.so"]))
    # at -O3 the loop runs on OpenMP threads: the library needs libiomp5, and a note says so
    assert any("libiomp5" in d["message"] for d in body["diagnostics"]), body["diagnostics"]
    runtime = openmp_library_dir()
    assert runtime is not None
    ctypes.CDLL(str(runtime / "libiomp5.so"), mode=ctypes.RTLD_GLOBAL)
    axpb = ctypes.CDLL(str(library)).__polyflow_axpb
    axpb.argtypes = [ctypes.c_int, ctypes.c_double, *[ctypes.c_void_p] * 3]
    x = np.arange(20000.0)
    y = np.full(20000, 2.0)
    bias = ctypes.c_double(0.5)  # the file-scope variable, passed by address
    axpb(15000, 3.0, x.ctypes.data, y.ctypes.data, ctypes.addressof(bias))
    expected = np.full(20000, 2.0)
    expected[:15000] = 3.0 * x[:15000] + 2.0 + 0.5
    np.testing.assert_array_equal(y, expected)


def test_identical_requests_in_flight_compile_once(server: Server) -> None:
    source = SCALE.replace("scale", "scale_once")
    jobs_before = json.loads(server.call("GET", "/v1/healthz")[2])["jobs"]
    answers: list[tuple[int, Any]] = []
    threads = [
        threading.Thread(
            target=lambda: answers.append(server.compile({"language": "c", "source": source}))
        )
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert [status for status, _ in answers] == [200] * 4
    assert len({body["key"] for _, body in answers}) == 1
    assert json.loads(server.call("GET", "/v1/healthz")[2])["jobs"] - jobs_before == 1


def test_metrics_count_requests_hits_and_misses(server: Server) -> None:
    request = {"language": "c", "source": SCALE.replace("scale", "scale_metrics")}
    server.compile(request)
    server.compile(request)
    for path in ("/docs", "/openapi.json", "/no/such/page"):
        server.call("GET", path)
    status, _, text = server.call("GET", "/metrics")
    lines = text.decode().splitlines()
    assert status == 200

    def value(prefix: str) -> float:
        return sum(float(line.split()[-1]) for line in lines if line.startswith(prefix))

    assert value("polyflow_cache_hits_total") >= 1 and value("polyflow_cache_misses_total") >= 1
    assert value('polyflow_compile_seconds_count{cache="hit"}') >= 1
    assert value('polyflow_requests_total{method="POST",path="/v1/compile",status="200"}') >= 2
    assert any(line.startswith("polyflow_queue_depth ") for line in lines)
    # route templates as labels, Starlette's own routes included
    assert value('polyflow_requests_total{method="GET",path="/docs",status="200"}') >= 1
    assert value('polyflow_requests_total{method="GET",path="/openapi.json",status="200"}') >= 1
    assert value('polyflow_requests_total{method="GET",path="unmatched",status="404"}') >= 1
    assert "# TYPE polyflow_compile_seconds histogram" in lines


def test_the_response_carries_the_compile_report(server: Server) -> None:
    source = "double dot(int n, double *x, double *y) {\n  double s = 0;\n" \
        "  for (int i = 0; i < n; i++)\n    s += x[i] * y[i];\n  return s;\n}\n"
    options = {"opt_level": 3, "associative_math": True}
    status, body = server.compile({"language": "c", "source": source, "options": options})
    assert status == 200, body
    report = body["report"]
    assert report["version"] == 1
    (loop,) = [r for r in report["remarks"] if r["kind"] == "loop"]
    assert loop["function"] == "dot" and loop["line"] == 3 and loop["data"]["raised"] is True
    assert any(r["kind"] == "parallel-loop" and r["line"] == 3 for r in report["remarks"])
    (warning,) = [d for d in body["diagnostics"] if "floating-point addf reduction" in d["message"]]
    assert warning["severity"] == "warning" and warning["line"] == 3


def test_diagnostics_say_which_function_is_not_compiled_and_why(server: Server) -> None:
    # an entry that does not compile: why, where, and which ones do
    status, body = server.compile(
        {"language": "c", "source": "int f(int x) { return x + 1; }\n", "entry": "g"}
    )
    assert status == 422
    assert "no function named 'g' in the source (compilable functions: f)" in str(body)
    source = (
        "struct p { int a; };\nint g(struct p q) { return q.a; }\n"
        "void f(int n, double a[8]) {\n  for (int i = 0; i < n; i++) a[i] = 1;\n}\n"
    )
    status, body = server.compile({"language": "c", "source": source, "entry": "g"})
    assert status == 422
    (error,) = body["detail"]
    assert error["line"] == 2 and "cannot compile 'g'" in error["message"]
    assert "(compilable functions: f)" in error["message"]
    # without an entry: f compiles, g is named in a warning, not silently missing
    status, body = server.compile({"language": "c", "source": source})
    assert status == 200, body
    (warning,) = [d for d in body["diagnostics"] if "'g'" in d["message"]]
    assert warning["severity"] == "warning" and warning["line"] == 2
    assert "not compiled (not in kernel.o or kernel.h)" in warning["message"]
    # nothing compiles: each function's reason, the first one's position
    only_switch = "int f(int x) {\n  switch (x) { default: return 1; }\n}\n"
    status, body = server.compile({"language": "c", "source": only_switch})
    assert status == 422
    (error,) = body["detail"]
    assert error["line"] == 2 and "no function in the source can be compiled" in error["message"]
    assert "'switch'" in error["message"]


def test_random_requests_get_no_server_error(server: Server) -> None:
    """Random sources (bytes as text, damaged C, TC) with random option values: 200, 4xx."""
    import random

    rng = random.Random(24)
    values: list[Any] = [None, -1, 0, 3, 1e9, "x", "", [], {}, True, "\u0000", [1, "a"]]
    fields = ["opt_level", "march", "tile_sizes", "threads", "fast_math", "functions", "nope"]
    for _ in range(16):
        source = "".join(chr(rng.randrange(1, 0x2FF)) for _ in range(rng.randrange(0, 120)))
        if rng.random() < 0.5:
            chars = list(SCALE)
            for _ in range(rng.randrange(1, 5)):
                chars[rng.randrange(len(chars))] = chr(rng.randrange(32, 127))
            source = "".join(chars)
        body: dict[str, Any] = {"language": rng.choice(["c", "tc", "cobol", 3]), "source": source}
        if rng.random() < 0.6:
            body["options"] = {rng.choice(fields): rng.choice(values)}
        if rng.random() < 0.3:
            body[rng.choice(["entry", "emit", "sizes", "target"])] = rng.choice(values)
        status, answer = server.compile(body)
        assert status < 500, (body, answer)


def test_tc_compiles_with_sizes(server: Server) -> None:
    status, body = server.compile({"language": "tc", "source": MV_TC, "sizes": {"M": 8, "K": 4}})
    assert status == 200 and body["entry"] == "mv"
    status, body = server.compile({"language": "tc", "source": MV_TC})
    assert status == 422 and "K, M" in body["detail"][0]["message"]


def test_cuda_compiles_to_ptx_and_is_cached_per_gpu_arch(server: Server) -> None:
    """`target: "cuda"`: the `gpu` stage, the PTX (a stage and artifacts), and what the mapping
    and ptxas said; another GPU architecture is another result; a bad one or a block too large
    for CUDA is a 422 naming the option."""
    request = {"language": "tc", "source": MV_TC, "sizes": {"M": 64, "K": 32}, "target": "cuda", "emit": ["gpu"]}
    status, body = server.compile(request)
    assert status == 200, body
    assert "gpu.launch_func" in body["stages"]["gpu"] and ".target sm_90" in body["stages"]["ptx"]
    artifacts = {name: base64.b64decode(data) for name, data in body["artifacts"].items()}
    assert b".visible .entry" in artifacts["kernels.ptx"] and b"gpu.launch_func" in artifacts["host.mlir"]
    kinds = {r["kind"] for r in body["report"]["remarks"]}
    assert "gpu-kernel" in kinds
    status, again = server.compile(request)
    assert status == 200 and again["cached"]
    status, other = server.compile({**request, "options": {"gpu_arch": "sm_80"}})
    assert status == 200 and not other["cached"] and ".target sm_80" in other["stages"]["ptx"]
    status, bad = server.compile({**request, "options": {"gpu_arch": "sm_1"}})
    assert status == 422 and bad["detail"][0]["loc"] == ["body", "options", "gpu_arch"]
    status, bad = server.compile({**request, "options": {"block": [64, 32]}})
    assert status == 422 and "at most 1024" in json.dumps(bad)


@pytest.mark.parametrize(
    "request_body,where",
    [
        ({"language": "c", "source": "void f(int n) {\n  int x = ;\n}\n"}, (2, 11)),
        ({"language": "tc", "source": "def f(float(N) a) -> (b) {\n  b(i) = a(j)\n}"}, (2, 12)),
        ({"language": "c", "source": 'void f(void) {}\n#include "/etc/passwd"\n'}, (2, 1)),
    ],
)
def test_bad_input_is_422_with_its_position(
    server: Server, request_body: dict[str, Any], where: tuple[int, int]
) -> None:
    status, body = server.compile(request_body)
    assert status == 422, body
    (diagnostic,) = body["detail"]
    assert (diagnostic["line"], diagnostic["column"]) == where
    assert "Traceback" not in json.dumps(body)


def test_options_are_checked_by_name(server: Server) -> None:
    status, body = server.compile({"language": "c", "source": SCALE, "options": {"tiling": 1}})
    assert status == 422 and body["detail"][0]["loc"] == ["body", "options", "tiling"]
    status, body = server.compile({"language": "c", "source": SCALE, "options": {"cc": "sh"}})
    assert status == 422 and body["detail"][0]["loc"] == ["body", "options", "cc"]
    status, body = server.compile({"language": "fortran", "source": SCALE})
    assert status == 422


def test_a_source_over_the_limit_is_413(server: Server) -> None:
    status, _ = server.compile({"language": "c", "source": SCALE + "//" + "x" * 64000})
    assert status == 413


def test_a_worker_killed_mid_job_fails_that_request_only(server: Server) -> None:
    # a source the cache has not seen, big enough to keep a worker busy for a moment
    source = "".join(
        f"void k{n}(int m, double a[64][64]) {{ for (int i = 0; i < m; i++) "
        f"for (int j = 0; j < m; j++) a[i][j] += a[j][i] * {n}; }}\n"
        for n in range(12)
    )
    outcome: dict[str, Any] = {}

    def compile_it() -> None:
        outcome["status"], outcome["body"] = server.compile(
            {"language": "c", "source": source, "options": {"opt_level": 3}}
        )

    thread = threading.Thread(target=compile_it)
    thread.start()
    busy: list[int] = []
    deadline = time.monotonic() + 30
    while not busy and time.monotonic() < deadline:
        busy = json.loads(server.call("GET", "/v1/healthz")[2])["busy"]
    assert busy, "the compile never started"
    os.kill(busy[0], signal.SIGKILL)
    thread.join(timeout=120)
    assert outcome["status"] == 500 and "died" in outcome["body"]["detail"]
    status, body = server.compile({"language": "c", "source": source.replace("k0", "kk")})
    assert status == 200, body
    assert json.loads(server.call("GET", "/v1/healthz")[2])["replaced"] >= 1


def test_without_a_valid_key_nothing_compiles(start_server: Any, tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text("# the team's key\n\nsesame\n")
    keys.chmod(0o600)
    guarded = start_server("--workers", "1", "--api-key-file", str(keys))
    request = {"language": "c", "source": SCALE}
    assert guarded.compile(request)[0] == 401
    assert guarded.compile(request, headers={"Authorization": "Bearer nope"})[0] == 401
    for comment in ("# the team's key", "#", ""):
        assert guarded.compile(request, headers={"Authorization": f"Bearer {comment}"})[0] == 401
    status, body = guarded.compile(request, headers={"Authorization": "Bearer sesame"})
    assert status == 200 and body["cached"] is False


def test_an_api_key_file_others_may_read_gets_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from server.__main__ import read_api_keys

    keys = tmp_path / "keys"
    keys.write_text("  # comment\nalpha\n\n  beta  \n")
    keys.chmod(0o600)
    assert read_api_keys(keys) == {"alpha", "beta"}
    assert capsys.readouterr().err == ""
    keys.chmod(0o644)
    assert read_api_keys(keys) == {"alpha", "beta"}
    assert "may be read by other users" in capsys.readouterr().err


def test_the_run_limit_comes_from_its_flag_or_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    from server.__main__ import build_parser

    assert build_parser().parse_args(["--run-seconds", "2.5"]).run_seconds == 2.5
    monkeypatch.setenv("POLYFLOW_SERVE_RUN_SECONDS", "7")
    assert build_parser().parse_args([]).run_seconds == 7.0


def test_a_compile_past_the_time_limit_is_504_and_the_service_goes_on(start_server: Any) -> None:
    hurried = start_server("--workers", "1", "--timeout", "0.05")
    status, body = hurried.compile({"language": "c", "source": SCALE})
    assert status == 504 and "longer than" in body["detail"]
    status, _, health = hurried.call("GET", "/v1/healthz")
    assert status == 200 and json.loads(health)["replaced"] == 1


def test_a_compile_past_the_memory_limit_is_500_and_the_service_goes_on(
    start_server: Any, server: Server
) -> None:
    lines = "".join(f"  a[{i % 64}] += {i};\n" for i in range(2000))
    hog = {"language": "c", "source": f"void hog(double a[64]) {{\n{lines}}}\n"}
    starved = start_server("--workers", "1", "--memory-limit", "1")  # 1 MiB per job
    status, body = starved.compile(hog)
    assert status == 500 and "memory" in body["detail"], body
    status, _, health = starved.call("GET", "/v1/healthz")
    assert status == 200 and json.loads(health)["replaced"] == 1, (body, health)
    status, body = server.compile(hog)  # under the default limit (4 GiB per job) it compiles
    assert status == 200, body


def test_only_standard_headers_may_be_included() -> None:
    check_includes("#include <stdio.h>\n  # include <math.h> // m\n#define A 1\n#if A\n#endif\n")
    for source in (
        '#include "local.h"',
        "#include </etc/passwd>",
        "#/**/include <x>",
        "#define H <stdio.h>\n#include H",
        "#inc\\\nlude </etc/passwd>",
        '#pragma GCC dependency "/etc/passwd"',
    ):
        with pytest.raises(CompileError):
            check_includes(source)


def test_the_load_test_runs_short_and_finds_every_answer_right() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "load_test_service.py"), "--clients", "4",
         "--seconds", "2", "--miss-rate", "0.3"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert ", 0 wrong or failed" in done.stdout and "hit :" in done.stdout


def test_fuzzing_the_openapi_schema_finds_no_server_error(
    start_server: Any, tmp_path: Path
) -> None:
    """schemathesis generates requests from /openapi.json (its examples, edge cases, random
    bodies, and compile -> artifact sequences through the schema's link); no answer may be a 5xx
    or break the schema (server/schemathesis.toml), and the server's own log must agree."""
    log = tmp_path / "server.log"
    fuzzed = start_server("--workers", "2", log=log)
    done = subprocess.run(
        [str(Path(sys.executable).parent / "schemathesis"), "--no-color",
         "--config-file", str(ROOT / "server" / "schemathesis.toml"),
         "run", fuzzed.url + "/openapi.json", "--checks", "all", "--max-examples", "60",
         "--seed", "20261123", "--request-timeout", "120", "--workers", "2"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,  # its .schemathesis/ goes there
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    statuses = [
        json.loads(line)["status"] for line in log.read_text().splitlines() if '"status"' in line
    ]
    assert len(statuses) > 300 and all(status < 500 for status in statuses)
    assert statuses.count(200) > 20  # the examples and the stateful phase compile for real


def test_hot_results_drop_the_least_recently_used_first() -> None:
    hot = HotResults(max_bytes=30)
    for key in "abc":
        hot.put(key, bytes(10))
    assert hot.get("a") == bytes(10)  # now the most recent
    hot.put("d", bytes(10))
    assert hot.get("b") is None and hot.get("a") is not None and len(hot) == 3
    hot.put("huge", bytes(31))  # larger than everything: not kept, nothing dropped for it
    assert hot.get("huge") is None and hot.size == 30


def test_the_request_options_are_polyflows_options() -> None:
    """The service's `options` schema is derived from `Options`: the same names, defaults and
    help, the fields a request may not set refused by name."""
    from polyflow.options import Options
    from server.app import CompileOptions
    from server.jobs import FORBIDDEN_OPTIONS

    assert set(CompileOptions.model_fields) == set(Options.model_fields)
    for name, info in Options.model_fields.items():
        derived = CompileOptions.model_fields[name]
        if name in FORBIDDEN_OPTIONS:
            assert derived.description == "may not be set through the service"
        else:
            assert (derived.default, derived.description) == (info.default, info.description)


def test_a_gradient_is_compiled_on_request(server: Server, tmp_path: Path) -> None:
    """`"grad": {"entry", "wrt"}`: the response shows the adjoint (`emit: ["grad"]`), kernel.h
    declares `__polyflow_<entry>_grad` (Enzyme's arguments) and kernel.so computes it."""
    source = (
        "double dot(int n, const double *x, const double *y) {\n"
        "  double s = 0.0;\n"
        "  for (int i = 0; i < n; i++) s += x[i] * y[i] * y[i];\n"
        "  return s;\n}\n"
    )
    request = {"language": "c", "source": source, "grad": {"entry": "dot"}, "emit": ["grad"]}
    status, body = server.compile(request)
    assert status == 200, body
    assert "@dot_grad(" in body["stages"]["grad"]
    header = base64.b64decode(body["artifacts"]["kernel.h"]).decode()
    assert "__polyflow_dot_grad(int, const void *, const void *, const void *, const void *, double)" in header, header
    library = tmp_path / "kernel.so"
    library.write_bytes(base64.b64decode(body["artifacts"]["kernel.so"]))
    gradient = ctypes.CDLL(str(library)).__polyflow_dot_grad
    gradient.argtypes = [ctypes.c_int, *[ctypes.c_void_p] * 4, ctypes.c_double]
    x, y = np.linspace(0.5, 2.0, 7), np.linspace(-1.0, 1.0, 7)
    dx, dy = np.zeros(7), np.ones(7)  # an input's shadow is added to
    gradient(7, x.ctypes.data, dx.ctypes.data, y.ctypes.data, dy.ctypes.data, 2.0)
    np.testing.assert_allclose(dx, 2.0 * y * y, rtol=1e-14)
    np.testing.assert_allclose(dy, 1.0 + 4.0 * x * y, rtol=1e-14)
    status, body = server.compile({**request, "grad": {"entry": "dot", "wrt": ["n"]}})
    assert status == 422 and "not floating-point" in body["detail"][0]["message"], body
    tc_request = {"language": "tc", "source": MV_TC, "sizes": {"M": 8, "K": 4}, "emit": ["grad"]}
    status, body = server.compile({**tc_request, "grad": {"entry": "mv", "wrt": ["A"]}})
    assert status == 200 and "@mv_grad(" in body["stages"]["grad"], body
    status, body = server.compile({**tc_request, "grad": {"entry": "mv", "wrt": ["B"]}})
    assert status == 422 and "'B'" in body["detail"][0]["message"], body


def test_library_allocation_failures_count_as_out_of_memory() -> None:
    assert _ran_out_of_memory(OSError(errno.ENOMEM, "Cannot allocate memory"))
    assert _ran_out_of_memory(RuntimeError("LLVM ERROR: out of memory"))
    assert not _ran_out_of_memory(OSError(errno.ENOENT, "No such file or directory"))
    assert not _ran_out_of_memory(KeyError("memref"))
