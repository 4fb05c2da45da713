"""The content-addressed compile cache (polyflow/storage/cache.py) and its users: `polyflow build`,
the Python API (`compile_c`, `tc`); every program built from the cache is checked against gcc."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from difftest import build_with_gcc, run_program

from polyflow.options import Options
from polyflow.storage.cache import (
    CompileCache,
    cache_key,
    code_fingerprint,
    compiler_versions,
    default_cache,
    normalize_source,
)

BASE = {
    "source": "void f(void) {}\n",
    "language": "c",
    "entry": None,
    "target": "cpu",
    "options": {"opt_level": 3},
    "versions": {"polyflow": "0.1.0", "mlir": "22"},
}


def test_keys_ignore_line_ends_and_trailing_blanks_only() -> None:
    key = cache_key(**BASE)
    assert cache_key(**{**BASE, "source": "void f(void) {}  \r\n\r\n"}) == key
    assert normalize_source("a \r\nb\n\n") == "a\nb\n"
    for change in (
        {"source": "void g(void) {}\n"},
        {"language": "tc"},
        {"entry": "f"},
        {"target": "cuda"},
        {"options": {"opt_level": 2}},
        {"versions": {"polyflow": "0.2.0", "mlir": "22"}},
    ):
        assert cache_key(**{**BASE, **change}) != key, change


def test_a_module_key_follows_the_code_and_its_source_lines_only(tmp_path: Path) -> None:
    from polyflow.frontend.c import emit_c_module
    from polyflow.frontend.c_parse import parse_c
    from polyflow.storage.cache import module_key

    code = "void f(int n, double *a) { for (int i = 0; i < n; i++) a[i] *= 2; }\n"

    def key(text: str, options: Options | None = None) -> str:
        options = options or Options()
        cmod = emit_c_module(parse_c(text, "k.c", options, tmp_path))
        with cmod.context:
            return module_key(cmod.module, options, "cpu-object")

    assert key(code) == key(code)  # two contexts, one key
    assert key("\n" + code) != key(code)  # the lines moved: diagnostics must move too
    assert key(code.replace("2", "3")) != key(code)
    assert key(code, Options(opt_level=3)) != key(code)


def test_values_survive_a_new_instance_and_the_file_is_in_wal_mode(tmp_path: Path) -> None:
    CompileCache(tmp_path).put("k", b"value")
    again = CompileCache(tmp_path)
    assert again.get("k") == b"value" and again.get("other") is None and len(again) == 1
    mode = sqlite3.connect(again.path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def _write_many(directory: str, start: int) -> None:
    cache = CompileCache(directory)
    for n in range(start, start + 50):
        cache.put(f"key{n}", str(n).encode())


def test_several_processes_write_at_once(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_write_many, args=(str(tmp_path), 50 * w)) for w in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    cache = CompileCache(tmp_path)
    assert len(cache) == 200 and cache.get("key137") == b"137"


def test_past_its_size_the_oldest_results_go_first(tmp_path: Path) -> None:
    cache = CompileCache(tmp_path, max_bytes=1000)
    for n in range(12):
        cache.put(f"key{n}", bytes(100))  # 1200 bytes: past the limit at the 11th
    assert cache.get("key0") is None and cache.get("key11") == bytes(100)
    assert 100 * len(cache) <= 1000


def test_the_cache_is_off_with_polyflow_cache_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLYFLOW_CACHE", "off")
    assert default_cache() is None
    monkeypatch.setenv("POLYFLOW_CACHE", "on")
    assert default_cache() is not None


def test_native_code_is_keyed_by_the_host_cpu_and_every_key_by_polyflows_code() -> None:
    assert "host_cpu" in compiler_versions(march="native")
    assert "host_cpu" not in compiler_versions(march="")
    assert len(compiler_versions()["polyflow_code"]) == 16
    assert code_fingerprint("server") != code_fingerprint()


GEMM_PROGRAM = """
#include <stdio.h>
double A[90][70], B[70][80], C[90][80];
void gemm(int ni, int nj, int nk) {
  for (int i = 0; i < ni; i++)
    for (int j = 0; j < nj; j++)
      for (int k = 0; k < nk; k++)
        C[i][j] += A[i][k] * B[k][j];
}
int main(void) {
  for (int i = 0; i < 90; i++) for (int k = 0; k < 70; k++) A[i][k] = (i * k % 7) - 3;
  for (int k = 0; k < 70; k++) for (int j = 0; j < 80; j++) B[k][j] = (k + 2 * j) % 5;
  gemm(90, 80, 70);
  long sum = 0;
  for (int i = 0; i < 90; i++) for (int j = 0; j < 80; j++) sum += (long)C[i][j] * (i + j);
  printf("%ld\\n", sum);
  return 0;
}
"""


def test_polyflow_build_reuses_a_cached_object_and_the_program_still_agrees_with_gcc(
    tmp_path: Path,
) -> None:
    from polyflow.drivers.build import build_program

    source = tmp_path / "gemm.c"
    source.write_text(GEMM_PROGRAM)
    oracle = run_program(build_with_gcc(source, tmp_path / "gcc")).stdout
    cache = CompileCache(tmp_path / "cache")
    options = Options(opt_level=3)
    first = build_program(source, tmp_path / "a", options=options, cache=cache)
    again = build_program(source, tmp_path / "b", options=options, cache=cache)
    assert not first.cached and again.cached and len(cache) == 1
    assert "affine-opt" in first.timings and "affine-opt" not in again.timings
    assert again.compiled == first.compiled == ["gemm"] and again.notes == first.notes
    for exe in ("a", "b"):
        assert run_program(tmp_path / exe).stdout == oracle  # integers in doubles: exact
    # another option, or another kernel, is another key: compiled, and right
    other = build_program(source, tmp_path / "c", options=Options(opt_level=2), cache=cache)
    source.write_text(GEMM_PROGRAM.replace("A[i][k] * B[k][j]", "A[i][k] * B[k][j] * 2"))
    edited = build_program(source, tmp_path / "d", options=options, cache=cache)
    assert not other.cached and not edited.cached and len(cache) == 3
    assert run_program(tmp_path / "c").stdout == oracle
    oracle2 = run_program(build_with_gcc(source, tmp_path / "gcc2")).stdout
    assert run_program(tmp_path / "d").stdout == oracle2 != oracle


def test_the_cli_uses_the_shared_cache_unless_told_not_to(tmp_path: Path) -> None:
    source = tmp_path / "gemm.c"
    source.write_text(GEMM_PROGRAM)
    env = {**os.environ, "POLYFLOW_CACHE": "on", "POLYFLOW_CACHE_DIR": str(tmp_path / "shared")}
    polyflow = [sys.executable, "-m", "polyflow", "build", "-O3", str(source), "--time"]
    runs = [
        subprocess.run([*polyflow, *extra, "-o", str(tmp_path / "x")], env=env,
                       capture_output=True, text=True, timeout=300)
        for extra in ([], [], ["--no-cache"])
    ]  # fmt: skip
    assert all(run.returncode == 0 for run in runs), [run.stderr for run in runs]
    assert ["cache:" in run.stderr for run in runs] == [False, True, False]
    assert len(CompileCache(tmp_path / "shared")) == 1


def test_the_python_api_skips_the_pipeline_on_a_cached_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import polyflow
    from polyflow import tc

    monkeypatch.setenv("POLYFLOW_CACHE", "on")
    monkeypatch.setenv("POLYFLOW_CACHE_DIR", str(tmp_path))
    code = (
        "void kernel(int n, double x[64], double y[64]) "
        "{ for (int i = 0; i < n; i++) y[i] += 3 * x[i] + i; }"
    )
    x = np.arange(64.0)
    results = []
    for _ in range(2):
        kernel = polyflow.compile_c(code, options=Options(opt_level=3))
        y = np.ones(64)
        kernel(64, x, y)
        results.append((kernel.cached, y, kernel.mlir("affine-opt")))
    assert [cached for cached, _, _ in results] == [False, True]
    np.testing.assert_array_equal(results[1][1], 1 + 3 * x + np.arange(64))
    assert results[0][2] == results[1][2]  # the same IR, read back
    source = "def mv(float(M,K) A, float(K) x) -> (C) { C(i) +=! A(i,k) * x(k) }"
    A = np.random.default_rng(1).random((40, 30), dtype=np.float32)
    v = np.random.default_rng(2).random(30, dtype=np.float32)
    for expect_cached in (False, True):
        mv = tc.define(source)  # a new function: its in-memory kernels are empty
        out = mv(A, v)
        assert mv.cached is expect_cached
        np.testing.assert_allclose(out, A @ v, rtol=1e-5)
