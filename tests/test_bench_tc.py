"""Smoke test of scripts/bench_tc.py: one workload, one round, every library in its own
process; the JSON has a positive time per library and polyflow's result matched NumPy's. No
timing is asserted."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "bench_tc.py"


def test_one_round_of_the_mlp_times_each_library(tmp_path: Path) -> None:
    out = tmp_path / "tc.json"
    command = [sys.executable, str(SCRIPT), "--only", "mlp2", "--repeat", "1", "--threads", "1",
               "--json", str(out)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(out.read_text())["results"]
    assert row["workload"] == "mlp2" and row["max_rel_error"] < 1e-4
    libraries = ["polyflow", "numpy"]
    if importlib.util.find_spec("torch") is not None:
        libraries.append("torch")
    assert all(row[lib] > 0 for lib in libraries), row
    assert "mlp2" in done.stdout  # the table


def test_the_cuda_target_builds_the_gpu_bundle_and_says_how_to_run_it(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    command = [sys.executable, str(SCRIPT), "--target", "cuda", "--bundle", str(bundle),
               "--only", "moments_128x65536"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert (bundle / "gpu_runner.py").exists() and (bundle / "manifest.json").exists()
    assert list((bundle / "moments_128x65536").glob("*.ptx")), done.stdout
    if "no CUDA device here" in done.stdout:  # (on a GPU machine it runs and reports instead)
        assert f"gpu_runner.py {bundle} --json" in done.stdout
