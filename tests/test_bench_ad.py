"""Smoke test of the reverse-mode AD benchmark (bench_ad): `python -m bench_ad` at the small
size on trmv and gemm, once, in a subprocess; its JSON must show every gradient right (against
JAX), timed, and free of atomics, and its markdown table must be written."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="JAX is not installed")
def test_small_run_of_trmv_and_gemm(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "bench_ad", "--size", "small", "--kernels", "trmv,gemm"]
    done = subprocess.run(
        [*command, "--repeat", "1", "--out", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [results] = tmp_path.glob("*-small.json")
    assert results.with_suffix(".md").is_file()
    rows = json.loads(results.read_text())["rows"]
    assert {row["kernel"] for row in rows} == {"trmv", "gemm"}
    for row in rows:
        where = f"{row['kernel']} {row['size']}"
        assert row["grad_status"] == "ok" and row["correct"], (where, row)
        assert row["grad_s"] is not None and math.isfinite(row["grad_s"]), where
        assert row["max_rel_error"] <= 1e-9, where
        assert row["atomics"] == 0, (where, row["atomics_by_stage"])


def test_the_checkpointing_table_compares_segment_lengths() -> None:
    """`python -m bench_ad.checkpointing` at a tiny size: one row per segment length, the
    gradients equal (the exit status says so)."""
    done = subprocess.run(
        [sys.executable, "-m", "bench_ad.checkpointing", "--steps", "20", "--points", "64",
         "--repeat", "1", "--segments", "0,4"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "tape of every step" in done.stdout and "segments of 4 iterations" in done.stdout
