"""Every program of tests/programs/ built by polyflow behaves exactly like its ``gcc -O2`` build.

Each program runs three times through polyflow: at the default options, at ``opt_level=0``, and
built for the GPU (``--target=cuda``) with its kernels run by the CPU emulation. The
corpus checks at the end need only gcc: they keep the programs free of undefined behaviour, on
which gcc and polyflow could legitimately disagree.
"""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

import pytest
from difftest import (
    ORACLE_CC,
    build_with_gcc,
    check_program_against_gcc,
    output_diff,
    read_header,
    run_program,
)

from polyflow import Options

PROGRAMS_DIR = Path(__file__).parent / "programs"
PROGRAMS = sorted(PROGRAMS_DIR.glob("*.c"))
OPTION_SETS = {
    "O2": Options(),
    "O0": Options(opt_level=0),
    # the GPU build, its kernels run on the CPU emulation (blocks and threads as loops)
    "cuda-emulated": Options(opt_level=3, target="cuda", gpu_emulate=True),
}
SANITIZE_FLAGS = (
    "-std=c11",
    "-O1",
    "-g",
    "-fsanitize=undefined,address,float-cast-overflow",
    "-fno-sanitize-recover=all",
)


@pytest.mark.parametrize("level", list(OPTION_SETS))
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.stem)
def test_program_matches_gcc(program: Path, level: str, tmp_path: Path) -> None:
    check_program_against_gcc(program, tmp_path, OPTION_SETS[level])


# --- the corpus itself (gcc only) -----------------------------------------------------------


def test_corpus_is_large_enough() -> None:
    assert len(PROGRAMS) >= 30
    with_fallbacks = [p.name for p in PROGRAMS if read_header(p).fallback]
    assert len(with_fallbacks) >= 3, with_fallbacks


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.stem)
def test_corpus_header_names_defined_functions(program: Path) -> None:
    header = read_header(program)
    assert header.compiled, f"{program.name}: no '// polyflow: compiled=' header"
    text = program.read_text()
    for name in (*header.compiled, *header.fallback):
        definition = re.compile(
            # (old-style definitions declare their parameters between the ')' and the '{')
            rf"^[A-Za-z_][\w \t\*]*\b{re.escape(name)}\s*\([^;]*?\)(?:[^{{}}();]*;)*\s*\{{",
            re.M,
        )
        assert definition.search(text), f"{program.name}: header names '{name}', not defined"
    assert "main" not in header.compiled + header.fallback


@cache
def _sanitizers_available(tmp: Path) -> bool:
    src = tmp / "probe.c"
    src.write_text("int main(void) { return 0; }\n")
    cmd = [ORACLE_CC, *SANITIZE_FLAGS, "-o", str(tmp / "probe"), str(src)]
    return subprocess.run(cmd, capture_output=True, check=False).returncode == 0


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.stem)
def test_corpus_program_is_well_defined(
    program: Path, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """-O2, -O0 and a UBSan+ASan build print the same, the sanitizers stay silent, and the
    program is quick enough to run many times."""
    if not _sanitizers_available(tmp_path_factory.getbasetemp()):
        pytest.skip("gcc cannot build with -fsanitize=undefined,address here")
    args = read_header(program).args
    reference = run_program(build_with_gcc(program, tmp_path / "o2"), args, timeout=5.0)
    assert reference.returncode == 0, reference.stderr
    for flags in (("-O0",), SANITIZE_FLAGS):
        run = run_program(build_with_gcc(program, tmp_path / "other", flags=flags), args)
        assert run.stderr == "", f"{' '.join(flags)}:\n{run.stderr[:3000]}"
        assert run.returncode == 0
        assert run.stdout == reference.stdout, output_diff(
            reference.stdout, run.stdout, expected_name="gcc -O2", actual_name=" ".join(flags)
        )
