"""Random affine loop-nest programs built by polyflow behave exactly like their ``gcc -O2`` build.

The programs come from ``tests/fuzz/affine_gen.py`` (UB-free by construction, checked over many
seeds by ``tests/fuzz/check_ub.py`` with UBSan and ASan). Every ``kernel_*`` function of a
program must go through MLIR, and the printed checksums must be identical.

``POLYFLOW_FUZZ_COUNT`` (default 200) sets how many programs run, ``POLYFLOW_FUZZ_SEED`` (default
0) the first seed, so a run is reproducible, and ``POLYFLOW_FUZZ_OPT_LEVEL`` (default 2) polyflow's
``opt_level``. A failure names its seed; ``python tests/fuzz/affine_gen.py SEED`` prints the
program again.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from difftest import (
    build_with_gcc,
    build_with_polyflow,
    compare_report,
    compare_runs,
    read_header,
    run_program,
)
from fuzz.affine_gen import generate_program

from polyflow import CompileError, Options

FUZZ_COUNT = int(os.environ.get("POLYFLOW_FUZZ_COUNT", "200"))
FUZZ_SEED = int(os.environ.get("POLYFLOW_FUZZ_SEED", "0"))
FUZZ_OPTIONS = Options(opt_level=int(os.environ.get("POLYFLOW_FUZZ_OPT_LEVEL", "2")))
SEEDS = range(FUZZ_SEED, FUZZ_SEED + FUZZ_COUNT)
# The GPU build of the first of them (POLYFLOW_FUZZ_GPU_COUNT, default 40), emulated on the CPU.
GPU_OPTIONS = Options(opt_level=3, target="cuda", gpu_emulate=True)
GPU_SEEDS = range(FUZZ_SEED, FUZZ_SEED + int(os.environ.get("POLYFLOW_FUZZ_GPU_COUNT", "40")))
KERNEL_RE = re.compile(r"^\w+ (kernel_\d+)\(", re.MULTILINE)


def write_program(seed: int, directory: Path) -> tuple[Path, list[str]]:
    """Write the program of `seed`, headed by the list of functions that must be compiled."""
    source = generate_program(seed)
    kernels = KERNEL_RE.findall(source)
    path = directory / f"fuzz_{seed}.c"
    path.write_text(f"// polyflow: compiled={','.join(kernels)}\n{source}")
    return path, kernels


def test_generator_is_deterministic() -> None:
    assert generate_program(FUZZ_SEED) == generate_program(FUZZ_SEED)
    assert KERNEL_RE.findall(generate_program(FUZZ_SEED))


@pytest.mark.parametrize("seed", SEEDS, ids=lambda s: f"seed{s}")
def test_random_program_matches_gcc(seed: int, tmp_path: Path) -> None:
    """What ``difftest.check_program_against_gcc`` checks, plus a second oracle, ``gcc -O0``.

    gcc 12.2 miscompiles some of these programs at -O2 (seed 1929: a triangular nest whose outer
    loop starts at -1 loses all its stores under tree-pre + ivopts). When polyflow and ``gcc -O2``
    disagree, ``gcc -O0`` decides: agreeing with it is a skip (no trustworthy oracle), not a pass.
    """
    _check_against_gcc(seed, tmp_path, FUZZ_OPTIONS)


@pytest.mark.parametrize("seed", GPU_SEEDS, ids=lambda s: f"seed{s}")
def test_random_program_on_the_gpu_emulated_matches_gcc(seed: int, tmp_path: Path) -> None:
    """The same programs built for the GPU (`--target=cuda`), their kernels run by the CPU
    emulation: a wrong guard, grid or index in the mapping changes the checksums."""
    _check_against_gcc(seed, tmp_path, GPU_OPTIONS)


def _check_against_gcc(seed: int, tmp_path: Path, options: Options) -> None:
    path, _ = write_program(seed, tmp_path)
    where = f"seed {seed}: {path} (regenerate: python tests/fuzz/affine_gen.py {seed})"
    expected = run_program(build_with_gcc(path, tmp_path / "gcc-O2"))
    assert expected.returncode == 0, f"{where}: the gcc -O2 build fails: {expected.stderr[:2000]}"
    try:
        report = build_with_polyflow(path, tmp_path / "polyflow", options)
    except CompileError as exc:
        pytest.fail(f"{where}\npolyflow rejected the program: {exc}", pytrace=False)
    actual = run_program(report.output)
    problems = compare_report(read_header(path), report)
    run_problems = compare_runs(expected, actual)
    if run_problems:
        at_o0 = run_program(build_with_gcc(path, tmp_path / "gcc-O0", flags=("-O0",)))
        if at_o0.stdout != expected.stdout:
            if not compare_runs(at_o0, actual) and not problems:
                pytest.skip(f"{where}: gcc -O2 disagrees with gcc -O0 and polyflow (gcc bug)")
            run_problems.append(
                "gcc -O0 disagrees with both:\n" + "\n".join(compare_runs(at_o0, actual))
            )
    problems += run_problems
    if problems:
        pytest.fail(
            f"{where} (opt_level={options.opt_level}, target={options.target}):\n"
            + "\n".join(problems),
            pytrace=False,
        )
