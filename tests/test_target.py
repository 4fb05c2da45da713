"""The target (polyflow/target.py): register widths by -march, caches by -mtune, this host's
facts detected once, and all of it in the compile-cache key."""

from __future__ import annotations

from pathlib import Path

import pytest

from polyflow.cli import options_from_args, parse_args
from polyflow.options import Options
from polyflow.schedule.tiling import band_tile_sizes, default_tile_size
from polyflow.storage.cache import compiler_versions
from polyflow.target import (
    GENERIC_CACHES,
    Caches,
    _bytes,
    host_caches,
    host_cores,
    target_of,
    vector_register_bits,
)


@pytest.mark.parametrize(
    ("march", "bits"),
    [("", 128), ("x86-64", 128), ("haswell", 256), ("znver3", 256), ("skylake-avx512", 512),
     ("x86-64-v4", 512)],
)  # fmt: skip
def test_register_width_follows_march(march: str, bits: int) -> None:
    assert vector_register_bits(march) == bits
    assert target_of(march).vector_bits == bits


def test_caches_follow_mtune_which_defaults_to_march() -> None:
    assert target_of("").caches == GENERIC_CACHES
    assert target_of("haswell").caches == GENERIC_CACHES
    assert target_of("native").caches == host_caches()
    assert target_of("", "native").caches == host_caches()
    assert target_of("native", "haswell").caches == GENERIC_CACHES
    host = host_caches()
    assert host.l1_data >= 8 * 1024 and host.l2 >= host.l1_data and host.line in (32, 64, 128)
    assert host_cores() >= 1


def test_cache_sizes_read_as_sysfs_writes_them() -> None:
    assert (_bytes("32K"), _bytes("1M"), _bytes("512")) == (32768, 1 << 20, 512)


def test_tile_sizes_come_from_the_targets_l1() -> None:
    assert default_tile_size(8) == default_tile_size(8, GENERIC_CACHES) == 32
    small = Caches(l1_data=8 * 1024, l2=256 * 1024, line=64)
    assert default_tile_size(8, small) == 16
    assert band_tile_sizes(2, options=Options(mtune="native")) == (
        default_tile_size(8, host_caches()),
    ) * 2


def test_the_target_is_part_of_the_cache_key() -> None:
    generic, native = compiler_versions(), compiler_versions(march="native")
    assert "host_cpu" in native and "host_cpu" not in generic
    assert compiler_versions(mtune="native")["cache_l2"] == str(host_caches().l2)
    assert compiler_versions(march="haswell")["vector_bits"] == "256"
    assert compiler_versions(march="haswell") != generic


def test_the_command_line_takes_gccs_spellings() -> None:
    options = options_from_args(parse_args(["build", "k.c", "-march=haswell", "-mtune=native"]))
    assert (options.march, options.mtune) == ("haswell", "native")


PARALLEL = """#include <stdio.h>
#define N 40000  /* more than MIN_PARALLEL_WORK: a smaller loop does not fork */
double A[N], B[N];
void kernel(double a[N], double b[N]) { for (int i = 0; i < N; i++) a[i] = b[i] * 2.0 + 1.0; }
int main(void) {
  for (int i = 0; i < N; i++) B[i] = i;
  kernel(A, B);
  double s = 0;
  for (int i = 0; i < N; i++) s += A[i];
  printf("%.17g\\n", s);
  return 0;
}
"""


def test_the_thread_count_is_an_option(tmp_path: Path) -> None:
    from difftest import check_program_against_gcc

    import polyflow

    source = tmp_path / "par.c"
    source.write_text(PARALLEL)
    fixed = Options(opt_level=3, threads=3)
    polyflow.build_program(source, tmp_path / "k.mlir", options=fixed, emit="llvm-dialect")
    assert "omp.parallel num_threads(" in (tmp_path / "k.mlir").read_text()
    default = Options(opt_level=3)
    polyflow.build_program(source, tmp_path / "d.mlir", options=default, emit="llvm-dialect")
    text = (tmp_path / "d.mlir").read_text()
    assert "omp.parallel" in text and "num_threads" not in text
    check_program_against_gcc(source, tmp_path / "run", fixed)
    assert options_from_args(parse_args(["build", "k.c", "--threads", "2"])).threads == 2
