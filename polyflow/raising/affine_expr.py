"""Affine forms of SSA values: an integer value as an affine expression over dims (counters of
enclosing `affine.for`s) and symbols (values of the function's top level), or the reason it is not.

The rules are upstream MLIR's for the affine dialect (an `affine.for`/`affine.parallel` counter is a
valid dim anywhere inside its loop; a value defined at the top level of the function is a valid
symbol everywhere in it) read with C semantics (CONTRACT.md): signed `i32`/`i64`/`index` arithmetic
does not overflow, so `addi`, `subi`, `muli` by a constant, `index_cast`, `extsi` and `trunci` are
exact; `floordivsi`/`ceildivsi` by a positive constant are affine; `divsi`/`remsi` truncate towards
zero, so they are `floordiv`/`mod` only where the dividend is provably non-negative (and `ceildiv`
where it is provably non-positive). Anything unsigned wraps and is not affine.

`AffineAnalysis` answers three questions about one function, memoized:
- `expr(value)`: the affine expression (`Lin`) of an integer or index value;
- `bound(value, kind)`: a loop bound as the minimum (`kind="min"`, upper bounds) or maximum
  (`"max"`, lower bounds) of affine expressions, from `arith.minsi`/`maxsi` and min/max selects;
- `condition(value)`: an `i1` condition as a disjunction of conjunctions of affine constraints.
Each raises `NotAffine` with a short reason for a person. The analysis reads the IR as it is when
asked, so the raising pass asks about a value only after the loops around it have been raised.

`affine_map` and `integer_set` turn expressions into an MLIR map or set plus the `Leaf`s that are
its operands (dims first, then symbols), for the pass to materialize as `index` values.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal, TypeAlias

from mlir import ir

MinMax = Literal["min", "max"]
DivKind = Literal["floordiv", "ceildiv", "mod"]

# Most cases a condition (disjuncts) or a bound (min/max results) may expand into.
MAX_CASES = 16
# Most bound substitutions one non-negativity proof may try.
PROOF_BUDGET = 64

# arith.cmpi predicates, by their enum value.
_EQ, _NE, _SLT, _SLE, _SGT, _SGE, _ULT, _ULE, _UGT, _UGE = range(10)

_LOOPS = frozenset({"scf.for", "scf.while", "scf.parallel", "affine.for", "affine.parallel"})
_UNSIGNED_OPS = frozenset(
    {
        "arith.divui",
        "arith.remui",
        "arith.ceildivui",
        "arith.shrui",
        "arith.minui",
        "arith.maxui",
        "arith.index_castui",
        "arith.extui",
    }
)


class NotAffine(Exception):
    """A value is not an affine expression of valid dims and symbols; `reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Leaf:
    """An operand of an affine map: a dim (an affine loop counter) or a symbol (a top-level value,
    possibly of an integer type that the pass casts to `index`)."""

    value: ir.Value
    is_dim: bool


@dataclass(frozen=True)
class Div:
    """`num floordiv den`, `num ceildiv den` or `num mod den`, for a constant `den` > 1."""

    kind: DivKind
    num: Lin
    den: int


Atom: TypeAlias = Leaf | Div


class Lin:
    """An affine expression: a constant plus integer multiples of atoms (leaves and divisions).

    Immutable; equal when the same multiples of the same atoms and the same constant.
    """

    __slots__ = ("const", "terms")

    def __init__(self, terms: Mapping[Atom, int] | None = None, const: int = 0) -> None:
        self.terms: dict[Atom, int] = {a: c for a, c in (terms or {}).items() if c != 0}
        self.const = const

    @staticmethod
    def of(atom: Atom) -> Lin:
        return Lin({atom: 1})

    @property
    def is_const(self) -> bool:
        return not self.terms

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Lin) and self.const == other.const and self.terms == other.terms

    def __hash__(self) -> int:
        return hash((frozenset(self.terms.items()), self.const))

    def __add__(self, other: Lin | int) -> Lin:
        if isinstance(other, int):
            return Lin(self.terms, self.const + other)
        terms = dict(self.terms)
        for atom, coeff in other.terms.items():
            terms[atom] = terms.get(atom, 0) + coeff
        return Lin(terms, self.const + other.const)

    def __sub__(self, other: Lin | int) -> Lin:
        return self + (-other)

    def __neg__(self) -> Lin:
        return self.scale(-1)

    def scale(self, k: int) -> Lin:
        return Lin({a: c * k for a, c in self.terms.items()}, self.const * k)

    def leaves(self) -> list[Leaf]:
        """The leaves, inside divisions too, in order of first appearance."""
        out: list[Leaf] = []
        for atom in self.terms:
            for leaf in [atom] if isinstance(atom, Leaf) else atom.num.leaves():
                if leaf not in out:
                    out.append(leaf)
        return out

    @property
    def has_dims(self) -> bool:
        return any(leaf.is_dim for leaf in self.leaves())

    def render(self, name: Callable[[ir.Value], str]) -> str:
        """The expression as text, leaves named by `name` (MLIR's affine syntax otherwise)."""
        parts: list[str] = []
        for atom, coeff in self.terms.items():
            text = (
                name(atom.value)
                if isinstance(atom, Leaf)
                else f"({atom.num.render(name)}) {atom.kind} {atom.den}"
            )
            magnitude = text if abs(coeff) == 1 else f"{text} * {abs(coeff)}"
            if not parts:
                parts.append(magnitude if coeff > 0 else f"-{magnitude}")
            else:
                parts.append(f"{'+' if coeff > 0 else '-'} {magnitude}")
        if self.const or not parts:
            if not parts:
                parts.append(str(self.const))
            else:
                parts.append(f"{'+' if self.const > 0 else '-'} {abs(self.const)}")
        return " ".join(parts)

    def __str__(self) -> str:
        return self.render(lambda v: v.get_name())

    def __repr__(self) -> str:
        return f"Lin({self})"


@dataclass(frozen=True)
class Constraint:
    """`expr >= 0`, or `expr == 0` when `eq`."""

    expr: Lin
    eq: bool = False

    def __str__(self) -> str:
        return f"{self.expr} {'==' if self.eq else '>='} 0"


# A condition in disjunctive normal form: any of the conjunctions holds.
Dnf: TypeAlias = tuple[tuple[Constraint, ...], ...]
TRUE: Dnf = ((),)
FALSE: Dnf = ()


def _divide(kind: DivKind, num: Lin, den: int) -> Lin:
    """`num kind den` for den > 0, with the multiples of `den` taken out of the division."""
    if den == 1:
        return Lin() if kind == "mod" else num
    q_terms = {a: c // den for a, c in num.terms.items() if c % den == 0}
    r_terms = {a: c for a, c in num.terms.items() if c % den != 0}
    q_const, r_const = divmod(num.const, den)
    if not r_terms:
        if kind == "mod":
            return Lin(const=r_const)
        up = 1 if kind == "ceildiv" and r_const else 0
        return Lin(q_terms, q_const + up)
    rest = Lin.of(Div(kind, Lin(r_terms, r_const), den))
    return rest if kind == "mod" else Lin(q_terms, q_const) + rest


def floordiv(num: Lin, den: int) -> Lin:
    return _divide("floordiv", num, den)


def ceildiv(num: Lin, den: int) -> Lin:
    return _divide("ceildiv", num, den)


def mod(num: Lin, den: int) -> Lin:
    return _divide("mod", num, den)


# ---------------------------------------------------------------------------------------------
# Lin ↔ MLIR affine expressions


def operands_of(exprs: Iterable[Lin]) -> list[Leaf]:
    """The leaves of `exprs` as map operands: dims first, then symbols, each in first appearance."""
    leaves: list[Leaf] = []
    for e in exprs:
        for leaf in e.leaves():
            if leaf not in leaves:
                leaves.append(leaf)
    return [x for x in leaves if x.is_dim] + [x for x in leaves if not x.is_dim]


def _to_affine(e: Lin, position: Mapping[Leaf, ir.AffineExpr]) -> ir.AffineExpr:
    out: ir.AffineExpr = ir.AffineConstantExpr.get(e.const)
    for atom, coeff in e.terms.items():
        if isinstance(atom, Leaf):
            term = position[atom]
        else:
            num, den = _to_affine(atom.num, position), ir.AffineConstantExpr.get(atom.den)
            make = {
                "floordiv": ir.AffineExpr.get_floor_div,
                "ceildiv": ir.AffineExpr.get_ceil_div,
                "mod": ir.AffineExpr.get_mod,
            }[atom.kind]
            term = make(num, den)
        out = out + term * coeff
    return out


def _positions(leaves: Sequence[Leaf]) -> tuple[dict[Leaf, ir.AffineExpr], int, int]:
    dims = [x for x in leaves if x.is_dim]
    syms = [x for x in leaves if not x.is_dim]
    position: dict[Leaf, ir.AffineExpr] = {x: ir.AffineDimExpr.get(i) for i, x in enumerate(dims)}
    position.update({x: ir.AffineSymbolExpr.get(i) for i, x in enumerate(syms)})
    return position, len(dims), len(syms)


def affine_map(exprs: Sequence[Lin]) -> tuple[ir.AffineMap, list[Leaf]]:
    """A map with one result per expression, and its operands (dims, then symbols)."""
    leaves = operands_of(exprs)
    position, n_dims, n_syms = _positions(leaves)
    results = [_to_affine(e, position) for e in exprs]
    return ir.AffineMap.get(n_dims, n_syms, results), leaves


def integer_set(constraints: Sequence[Constraint]) -> tuple[ir.IntegerSet, list[Leaf]]:
    """The set of points satisfying all `constraints` (none: all points), and its operands."""
    constraints = list(constraints) or [Constraint(Lin())]
    leaves = operands_of(c.expr for c in constraints)
    position, n_dims, n_syms = _positions(leaves)
    exprs = [_to_affine(c.expr, position) for c in constraints]
    return ir.IntegerSet.get(n_dims, n_syms, exprs, [c.eq for c in constraints]), leaves


def _from_affine(e: ir.AffineExpr, dims: Sequence[Lin], syms: Sequence[Lin]) -> Lin:
    """The Lin of an MLIR affine expression whose dims and symbols stand for `dims`/`syms`."""
    if isinstance(e, ir.AffineConstantExpr):
        return Lin(const=e.value)
    if isinstance(e, ir.AffineDimExpr):
        return dims[e.position]
    if isinstance(e, ir.AffineSymbolExpr):
        return syms[e.position]
    if isinstance(e, ir.AffineAddExpr):
        return _from_affine(e.lhs, dims, syms) + _from_affine(e.rhs, dims, syms)
    if isinstance(e, ir.AffineMulExpr):
        a, b = _from_affine(e.lhs, dims, syms), _from_affine(e.rhs, dims, syms)
        if a.is_const:
            return b.scale(a.const)
        if b.is_const:
            return a.scale(b.const)
        raise NotAffine("semi-affine map (product of two operands)")
    if isinstance(e, ir.AffineFloorDivExpr | ir.AffineCeilDivExpr | ir.AffineModExpr):
        num, den = _from_affine(e.lhs, dims, syms), _from_affine(e.rhs, dims, syms)
        if not den.is_const or den.const <= 0:
            raise NotAffine("semi-affine map (division by a non-constant)")
        if isinstance(e, ir.AffineFloorDivExpr):
            return floordiv(num, den.const)
        if isinstance(e, ir.AffineCeilDivExpr):
            return ceildiv(num, den.const)
        return mod(num, den.const)
    raise NotAffine(f"unknown affine expression {e}")


# ---------------------------------------------------------------------------------------------
# Conditions in disjunctive normal form


def _simplify(dnf: Iterable[Iterable[Constraint]]) -> Dnf:
    out: list[tuple[Constraint, ...]] = []
    for conj in dnf:
        kept: list[Constraint] = []
        feasible = True
        for c in conj:
            if c.expr.is_const:
                holds = c.expr.const == 0 if c.eq else c.expr.const >= 0
                feasible = feasible and holds
            elif c not in kept:
                kept.append(c)
        if not feasible:
            continue
        if not kept:
            return TRUE
        if tuple(kept) not in out:
            out.append(tuple(kept))
    if len(out) > MAX_CASES:
        raise NotAffine("condition has too many cases")
    return tuple(out)


def dnf_and(a: Dnf, b: Dnf) -> Dnf:
    return _simplify(x + y for x in a for y in b)


def dnf_or(a: Dnf, b: Dnf) -> Dnf:
    return _simplify((*a, *b))


def dnf_not(a: Dnf) -> Dnf:
    out = TRUE
    for conj in a:
        # not (c1 and c2 ...) = not c1 or not c2 ...; not (e >= 0) = -e - 1 >= 0
        negated: list[tuple[Constraint, ...]] = []
        for c in conj:
            if c.eq:
                negated += [(Constraint(c.expr - 1),), (Constraint(-c.expr - 1),)]
            else:
                negated.append((Constraint(-c.expr - 1),))
        out = dnf_and(out, _simplify(negated))
    return out


# ---------------------------------------------------------------------------------------------
# The analysis


def _const_int(value: ir.Value) -> int | None:
    """The integer of an `arith.constant` (index or integer), else None."""
    if isinstance(value, ir.BlockArgument):
        return None
    op = value.owner
    if op.operation.name != "arith.constant":
        return None
    attr = op.attributes["value"]
    if isinstance(attr, ir.BoolAttr):
        return int(attr.value)
    if isinstance(attr, ir.IntegerAttr):
        return int(attr.value)
    return None


def _inside_loop(op: ir.Operation) -> bool:
    parent = op.parent
    while parent is not None and parent.operation.name != "func.func":
        if parent.operation.name in _LOOPS:
            return True
        parent = parent.operation.parent
    return False


class AffineAnalysis:
    """Affine forms of the integer values of one `func.func`, memoized per value.

    Ask about a value only once the loops around its definition are in their final form (raised
    to `affine.for` or given up): a counter is a dim only if its loop is an `affine.for`.
    """

    def __init__(self, func: ir.Operation | ir.OpView) -> None:
        self.func = func.operation
        self._exprs: dict[ir.Value, Lin | str] = {}  # the expression, or why there is none
        self._iv_bounds: dict[Leaf, tuple[list[Lin], list[Lin]]] = {}
        self._depths: dict[Leaf, int] = {}

    def forget(self, values: Iterable[ir.Value]) -> None:
        """Drop what is known about `values`, whose op is about to be erased (a later value may
        reuse its storage, and values compare by it)."""
        for value in values:
            self._exprs.pop(value, None)

    # -- where values live ----------------------------------------------------------------------

    def is_top_level(self, value: ir.Value) -> bool:
        """Whether `value` is an argument of the function or defined in its body's top block."""
        if isinstance(value, ir.BlockArgument):
            return bool(value.owner.owner.operation == self.func)
        parent = value.owner.operation.parent
        return parent is not None and bool(parent.operation == self.func)

    def _is_symbol(self, value: ir.Value) -> bool:
        if self.is_top_level(value):
            return True
        if isinstance(value, ir.BlockArgument):
            return False
        op = value.owner
        # memref.dim of a top-level memref is a valid symbol wherever it is (upstream's rule)
        return (
            op.operation.name == "memref.dim"
            and self.is_top_level(op.operands[0])
            and _const_int(op.operands[1]) is not None
        )

    # -- expressions ----------------------------------------------------------------------------

    def expr(self, value: ir.Value) -> Lin:
        """The affine expression of an integer/index `value`; raises NotAffine."""
        hit = self._exprs.get(value)
        if hit is None:
            try:
                hit = self._compute(value)
            except NotAffine as exc:
                hit = exc.reason
            self._exprs[value] = hit
        if isinstance(hit, str):
            raise NotAffine(hit)
        return hit

    def _compute(self, value: ir.Value) -> Lin:
        t = value.type
        if isinstance(t, ir.FloatType):
            raise NotAffine("floating-point value")
        if not isinstance(t, ir.IndexType | ir.IntegerType):
            raise NotAffine(f"value of type {t}")
        if isinstance(t, ir.IntegerType) and t.width == 1:
            raise NotAffine("boolean value")
        if isinstance(value, ir.BlockArgument):
            return self._block_argument(value)
        try:
            return self._op_result(value)
        except NotAffine:
            # a value the expression cannot see through is still a symbol at the top level
            if self._is_symbol(value):
                return Lin.of(Leaf(value, False))
            raise

    def _block_argument(self, value: ir.BlockArgument) -> Lin:
        owner = value.owner.owner.operation
        name = owner.name
        if owner == self.func:
            return Lin.of(Leaf(value, False))
        if name == "affine.parallel" or (name == "affine.for" and value.arg_number == 0):
            return Lin.of(Leaf(value, True))
        if name == "scf.for" and value.arg_number == 0:
            raise NotAffine("uses the counter of an enclosing loop that was not raised")
        if name in ("scf.for", "affine.for"):
            raise NotAffine("value carried across loop iterations")
        if name == "scf.while":
            raise NotAffine("value of a while loop")
        raise NotAffine(f"argument of {name}")

    def _constant_divisor(self, value: ir.Value) -> int:
        den = _const_int(value)
        if den is None:
            raise NotAffine("division by a non-constant")
        if den <= 0:
            raise NotAffine("division by a non-positive constant")
        return den

    def _op_result(self, value: ir.Value) -> Lin:
        op = value.owner
        name = op.operation.name
        args = list(op.operands)
        if name == "arith.constant":
            c = _const_int(value)
            if c is None:
                raise NotAffine("non-integer constant")
            return Lin(const=c)
        if name == "arith.addi":
            return self.expr(args[0]) + self.expr(args[1])
        if name == "arith.subi":
            return self.expr(args[0]) - self.expr(args[1])
        if name == "arith.muli":
            a, b = self.expr(args[0]), self.expr(args[1])
            if a.is_const:
                return b.scale(a.const)
            if b.is_const:
                return a.scale(b.const)
            raise NotAffine(_product_reason(a, b))
        if name in ("arith.index_cast", "arith.extsi", "arith.trunci"):
            # exact between index, i64 and i32 (CONTRACT.md); narrower C types wrap
            if isinstance(value.type, ir.IntegerType) and value.type.width < 32:
                raise NotAffine(f"truncated to {value.type} (may wrap)")
            return self.expr(args[0])
        if name in ("arith.index_castui", "arith.extui"):
            # zero extension equals sign extension for a value known to be non-negative
            x = self.expr(args[0])
            if self.nonnegative(x):
                return x
            raise NotAffine("unsigned value (zero-extended)")
        if name == "arith.floordivsi":
            return floordiv(self.expr(args[0]), self._constant_divisor(args[1]))
        if name == "arith.ceildivsi":
            return ceildiv(self.expr(args[0]), self._constant_divisor(args[1]))
        if name == "arith.divsi":
            den = self._constant_divisor(args[1])
            x = self.expr(args[0])
            if self.nonnegative(x):
                return floordiv(x, den)
            if self.nonnegative(-x):
                return ceildiv(x, den)
            raise NotAffine("signed division of a value that may be negative (C rounds towards 0)")
        if name == "arith.remsi":
            divisor = _const_int(args[1])
            if divisor is None or divisor == 0:
                raise NotAffine("remainder by a non-constant")
            den = abs(divisor)  # C: the sign of a % b follows a
            x = self.expr(args[0])
            if self.nonnegative(x):
                return mod(x, den)
            if self.nonnegative(-x):
                return -mod(-x, den)
            raise NotAffine("remainder of a value that may be negative (C's % is not mod)")
        if name == "arith.shli":
            k = _const_int(args[1])
            if k is None or not 0 <= k < 63:
                raise NotAffine("shift by a non-constant")
            return self.expr(args[0]).scale(1 << k)
        if name == "arith.shrsi":
            k = _const_int(args[1])
            if k is None or not 0 <= k < 63:
                raise NotAffine("shift by a non-constant")
            return floordiv(self.expr(args[0]), 1 << k)
        if name == "arith.andi":
            # x & (2^k - 1) is x mod 2^k in two's complement
            for x, m in ((args[0], args[1]), (args[1], args[0])):
                mask = _const_int(m)
                if mask is not None and mask >= 0 and (mask + 1) & mask == 0:
                    return mod(self.expr(x), mask + 1)
            raise NotAffine("bitwise and")
        if name == "affine.apply":
            return self._apply(op)
        raise NotAffine(self._opaque_reason(op.operation))

    def _apply(self, op: ir.OpView) -> Lin:
        amap = ir.AffineMapAttr(op.attributes["map"]).value
        operands = [self.expr(v) for v in op.operands]
        return _from_affine(amap.results[0], operands[: amap.n_dims], operands[amap.n_dims :])

    def _opaque_reason(self, op: ir.Operation) -> str:
        name = op.name
        if name in ("memref.load", "affine.load"):
            if _inside_loop(op):
                return "loaded from memory inside the loop nest"
            return "loaded from memory" + (
                "" if self._is_symbol(op.result) else " in a conditional"
            )
        if name in ("func.call", "func.call_indirect", "llvm.call"):
            return "result of a function call"
        if name in ("scf.if", "affine.if"):
            return "result of a conditional"
        if name in ("scf.for", "affine.for"):
            return "result of a loop"
        if name == "scf.while":
            return "result of a while loop"
        if name == "arith.select":
            return "conditional value (select)"
        if name in ("arith.minsi", "arith.maxsi"):
            return "minimum or maximum (affine only in a loop bound)"
        if name in _UNSIGNED_OPS:
            return f"unsigned arithmetic ({name})"
        if name in ("arith.fptosi", "arith.fptoui"):
            return "converted from a floating-point value"
        return f"computed by {name}"

    # -- bounds ---------------------------------------------------------------------------------

    def _minmax_of(self, value: ir.Value) -> tuple[MinMax, ir.Value, ir.Value] | None:
        """`("min", a, b)` for `minsi a b` or a select that is one; likewise max; else None."""
        if isinstance(value, ir.BlockArgument):
            return None
        op = value.owner
        name = op.operation.name
        if name in ("arith.minsi", "arith.maxsi"):
            return ("min" if name == "arith.minsi" else "max", op.operands[0], op.operands[1])
        if name != "arith.select":
            return None
        cond, x, y = op.operands
        if isinstance(cond, ir.BlockArgument) or cond.owner.operation.name != "arith.cmpi":
            return None
        cmp = cond.owner
        pred = ir.IntegerAttr(cmp.attributes["predicate"]).value
        a, b = cmp.operands
        if pred not in (_SLT, _SLE, _SGT, _SGE):
            return None
        less = pred in (_SLT, _SLE)
        if (x, y) == (a, b):
            return ("min" if less else "max", x, y)
        if (x, y) == (b, a):
            return ("max" if less else "min", x, y)
        return self._minmax_by_difference(pred, a, b, x, y)

    def _minmax_by_difference(
        self, pred: int, a: ir.Value, b: ir.Value, x: ir.Value, y: ir.Value
    ) -> tuple[MinMax, ir.Value, ir.Value] | None:
        """`a cmp b ? x : y` where x - y = ±(a - b) + constant, as in `i > 2 ? i - 2 : 0`:
        the compare is `x - y <= t` (a min when t is -1 or 0) or `x - y >= t` (a max when t is
        0 or 1; at x = y either choice is right)."""
        try:
            e = self.expr(a) - self.expr(b)
            d = self.expr(x) - self.expr(y)
        except NotAffine:
            return None
        # e <= k (slt: k = -1, sle: 0) or e >= k (sgt: 1, sge: 0)
        below = pred in (_SLT, _SLE)
        k = {_SLT: -1, _SLE: 0, _SGT: 1, _SGE: 0}[pred]
        for sign in (1, -1):
            shift = d - e.scale(sign)
            if not shift.is_const:
                continue
            # d = sign * e + shift: e <= k is d <= k + shift (sign 1) or d >= shift - k (sign -1)
            t = k + shift.const if sign == 1 else shift.const - k
            d_below = below == (sign == 1)
            if d_below and t in (-1, 0):
                return ("min", x, y)
            if not d_below and t in (0, 1):
                return ("max", x, y)
        return None

    def _has_minmax(self, value: ir.Value, budget: list[int]) -> bool:
        budget[0] -= 1
        if budget[0] < 0 or isinstance(value, ir.BlockArgument):
            return False
        if self._minmax_of(value) is not None:
            return True
        op = value.owner
        if op.operation.name not in _THROUGH_BOUND:
            return False
        return any(self._has_minmax(v, budget) for v in op.operands)

    def bound(self, value: ir.Value, kind: MinMax) -> list[Lin]:
        """`value` as the minimum (`kind="min"`) or maximum (`"max"`) of affine expressions."""
        if not self._has_minmax(value, [64]):
            return [self.expr(value)]
        found = self._minmax_of(value)
        if found is not None:
            which, a, b = found
            if which != kind:
                raise NotAffine(
                    "a maximum where only a minimum can be expressed"
                    if kind == "min"
                    else "a minimum where only a maximum can be expressed"
                )
            return _cases(self.bound(a, kind) + self.bound(b, kind))
        op = value.owner
        name = op.operation.name
        args = list(op.operands)
        other: MinMax = "max" if kind == "min" else "min"
        if name == "arith.addi":
            return _cases(
                x + y for x in self.bound(args[0], kind) for y in self.bound(args[1], kind)
            )
        if name == "arith.subi":
            return _cases(
                x - y for x in self.bound(args[0], kind) for y in self.bound(args[1], other)
            )
        if name == "arith.muli":
            for x, c in ((args[0], args[1]), (args[1], args[0])):
                k = _const_int(c)
                if k is not None:
                    return _cases(e.scale(k) for e in self.bound(x, kind if k >= 0 else other))
            raise NotAffine("product of a minimum or maximum and a non-constant")
        if name in ("arith.floordivsi", "arith.ceildivsi"):
            den = self._constant_divisor(args[1])
            div = floordiv if name == "arith.floordivsi" else ceildiv
            return _cases(div(e, den) for e in self.bound(args[0], kind))
        # index_cast, extsi, trunci (see _THROUGH_BOUND)
        return self.bound(args[0], kind)

    # -- conditions -----------------------------------------------------------------------------

    def condition(self, value: ir.Value) -> Dnf:
        """An `i1` value as a disjunction of conjunctions of affine constraints."""
        if isinstance(value, ir.BlockArgument):
            owner = value.owner.owner.operation
            if owner == self.func:
                raise NotAffine("boolean function argument")
            raise NotAffine(f"argument of {owner.name}")
        op = value.owner
        name = op.operation.name
        args = list(op.operands)
        if name == "arith.constant":
            return TRUE if _const_int(value) else FALSE
        if name == "arith.andi":
            return dnf_and(self.condition(args[0]), self.condition(args[1]))
        if name == "arith.ori":
            return dnf_or(self.condition(args[0]), self.condition(args[1]))
        if name == "arith.xori":
            a, b = self.condition(args[0]), self.condition(args[1])
            return dnf_or(dnf_and(a, dnf_not(b)), dnf_and(dnf_not(a), b))
        if name == "arith.select":  # c ? a : b on booleans, as the selects of && and || are
            c, a, b = (self.condition(v) for v in args)
            return dnf_or(dnf_and(c, a), dnf_and(dnf_not(c), b))
        if name == "arith.cmpi":
            pred = ir.IntegerAttr(op.attributes["predicate"]).value
            if pred in (_ULT, _ULE, _UGT, _UGE):
                raise NotAffine("unsigned comparison")
            return self._compare(pred, args[0], args[1])
        if name == "arith.cmpf":
            raise NotAffine("compares floating-point values")
        if name == "arith.trunci":  # the low bit of an integer, a C flag (0 or 1) mostly
            try:
                return self._flag(args[0])
            except NotAffine as exc:
                try:
                    low_bit = mod(self.expr(args[0]), 2)
                except NotAffine:
                    raise exc from None
                return _simplify([(Constraint(low_bit - 1, eq=True),)])
        raise NotAffine(self._opaque_reason(op.operation))

    def _flag(self, value: ir.Value) -> Dnf:
        """When the integer `value` is odd, for flags the frontend keeps in i8/i32: constants,
        extended booleans and selects of those (what mem2reg makes of break/return flags)."""
        known = _const_int(value)
        if known is not None:
            return TRUE if known & 1 else FALSE
        if isinstance(value, ir.BlockArgument):
            return self.condition(value)  # says why not
        op = value.owner
        name = op.operation.name
        args = list(op.operands)
        is_bool = (
            bool(args) and isinstance(args[0].type, ir.IntegerType) and args[0].type.width == 1
        )
        if name in ("arith.extui", "arith.extsi") and is_bool:
            return self.condition(args[0])
        if name == "arith.select":
            c, a, b = self.condition(args[0]), self._flag(args[1]), self._flag(args[2])
            return dnf_or(dnf_and(c, a), dnf_and(dnf_not(c), b))
        raise NotAffine(self._opaque_reason(op.operation))

    def _remainder(self, value: ir.Value) -> Lin | None:
        """`x mod |c|` when `value` is `remsi x, c` (through exact casts): it is zero exactly
        when C's `x % c` is, whatever the sign of x."""
        while not isinstance(value, ir.BlockArgument):
            op = value.owner
            name = op.operation.name
            if name == "arith.remsi":
                divisor = _const_int(op.operands[1])
                if divisor is None or divisor == 0:
                    return None
                return mod(self.expr(op.operands[0]), abs(divisor))
            if name not in ("arith.index_cast", "arith.extsi", "arith.trunci"):
                return None
            value = op.operands[0]
        return None

    def _compare(self, pred: int, lhs: ir.Value, rhs: ir.Value) -> Dnf:
        if pred in (_EQ, _NE):  # x % c == 0, x % c != 0
            for x, zero in ((lhs, rhs), (rhs, lhs)):
                rem = self._remainder(x) if _const_int(zero) == 0 else None
                if rem is not None:
                    if pred == _EQ:
                        return _simplify([(Constraint(rem, eq=True),)])
                    return _simplify([(Constraint(rem - 1),)])  # mod is >= 0
        try:
            a, b = self.expr(lhs), self.expr(rhs)
        except NotAffine as exc:
            if pred in (_EQ, _NE):
                raise
            return self._compare_minmax(pred, lhs, rhs, exc)
        if pred == _EQ:
            return _simplify([(Constraint(a - b, eq=True),)])
        if pred == _NE:
            return _simplify([(Constraint(a - b - 1),), (Constraint(b - a - 1),)])
        # a < b: b - a - 1 >= 0; a <= b: b - a >= 0; a > b: a - b - 1 >= 0; a >= b: a - b >= 0
        diff = b - a if pred in (_SLT, _SLE) else a - b
        gap = 1 if pred in (_SLT, _SGT) else 0
        return _simplify([(Constraint(diff - gap),)])

    def _compare_minmax(self, pred: int, lhs: ir.Value, rhs: ir.Value, exc: NotAffine) -> Dnf:
        """`p - q - gap >= 0` where p or q is a min or max: min(P) - max(Q) >= 0 holds when every
        difference does, max(P) - min(Q) >= 0 when one does."""
        p, q = (rhs, lhs) if pred in (_SLT, _SLE) else (lhs, rhs)
        gap = 1 if pred in (_SLT, _SGT) else 0
        try:
            ps, qs = self.bound(p, "min"), self.bound(q, "max")
            return _simplify([tuple(Constraint(x - y - gap) for x in ps for y in qs)])
        except NotAffine:
            pass
        try:
            ps, qs = self.bound(p, "max"), self.bound(q, "min")
            return _simplify([(Constraint(x - y - gap),) for x in ps for y in qs])
        except NotAffine:
            raise exc from None

    # -- non-negativity -------------------------------------------------------------------------

    def nonnegative(self, e: Lin) -> bool:
        """Whether `e >= 0` is provable from the bounds of the affine loops around its dims.

        Replaces each division by its bound in terms of its numerator, then each dim, innermost
        first, by a loop bound (lower where its coefficient is positive, upper - 1 where
        negative), until only symbols remain; true when they cancel and the constant is >= 0.
        """
        terms = {a: Fraction(c) for a, c in e.terms.items()}
        return self._prove(terms, Fraction(e.const), [PROOF_BUDGET])

    def _prove(self, terms: dict[Atom, Fraction], const: Fraction, budget: list[int]) -> bool:
        budget[0] -= 1
        if budget[0] < 0:
            return False
        terms = {a: c for a, c in terms.items() if c != 0}
        for atom, k in terms.items():
            if isinstance(atom, Div):
                rest = dict(terms)
                del rest[atom]
                x, c = atom.num, atom.den
                # (x - c + 1) / c <= x floordiv c <= x / c;  x / c <= x ceildiv c <= (x + c - 1) / c
                if atom.kind == "mod":  # 0 <= x mod c <= c - 1
                    num, den = (Lin(), 1) if k > 0 else (Lin(const=c - 1), 1)
                elif atom.kind == "floordiv":
                    num, den = (x - (c - 1), c) if k > 0 else (x, c)
                else:
                    num, den = (x, c) if k > 0 else (x + (c - 1), c)
                return self._prove(*_add_scaled(rest, const, num, k / den), budget)
        dims = [a for a in terms if isinstance(a, Leaf) and a.is_dim]
        if not dims:
            return not terms and const >= 0
        dim = max(dims, key=self._depth)
        k = terms.pop(dim)
        try:
            lower, upper = self._bounds_of(dim)
        except NotAffine:
            return False
        choices = lower if k > 0 else [u - 1 for u in upper]
        return any(self._prove(*_add_scaled(terms, const, b, k), budget) for b in choices)

    def _depth(self, leaf: Leaf) -> int:
        depth = self._depths.get(leaf)
        if depth is None:
            depth = 0
            op: ir.OpView | None = leaf.value.owner.owner
            while op is not None and op.operation != self.func:
                depth += 1
                op = op.operation.parent
            self._depths[leaf] = depth
        return depth

    def _bounds_of(self, dim: Leaf) -> tuple[list[Lin], list[Lin]]:
        """The lower bounds (max of) and exclusive upper bounds (min of) of an affine counter."""
        hit = self._iv_bounds.get(dim)
        if hit is None:
            loop = dim.value.owner.owner
            if loop.operation.name != "affine.for":
                raise NotAffine("counter of an affine.parallel")
            sides = []
            for key, operands in (
                ("lowerBoundMap", loop.lowerBoundOperands),
                ("upperBoundMap", loop.upperBoundOperands),
            ):
                amap = ir.AffineMapAttr(loop.attributes[key]).value
                lins = [self.expr(v) for v in operands]
                dims, syms = lins[: amap.n_dims], lins[amap.n_dims :]
                sides.append([_from_affine(r, dims, syms) for r in amap.results])
            hit = (sides[0], sides[1])
            self._iv_bounds[dim] = hit
        return hit


# ops a bound's min/max may hide behind (see AffineAnalysis.bound)
_THROUGH_BOUND = frozenset(
    {
        "arith.addi",
        "arith.subi",
        "arith.muli",
        "arith.index_cast",
        "arith.extsi",
        "arith.trunci",
        "arith.floordivsi",
        "arith.ceildivsi",
    }
)


def _add_scaled(
    terms: dict[Atom, Fraction], const: Fraction, e: Lin, k: Fraction
) -> tuple[dict[Atom, Fraction], Fraction]:
    out = dict(terms)
    for atom, c in e.terms.items():
        out[atom] = out.get(atom, Fraction(0)) + k * c
    return out, const + k * e.const


def _cases(exprs: Iterable[Lin]) -> list[Lin]:
    out: list[Lin] = []
    for e in exprs:
        if e not in out:
            out.append(e)
            if len(out) > MAX_CASES:
                raise NotAffine("bound has too many minimum/maximum cases")
    return out


def _product_reason(a: Lin, b: Lin) -> str:
    if a.has_dims and b.has_dims:
        return "product of two loop counters"
    if a.has_dims or b.has_dims:
        return "product of a loop counter and a symbol"
    return "product of two symbols computed inside the loop nest"


def explain(value: ir.Value, analysis: AffineAnalysis) -> str:
    """`value`'s affine expression as text, or `not affine: <reason>` (for tests and reports)."""
    try:
        return str(analysis.expr(value))
    except NotAffine as exc:
        return f"not affine: {exc.reason}"


def existing_index_cast(
    value: ir.Value, func: ir.Operation, anchor: ir.Operation
) -> ir.Value | None:
    """An `arith.index_cast` of `value` to `index` at the top level of `func`, before `anchor`
    (itself a top-level op), so that raising reuses it rather than casting again."""
    for use in value.uses:
        user = use.owner.operation
        if (
            user.name == "arith.index_cast"
            and isinstance(user.results[0].type, ir.IndexType)
            and user.parent is not None
            and user.parent.operation == func
            and user.is_before_in_block(anchor)
        ):
            return user.results[0]
    return None
