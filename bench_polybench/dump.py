"""The output dumps of harness/bench.h: parsing them, and comparing one with the reference's.

A dump is, for every output array:

    array <name> <count>
    sum <value>
    abs <value>
    weighted <value>
    <index> <value>        (up to BENCH_DUMP_SAMPLES sampled elements)

Two dumps agree when they name the same arrays with the same counts and sample indices, and
every number is within a relative tolerance of the reference's. The error of a number is
|got - ref| / max(|got|, |ref|, floor), where the floor keeps values near zero (cancellations,
reassociated sums) from blowing the relative error up: for an element it is the array's mean
magnitude (abs / count), for `sum` and `weighted` the array's `abs`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

TINY = 1e-300


class DumpError(ValueError):
    """The text is not a dump of bench.h's format; the message says where."""


@dataclass
class ArrayDump:
    """One array of a dump: its length, its three checksums and its sampled elements."""

    name: str
    count: int
    sums: dict[str, float] = field(default_factory=dict)  # "sum", "abs", "weighted"
    samples: dict[int, float] = field(default_factory=dict)

    @property
    def scale(self) -> float:
        """The mean magnitude of an element (from `abs`)."""
        return abs(self.sums.get("abs", 0.0)) / self.count if self.count else 0.0


@dataclass
class Validation:
    """How a dump compares with the reference: agreement, the largest error seen, and why not."""

    ok: bool
    max_rel_err: float
    message: str = ""


CHECKSUMS = ("sum", "abs", "weighted")


def parse_dump(text: str) -> dict[str, ArrayDump]:
    """The arrays of a dump, by name, in the order printed. Raises DumpError on malformed text."""
    arrays: dict[str, ArrayDump] = {}
    current: ArrayDump | None = None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        parts = line.split()
        try:
            if parts[0] == "array":
                if len(parts) != 3:
                    raise DumpError(f"line {lineno}: expected 'array <name> <count>': {line!r}")
                name, count = parts[1], int(parts[2])
                if name in arrays:
                    raise DumpError(f"line {lineno}: array {name!r} dumped twice")
                current = arrays[name] = ArrayDump(name, count)
                continue
            if current is None:
                raise DumpError(f"line {lineno}: data before any 'array' line: {line!r}")
            if len(parts) != 2:
                raise DumpError(f"line {lineno}: expected two fields: {line!r}")
            if parts[0] in CHECKSUMS:
                current.sums[parts[0]] = float(parts[1])
            else:
                index = int(parts[0])
                if not 0 <= index < current.count:
                    raise DumpError(
                        f"line {lineno}: index {index} outside array {current.name!r} "
                        f"of {current.count} elements"
                    )
                current.samples[index] = float(parts[1])
        except ValueError as exc:
            if isinstance(exc, DumpError):
                raise
            raise DumpError(f"line {lineno}: not a number: {line!r}") from None
    for array in arrays.values():
        missing = [key for key in CHECKSUMS if key not in array.sums]
        if missing:
            raise DumpError(f"array {array.name!r} lacks {', '.join(missing)}")
    return arrays


def rel_error(got: float, ref: float, floor: float = 0.0) -> float:
    """|got - ref| relative to the larger magnitude (at least `floor`); NaN matches only NaN."""
    if got == ref or (math.isnan(got) and math.isnan(ref)):
        return 0.0
    if math.isnan(got) or math.isnan(ref) or math.isinf(got) or math.isinf(ref):
        return math.inf
    return abs(got - ref) / max(abs(got), abs(ref), floor, TINY)


def compare_dumps(
    reference: dict[str, ArrayDump], got: dict[str, ArrayDump], rtol: float
) -> Validation:
    """Compare `got` with `reference`; ok when the structure matches and every error <= rtol."""
    if not reference:
        return Validation(False, math.inf, "the reference dump has no arrays")
    if list(got) != list(reference):
        return Validation(
            False,
            math.inf,
            f"arrays differ: reference dumps {', '.join(reference)}; "
            f"this dumps {', '.join(got) or 'nothing'}",
        )
    worst = 0.0
    where = ""
    for name, ref in reference.items():
        arr = got[name]
        if arr.count != ref.count:
            return Validation(
                False, math.inf, f"array {name}: {arr.count} elements, reference {ref.count}"
            )
        if arr.samples.keys() != ref.samples.keys():
            return Validation(False, math.inf, f"array {name}: sampled indices differ")
        checks: list[tuple[str, float, float, float]] = [
            (key, arr.sums[key], ref.sums[key], abs(ref.sums["abs"])) for key in CHECKSUMS
        ]
        checks += [(f"[{i}]", arr.samples[i], value, ref.scale) for i, value in ref.samples.items()]
        for label, value, expected, floor in checks:
            err = rel_error(value, expected, floor)
            if err > worst:
                worst = err
                where = f"{name}{label if label.startswith('[') else ' ' + label}: {value!r} vs reference {expected!r}"
    if worst > rtol:
        return Validation(False, worst, f"{where} (relative error {worst:.3g} > {rtol:g})")
    return Validation(True, worst)


def validate(reference_text: str, text: str, rtol: float) -> Validation:
    """Parse both dumps and compare them; a malformed dump fails validation with the reason."""
    try:
        reference = parse_dump(reference_text)
    except DumpError as exc:
        return Validation(False, math.inf, f"reference dump unreadable: {exc}")
    try:
        got = parse_dump(text)
    except DumpError as exc:
        return Validation(False, math.inf, f"dump unreadable: {exc}")
    return compare_dumps(reference, got, rtol)
