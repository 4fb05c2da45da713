"""bench_polybench's dump parser and validator: harness/bench.h's format, tolerances, failures."""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import pytest

from bench_polybench import HARNESS_DIR
from bench_polybench.dump import DumpError, compare_dumps, parse_dump, rel_error, validate

PROGRAM = r"""#include "bench.h"
int main(void) {
  long n = 5000;
  DATA_TYPE *x = BENCH_ALLOC(DATA_TYPE, n);
  int *t = BENCH_ALLOC(int, 7);
  for (long i = 0; i < n; i++) x[i] = (DATA_TYPE)((i * 7 + 3) % 101) / 101 - 0.25;
  for (int i = 0; i < 7; i++) t[i] = i * i - 9;
  x[PLANT] += DELTA;
  bench_dump("x", x, n);
  bench_dump_int("t", t, 7);
  free(x); free(t);
  return 0;
}
"""


def dump_of(tmp_path: Path, plant: int = 0, delta: str = "0.0") -> str:
    """The stdout of a real bench.h program, with `delta` added to x[plant]."""
    src = tmp_path / "dump.c"
    exe = tmp_path / f"dump-{plant}-{delta}"
    src.write_text(PROGRAM)
    cmd = ["gcc", "-O2", f"-I{HARNESS_DIR}", f"-DPLANT={plant}", f"-DDELTA={delta}"]
    subprocess.run([*cmd, str(src), "-o", str(exe), "-lm"], check=True)
    return subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout


def test_parses_the_harness_format(tmp_path: Path) -> None:
    arrays = parse_dump(dump_of(tmp_path))
    assert list(arrays) == ["x", "t"]
    x, t = arrays["x"], arrays["t"]
    assert x.count == 5000 and set(x.sums) == {"sum", "abs", "weighted"}
    assert len(x.samples) == 2500 and x.samples[0] == pytest.approx(3 / 101 - 0.25)  # stride 2
    assert t.count == 7 and t.samples == {i: float(i * i - 9) for i in range(7)}
    assert t.sums["sum"] == sum(i * i - 9 for i in range(7))


def test_identical_dumps_validate_exactly(tmp_path: Path) -> None:
    text = dump_of(tmp_path)
    verdict = validate(text, text, 1e-6)
    assert verdict.ok and verdict.max_rel_err == 0.0 and verdict.message == ""


def test_a_planted_difference_fails_validation(tmp_path: Path) -> None:
    reference = dump_of(tmp_path)
    verdict = validate(reference, dump_of(tmp_path, plant=1234, delta="1e-3"), 1e-6)
    assert not verdict.ok
    assert verdict.max_rel_err > 1e-6
    assert verdict.message.startswith("x[1234]:")  # the sampled element, named


def test_a_planted_difference_off_the_samples_is_caught_by_the_checksums(tmp_path: Path) -> None:
    reference = dump_of(tmp_path)
    # off the samples only the checksums see it, relative to the array's sum of magnitudes
    verdict = validate(reference, dump_of(tmp_path, plant=1235, delta="0.5"), 1e-6)
    assert not verdict.ok and verdict.message.startswith("x ")  # sum, abs or weighted


def test_a_difference_within_the_tolerance_passes_with_its_error(tmp_path: Path) -> None:
    reference = dump_of(tmp_path)
    verdict = validate(reference, dump_of(tmp_path, plant=1234, delta="1e-10"), 1e-6)
    assert verdict.ok and 0.0 < verdict.max_rel_err < 1e-6
    assert not validate(reference, dump_of(tmp_path, plant=1234, delta="1e-10"), 1e-12).ok


def dump(values: list[float], name: str = "A") -> str:
    abs_sum = sum(abs(v) for v in values)
    weighted = sum(v * ((i % 1021) + 1) for i, v in enumerate(values))
    lines = [f"array {name} {len(values)}", f"sum {sum(values)!r}", f"abs {abs_sum!r}"]
    lines.append(f"weighted {weighted!r}")
    lines += [f"{i} {v!r}" for i, v in enumerate(values)]
    return "\n".join(lines) + "\n"


def test_integer_tables_must_agree() -> None:
    assert not validate(dump([1.0, 2.0, 3.0]), dump([1.0, 2.0, 4.0]), 1e-6).ok


def test_values_near_zero_are_compared_at_the_array_scale() -> None:
    # a cancellation: 1e-17 against -1e-17 in an array of magnitude 1 is rounding, not an error
    verdict = validate(dump([1.0, 1e-17, -1.0]), dump([1.0, -1e-17, -1.0]), 1e-6)
    assert verdict.ok and verdict.max_rel_err < 1e-16


def test_nan_differs_from_a_number_and_matches_nan() -> None:
    assert rel_error(math.nan, 1.0) == math.inf
    assert rel_error(math.nan, math.nan) == 0.0
    assert not validate(dump([1.0, 2.0]), dump([1.0, math.nan]), 1e-6).ok


@pytest.mark.parametrize(
    ("got", "message"),
    [
        (dump([1.0, 2.0], name="B"), "arrays differ"),
        (dump([1.0, 2.0]) + dump([3.0], name="B"), "arrays differ"),
        (dump([1.0, 2.0, 3.0]), "3 elements, reference 2"),
        ("", "arrays differ"),
        ("array A 2\nsum 1\n", "dump unreadable: array 'A' lacks abs, weighted"),
        ("0 1.0\n", "dump unreadable: line 1: data before any 'array' line"),
        (dump([1.0, 2.0]).replace("1 2.0", "1 two"), "dump unreadable: line 6: not a number"),
        (dump([1.0, 2.0]).replace("1 2.0", "7 2.0"), "index 7 outside array 'A'"),
    ],
)
def test_structural_differences_fail_with_a_reason(got: str, message: str) -> None:
    verdict = validate(dump([1.0, 2.0]), got, 1e-6)
    assert not verdict.ok and message in verdict.message


def test_different_sample_indices_fail() -> None:
    reference = parse_dump(dump([1.0, 2.0]))
    got = parse_dump(dump([1.0, 2.0]))
    del got["A"].samples[1]
    assert compare_dumps(reference, got, 1e-6).message == "array A: sampled indices differ"


def test_parse_errors_are_dump_errors() -> None:
    with pytest.raises(DumpError, match="dumped twice"):
        parse_dump(dump([1.0]) + dump([1.0]))
    with pytest.raises(DumpError, match="expected 'array <name> <count>'"):
        parse_dump("array A\n")
