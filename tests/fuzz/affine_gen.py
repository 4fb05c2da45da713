"""Seeded generator of small, UB-free C programs made of random affine loop nests.

``generate_program(seed)`` is a pure function of the seed (one ``random.Random(seed)``). A program
has 1-3 functions ``kernel_0`` ... (each one or two loop nests of depth 1-4) and a ``main`` that
initializes every array from formulas, calls the kernels once each and prints a checksum per array
and every scalar result, so the output of two compilers can be compared exactly.

How undefined behaviour is ruled out, by construction:

- Bounds: kernel parameters have concrete values (main passes literals), so every loop variable has
  a known integer interval (interval arithmetic over the nest, min/max bounds included). Each
  subscript is an affine function whose interval is computed from those; it is shifted to start at
  0 or more, and each array dimension is sized, after the whole program is generated, to the
  largest index used plus some slack. VLA and linearized strides are rendered from those sizes.
- Integers: every ``int`` array element stays in [-1024, 1023] (each store is reduced with
  ``% 1009``/``& 1023`` or is a compound op that keeps 11-bit values); each int expression has an
  interval and no node may leave [-2**30, 2**30]; divisors are nonzero by construction
  (``(e & 7) + 1``, constants, or affine expressions whose interval excludes 0); only nonnegative
  values are shifted left, shift counts lie in [0, 8]; ``long`` accumulators only ever add values
  below 2**20 a bounded number of times, and are only read masked (``c0 & 1023``).
- Doubles: every value has a static magnitude bound. A store ``A[..] = e`` is scaled by a power of
  two so that the bound of ``A`` does not change; an array that gets ``+=`` in a kernel has a
  headroom budget for that kernel, each ``+=`` is scaled so that (number of executions) x (bound
  of its right-hand side) fits in what is left of the budget, and reads of such an array use the
  bound plus the whole budget. So no inf or NaN can arise; ``sqrt`` only sees ``fabs(..)``,
  divisions are by constants or by ``1.0 + fabs(..)``.
- Double scalar accumulators add quantized values (multiples of 1/64, exact in any order), so a
  compiler allowed to reassociate a reduction still gets the same bits (``exact_reductions``).
- Nothing is read before it is written: main fills every array, scalars are initialized where they
  are declared, arrays passed to one call are distinct objects (``restrict`` holds).
"""

from __future__ import annotations

import math
import random
import sys
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

Interval = tuple[int, int]
Render = Callable[[], str]

INT_CAP = 1 << 30  # no int expression node may leave [-INT_CAP, INT_CAP]
IARR_LO, IARR_HI = -1024, 1023  # invariant of every int array element
DCONSTS = ("0.5", "0.25", "1.5", "2.0", "0.1", "0.3", "1.7", "3.0", "0.75", "1.25", "0.125")
PARAM_NAMES = ("n", "m", "q")
LOOP_VARS = ("i", "j", "k", "l")
MAX_LINES = 79


def _lit(s: str) -> Render:
    return lambda: s


def _cat(*parts: str | Render) -> Render:
    def render() -> str:
        return "".join(p if isinstance(p, str) else p() for p in parts)

    return render


def _pow2(k: int) -> str:
    """The literal 2**k, exact in decimal."""
    return repr(2.0**k)


@dataclass(frozen=True)
class Aff:
    """An affine expression sum(coef * var) + const over loop variables and parameters."""

    terms: tuple[tuple[str, int], ...]
    const: int

    @staticmethod
    def of(terms: dict[str, int], const: int = 0) -> Aff:
        return Aff(tuple((v, c) for v, c in terms.items() if c != 0), const)

    def shifted(self, d: int) -> Aff:
        return Aff(self.terms, self.const + d)

    def interval(self, env: dict[str, Interval]) -> Interval:
        lo = hi = self.const
        for v, c in self.terms:
            a, b = env[v]
            lo += min(c * a, c * b)
            hi += max(c * a, c * b)
        return lo, hi

    def is_simple(self) -> bool:
        return len(self.terms) + (self.const != 0) <= 1

    def render(self) -> str:
        pos = [v if c == 1 else f"{c} * {v}" for v, c in self.terms if c > 0]
        neg = [v if c == -1 else f"{-c} * {v}" for v, c in self.terms if c < 0]
        s = " + ".join(pos)
        if self.const > 0:
            s = f"{s} + {self.const}" if s else str(self.const)
        for t in neg:
            s = f"{s} - {t}" if s else f"-{t}"
        if self.const < 0:
            s = f"{s} - {-self.const}" if s else str(self.const)
        return s or "0"


@dataclass(frozen=True)
class Bound:
    """A loop bound: an affine expression, or the min / max of two (rendered as a ternary)."""

    a: Aff
    b: Aff | None = None
    kind: str = "aff"  # "aff" | "min" | "max"

    def interval(self, env: dict[str, Interval]) -> Interval:
        la, ha = self.a.interval(env)
        if self.b is None:
            return la, ha
        lb, hb = self.b.interval(env)
        if self.kind == "min":
            return min(la, lb), min(ha, hb)
        return max(la, lb), max(ha, hb)

    def render_plus(self, d: int) -> str:
        if self.b is None:
            return self.a.shifted(d).render()
        return f"{self.render()} {'+' if d > 0 else '-'} {abs(d)}"

    def render(self) -> str:
        if self.b is None:
            return self.a.render()
        op = "<" if self.kind == "min" else ">"
        a, b = self.a.render(), self.b.render()
        return f"({a} {op} {b} ? {a} : {b})"


@dataclass
class Array:
    name: str
    elem: str  # "double" | "int"
    ndim: int
    kind: str  # "const" | "vla" | "flat" | "global"
    ext: list[int]
    bound: float  # magnitude bound of the elements (double arrays), at the current point
    init: tuple[int, int, int, int]  # formula constants of main's initialization


@dataclass
class Node:
    """A statement (head only), or a block: ``head {`` body ``}`` [``else {`` orelse ``}``]."""

    head: Render
    body: list[Node] | None = None
    orelse: list[Node] | None = None
    tail: Render | None = None  # do { body } tail;

    def lines(self, ind: str) -> list[str]:
        if self.body is None:
            return [f"{ind}{self.head()};"]
        out = [f"{ind}{self.head()} {{"]
        for n in self.body:
            out += n.lines(ind + "  ")
        if self.orelse is not None:
            out.append(f"{ind}}} else {{")
            for n in self.orelse:
                out += n.lines(ind + "  ")
        out.append(f"{ind}}} {self.tail()};" if self.tail else f"{ind}}}")
        return out


@dataclass
class Kernel:
    name: str
    params: dict[str, int]
    vmax: int
    env: dict[str, Interval] = field(default_factory=dict)
    loop_vars: list[str] = field(default_factory=list)
    trips: list[int] = field(default_factory=list)
    used: list[str] = field(default_factory=list)
    dimsrc: dict[str, list[str | None]] = field(default_factory=dict)
    plus: dict[str, float] = field(default_factory=dict)  # array -> headroom budget
    plus_left: dict[str, float] = field(default_factory=dict)
    plus_written: set[str] = field(default_factory=set)
    temps: list[tuple[str, float]] = field(default_factory=list)
    daccs: dict[str, float] = field(default_factory=dict)  # double accumulator -> budget
    daccs_left: dict[str, float] = field(default_factory=dict)
    laccs: list[str] = field(default_factory=list)
    counter: int = 0
    body: list[Node] = field(default_factory=list)
    ret: str | None = None  # "double" | "long"
    ret_var: str | None = None

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def trip(self) -> int:
        return math.prod(self.trips) if self.trips else 1


class Gen:
    def __init__(self, seed: int | str, *, exact_reductions: bool) -> None:
        self.rng = random.Random(seed)
        self.static_kernels = zlib.crc32(str(seed).encode()) % 2 == 0
        self.exact = exact_reductions
        self.arrays: list[Array] = []
        self.kernels: list[Kernel] = []
        self.gscalars: list[tuple[str, str]] = []  # (type, name)
        self.k: Kernel = Kernel("", {}, 1)
        self.small = False

    # ---- small helpers ---------------------------------------------------------------------------
    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def pick_weighted(self, options: list[tuple[str, float]]) -> str:
        total = sum(w for _, w in options)
        x = self.rng.random() * total
        for name, w in options:
            x -= w
            if x < 0:
                return name
        return options[-1][0]

    def darrays(self) -> list[Array]:
        return [a for a in self.arrays if a.elem == "double"]

    def iarrays(self) -> list[Array]:
        return [a for a in self.arrays if a.elem == "int"]

    def read_bound(self, a: Array) -> float:
        return a.bound + self.k.plus.get(a.name, 0.0)

    # ---- subscripts and accesses ----------------------------------------------------------------
    def subscript(self) -> Aff:
        k, rng = self.k, self.rng
        lv = k.loop_vars
        terms: dict[str, int] = {}
        if lv:
            v = rng.choice(lv[-2:] if self.chance(0.6) else lv)
            terms[v] = rng.choice((1, 1, 1, 1, 1, 2, -1))
            if len(lv) > 1 and self.chance(0.25):
                v2 = rng.choice([x for x in lv if x != v])
                terms[v2] = rng.choice((1, 1, -1))
            if terms[v] == -1 and self.chance(0.5):
                terms[rng.choice(list(k.params))] = 1
        elif self.chance(0.5):
            terms[rng.choice(list(k.params))] = 1
        aff = Aff.of(terms, rng.randint(-2, 2))
        lo, hi = aff.interval(k.env)
        if hi - lo > 70:  # keep arrays small: fall back to one variable
            aff = Aff.of({lv[-1]: 1} if lv else {}, 0)
            lo, hi = aff.interval(k.env)
        if lo < 0:
            aff = aff.shifted(-lo)
        elif lo > 6:
            aff = aff.shifted(-rng.randint(0, lo))
        return aff

    def dim_expr(self, a: Array, d: int, src: str | None) -> str:
        if src is None:
            return str(a.ext[d])
        return Aff.of({src: 1}, a.ext[d] - self.k.params[src]).render()

    def access(self, a: Array) -> Render:
        k = self.k
        subs = [self.subscript() for _ in range(a.ndim)]
        for d, s in enumerate(subs):
            a.ext[d] = max(a.ext[d], s.interval(k.env)[1] + 1)
        if a.kind != "global" and a.name not in k.used:
            k.used.append(a.name)
            k.dimsrc[a.name] = [
                self.rng.choice(list(k.params)) if a.kind == "vla" or self.chance(0.3) else None
                for _ in range(a.ndim)
            ]
        if a.kind != "flat" or a.ndim == 1:
            return _cat(a.name, *[_cat("[", s.render(), "]") for s in subs])
        src = k.dimsrc[a.name]
        kern = k

        def render() -> str:
            saved, self.k = self.k, kern
            lin = subs[0].render()
            for d in range(1, a.ndim):
                dim = self.dim_expr(a, d, src[d])
                left = lin if (d > 1 or subs[0].is_simple()) else f"({lin})"
                dim = dim if src[d] is None else f"({dim})"
                right = subs[d].render()
                lin = f"{left} * {dim} + {right}" if d == 1 else f"({left}) * {dim} + {right}"
            self.k = saved
            return f"{a.name}[{lin}]"

        return render

    # ---- expressions -----------------------------------------------------------------------------
    def var_leaf(self) -> tuple[str, Interval]:
        k = self.k
        names = k.loop_vars + list(k.params) if k.loop_vars else list(k.params)
        v = self.rng.choice(names)
        return v, k.env[v]

    def dexpr(self, depth: int, *, int_ok: bool = True) -> tuple[Render, float]:
        """A double expression and a bound on its magnitude (``int_ok``: may be an int leaf)."""
        rng, k = self.rng, self.k
        if depth <= 0 or self.chance(0.25):
            kinds: list[tuple[str, float]] = [("arr", 6), ("const", 1.5), ("var", 1.5)]
            if self.iarrays():
                kinds.append(("iarr", 1))
            if k.temps:
                kinds.append(("temp", 2))
            if k.daccs:
                kinds.append(("acc", 0.5))
            kind = self.pick_weighted(kinds)
            if kind == "arr":
                a = rng.choice(self.darrays())
                return self.access(a), self.read_bound(a)
            if kind == "const":
                c = rng.choice(DCONSTS)
                return _lit(c), float(c)
            if kind == "var":
                v, (lo, hi) = self.var_leaf()
                m = float(max(abs(lo), abs(hi)))
                return (_lit(v) if int_ok and self.chance(0.4) else _lit(f"(double){v}")), m
            if kind == "iarr":
                a = rng.choice(self.iarrays())
                acc = self.access(a)
                return (acc if int_ok and self.chance(0.5) else _cat("(double)", acc)), 1024.0
            if kind == "temp":
                t, m = rng.choice(k.temps)
                return _lit(t), m
            s = rng.choice(list(k.daccs))
            return _lit(s), k.daccs[s]
        op = self.pick_weighted(
            [
                ("+", 4),
                ("-", 3),
                ("*", 4),
                ("fabs", 1),
                ("sqrt", 1.2),
                ("divf", 1),
                ("divc", 0.7),
                ("mulc", 1),
                ("neg", 0.4),
                ("tern", 1),
                ("min", 0.6),
                ("floor", 0.3),
            ]
        )
        # int_ok=False: the result must have type double (fabs of an int draws a warning), so
        # the first operand of a binary op, which decides it, must be double too.
        a_int_ok = op not in ("fabs", "sqrt", "floor") and (
            int_ok or op in ("divf", "divc", "mulc")
        )
        a, ma = self.dexpr(depth - 1, int_ok=a_int_ok)
        if op in ("+", "-", "*", "divf", "tern", "min"):
            b, mb = self.dexpr(depth - 1, int_ok=op != "divf")
            if op == "*" and ma * mb > 1e12:
                op = "+"
            if op in ("+", "-", "*"):
                return _cat("(", a, f" {op} ", b, ")"), (ma * mb if op == "*" else ma + mb)
            if op == "divf":
                return _cat("(", a, " / (1.0 + fabs(", b, ")))"), ma
            if op == "tern":
                return _cat("(", self.cond(1), " ? ", a, " : ", b, ")"), max(ma, mb)
            cmp = rng.choice(("<", ">"))

            def minmax() -> str:
                ra, rb = a(), b()
                return ra if ra == rb else f"({ra} {cmp} {rb} ? {ra} : {rb})"

            return minmax, max(ma, mb)
        if op == "fabs":
            return _cat("fabs(", a, ")"), ma
        if op == "sqrt":
            return _cat("sqrt(fabs(", a, "))"), math.sqrt(ma) + 1e-9
        if op == "divc":
            c = rng.choice(("2.0", "4.0", "3.0", "0.5", "-1.5", "7.0"))
            return _cat("(", a, f" / {c})"), ma / abs(float(c))
        if op == "mulc":
            c = rng.choice(("0.5", "2.0", "0.25", "-0.75", "1.5", "0.1", "-3.0"))
            return _cat("(", a, f" * {c})"), ma * abs(float(c))
        if op == "neg":
            return _cat("-(", a, ")"), ma
        return _cat("floor(", a, ")"), ma + 1.0

    def iexpr(self, depth: int) -> tuple[Render, Interval]:
        rng, k = self.rng, self.k
        if depth <= 0 or self.chance(0.25):
            kinds: list[tuple[str, float]] = [("var", 3), ("const", 1.5), ("dcast", 0.5)]
            if self.iarrays():
                kinds.append(("arr", 5))
            if k.laccs:
                kinds.append(("acc", 0.7))
            kind = self.pick_weighted(kinds)
            if kind == "arr":
                return self.access(rng.choice(self.iarrays())), (IARR_LO, IARR_HI)
            if kind == "var":
                v, iv = self.var_leaf()
                return _lit(v), iv
            if kind == "const":
                c = rng.randint(-3, 12)
                return _lit(str(c) if c >= 0 else f"({c})"), (c, c)
            if kind == "acc":
                c = rng.choice(k.laccs)
                if self.chance(0.5):
                    return _lit(f"({c} & 1023)"), (0, 1023)
                return _lit(f"({c} % 1009)"), (-1008, 1008)
            e, m = self.dexpr(1)
            if m * 4 > 1e6:
                return _lit("1"), (1, 1)
            mi = math.floor(m * 4)
            return _cat("(int)(", e, " * 4.0)"), (-mi, mi)
        op = self.pick_weighted(
            [
                ("+", 4),
                ("-", 3),
                ("*", 3),
                ("/", 1.5),
                ("%", 1.5),
                ("&", 1),
                ("|", 0.7),
                ("^", 1),
                ("<<", 0.7),
                (">>", 0.7),
                ("tern", 0.8),
                ("cmp", 0.5),
            ]
        )
        a, (al, ah) = self.iexpr(depth - 1)
        if op in ("+", "-", "*", "&", "|", "^", "tern"):
            b, (bl, bh) = self.iexpr(depth - 1)
            if op == "+":
                lo, hi = al + bl, ah + bh
            elif op == "-":
                lo, hi = al - bh, ah - bl
            elif op == "*":
                ps = (al * bl, al * bh, ah * bl, ah * bh)
                lo, hi = min(ps), max(ps)
            elif op == "tern":
                lo, hi = min(al, bl), max(ah, bh)
            else:
                w = max(abs(al), ah + 1, abs(bl), bh + 1, 1)
                p2 = 1 << (w - 1).bit_length()
                lo, hi = -p2, p2 - 1
            if max(abs(lo), abs(hi)) > INT_CAP:
                return a, (al, ah)
            if op == "tern":
                return _cat("(", self.cond(1), " ? ", a, " : ", b, ")"), (lo, hi)
            return _cat("(", a, f" {op} ", b, ")"), (lo, hi)
        if op in ("/", "%"):
            d, (dl, dh) = self.divisor()
            am = max(abs(al), abs(ah))
            dmin = min(abs(dl), abs(dh))
            dmax = max(abs(dl), abs(dh))
            if op == "/":
                qm = am // dmin
                return _cat("(", a, " / ", d, ")"), (-qm, qm)
            r = min(am, dmax - 1)
            return _cat("(", a, " % ", d, ")"), (-r if al < 0 else 0, r if ah > 0 else 0)
        if op == "<<":
            sh, smax = self.shift_amount(7)
            return _cat("((", a, " & 255) << ", sh, ")"), (0, 255 << smax)
        if op == ">>":
            sh, _ = self.shift_amount(5)
            return _cat("(", a, " >> ", sh, ")"), (min(al, 0), max(ah, 0))
        b, _ = self.iexpr(depth - 1)
        c = rng.choice(("<", "<=", ">", ">=", "==", "!="))

        def compare() -> str:
            ra, rb = a(), b()
            return f"({ra} {c} {rb if rb != ra else '3'})"

        return compare, (0, 1)

    def shift_amount(self, top: int) -> tuple[Render, int]:
        if self.chance(0.5) or not self.k.loop_vars:
            s = self.rng.randint(0, top)
            return _lit(str(s)), s
        v = self.rng.choice(self.k.loop_vars)
        mask = 7 if top >= 7 else 3
        return _lit(f"({v} & {mask})"), mask

    def divisor(self) -> tuple[Render, Interval]:
        rng, k = self.rng, self.k
        kind = self.pick_weighted([("const", 2), ("mask", 2), ("aff", 2)])
        if kind == "aff" and k.loop_vars:
            v = rng.choice(k.loop_vars)
            aff = Aff.of({v: 1}, 1 - k.env[v][0] + rng.randint(0, 2))
            return _lit(f"({aff.render()})"), aff.interval(k.env)
        if kind == "mask":
            e, _ = self.iexpr(0)
            m = rng.choice((3, 7, 15))
            return _cat("((", e, f" & {m}) + 1)"), (1, m + 1)
        c = rng.choice((1, 2, 3, 5, 7, 9, -2, -3))
        return _lit(str(c) if c > 0 else f"({c})"), (c, c)

    def cond(self, depth: int) -> Render:
        rng, k = self.rng, self.k
        if depth > 0 and self.chance(0.3):
            a, b = self.cond(depth - 1), self.cond(depth - 1)
            if self.chance(0.2):
                return _cat("!(", a, ")")
            return _cat("(", a, rng.choice((" && ", " || ")), b, ")")
        kind = self.pick_weighted([("aff", 4), ("mod", 1), ("darr", 2), ("iarr", 1)])
        cmp = rng.choice(("<", "<=", ">", ">=", "==", "!="))
        if kind in ("aff", "mod") and k.loop_vars:
            lv = k.loop_vars
            v = rng.choice(lv)
            terms = {v: rng.choice((1, 1, 2))}
            if kind == "mod":
                if len(lv) > 1 and self.chance(0.5):
                    terms[rng.choice(lv)] = 1
                m = rng.randint(2, 4)
                return _lit(
                    f"({Aff.of(terms).render()}) % {m} {rng.choice(('==', '!='))} {rng.randint(0, m - 1)}"
                )
            rhs: dict[str, int] = {}
            r = rng.random()
            if r < 0.4:
                rhs[rng.choice(list(k.params))] = 1
            elif r < 0.7 and len(lv) > 1:
                rhs[rng.choice([x for x in lv if x != v])] = 1
            return _lit(
                f"{Aff.of(terms).render()} {cmp} {Aff.of(rhs, rng.randint(-2, 3)).render()}"
            )
        if kind == "iarr" and self.iarrays():
            acc = self.access(rng.choice(self.iarrays()))
            if self.chance(0.5):
                return _cat(acc, f" % {rng.randint(2, 5)} == 0")
            return _cat(acc, f" {cmp} {rng.randint(-20, 20)}")
        e, _ = self.dexpr(1)
        return _cat(e, f" {rng.choice(('<', '>'))} {rng.choice(('0.0', '0.5', '-0.25', '1.0'))}")

    # ---- statements ------------------------------------------------------------------------------
    def scaled(self, e: Render, m: float, limit: float) -> Render:
        """``e`` times a power of two that brings its bound ``m`` under ``limit``."""
        sh = 0
        while m * 2.0**-sh > limit:
            sh += 1
        if sh == 0:
            return e
        if self.chance(0.5):
            return _cat("(", e, f") * {_pow2(-sh)}")
        return _cat("(", e, f") / {_pow2(sh)}")

    def stmt(self, depth: int) -> list[Node]:
        rng, k = self.rng, self.k
        kinds: list[tuple[str, float]] = [("dstore", 6)]
        if any(a.name in k.plus for a in self.darrays()):
            kinds.append(("dplus", 4))
        kinds.append(("dmul", 0.5))
        if self.iarrays():
            kinds += [("istore", 3), ("icomp", 2)]
        if k.daccs:
            kinds.append(("dacc", 4))
        if k.laccs:
            kinds.append(("lacc", 3))
        kinds.append(("temp", 1.2))
        if depth > 0:
            kinds.append(("if", 1.5))
        kind = self.pick_weighted(kinds)
        ed = rng.randint(1, 3)
        if kind == "dstore":
            a = rng.choice(self.darrays())
            e, m = self.dexpr(ed)
            return [Node(_cat(self.access(a), " = ", self.scaled(e, m, a.bound)))]
        if kind == "dplus":
            a = rng.choice([x for x in self.darrays() if x.name in k.plus])
            e, m = self.dexpr(ed)
            t = k.trip()
            lhs = self.access(a)
            k.plus_written.add(a.name)
            e = self.scaled(e, m * t, k.plus_left[a.name] / 2)
            k.plus_left[a.name] -= k.plus_left[a.name] / 2
            return [Node(_cat(lhs, rng.choice((" += ", " += ", " -= ")), e))]
        if kind == "dmul":
            a = rng.choice(self.darrays())
            return [
                Node(_cat(self.access(a), f" *= {rng.choice(('0.5', '-0.5', '0.75', '0.25'))}"))
            ]
        if kind == "istore":
            a = rng.choice(self.iarrays())
            e, (lo, hi) = self.iexpr(ed)
            lhs = self.access(a)
            if lo >= IARR_LO and hi <= IARR_HI and self.chance(0.4):
                return [Node(_cat(lhs, " = ", e))]
            red = rng.choice((" % 1009", " & 1023", " % 997"))
            return [Node(_cat(lhs, " = (", e, ")", red))]
        if kind == "icomp":
            a = rng.choice(self.iarrays())
            e, (lo, hi) = self.iexpr(ed - 1)
            lhs = self.access(a)
            op = self.pick_weighted(
                [("^", 2), ("|", 1), ("&", 1), ("%", 1), (">>", 0.5), ("+", 2), ("*", 1), ("++", 1)]
            )
            if op in ("^", "|"):
                return [Node(_cat(lhs, f" {op}= (", e, ") & 1023"))]
            if op == "&":
                if lo >= IARR_LO and hi <= IARR_HI:
                    return [Node(_cat(lhs, " &= ", e))]
                return [Node(_cat(lhs, " &= (", e, ") & 511"))]
            if op == "%":
                return [Node(_cat(lhs, f" %= {rng.randint(2, 300)}"))]
            if op == ">>":
                return [Node(_cat(lhs, f" >>= {rng.randint(1, 4)}"))]
            if op == "++":
                inc = rng.choice(("++", "--"))
                pre = self.chance(0.5)
                node1 = Node(_cat(inc, lhs) if pre else _cat(lhs, inc))
                return [node1, Node(_cat(lhs, " &= 1023" if inc == "++" else " %= 1009"))]
            if max(abs(lo), abs(hi)) > (1 << 20):
                e, lo, hi = _cat("(", e, ") % 1009"), -1008, 1008
            opr = "+=" if op == "+" else rng.choice(("*=", "-="))
            return [Node(_cat(lhs, f" {opr} ", e)), Node(_cat(lhs, " %= 1009"))]
        if kind == "dacc":
            s = rng.choice(list(k.daccs))
            e, m = self.dexpr(ed)
            t = k.trip()
            room = k.daccs_left[s] / 2 - t / 64.0
            if room <= 0:
                return [Node(_cat(rng.choice(list(k.daccs)), " *= 0.5"))]
            e = self.scaled(e, m * t, room)
            k.daccs_left[s] /= 2
            if self.exact:
                if self.chance(0.5):
                    e = _cat("floor((", e, ") * 64.0) * 0.015625")
                else:
                    e = _cat("(double)(long)((", e, ") * 64.0) / 64.0")
            return [Node(_cat(s, " += ", e))]
        if kind == "lacc":
            c = rng.choice(k.laccs)
            if self.chance(0.2):
                return [Node(_lit(f"{c}++" if self.chance(0.5) else f"++{c}"))]
            e, (lo, hi) = self.iexpr(ed)
            if max(abs(lo), abs(hi)) > (1 << 20):
                e = _cat("(", e, ") % 1009")
            return [Node(_cat(c, rng.choice((" += ", " -= ", " ^= ", " += ")), e))]
        if kind == "temp":
            e, m = self.dexpr(ed)
            t = k.fresh("t")
            k.temps.append((t, m))
            return [Node(_cat(f"double {t} = ", e))]
        # if / if-else
        c = self.cond(1)
        saved = len(k.temps)
        then = self.stmts(rng.randint(1, 2), depth - 1)
        del k.temps[saved:]
        orelse = None
        if self.chance(0.35):
            orelse = self.stmts(1, depth - 1)
            del k.temps[saved:]
        return [Node(_cat("if (", c, ")"), then, orelse)]

    def stmts(self, count: int, depth: int) -> list[Node]:
        out: list[Node] = []
        for _ in range(count):
            out += self.stmt(depth)
        return out

    # ---- loops -----------------------------------------------------------------------------------
    def bound_choices(self, upper: bool) -> Bound:
        rng, k = self.rng, self.k
        lv, ps = k.loop_vars, list(k.params)
        outer = rng.choice(lv) if lv else None
        p = rng.choice(ps)
        c = rng.randint(1, 3)
        if not upper:
            opts: list[tuple[str, float]] = [("zero", 6), ("const", 2), ("param", 0.5)]
            if outer:
                opts += [("outer", 3), ("max", 1.5)]
            kind = self.pick_weighted(opts)
            if kind == "zero":
                return Bound(Aff.of({}, 0))
            if kind == "const":
                return Bound(Aff.of({}, rng.randint(-2, 3)))
            if kind == "param":
                return Bound(Aff.of({p: 1}, -rng.randint(2, 5)))
            assert outer is not None
            if kind == "outer":
                return Bound(Aff.of({outer: 1}, rng.choice((0, 0, 1, -1))))
            return Bound(Aff.of({outer: 1}, -c), Aff.of({}, 0), "max")
        opts = [("param", 6), ("pconst", 2), ("const", 1.5)]
        if outer:
            opts += [("outer", 3), ("pminus", 2), ("min", 1.5), ("twice", 0.4)]
        kind = self.pick_weighted(opts)
        if kind == "param":
            return Bound(Aff.of({p: 1}))
        if kind == "pconst":
            return Bound(Aff.of({p: 1}, rng.randint(-3, 2)))
        if kind == "const":
            return Bound(Aff.of({}, rng.randint(3, k.vmax)))
        assert outer is not None
        if kind == "outer":
            return Bound(Aff.of({outer: 1}, rng.choice((0, 1, 1, 2))))
        if kind == "pminus":
            return Bound(Aff.of({p: 1, outer: -1}, rng.choice((0, 0, -1))))
        if kind == "twice":
            return Bound(Aff.of({outer: 2}, 1))
        return Bound(Aff.of({p: 1}), Aff.of({outer: 1}, c + 1), "min")

    def runs(self, lo_b: Bound, hi_b: Bound, incl: bool) -> bool:
        """Whether the loop runs at least twice for some values of the outer variables."""
        if lo_b.b is not None or hi_b.b is not None:
            return True
        diff = Aff.of(dict(hi_b.a.terms), hi_b.a.const)
        terms = dict(diff.terms)
        for v, c in lo_b.a.terms:
            terms[v] = terms.get(v, 0) - c
        d = Aff.of(terms, hi_b.a.const - lo_b.a.const + (1 if incl else 0))
        return d.interval(self.k.env)[1] >= 2

    def loop(self, depth: int) -> list[Node]:
        rng, k = self.rng, self.k
        style = self.pick_weighted([("up", 7), ("down", 1.5), ("while", 1), ("do", 0.4)])
        step = 1 if self.chance(0.7) else rng.randint(2, 3)
        incl = self.chance(0.25)
        for _ in range(20):
            lo_b, hi_b = self.bound_choices(False), self.bound_choices(True)
            lo_i, hi_i = lo_b.interval(k.env), hi_b.interval(k.env)
            iv = (lo_i[0], hi_i[1] - (0 if incl else 1))
            if (
                iv[0] <= iv[1]
                and iv[1] - iv[0] <= 2 * k.vmax
                and iv[0] >= -4
                and self.runs(lo_b, hi_b, incl)
            ):
                break
        else:
            p = next(iter(k.params))
            lo_b, hi_b, incl = Bound(Aff.of({}, 0)), Bound(Aff.of({p: 1})), False
            iv = (0, k.params[p] - 1)
        if style == "do":  # the body runs once before the test
            iv = (iv[0], max(iv[1], lo_b.interval(k.env)[1]))
        if style in ("while", "do"):
            v = k.fresh("w")
        else:
            v = LOOP_VARS[len(k.loop_vars)] if len(k.loop_vars) < len(LOOP_VARS) else k.fresh("v")
        vt = "long" if self.chance(0.1) else "int"
        k.loop_vars.append(v)
        k.env[v] = iv
        k.trips.append(iv[1] - iv[0] + 1)
        saved = len(k.temps)
        body: list[Node] = []
        if depth > 1:
            body += self.stmts(rng.choice((0, 0, 1) if self.small else (0, 0, 1, 1, 2)), 1)
            body += self.loop(depth - 1)
            body += self.stmts(0 if self.small else rng.choice((0, 0, 0, 1)), 1)
        else:
            body += self.stmts(rng.randint(1, 2 if self.small else 3), 1)
        if style in ("up", "down") and self.chance(0.08):
            if self.chance(0.5):  # leave the loop part-way, at a point it does reach
                ctl = Node(_lit(f"if ({v} == {rng.randint(iv[0], iv[1])}) break"))
            else:
                ctl = Node(_cat("if (", self.cond(0), ") continue"))
            body.insert(rng.randint(0, len(body)), ctl)
        del k.temps[saved:]
        k.loop_vars.pop()
        del k.env[v]
        k.trips.pop()
        inc = "++" if step == 1 else f" += {step}"
        dec = "--" if step == 1 else f" -= {step}"
        cmp_up = "<=" if incl else "<"
        if style == "up":
            head = _cat(
                f"for ({vt} {v} = ",
                lo_b.render(),
                f"; {v} {cmp_up} ",
                hi_b.render(),
                f"; {v}{inc})",
            )
            return [Node(head, body)]
        if style in ("while", "do"):
            body.append(Node(_lit(f"{v}{inc}")))
            decl = Node(_cat(f"{vt} {v} = ", lo_b.render()))
            test = _cat(f"while ({v} {cmp_up} ", hi_b.render(), ")")
            if style == "do":
                return [decl, Node(_lit("do"), body, tail=test)]
            return [decl, Node(test, body)]
        start = hi_b.render() if incl else hi_b.render_plus(-1)
        stop = f"{v} > {lo_b.render_plus(-1)}" if self.chance(0.3) else f"{v} >= {lo_b.render()}"
        return [Node(_lit(f"for ({vt} {v} = {start}; {stop}; {v}{dec})"), body)]

    # ---- kernels and program ---------------------------------------------------------------------
    def kernel(self, idx: int) -> Kernel:
        rng = self.rng
        nests = 1 if self.small else rng.choice((1, 1, 2))
        depths = [rng.choice((1, 2, 2, 3, 3, 4)) for _ in range(nests)]
        vmax = {1: 24, 2: 24, 3: 20, 4: 10}[max(depths)]
        nparams = rng.randint(1, 3)
        params = {PARAM_NAMES[i]: rng.randint(3, vmax) for i in range(nparams)}
        k = Kernel(f"kernel_{idx}", params, vmax)
        k.env = {p: (v, v) for p, v in params.items()}
        self.k = k
        for a in self.darrays():
            if self.chance(0.45):
                k.plus[a.name] = max(8.0 * a.bound, 256.0)
                k.plus_left[a.name] = k.plus[a.name]
        for _ in range(rng.choice((0, 1, 1, 2))):
            s = k.fresh("s")
            k.daccs[s] = 1e5
            k.daccs_left[s] = 1e5
        for _ in range(rng.choice((0, 0, 1, 2))):
            k.laccs.append(k.fresh("c"))
        decls = [Node(_lit(f"double {s} = 0.0")) for s in k.daccs]
        decls += [Node(_lit(f"long {c} = 0")) for c in k.laccs]
        body: list[Node] = []
        for d in depths:
            body += self.loop(d)
        # results: at most one returned, the rest into global scalars
        results = [("double", s) for s in k.daccs] + [("long", c) for c in k.laccs]
        tail: list[Node] = []
        if results and self.chance(0.5):
            k.ret, k.ret_var = results.pop(0)
        for ty, name in results:
            g = f"g{name}_{idx}"
            self.gscalars.append((ty, g))
            tail.append(Node(_lit(f"{g} = {name}")))
        if k.ret_var is not None:
            tail.append(Node(_lit(f"return {k.ret_var}")))
        k.body = decls + body + tail
        for a in self.darrays():
            if a.name in k.plus_written:
                a.bound += k.plus[a.name]
        return k

    def make_arrays(self) -> None:
        rng = self.rng
        nd = rng.randint(2, 4)
        ni = rng.choice((0, 1, 1, 2))
        names = iter("ABCDEFGHPQRSTU")
        for i in range(nd + ni):
            elem = "double" if i < nd else "int"
            ndim = self.pick_weighted([("1", 2), ("2", 4), ("3", 1)])
            kind = self.pick_weighted([("const", 4), ("vla", 2), ("flat", 2), ("global", 1.5)])
            init = (
                rng.randint(1, 13),
                rng.randint(1, 13),
                rng.randint(1, 13),
                rng.choice((7, 11, 13, 17, 19, 23)),
            )
            a = Array(
                next(names), elem, int(ndim), kind, [0] * int(ndim), 2.5 + init[3] * 0.25, init
            )
            self.arrays.append(a)

    def line_estimate(self, extra: Kernel) -> int:
        """Lines of the program with the kernels so far and ``extra`` (main included)."""
        na = len(self.arrays)
        nglob = sum(a.kind == "global" for a in self.arrays)
        body = sum(len(n.lines("")) for k in [*self.kernels, extra] for n in k.body)
        nk = len(self.kernels) + 1
        return (
            3
            + nglob
            + len(self.gscalars)
            + body
            + 3 * nk
            + 1
            + (na - nglob)
            + 2 * na
            + nk
            + len(self.gscalars)
            + 3
        )

    def render_kernel(self, k: Kernel) -> list[str]:
        self.k = k
        sig = [f"int {p}" for p in k.params]
        for name in k.used:
            a = next(x for x in self.arrays if x.name == name)
            if a.kind == "flat":
                sig.append(f"{a.elem} *restrict {a.name}")
            else:
                src = k.dimsrc[a.name] if a.kind == "vla" else [None] * a.ndim
                dims = "".join(f"[{self.dim_expr(a, d, src[d])}]" for d in range(a.ndim))
                sig.append(f"{a.elem} {a.name}{dims}")
        # every other program's kernels are static: main's constant arguments are then bound
        # (frontend/c_constant_arguments.py); chosen without drawing from rng, so that the
        # programs are otherwise those of earlier versions
        storage = "static " if self.static_kernels else ""
        out = [f"{storage}{k.ret or 'void'} {k.name}({', '.join(sig)}) {{"]
        for n in k.body:
            out += n.lines("  ")
        out.append("}")
        return out

    def program(self) -> str:
        rng = self.rng
        self.make_arrays()
        nk = rng.choice((1, 2, 2, 3, 3))
        self.small = nk == 3  # three kernels fit in the line budget only if each is small
        for i in range(nk):
            nscalars = len(self.gscalars)
            k = self.kernel(i)
            if self.kernels and self.line_estimate(k) > MAX_LINES:
                del self.gscalars[nscalars:]  # too long: drop this kernel (bounds stay sound)
                break
            self.kernels.append(k)
        for a in self.arrays:
            a.ext = [max(e, 1) + rng.choice((0, 0, 1, 2)) for e in a.ext]
        lines = ["#include <math.h>", "#include <stdio.h>", ""]
        for a in self.arrays:
            if a.kind == "global":
                lines.append(f"static {a.elem} {a.name}{''.join(f'[{e}]' for e in a.ext)};")
        for ty, g in self.gscalars:
            lines.append(f"{ty} {g};")
        for k in self.kernels:
            lines.append("")
            lines += self.render_kernel(k)
        lines += ["", "int main(void) {"]
        for a in self.arrays:
            if a.kind == "flat":
                lines.append(f"  static {a.elem} {a.name}[{math.prod(a.ext)}];")
            elif a.kind != "global":
                lines.append(f"  static {a.elem} {a.name}{''.join(f'[{e}]' for e in a.ext)};")
        for a in self.arrays:
            lines.append("  " + self.init_loop(a))
        for k in self.kernels:
            args = [str(v) for v in k.params.values()] + list(k.used)
            call = f"{k.name}({', '.join(args)})"
            if k.ret == "double":
                lines.append(f'  printf("{k.name} %.15g\\n", {call});')
            elif k.ret == "long":
                lines.append(f'  printf("{k.name} %ld\\n", {call});')
            else:
                lines.append(f"  {call};")
        for a in self.arrays:
            lines.append("  " + self.checksum(a))
        for ty, g in self.gscalars:
            fmt = "%.15g" if ty == "double" else "%ld"
            lines.append(f'  printf("{g} {fmt}\\n", {g});')
        lines += ["  return 0;", "}"]
        return "\n".join(lines) + "\n"

    @staticmethod
    def index_loops(a: Array) -> tuple[str, str, str]:
        """(loop headers, element reference, linear index) over every element of ``a``."""
        if a.kind == "flat":
            total = math.prod(a.ext)
            return f"for (int x = 0; x < {total}; x++) ", f"{a.name}[x]", "x"
        heads = "".join(f"for (int x{d} = 0; x{d} < {e}; x{d}++) " for d, e in enumerate(a.ext))
        ref = a.name + "".join(f"[x{d}]" for d in range(a.ndim))
        lin = "x0"
        for d in range(1, a.ndim):
            lin = f"({lin}) * {a.ext[d]} + x{d}"
        return heads, ref, lin

    def init_loop(self, a: Array) -> str:
        heads, ref, lin = self.index_loops(a)
        c1, c2, c3, p = a.init
        if a.elem == "double":
            return f"{heads}{ref} = (double)(({lin}) * {c1} % {p}) * 0.25 - {c2 % 3}.5;"
        return f"{heads}{ref} = ({lin}) * {c1} % {p + c3} - {c3};"

    def checksum(self, a: Array) -> str:
        heads, ref, lin = self.index_loops(a)
        if a.elem == "double":
            return (
                f"{{ double cs = 0.0; {heads}cs += {ref} * (double)(({lin}) % 13 + 1); "
                f'printf("{a.name} %.15g\\n", cs); }}'
            )
        return (
            f"{{ long cs = 0; {heads}cs = (cs * 31 + {ref}) % 1000000007; "
            f'printf("{a.name} %ld\\n", cs); }}'
        )


def generate_program(seed: int, *, exact_reductions: bool = True) -> str:
    """A random UB-free C program of affine loop nests; a pure function of ``seed``.

    ``exact_reductions``: double scalar accumulators add multiples of 1/64 only, so their sums are
    exact whatever order a compiler adds them in. The rare program over the line budget is drawn
    again from a derived seed.
    """
    src = ""
    for attempt in range(64):
        sub: int | str = seed if attempt == 0 else f"{seed}/{attempt}"
        src = Gen(sub, exact_reductions=exact_reductions).program()
        if src.count("\n") <= MAX_LINES:
            break
    return src


if __name__ == "__main__":
    sys.stdout.write(generate_program(int(sys.argv[1])))
