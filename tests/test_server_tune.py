"""Tuning through the compile service (POST /v1/tune, server/tuning.py), on a real uvicorn server
with real worker and candidate processes: refused without --allow-run; a TC and a C tuning run
queued -> running -> done, land in the service's tuning database, and later compiles of the same
kernel use them (past the compile cache); a tuning is cancelled within moments; the candidates
see none of the service's environment and fail cleanly past the memory limit."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
import test_server
from test_server import Server

from polyflow.storage.tuning import TuningDB

ROOT = Path(__file__).resolve().parent.parent

MM_TC = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }"

# a whole program: main makes the inputs, calls the kernel, prints a checksum (what candidates
# are checked against); it refuses to run where it can see the service's secret
C_PROGRAM = """#include <stdio.h>
#include <stdlib.h>
#define N 64
static double a[N][N], b[N][N], c[N][N];
void kernel(double A[N][N], double B[N][N], double C[N][N]) {
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {
      C[i][j] = 0;
      for (int k = 0; k < N; k++) C[i][j] += A[i][k] * B[k][j];
    }
}
int main(void) {
  if (getenv("SECRET_TOKEN") != NULL) {
    fprintf(stderr, "the service's SECRET_TOKEN is visible\\n");
    return 3;
  }
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) { a[i][j] = (i + 2 * j) % 7; b[i][j] = (3 * i + j) % 5; }
  for (int r = 0; r < 20; r++) kernel(a, b, c);
  double sum = 0;
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) sum += c[i][j] * (i + 1);
  printf("%.3f\\n", sum);
  return 0;
}
"""

# touches 64 MiB at a time, up to 4 GiB: far past the service's limit for a candidate (512 MiB
# over the worker's size), yet something this machine survives should the limit not hold
HOG = """#include <stdio.h>
#include <stdlib.h>
#include <string.h>
void kernel(int n, double a[64]) { for (int i = 0; i < n; i++) a[i] = 2 * a[i]; }
int main(void) {
  double a[64] = {1};
  kernel(64, a);
  for (int chunk = 0; chunk < 64; chunk++) {
    char *p = malloc(64 << 20);
    if (p == NULL) {
      fprintf(stderr, "out of memory after %d MiB\\n", chunk * 64);
      return 1;
    }
    memset(p, 1, 64 << 20);
  }
  printf("%f\\n", a[0]);
  return 0;
}
"""

FINISHED = ("done", "failed", "cancelled")


class TuneServer(Server):
    """The service, answering in JSON, and waiting for tunings."""

    def json_call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        status, _, payload = self.call(method, path, body)
        return status, json.loads(payload)

    def wait(self, tune_id: str, timeout: float = 60.0) -> dict[str, Any]:
        """The tuning once it has ended; every status it was seen in, in `seen`."""
        seen: list[str] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status, view = self.json_call("GET", f"/v1/tune/{tune_id}")
            assert status == 200, view
            if not seen or seen[-1] != view["status"]:
                seen.append(view["status"])
            if view["status"] in FINISHED:
                return {**view, "seen": seen}
            time.sleep(0.2)
        raise AssertionError(f"tuning {tune_id} did not end in {timeout} s (seen: {seen})")


# the service's start-up fixture of test_server.py, started here with a TuneServer
start_server = test_server.start_server


@pytest.fixture(scope="module")
def tuning_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tuning") / "tuning.sqlite3"


@pytest.fixture(scope="module")
def server(start_server: Any, tuning_db: Path) -> TuneServer:
    """A service that runs tunings, with a secret in its environment that no candidate may see."""
    return start_server(
        "--workers", "1", "--allow-run", "--tuning-db", str(tuning_db), "--max-tune-seconds", "120",
        "--tune-memory-limit", "512",
        env={"SECRET_TOKEN": "do-not-leak"}, kind=TuneServer,
    )  # fmt: skip


def test_without_allow_run_tuning_is_refused(start_server: Any) -> None:
    plain = start_server("--workers", "1", kind=TuneServer)
    status, body = plain.json_call(
        "POST", "/v1/tune", {"language": "tc", "source": MM_TC, "sizes": {"M": 8, "N": 8, "K": 8}}
    )
    assert status == 403
    assert "runs the submitted program" in body["detail"] and "--allow-run" in body["detail"]
    status, _ = plain.json_call("GET", "/v1/tune/0123")
    assert status == 404
    status, schema = plain.json_call("GET", "/openapi.json")
    assert status == 200 and "/v1/tune" not in schema["paths"]  # not offered
    status, health = plain.json_call("GET", "/v1/healthz")
    assert health["tuning"]["allowed"] is False


def test_a_tc_tuning_is_stored_and_later_compiles_use_it(server: TuneServer, tuning_db: Path) -> None:
    sizes = {"M": 64, "N": 64, "K": 64}
    compile_request = {
        "language": "tc",
        "source": MM_TC,
        "sizes": sizes,
        "options": {"opt_level": 3},
    }
    status, before = server.json_call("POST", "/v1/compile", compile_request)
    assert status == 200 and before["tuned"] is None, before
    status, again = server.json_call("POST", "/v1/compile", compile_request)
    assert again["cached"] is True and again["tuned"] is None

    status, queued = server.json_call(
        "POST", "/v1/tune",
        {"language": "tc", "source": MM_TC, "sizes": sizes, "search": "random", "max_candidates": 4},
    )  # fmt: skip
    assert status == 202, queued
    assert queued["status"] == "queued" and queued["entry"] == "mm"
    assert queued["budget_seconds"] == 120  # the service's maximum
    ended = server.wait(queued["id"])
    assert ended["status"] == "done", ended
    assert ended["seen"][-2:] == ["running", "done"] or ended["seen"] == ["done"]
    result = ended["result"]
    assert result["speedup"] and result["default_seconds"] and result["best_seconds"]
    assert isinstance(result["best_choices"], dict) and result["stored"] is True
    assert ended["progress"]["candidates"] == len(result["candidates"]) == 4
    assert sum(result["counts"].values()) == 4

    stored = TuningDB(str(tuning_db)).get(result["key"])
    assert stored is not None and stored.choices == result["best_choices"]
    assert stored.description["inputs"] == ["64x64:float32", "64x64:float32"]

    # the answer cached before the tuning is not served after it
    status, after = server.json_call("POST", "/v1/compile", compile_request)
    assert status == 200 and after["cached"] is False and after["key"] != before["key"]
    assert after["tuned"] == result["best_choices"]
    assert any("using tuned options" in d["message"] for d in after["diagnostics"])
    # other sizes are another kernel; `tuned: false` asks for the options as given
    status, other = server.json_call(
        "POST", "/v1/compile", {**compile_request, "sizes": {**sizes, "K": 32}}
    )
    assert status == 200 and other["tuned"] is None
    untuned = {**compile_request, "options": {"opt_level": 3, "tuned": False}}
    status, plain = server.json_call("POST", "/v1/compile", untuned)
    assert status == 200 and plain["tuned"] is None


def test_a_c_program_is_tuned_without_the_services_secrets(server: TuneServer, tuning_db: Path) -> None:
    """The program exits non-zero where it sees SECRET_TOKEN, which the service's environment
    holds: the tuning is done only because its candidates run with a clean environment."""
    status, queued = server.json_call(
        "POST", "/v1/tune",
        {"language": "c", "source": C_PROGRAM, "entry": "kernel", "search": "random",
         "max_candidates": 3},
    )  # fmt: skip
    assert status == 202, queued
    ended = server.wait(queued["id"], timeout=120)
    assert ended["status"] == "done", ended
    result = ended["result"]
    assert result["kernel"]["language"] == "c" and result["kernel"]["entry"] == "kernel"
    assert result["speedup"] and len(result["candidates"]) == 3
    assert TuningDB(str(tuning_db)).get(result["key"]) is not None

    status, compiled = server.json_call(
        "POST", "/v1/compile",
        {"language": "c", "source": C_PROGRAM, "entry": "kernel", "options": {"opt_level": 3}},
    )  # fmt: skip
    assert status == 200, compiled
    assert compiled["tuned"] == result["best_choices"]
    assert any("using tuned options" in d["message"] for d in compiled["diagnostics"])


def test_a_cancelled_tuning_ends_at_once_and_stores_nothing(
    server: TuneServer, tuning_db: Path
) -> None:
    sizes = {"M": 96, "N": 96, "K": 96}
    status, queued = server.json_call(
        "POST", "/v1/tune", {"language": "tc", "source": MM_TC, "sizes": sizes, "search": "random"}
    )
    assert status == 202 and queued["max_candidates"] is None
    deadline = time.monotonic() + 60
    while server.json_call("GET", f"/v1/tune/{queued['id']}")[1]["status"] == "queued":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    time.sleep(1.0)  # the default build or a candidate runs
    start = time.monotonic()
    status, cancelling = server.json_call("DELETE", f"/v1/tune/{queued['id']}")
    assert status == 200 and cancelling["cancel_requested"] is True
    ended = server.wait(queued["id"], timeout=30)
    assert ended["status"] == "cancelled", ended
    assert time.monotonic() - start < 10
    # its candidate processes were killed, not left to run on
    service = psutil.Process(server.process.pid)
    assert not [
        p for p in service.children(recursive=True) if "job_start.py" in " ".join(p.cmdline())
    ]
    kernels = [t.description["inputs"] for t in TuningDB(str(tuning_db)).all()]
    assert ["96x96:float32", "96x96:float32"] not in kernels
    status, _ = server.json_call("DELETE", "/v1/tune/no-such-tuning")
    assert status == 404


def test_a_program_past_the_memory_limit_fails_the_tuning_cleanly(server: TuneServer) -> None:
    status, queued = server.json_call(
        "POST", "/v1/tune",
        {"language": "c", "source": HOG, "entry": "kernel", "search": "random", "max_candidates": 2},
    )  # fmt: skip
    assert status == 202, queued
    ended = server.wait(queued["id"], timeout=60)
    assert ended["status"] == "failed", ended
    assert "out of memory after" in ended["message"], ended["message"]
    # the service goes on
    status, health = server.json_call("GET", "/v1/healthz")
    assert status == 200 and health["tuning"]["running"] is None
    status, body = server.json_call(
        "POST", "/v1/compile",
        {"language": "tc", "source": MM_TC, "sizes": {"M": 8, "N": 8, "K": 8}},
    )  # fmt: skip
    assert status == 200, body


def test_a_tuning_request_is_checked_before_it_is_queued(server: TuneServer) -> None:
    status, schema = server.json_call("GET", "/openapi.json")
    assert status == 200 and {"/v1/tune", "/v1/tune/{tune_id}"} <= set(schema["paths"])
    for body, expected in (
        ({"language": "c", "source": "void k(double a[4]) { a[0] = 1; }"}, "main()"),
        (
            {"language": "c", "source": '#include "x.h"\nint main(void) { return 0; }'},
            "standard headers",
        ),
        ({"language": "tc", "source": MM_TC, "sizes": {"M": 8}}, "K, N"),
        ({"language": "tc", "source": MM_TC, "entry": "nope", "sizes": {}}, "no definition"),
    ):
        status, answer = server.json_call("POST", "/v1/tune", body)
        assert status == 422 and expected in json.dumps(answer), answer
    status, answer = server.json_call(
        "POST", "/v1/tune", {"language": "tc", "source": MM_TC, "options": {"target": "cuda"}}
    )
    assert status == 422 and "CPU only" in json.dumps(answer)
    status, answer = server.json_call(
        "POST", "/v1/tune", {"language": "tc", "source": MM_TC, "budget_seconds": -1}
    )
    assert status == 422


def test_the_services_keys_are_the_builds_keys() -> None:
    from polyflow import Options
    from polyflow.storage.tuning import c_tuning_key_of
    from server.tuning import c_key

    source = "int main(void) { return 0; }\n"
    for given in ({}, {"associative_math": True}, {"fast_math": True, "defines": ["N=8"]}):
        options = Options(opt_level=3, **given)
        assert c_key(source, None, options.model_dump(mode="json")) == c_tuning_key_of(source, options)
