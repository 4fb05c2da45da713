"""The GPU benchmark's two halves without a GPU: the bundle `scripts/bench_gpu.py build` writes
(PTX, launch plans, PolyBench executables, the runner), every workload's launch plan replayed on
the CPU emulation against NumPy (`check`), and the report from a runner's results."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location("bench_gpu", ROOT / "scripts" / "bench_gpu.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_workload_replays_its_launch_plan_correctly_on_the_cpu_emulation() -> None:
    assert _bench().check(set()) == 0


def test_the_bundle_holds_ptx_plans_executables_and_the_runner(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    _bench().build(bundle, {"tmm_128x256x32", "jacobi-2d"}, "sm_90")
    manifest = json.loads((bundle / "manifest.json").read_text())
    tmm, small = manifest["tc"]  # its own sizes, timed; odd small sizes, only checked there
    assert small["name"] == "tmm_128x256x32@small" and small["check_only"]
    assert small["shapes"] == [[33, 17], [29, 17]]
    plan = json.loads((bundle / tmm["plan"]).read_text())
    assert len(plan["launches"]) == 1
    launch = plan["launches"][0]
    assert launch["block"] == [32, 8, 1] and launch["grid"] == [8, 16, 1]
    assert {a["buffer"] for a in launch["args"] if a["kind"] == "ptr"} == {0, 1, 2}
    assert all(".visible .entry" in (bundle / p).read_text() for p in tmm["ptx"].values())
    (jacobi,) = manifest["polybench"]
    for build in ("gcc", "polyflow_cpu", "polyflow_cuda"):
        assert (bundle / jacobi[build]).stat().st_size > 0
    # the runner needs no polyflow: it starts, and says there is no GPU here
    run = subprocess.run(
        [sys.executable, "-I", str(bundle / "gpu_runner.py"), str(bundle)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1 or "device" in run.stdout, run.stderr


def test_the_report_gives_ratios_and_the_geomean(tmp_path: Path) -> None:
    results = {
        "manifest": {"built": "2026-11-26 15:00", "gpu_arch": "sm_90", "polyflow": "0.1.0"},
        "device": "NVIDIA H100",
        "date": "2026-11-26 16:00",
        "tc": [
            {
                "name": "a",
                "correct": True,
                "problems": [],
                "polyflow_s": 1e-3,
                "torch_eager_s": 2e-3,
                "torch_compile_s": 1e-3,
            },
            {
                "name": "b",
                "correct": True,
                "problems": [],
                "polyflow_s": 2e-3,
                "torch_eager_s": 1e-3,
                "torch_compile_s": None,
            },
            {"name": "b@odd", "correct": False, "problems": ["C: relative error 1"]},
        ],
        "polybench": [
            {"name": "gemm", "gcc_s": 2.0, "polyflow_cpu_s": 0.5, "polyflow_cuda_s": 0.1}
        ],
    }
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results))
    written = _bench().report(path, tmp_path)
    text = written.read_text()
    assert "Geomean vs PyTorch eager: 1.00x" in text  # the odd-size check is not timed
    assert "0 of 1 agree with PyTorch in float64: wrong: b@odd (C: relative error 1)" in text
    assert "| gemm | 2.0 | 0.5 | 0.1 | 20.00x | 5.00x |" in text
    assert written.with_suffix(".png").exists()
