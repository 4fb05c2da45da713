"""Seeded generator of the harder random programs: the ones that stress isl, not the frontend.

``generate_hard_program(seed)`` is a pure function of the seed. Where ``affine_gen`` varies the C
that reaches the frontend, these programs vary what reaches the dependence analysis and the
scheduler, in the shapes that made isl explode in practice:

- four to six arrays of 100 elements (some viewed as 10x10), globals and parameters;
- nests of depth 3-4 whose statements sit at every level (6-12 statements per kernel);
- subscripts coupled over 3-4 iterators with coefficients 1-3, such as ``A2[i + 2*j + 2*k + l + 4]``,
  and differences such as ``A1[i - j + 7]``;
- guards on the iterators: ``(l % 2) == 0``, ``(i + 2*j) % 3 != 1``, ``!(i == k)``, ``i + j < n``,
  and conjunctions and disjunctions of them;
- triangular (``j = i``, ``l <= k``), reversed (``k = n - 1; k >= j; k--``) and strided loops;
- element types ``double``, ``float``, ``int``, ``unsigned``, ``long`` and ``short``, mixed in one
  expression (C's conversions), and ``unsigned``/``long`` iterators; loops comparing an
  ``unsigned long`` iterator with a constant, or an ``int`` one with an ``unsigned`` bound.

No undefined behaviour, by construction: every iterator lies in [0, PMAX), every subscript's range
is computed from those and shifted into its array; ``int``/``long``/``short`` stores are reduced
modulo small primes and their expressions stay far from overflow; ``unsigned`` arithmetic wraps
(defined); no double becomes an unsigned, no negative value is shifted. Floating-point values are
multiples of 1/8 below 64 where they are stored and every ``+=`` adds a multiple of 1/8 below 8,
so sums are exact in any order: a compiler that parallelizes a reduction still prints gcc's bits.
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass, field

PMAX = 8  # every parameter (loop bound) is at most this; iterators lie in [0, PMAX)
SIZE = 100  # elements per array
ITERATORS = ("i", "j", "k", "l")
ELEMENT_TYPES = ("double", "float", "int", "unsigned", "long", "short")
FLOATING = ("double", "float")


@dataclass
class Array:
    name: str
    elem: str
    is_2d: bool  # double X[10][10] instead of X[100]
    is_global: bool


@dataclass
class Nest:
    """What the generator knows at one point of a loop nest: the iterators around it."""

    iterators: list[str] = field(default_factory=list)
    params: tuple[str, ...] = ()
    unsigned: frozenset[str] = frozenset()  # iterators declared unsigned


class HardGen:
    def __init__(self, seed: int | str) -> None:
        self.rng = random.Random(seed)
        self.arrays: list[Array] = []
        self.lines: list[str] = []

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    # ---- subscripts --------------------------------------------------------------------------
    def coupled(self, nest: Nest, limit: int) -> str:
        """An affine expression of the iterators with range inside [0, limit)."""
        rng = self.rng
        its = nest.iterators
        terms: list[tuple[int, str]] = []
        if its:
            count = min(len(its), rng.choice((1, 2, 3, 3, 4, 4)))
            names = rng.sample(its, count)
            # With an unsigned iterator a difference wraps around, and a long iterator in the
            # same sum would then keep the huge value: only sums there.
            signed = not any(name in nest.unsigned for name in names)
            for name in names:
                terms.append((rng.choice((1, 1, 1, 2, 2, 3, -1 if signed else 1)), name))
        lo = sum(c * (PMAX - 1) for c, _ in terms if c < 0)
        hi = sum(c * (PMAX - 1) for c, _ in terms if c > 0)
        while hi - lo >= limit and terms:  # too wide for the array: drop a term
            c, _ = terms.pop()
            if c < 0:
                lo -= c * (PMAX - 1)
            else:
                hi -= c * (PMAX - 1)
        room = limit - 1 - (hi - lo)
        const = -lo + rng.randint(0, min(room, 6))
        text = ""
        for c, name in terms:
            sign = "-" if c < 0 else "+"
            mag = f"{abs(c)}*{name}" if abs(c) != 1 else name
            text = f"{mag}" if not text and c > 0 else f"{text} {sign} {mag}".strip()
        if text.startswith("-"):
            text = f"{const} {text}"
        elif const:
            text = f"{text} + {const}" if text else str(const)
        return text or "0"

    def ref(self, a: Array, nest: Nest) -> str:
        if a.is_2d:
            return f"{a.name}[{self.coupled(nest, 10)}][{self.coupled(nest, 10)}]"
        return f"{a.name}[{self.coupled(nest, SIZE)}]"

    # ---- guards ------------------------------------------------------------------------------
    def guard(self, nest: Nest) -> str:
        rng = self.rng
        its = nest.iterators

        def atom() -> str:
            a = rng.choice(its)
            b = rng.choice([x for x in its if x != a] or its)
            kind = rng.choice(("mod", "mod2", "neq", "sum", "cmp", "eq"))
            if kind == "mod":
                m = rng.randint(2, 4)
                return f"({a} % {m}) {rng.choice(('==', '!='))} {rng.randint(0, m - 1)}"
            if kind == "mod2":
                m = rng.randint(2, 3)
                return f"(({a} + 2*{b}) % {m}) == {rng.randint(0, m - 1)}"
            if kind == "neq":
                return f"!({a} == {b})"
            if kind == "sum":
                return f"{a} + {b} < {rng.choice(nest.params)}"
            if kind == "cmp":
                return f"{a} {rng.choice(('<', '<=', '>', '>='))} {b}"
            return f"{a} == {rng.randint(0, PMAX - 2)}"

        first = atom()
        if self.chance(0.35):
            op = rng.choice(("&&", "||"))
            second = atom()
            # `(i % 4) == 1 && (i % 2) != 1` on an unsigned i: gcc warns it is always 0
            while _same_modulo_of(first, second, nest.unsigned):
                second = atom()
            return f"{first} {op} {second}"
        return first

    # ---- expressions -------------------------------------------------------------------------
    def read(self, nest: Nest, want: str) -> str:
        """A read of some array, converted the way an expression of kind `want` needs it."""
        a = self.rng.choice(self.arrays)
        r = self.ref(a, nest)
        if want in FLOATING:
            if a.elem == "unsigned":
                return f"(double)({r} % 64u)"
            if a.elem in ("int", "long", "short"):
                return f"(double)({r} % 64)"
            return r
        # integer-valued: no floating value converted to unsigned; magnitudes stay small
        if a.elem in FLOATING:
            return f"(int){r}"
        if a.elem == "unsigned":
            return f"(int)({r} % 1024u)" if want != "unsigned" else r
        return r

    def float_expr(self, nest: Nest) -> str:
        rng = self.rng
        terms = []
        for _ in range(rng.randint(1, 3)):
            kind = rng.choice(("read", "read", "prod", "scaled", "iter"))
            if kind == "read" or (not nest.iterators and kind == "iter"):
                terms.append(self.read(nest, "double"))
            elif kind == "prod":
                terms.append(f"{self.read(nest, 'double')} * {self.read(nest, 'double')}")
            elif kind == "scaled":
                terms.append(
                    f"{rng.choice(('0.5', '0.25', '1.5', '2.0'))} * {self.read(nest, 'double')}"
                )
            else:
                terms.append(f"(double)({rng.choice(nest.iterators)} + 1)")
        return f" {rng.choice(('+', '-'))} ".join(terms)

    def int_expr(self, nest: Nest, want: str) -> str:
        rng = self.rng
        terms = []
        for _ in range(rng.randint(1, 3)):
            kind = rng.choice(("read", "read", "prod", "bits", "iter"))
            if kind == "read" or (not nest.iterators and kind == "iter"):
                terms.append(self.read(nest, want))
            elif kind == "prod":
                terms.append(f"{self.read(nest, want)} * {rng.randint(2, 9)}")
            elif kind == "bits":
                op = rng.choice(("&", "|", "^"))
                terms.append(f"({self.read(nest, want)} {op} {rng.randint(1, 255)})")
            else:
                terms.append(f"{rng.choice(nest.iterators)} * {rng.randint(1, 5)}")
        return f" {rng.choice(('+', '-', '^'))} ".join(f"({t})" for t in terms)

    def statement(self, nest: Nest) -> str:
        rng = self.rng
        a = rng.choice(self.arrays)
        lhs = self.ref(a, nest)
        if a.elem in FLOATING:
            quantized = f"floor(({self.float_expr(nest)}) * 8.0) * 0.125"
            cast = "(float)" if a.elem == "float" else ""
            if self.chance(0.4):
                return f"{lhs} += {cast}fmod({quantized}, 8.0);"
            return f"{lhs} = {cast}fmod({quantized}, 64.0);"
        if a.elem == "unsigned":
            e = self.int_expr(nest, "unsigned")
            mul = rng.choice(("2654435761u", "40503u", "3u"))
            return f"{lhs} = ({lhs} * {mul}) ^ (unsigned)({e});"
        e = self.int_expr(nest, "int")
        mod = {"int": 1009, "long": 100003, "short": 251}[a.elem]
        if self.chance(0.3):
            return f"{lhs} = ({lhs} + ({e})) % {mod};"
        return f"{lhs} = ({e}) % {mod};"

    def guarded(self, nest: Nest, indent: str) -> list[str]:
        stmt = self.statement(nest)
        if nest.iterators and self.chance(0.45):
            return [f"{indent}if ({self.guard(nest)})", f"{indent}  {stmt}"]
        return [f"{indent}{stmt}"]

    # ---- loops -------------------------------------------------------------------------------
    def loop_head(self, nest: Nest, var: str) -> str:
        """A loop over `var` whose values stay in [0, PMAX)."""
        rng = self.rng
        outer = nest.iterators[-1] if nest.iterators else None
        p = rng.choice(nest.params)
        kind = rng.choice(("up", "up", "tri", "tri", "rev", "le", "step", "mixed"))
        if outer is None and kind in ("tri", "le", "rev"):
            kind = "up"
        if kind == "rev" and outer in nest.unsigned:  # `k >= outer` would compare unsigned
            kind = "tri"
        if kind == "tri":
            return f"for (int {var} = {outer}; {var} < {p}; {var}++)"
        if kind == "le":
            return f"for (int {var} = 0; {var} <= {outer}; {var}++)"
        if kind == "rev":
            return f"for (int {var} = {p} - 1; {var} >= {outer}; {var}--)"
        if kind == "step":
            return f"for (int {var} = {rng.randint(0, 1)}; {var} < {p}; {var} += 2)"
        if kind == "mixed":  # comparisons of mixed signedness (C's usual conversions)
            form = rng.choice(("unsigned", "long", "constant", "unsigned bound"))
            if form == "constant":  # GSL's `size_t k < MULTIPLICITY`
                return f"for (unsigned long {var} = 0; {var} < {rng.randint(1, PMAX - 1)}; {var}++)"
            if form == "unsigned bound":
                return f"for (int {var} = 0; {var} < (unsigned){p}; {var}++)"
            return f"for ({form} {var} = 0; {var} < {p}; {var}++)"
        return f"for (int {var} = 0; {var} < {p}; {var}++)"

    def nest(self, nest: Nest, depth: int, budget: list[int], indent: str) -> list[str]:
        var = ITERATORS[len(nest.iterators)]
        head = self.loop_head(nest, var)
        out = [head + " {"]
        unsigned = nest.unsigned | ({var} if head.startswith("for (unsigned") else set())
        inner = Nest([*nest.iterators, var], nest.params, frozenset(unsigned))
        body: list[str] = []
        before = self.rng.randint(0, 2) if depth > 1 else 0
        for _ in range(before):
            body += self.guarded(inner, indent + "  ")
            budget[0] -= 1
        if depth > 1:
            body += self.nest(inner, depth - 1, budget, indent + "  ")
        count = max(1, budget[0]) if depth == 1 else self.rng.randint(0, 1)
        for _ in range(count):
            body += self.guarded(inner, indent + "  ")
            budget[0] -= 1
        return [indent + out[0], *body, indent + "}"]

    def kernel(self, index: int, params: tuple[str, ...]) -> tuple[str, list[Array]]:
        rng = self.rng
        passed = [a for a in self.arrays if not a.is_global]
        sig = [f"int {p}" for p in params]
        for a in passed:
            dims = "[10][10]" if a.is_2d else f"[{SIZE}]"
            sig.append(f"{a.elem} {a.name}{dims}")
        lines = [f"void kernel_{index}({', '.join(sig)}) {{"]
        nests = rng.choice((1, 1, 2))
        for _ in range(nests):
            depth = rng.choice((3, 4, 4))
            budget = [rng.randint(6, 10) // nests]
            lines += self.nest(Nest([], params), depth, budget, "  ")
        lines.append("}")
        self.lines += lines
        return f"kernel_{index}", passed

    def program(self) -> str:
        rng = self.rng
        names = iter(("A0", "A1", "A2", "A3", "A4", "A5"))
        for _ in range(rng.randint(4, 6)):
            self.arrays.append(
                Array(next(names), rng.choice(ELEMENT_TYPES), self.chance(0.2), self.chance(0.5))
            )
        head = ["#include <math.h>", "#include <stdio.h>", ""]
        for a in self.arrays:
            if a.is_global:
                dims = "[10][10]" if a.is_2d else f"[{SIZE}]"
                head.append(f"static {a.elem} {a.name}{dims};")
        head.append("")
        calls = []
        for index in range(rng.choice((1, 1, 2))):
            params = ("n", "m")[: rng.randint(1, 2)]
            name, passed = self.kernel(index, params)
            values = [str(rng.randint(4, PMAX)) for _ in params]
            calls.append(f"  {name}({', '.join(values + [a.name for a in passed])});")
            self.lines.append("")
        main = ["int main(void) {"]
        for a in self.arrays:
            if not a.is_global:
                dims = "[10][10]" if a.is_2d else f"[{SIZE}]"
                main.append(f"  static {a.elem} {a.name}{dims};")
        for a in self.arrays:
            flat = f"(*(({a.elem} *){a.name} + x))" if a.is_2d else f"{a.name}[x]"
            c1, c2 = rng.randint(3, 17), rng.choice((7, 11, 13, 17))
            if a.elem in FLOATING:
                value = f"({a.elem})((x * {c1}) % {c2}) * 0.125"
            else:
                value = f"({a.elem})((x * {c1}) % {c2 + 40})"
            main.append(f"  for (int x = 0; x < {SIZE}; x++) {flat} = {value};")
        main += calls
        for a in self.arrays:
            flat = f"(*(({a.elem} *){a.name} + x))" if a.is_2d else f"{a.name}[x]"
            main.append(
                f"  {{ double cs = 0.0; for (int x = 0; x < {SIZE}; x++) "
                f"cs += (double){flat} * (double)(x % 13 + 1); "
                f'printf("{a.name} %.17g\\n", cs); }}'
            )
        main += ["  return 0;", "}"]
        return "\n".join(head + self.lines + main) + "\n"


def _same_modulo_of(a: str, b: str, unsigned: frozenset[str]) -> bool:
    """Whether guards `a` and `b` both take a modulo of the same unsigned iterator."""
    var = a.split(" %")[0]
    return " % " in a and " % " in b and var == b.split(" %")[0] and var.lstrip("(") in unsigned


def generate_hard_program(seed: int) -> str:
    """A random UB-free C program of the harder kind (module docstring); a pure function of
    `seed`."""
    return HardGen(f"hard/{seed}").program()


if __name__ == "__main__":
    sys.stdout.write(generate_hard_program(int(sys.argv[1])))
