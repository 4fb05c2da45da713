"""The option space of one kernel: which `Options` fields the tuner varies, and over which values.

The space is made from the options model and what the default build of the kernel showed
(`CompileFacts`): tile sizes per band dimension, as deep as its deepest loop nest, from powers
of two and the divisors of its loop extents near them (or untiled, or the compiler's own
choice); fusion; the scheduler preset; statement and index splitting; the contraction
micro-kernel's shape, tiles and orientation (only where the default build made one); the
unrolling of innermost loops; parallelization (loops, the smallest parallel trip, threads;
reductions where floats may be reassociated); wavefronts; for `cuda` the block and grid
shapes, the shared memory for promotion and the unrolling of the loops over its tiles, and the
register tiles (points per thread, their sums in registers: unroll-and-jam of the threads).

A candidate is a genome: one choice index per parameter. `choices(genome)` decodes it into the
`Options` fields it sets, canonically: a field that cannot matter under the others (tile sizes
of an untiled build, wavefronts without parallel loops) is left out, so two genomes that build
the same program decode to equal choices and are measured once. Invalid combinations (a
micro-kernel block that does not fit the vector registers, a CUDA block of more than 1024
threads) are filtered out by `valid`.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from polyflow.options import Options
from polyflow.target import host_cores, vector_register_bits
from polyflow.tune.tasks import CompileFacts

Genome = dict[str, int]
Choices = dict[str, Any]

# the tile sizes tried per band dimension before the extents' divisors join them
TILE_POWERS = (4, 8, 16, 32, 64, 128, 256)
# at most this many band dimensions get a tile size gene (deeper ones repeat the last)
MAX_TILED_DIMENSIONS = 4


@dataclass(frozen=True)
class Parameter:
    """One dimension of the space: an `Options` field (or a part of one: `tile_size_<d>`)
    and its values, the default build's first."""

    name: str
    values: tuple[Any, ...]

    def __post_init__(self) -> None:
        if not self.values:
            raise ValueError(f"parameter {self.name} has no values")


@dataclass
class OptionSpace:
    """The parameters tuned for one kernel, with the base options they override."""

    base: Options
    parameters: list[Parameter] = field(default_factory=list)
    registers: int = 16  # vector registers a micro-kernel block must fit in

    def __len__(self) -> int:
        return len(self.parameters)

    def size(self) -> int:
        """How many genomes there are (before the canonical merging of equal builds)."""
        total = 1
        for parameter in self.parameters:
            total *= len(parameter.values)
        return total

    def default_genome(self) -> Genome:
        return {p.name: 0 for p in self.parameters}

    def random_genome(self, rng: random.Random) -> Genome:
        for _ in range(100):
            genome = {p.name: rng.randrange(len(p.values)) for p in self.parameters}
            if self.valid(genome):
                return genome
        return self.default_genome()

    def neighbours(self, genome: Genome) -> list[Genome]:
        """The valid genomes that differ from `genome` in one choice and build something else
        (a tile size of an untiled build is no neighbour)."""
        own = self.key_of(genome)
        found: dict[str, Genome] = {}
        for parameter in self.parameters:
            for index in range(len(parameter.values)):
                if index == genome.get(parameter.name, 0):
                    continue
                other = dict(genome, **{parameter.name: index})
                key = self.key_of(other)
                if key != own and key not in found and self.valid(other):
                    found[key] = other
        return list(found.values())

    def value(self, genome: Genome, name: str) -> Any:
        for parameter in self.parameters:
            if parameter.name == name:
                return parameter.values[genome.get(name, 0)]
        raise KeyError(name)

    def has(self, name: str) -> bool:
        return any(p.name == name for p in self.parameters)

    def choices(self, genome: Genome) -> Choices:
        """The `Options` fields `genome` sets, canonical (see the module docstring)."""
        raw = {p.name: p.values[genome.get(p.name, 0)] for p in self.parameters}
        chosen: Choices = {}
        for name, value in raw.items():
            if not name.startswith("tile_size_"):
                chosen[name] = value
        tiled = chosen.get("tile", self.base.tile)
        if tiled and raw.get("tile_sizes_auto") is False:
            sizes = [raw[f"tile_size_{d}"] for d in range(MAX_TILED_DIMENSIONS) if f"tile_size_{d}" in raw]
            while len(sizes) > 1 and sizes[-1] == sizes[-2]:
                sizes.pop()  # the last size repeats: equal trailing sizes say nothing more
            chosen["tile_sizes"] = sizes
        chosen.pop("tile_sizes_auto", None)
        if not tiled:
            for name in ("tile_sizes", "tile_second_level", "wavefront", "wavefront_block", "point_distribution"):
                chosen.pop(name, None)
        parallel = chosen.get("parallel", self.base.parallel)
        if not parallel:
            for name in ("wavefront", "wavefront_block", "threads", "min_parallel_trip", "parallel_reductions"):
                chosen.pop(name, None)
        if not chosen.get("wavefront", self.base.wavefront):
            chosen.pop("wavefront_block", None)
        if not chosen.get("micro_kernels", self.base.micro_kernels):
            for name in list(chosen):
                if name.startswith(("micro_kernel_", "contraction_tile_")):
                    del chosen[name]
        if not chosen.get("schedule", self.base.schedule):
            for name in ("fusion", "schedule_preset", "split", "index_split"):
                chosen.pop(name, None)
        if self.base.target == "cuda" and not chosen.get("shared_memory", self.base.shared_memory):
            chosen.pop("unroll", None)  # it unrolls the loops over shared-memory tiles only
        # what the base options already say is no choice: the default build chooses nothing
        return {
            name: value
            for name, value in chosen.items()
            if _normal(getattr(self.base, name)) != _normal(value)
        }

    def options(self, genome: Genome) -> Options:
        """The base options with `genome`'s choices."""
        return apply(self.base, self.choices(genome))

    def valid(self, genome: Genome) -> bool:
        """Whether `genome` decodes to options that build: a micro-kernel block fits the
        vector registers (with one for the broadcast value), a CUDA block has at most 1024
        threads."""
        chosen = self.choices(genome)
        rows = chosen.get("micro_kernel_rows", self.base.micro_kernel_rows)
        vectors = chosen.get("micro_kernel_vectors", self.base.micro_kernel_vectors)
        if chosen.get("micro_kernels", self.base.micro_kernels) and rows * vectors + vectors + 1 > self.registers:
            return False
        block = chosen.get("block")
        if block is not None:
            threads = 1
            for size in block:
                threads *= size
            if threads > 1024:
                return False
        try:
            apply(self.base, chosen)
        except ValueError:
            return False
        return True

    def key_of(self, genome: Genome) -> str:
        """A text naming the build `genome` makes (equal for canonically equal genomes)."""
        return json.dumps(self.choices(genome), sort_keys=True)

    def describe(self) -> list[dict[str, Any]]:
        return [{"name": p.name, "values": list(p.values)} for p in self.parameters]


def _normal(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def apply(base: Options, chosen: Mapping[str, Any]) -> Options:
    """`base` with the chosen fields (validated: a ValueError names a bad one)."""
    update = {k: tuple(v) if isinstance(v, list) else v for k, v in chosen.items()}
    return Options(**{**base.model_dump(exclude_unset=True), **update})


def tile_size_values(extents: Sequence[int] | set[int], default: int = 32) -> tuple[int, ...]:
    """Tile sizes worth trying for loops of these extents: `default` first, then the powers
    of two below the largest extent, and for the three largest extents the divisor nearest
    to each of 16, 32, 64 and 128 (within a factor 1.5): a tile that divides its loop leaves
    no partial tile."""
    largest = max(extents, default=1024)
    sizes = {p for p in TILE_POWERS if p < largest}
    for extent in sorted(extents, reverse=True)[:3]:
        for power in (16, 32, 64, 128):
            if power >= extent:
                continue
            near = [
                d
                for d in range(int(power / 1.5), int(power * 1.5) + 1)
                if d > 1 and extent % d == 0 and d != power and d < extent
            ]
            if near:
                sizes.add(min(near, key=lambda d: (abs(d - power), -d)))
    return (default, *sorted(s for s in sizes if s != default))


def option_space(base: Options, facts: CompileFacts) -> OptionSpace:
    """The space of `base`'s kernel (see the module docstring); the default build is genome 0
    (each parameter's first value is the base options' own)."""
    space = OptionSpace(base)
    bits = vector_register_bits(base.march)
    space.registers = 32 if bits == 512 else 16

    def add(name: str, *alternatives: Any) -> None:
        first = getattr(base, name) if name in Options.model_fields else alternatives[0]
        values = [first] + [v for v in alternatives if v != first]
        if len(values) > 1:
            space.parameters.append(Parameter(name, tuple(values)))

    if base.target == "cuda":
        _gpu_parameters(space, base, facts, add)
        return space
    depth = max(1, min(facts.depth, MAX_TILED_DIMENSIONS))
    add("tile", True, False)
    add("tile_sizes_auto", base.tile_sizes is None, base.tile_sizes is not None)
    given = list(base.tile_sizes or ())
    for d in range(depth):
        default = given[min(d, len(given) - 1)] if given else 32
        space.parameters.append(Parameter(f"tile_size_{d}", tile_size_values(facts.extents, default)))
    add("tile_second_level", False, True)
    add("fusion", "smart", "max", "min")
    add("schedule_preset", "pluto", "isl", "feautrier")
    add("split", True, False)
    add("index_split", True, False)
    add("parallel", True, False)
    add("min_parallel_trip", 8, 32, 256)
    add("unroll", None, 2, 4)
    cores = host_cores()
    if cores > 1:
        add("threads", None, *sorted({1, max(1, cores // 2)} - {cores}))
    if base.reassociation:
        add("parallel_reductions", True, False)
    if "wavefront" in facts.remark_kinds or facts.depth >= 3:
        add("wavefront", True, False)
        add("wavefront_block", 2, 1, 4)
        add("point_distribution", True, False)
        add("interleave", True, False)
    if "micro-kernel" in facts.remark_kinds:
        add("micro_kernels", True, False)
        add("micro_kernel_rows", 6, 4, 8, 3, 12)
        add("micro_kernel_vectors", 2, 1, 3, 4)
        add("micro_kernel_transposed", "auto", "on", "off")
        add("contraction_tile_rows", 384, 96, 192, 768)
        add("contraction_tile_columns", 64, 32, 128, 256)
        add("contraction_tile_depth_bytes", 1024, 512, 2048, 4096)
    return space


def _gpu_parameters(space: OptionSpace, base: Options, facts: CompileFacts, add: Any) -> None:
    """Block and grid shapes by the depth of the mapped nests, and shared memory."""
    depth = max(1, min(facts.depth, 3))
    if depth == 1:
        blocks: list[tuple[int, ...] | None] = [None, (64,), (128,), (256,), (512,), (1024,)]
    elif depth == 2:
        blocks = [None] + [(x, y) for x in (16, 32, 64, 128) for y in (1, 2, 4, 8, 16) if 64 <= x * y <= 1024]
    else:
        blocks = [None] + [
            (x, y, z) for x in (32, 64) for y in (2, 4, 8) for z in (1, 2, 4) if 64 <= x * y * z <= 1024
        ]
    add("block", *blocks)
    add("grid", None, (132,), (264,), (528,))
    add("shared_memory", base.shared_memory, 0, 96 * 1024)
    # points per thread of a reduction's band (register tiles; None: the mapper's choice)
    add("gpu_register_tile", None, (1,), (2, 1), (2, 2), (4, 2), (4, 4), (8, 2))
    if base.shared_memory:  # the loops over shared-memory tiles (8 times by default)
        add("unroll", None, 1, 4, 16)
