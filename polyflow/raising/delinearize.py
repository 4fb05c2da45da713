"""raise-delinearize: a `memref.load`/`memref.store` on a 1-D memref at `q * m + r`, with `m` a
symbol (a C row length), → an `affine.load`/`affine.store` at `[q, r]` on a 2-D view of the same
memory, wherever `0 <= r < m` is proven on the access's whole iteration domain; `q` is split the
same way for more dimensions (`(i * m + j) * p + k` → `[i, j, k]`).

C code over flat pointers writes `a[i*m + k]`. The product of a loop counter and a symbol is not
affine, so raise-scf-to-affine leaves the access a `memref.load` with `polyflow.not_affine`. Here
the subscript becomes a polynomial in loop counters and symbols, in which we look for symbols
m1..mk, each a factor of every product term, such that it is `((s0 * m1 + s1) * m2 ...) * mk + sk`
with every `s` affine; then we prove that no point of the access's domain (the bounds of the
`affine.for`s and the conditions of the `affine.if`s around it; nothing else is assumed of the
symbols: `for k < m` gives `k <= m - 1`, and `m >= 1` only where that loop runs) has some
`s1..sk` outside `[0, m)`: by substituting loop bounds (`AffineAnalysis.nonnegative`, quick, the
usual `0 <= k < m`), else by asking isl (domain.py) whether that set of points is empty. Once
proven, the access becomes affine on the view

    memref.reinterpret_cast %a to offset: [0], sizes: [S, m1, ..., mk],
                                     strides: [m1 * ... * mk, ..., mk, 1]

made once per memref and row lengths, at the function's top level right after the last of their
definitions. S, the leading extent, is the 1-D extent divided by the product (never by 0); the
addressing does not use it. The address is the same number as before, so the program computes
the same thing; the proof is what makes the new subscripts in bounds per dimension, as the affine
dialect and dependence analyses assume. The view is the same memory as the memref, and views with
other row lengths, or the memref itself, may still be accessed next to it: passes after this one
must compare memrefs by their root (as polyflow/ir/aliasing.py does).

Declined, with the reason in `polyflow.not_affine` once such a split exists: a remainder not
proven in range ("... and %k < %m is not implied by the loop bounds"), a memref whose layout is
not the identity (its offset would be lost) or that is defined inside the loop nest, a row length
defined inside the loop nest. Only 1-D memrefs are considered. A constant row length needs
nothing: the subscript is affine already, and raise-scf-to-affine raised it.

Guarantees: every created op has the location of the access it serves (a view, of the first
access that needs it); accesses are analysed first and rewritten after; the index arithmetic
that only the old subscripts used is erased.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias

from mlir import ir
from mlir.dialects import affine, arith, memref

from polyflow.ir.affine import Inexpressible
from polyflow.ir.names import NOT_AFFINE_ATTR

from .affine_expr import (
    AffineAnalysis,
    Atom,
    Leaf,
    Lin,
    NotAffine,
    affine_map,
    existing_index_cast,
)
from .domain import Space

# Most splits (q, r) one access may try, each one isl question.
MAX_SPLITS = 8

# A product of atoms, each with its power (the empty product is the constant term).
Monomial: TypeAlias = frozenset[tuple[Atom, int]]
# monomial → its coefficient (never 0)
Poly: TypeAlias = dict[Monomial, int]

_ONE: Monomial = frozenset()
# Casts that keep the number as it is (CONTRACT.md: C's signed arithmetic does not overflow).
_EXACT_CASTS = frozenset({"arith.index_cast", "arith.extsi", "arith.trunci"})
_ACCESSES = frozenset({"memref.load", "memref.store"})


# ---------------------------------------------------------------------------------------------
# Polynomials


def _add(a: Poly, b: Poly, scale: int = 1) -> Poly:
    out = dict(a)
    for mono, c in b.items():
        out[mono] = out.get(mono, 0) + scale * c
    return {mono: c for mono, c in out.items() if c != 0}


def _times(x: Monomial, y: Monomial) -> Monomial:
    powers = dict(x)
    for atom, power in y:
        powers[atom] = powers.get(atom, 0) + power
    return frozenset(powers.items())


def _mul(a: Poly, b: Poly) -> Poly:
    out: Poly = {}
    for x, cx in a.items():
        for y, cy in b.items():
            xy = _times(x, y)
            out[xy] = out.get(xy, 0) + cx * cy
    return {mono: c for mono, c in out.items() if c != 0}


def _degree(mono: Monomial) -> int:
    return sum(power for _, power in mono)


def _without(mono: Monomial, atom: Atom) -> Monomial:
    """`mono / atom` (`atom` is a factor of `mono`)."""
    powers = dict(mono)
    powers[atom] -= 1
    return frozenset((a, p) for a, p in powers.items() if p > 0)


def _of_lin(e: Lin) -> Poly:
    out: Poly = {frozenset({(atom, 1)}): c for atom, c in e.terms.items()}
    if e.const:
        out[_ONE] = e.const
    return out


def _as_lin(p: Poly) -> Lin | None:
    """`p` as an affine expression, or None when it has a product term."""
    terms: dict[Atom, int] = {}
    const = 0
    for mono, c in p.items():
        if not mono:
            const = c
        elif _degree(mono) == 1:
            ((atom, _),) = mono
            terms[atom] = c
        else:
            return None
    return Lin(terms, const)


class _Polynomials:
    """Subscripts of one function as polynomials: loop counters are dims; a value of the
    function's top level is one symbol (an atom), or, with `expand`, a product of its factors
    when it is one; everything else is read through `+ - *` and exact casts down to what
    `AffineAnalysis` makes of it."""

    def __init__(self, analysis: AffineAnalysis) -> None:
        self.analysis = analysis
        self.order: dict[Atom, int] = {}  # first appearance: candidates are tried in this order
        self.saw_top_product = False

    def of(self, value: ir.Value, *, expand: bool) -> Poly:
        if self.analysis.is_top_level(value):
            e = self.analysis.expr(value)
            if e.is_const:
                return _of_lin(e)
            factors = _top_product(value)
            if factors is not None:
                self.saw_top_product = True
                if expand:
                    a, b = factors
                    return _mul(self.of(a, expand=True), self.of(b, expand=True))
            return self._atoms(Lin.of(Leaf(_unwidened(value), False)))
        op = None if isinstance(value, ir.BlockArgument) else value.owner.operation
        if op is not None and op.name in ("arith.addi", "arith.subi", "arith.muli"):
            a, b = (self.of(v, expand=expand) for v in op.operands)
            if op.name == "arith.muli":
                return _mul(a, b)
            return _add(a, b, -1 if op.name == "arith.subi" else 1)
        if op is not None and op.name in _EXACT_CASTS:
            if isinstance(value.type, ir.IntegerType) and value.type.width < 32:
                raise NotAffine(f"truncated to {value.type} (may wrap)")
            return self.of(op.operands[0], expand=expand)
        return self._atoms(self.analysis.expr(value))

    def _atoms(self, e: Lin) -> Poly:
        for atom in e.terms:
            self.order.setdefault(atom, len(self.order))
        return _of_lin(e)

    def sorted_atoms(self, mono: Monomial) -> list[tuple[Atom, int]]:
        return sorted(mono, key=lambda item: self.order.get(item[0], len(self.order)))


def _unwidened(value: ir.Value) -> ir.Value:
    """The value that `value` widens (through `index_cast` to `index` and `extsi`), so that
    `m` and its casts are one symbol."""
    while isinstance(value, ir.OpResult):
        op = value.owner.operation
        source = op.operands[0].type if op.operands else None
        widening = op.name == "arith.extsi" or (
            op.name == "arith.index_cast"
            and isinstance(value.type, ir.IndexType)
            and isinstance(source, ir.IntegerType)
        )
        if not widening:
            break
        value = op.operands[0]
    return value


def _top_product(value: ir.Value) -> tuple[ir.Value, ir.Value] | None:
    """The factors of a top-level `arith.muli` (through exact casts) defining `value`."""
    while isinstance(value, ir.OpResult):
        op = value.owner.operation
        if op.name == "arith.muli":
            return op.operands[0], op.operands[1]
        if op.name not in _EXACT_CASTS:
            return None
        value = op.operands[0]
    return None


@dataclass(frozen=True)
class _Split:
    """A subscript as `((subs[0] * sizes[0] + subs[1]) * sizes[1] ...) * sizes[-1] + subs[-1]`."""

    sizes: tuple[Leaf, ...]
    subs: tuple[Lin, ...]


def _splits(p: Poly, polys: _Polynomials, budget: list[int]) -> Iterator[_Split]:
    """The ways to split `p` over symbols (see the module docstring), at most `budget[0]`."""
    lin = _as_lin(p)
    if lin is not None:
        yield _Split((), (lin,))
        return
    products = [mono for mono in p if _degree(mono) > 1]
    rest = _as_lin({mono: c for mono, c in p.items() if _degree(mono) <= 1})
    assert rest is not None
    for m in _common_symbols(products, polys):
        quotient = {_without(mono, m): p[mono] for mono in products}
        variants = [(quotient, rest)]
        own = rest.terms.get(m, 0)
        if own:
            # `(i + 1) * m + k` reads `i * m + (m + k)`: first try the remainder without m (the
            # common case), then with it (`i * m + (m - 1 - k)`, a reversed row)
            variants.insert(0, (_add(quotient, {_ONE: own}), rest - Lin.of(m).scale(own)))
        for q, r in variants:
            for inner in _splits(q, polys, budget):
                if budget[0] <= 0:
                    return
                budget[0] -= 1
                yield _Split((*inner.sizes, m), (*inner.subs, r))


def _common_symbols(products: Sequence[Monomial], polys: _Polynomials) -> list[Leaf]:
    """The symbols that are a factor of every product term, in order of first appearance."""
    common: set[Leaf] | None = None
    for mono in products:
        atoms = {a for a, _ in mono if isinstance(a, Leaf) and not a.is_dim}
        common = atoms if common is None else common & atoms
    return sorted(common or (), key=lambda a: polys.order.get(a, len(polys.order)))


# ---------------------------------------------------------------------------------------------
# Analysis: which accesses become affine, and how


@dataclass(frozen=True)
class _Plan:
    """An access to rewrite: its memref, the row lengths of the view and the new subscripts."""

    access: ir.Operation
    memref: ir.Value
    split: _Split


def _access_parts(op: ir.Operation) -> tuple[ir.Value, list[ir.Value]]:
    operands = list(op.operands)
    return (operands[0], operands[1:]) if op.name == "memref.load" else (operands[1], operands[2:])


def _layout_problem(mtype: ir.MemRefType) -> str | None:
    layout = mtype.layout
    if isinstance(layout, ir.AffineMapAttr) and layout.value == ir.AffineMap.get_identity(
        mtype.rank
    ):
        return None
    return f"the memref's layout {layout} is not the identity"


class _Analyser:
    """Decides, for each access of one function, the split to use or why there is none."""

    def __init__(self, func: ir.Operation) -> None:
        self.func = func
        self.analysis = AffineAnalysis(func)
        self._asm: ir.AsmState | None = None
        # accesses in one loop nest often ask isl the same question
        self._answers: dict[str, bool] = {}

    def plan(self, op: ir.Operation) -> _Plan | str | None:
        """A plan for `op`, the reason it has none (a split exists but does not hold), or None
        when it is no case for this pass (the subscript has no symbolic row length)."""
        mem, indices = _access_parts(op)
        if len(indices) != 1:
            return None
        polys = _Polynomials(self.analysis)
        try:
            p = polys.of(indices[0], expand=False)
        except NotAffine:
            return None  # the reason raise-scf-to-affine gave stays
        outcome = self._plan_poly(op, mem, p, polys)
        if not isinstance(outcome, _Plan) and polys.saw_top_product:
            # `i * (m * p) + j * p + k`: read the products of symbols as products instead
            expanded = _Polynomials(self.analysis)
            try:
                second = self._plan_poly(op, mem, expanded.of(indices[0], expand=True), expanded)
            except NotAffine:
                second = None
            if isinstance(second, _Plan) or outcome is None:
                return second
        return outcome

    def _plan_poly(
        self, op: ir.Operation, mem: ir.Value, p: Poly, polys: _Polynomials
    ) -> _Plan | str | None:
        splits = [s for s in _splits(p, polys, [MAX_SPLITS]) if s.sizes]
        if not splits:
            return None
        head = f"subscript 0 is not affine: {self._render(p, polys)}, and"
        mtype = ir.MemRefType(mem.type)
        layout = _layout_problem(mtype)
        if layout is not None:
            return f"{head} {layout}"
        if not self.analysis.is_top_level(mem):
            return f"{head} the memref is defined inside the loop nest"
        first_problem: str | None = None
        space: Space | None = None
        for split in splits:
            inner = [m for m in split.sizes if not self.analysis.is_top_level(m.value)]
            if inner:
                first_problem = first_problem or (
                    f"{head} {self._name(inner[0].value)} is defined inside the loop nest"
                )
                continue
            if self._within_loop_bounds(split):
                return _Plan(op, mem, split)
            if space is None:  # the exact question, with the affine.ifs around too
                space = Space(self.analysis)
                try:
                    space.around(op)
                except Inexpressible:
                    return f"{head} the conditions around the access cannot be read"
            if space.empty([_out_of_range(space, split)], answers=self._answers):
                return _Plan(op, mem, split)
            first_problem = first_problem or (
                f"{head} {self._unproven(space, split)} not implied by the loop bounds"
            )
        return first_problem

    def _within_loop_bounds(self, split: _Split) -> bool:
        """The quick sufficient test before isl: `r >= 0` and `m - 1 - r >= 0` follow from
        substituting loop bounds (`AffineAnalysis.nonnegative`), as for `0 <= k < m`."""
        return all(
            self.analysis.nonnegative(r) and self.analysis.nonnegative(Lin.of(m) - r - 1)
            for m, r in zip(split.sizes, split.subs[1:], strict=True)
        )

    def _unproven(self, space: Space, split: _Split) -> str:
        """What the loop bounds fail to imply, as `0 <= r < m` or a part of it (and `is`/`are`)."""
        parts: list[str] = []
        for m, r in zip(split.sizes, split.subs[1:], strict=True):
            rt, mt = space.lin(r), space.lin(Lin.of(m))
            low = not space.empty([f"{rt} < 0"], answers=self._answers)
            high = not space.empty([f"{rt} >= {mt}"], answers=self._answers)
            r_text, m_text = self._render(_of_lin(r)), self._name(m.value)
            if low and high:
                parts.append(f"0 <= {r_text} < {m_text}")
            elif low:
                parts.append(f"{r_text} >= 0")
            elif high:
                parts.append(f"{r_text} < {m_text}")
        return " and ".join(parts) + (" are" if len(parts) > 1 else " is")

    # -- reasons ----------------------------------------------------------------------------

    def _name(self, value: ir.Value) -> str:
        """`value` as the IR prints it, seen through exact casts (`%arg1`, not its cast)."""
        while isinstance(value, ir.OpResult) and value.owner.operation.name in _EXACT_CASTS:
            value = value.owner.operation.operands[0]
        if self._asm is None:
            self._asm = ir.AsmState(self.func)
        return str(value.get_name(self._asm))

    def _render(self, p: Poly, polys: _Polynomials | None = None) -> str:
        parts: list[str] = []
        for mono, c in p.items():
            atoms = polys.sorted_atoms(mono) if polys is not None else list(mono)
            factors = [self._atom_text(atom) for atom, power in atoms for _ in range(power)] or [
                str(abs(c))
            ]
            text = " * ".join(factors) + (f" * {abs(c)}" if mono and abs(c) != 1 else "")
            if not parts:
                parts.append(text if c > 0 else f"-{text}")
            else:
                parts.append(f"{'+' if c > 0 else '-'} {text}")
        return " ".join(parts) or "0"

    def _atom_text(self, atom: Atom) -> str:
        if isinstance(atom, Leaf):
            return self._name(atom.value)
        return f"({atom.num.render(self._name)}) {atom.kind} {atom.den}"


def _out_of_range(space: Space, split: _Split) -> str:
    """The isl condition: some remainder outside `[0, m)`."""
    cases: list[str] = []
    for m, r in zip(split.sizes, split.subs[1:], strict=True):
        rt, mt = space.lin(r), space.lin(Lin.of(m))
        cases += [f"{rt} < 0", f"{rt} >= {mt}"]
    return "(" + " or ".join(cases) + ")"


# ---------------------------------------------------------------------------------------------
# The rewrite


def _top_ancestor(op: ir.Operation, func: ir.Operation) -> ir.Operation:
    while True:
        parent = op.parent
        if parent is None or parent.operation == func:
            return op
        op = parent.operation


class _Rewriter:
    """Rewrites planned accesses of one function, making the views and casts they need."""

    def __init__(self, func: ir.Operation) -> None:
        self.func = func
        self.entry = func.regions[0].blocks[0]
        self.views: dict[tuple[ir.Value, tuple[ir.Value, ...]], ir.Value] = {}
        self.casts: dict[ir.Value, ir.Value] = {}
        self.maybe_dead: list[ir.Operation] = []
        # (a top-level op, or None for the block's start) → the op that followed it first
        self.slots: list[tuple[ir.Operation | None, ir.Operation]] = []

    def rewrite(self, plan: _Plan) -> None:
        op = plan.access
        anchor = _top_ancestor(op, self.func)
        view = self._view(plan, anchor)
        amap, leaves = affine_map(list(plan.split.subs))
        values = [
            leaf.value
            if isinstance(leaf.value.type, ir.IndexType)
            else self._index_of(leaf.value, anchor, op.location)
            for leaf in leaves
        ]
        map_attr = ir.AffineMapAttr.get(amap)
        ip = ir.InsertionPoint(op)
        old_indices = _access_parts(op)[1]
        new: ir.OpView
        if op.name == "memref.load":
            new = affine.AffineLoadOp(
                op.results[0].type, view, values, map_attr, loc=op.location, ip=ip
            )
            op.results[0].replace_all_uses_with(new.result)
        else:
            new = affine.AffineStoreOp(
                op.operands[0], view, values, map_attr, loc=op.location, ip=ip
            )
        for name in op.attributes:
            if "." in name and name != NOT_AFFINE_ATTR:  # discardable attributes travel along
                new.operation.attributes[name] = op.attributes[name]
        op.erase()
        self._note_dead(old_indices)

    def _index_of(self, value: ir.Value, anchor: ir.Operation, loc: ir.Location) -> ir.Value:
        """`value` (a top-level integer) as an `index` value defined before `anchor`."""
        existing = existing_index_cast(value, self.func, anchor)
        if existing is not None:
            return existing
        made = self.casts.get(value)
        if made is None:
            ip = self._after([value])
            made = arith.IndexCastOp(ir.IndexType.get(), value, loc=loc, ip=ip).result
            self.casts[value] = made
        return made

    def _after(self, values: Iterable[ir.Value]) -> ir.InsertionPoint:
        """Right after the last definition of `values` in the entry block (all are top-level),
        after what was made there before (so that the IR reads in the order it was made)."""
        last: ir.Operation | None = None
        for value in values:
            if isinstance(value, ir.OpResult):
                op = value.owner.operation
                if last is None or last.is_before_in_block(op):
                    last = op
        for key, ref in self.slots:
            if (key is None and last is None) or (key is not None and key == last):
                return ir.InsertionPoint(ref)
        if last is None:
            ref = self.entry.operations[0].operation
        else:
            following = ir.InsertionPoint.after(last).ref_operation
            assert following is not None, "a top-level op is followed by the terminator at least"
            ref = following.operation
        self.slots.append((last, ref))
        return ir.InsertionPoint(ref)

    def _view(self, plan: _Plan, anchor: ir.Operation) -> ir.Value:
        """The view of `plan.memref` with `plan`'s row lengths, made on first use."""
        key = (plan.memref, tuple(m.value for m in plan.split.sizes))
        view = self.views.get(key)
        if view is not None:
            return view
        loc = plan.access.location
        index = ir.IndexType.get()
        sizes = [
            m.value
            if isinstance(m.value.type, ir.IndexType)
            else self._index_of(m.value, anchor, loc)
            for m in plan.split.sizes
        ]
        mtype = ir.MemRefType(plan.memref.type)
        with loc, self._after([plan.memref, *sizes]):
            dynamic = ir.ShapedType.get_dynamic_size()
            if mtype.shape[0] == dynamic:
                extent = memref.dim(plan.memref, arith.constant(index, 0))
            else:
                extent = arith.constant(index, mtype.shape[0])
            strides = [sizes[-1]]
            for m in reversed(sizes[:-1]):
                strides.insert(0, arith.muli(m, strides[0]))
            # the leading extent is never read; dividing by at least 1 keeps it defined
            lead = arith.divui(extent, arith.maxsi(strides[0], arith.constant(index, 1)))
            rank = len(sizes) + 1
            view_type = ir.MemRefType.get(
                [dynamic] * rank,
                mtype.element_type,
                layout=ir.StridedLayoutAttr.get(0, [dynamic] * (rank - 1) + [1]),
                memory_space=mtype.memory_space,
            )
            view = memref.ReinterpretCastOp(
                view_type,
                plan.memref,
                [],
                [lead, *sizes],
                strides,
                [0],
                [dynamic] * rank,
                [dynamic] * (rank - 1) + [1],
            ).result
        self.views[key] = view
        return view

    def _note_dead(self, values: Iterable[ir.Value]) -> None:
        for v in values:
            if isinstance(v, ir.OpResult):
                op = v.owner.operation
                if (op.name.startswith("arith.") or op.name == "affine.apply") and not any(
                    op == seen for seen in self.maybe_dead
                ):
                    self.maybe_dead.append(op)

    def erase_dead(self) -> None:
        """Erase the index arithmetic only the replaced subscripts used."""
        changed = True
        while changed:
            changed = False
            for op in list(self.maybe_dead):
                if all(next(iter(r.uses), None) is None for r in op.results):
                    self.maybe_dead.remove(op)
                    operands = list(op.operands)
                    op.erase()
                    self._note_dead(operands)
                    changed = True


def _functions(op: ir.Operation) -> list[ir.Operation]:
    if op.name == "func.func":
        return [op]
    return [
        f.operation
        for region in op.regions
        for block in region.blocks
        for f in block.operations
        if f.operation.name == "func.func"
    ]


def _accesses(func: ir.Operation) -> list[ir.Operation]:
    """The `memref.load`/`memref.store`s of `func`, in program order."""
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in _ACCESSES:
            found.append(op)
        return ir.WalkResult.ADVANCE

    func.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def delinearize_accesses(func_op: ir.Operation | ir.OpView | ir.Module) -> int:
    """Delinearize the flat accesses of `func_op` (a function, or a module of them) in place
    (see the module docstring); returns how many accesses became affine."""
    done = 0
    for func in _functions(func_op.operation):
        if not func.regions[0].blocks:
            continue
        with func.context:
            analyser = _Analyser(func)
            plans: list[_Plan] = []
            for op in _accesses(func):
                outcome = analyser.plan(op)
                if isinstance(outcome, _Plan):
                    plans.append(outcome)
                elif isinstance(outcome, str):
                    op.attributes[NOT_AFFINE_ATTR] = ir.StringAttr.get(outcome)
            rewriter = _Rewriter(func)
            for plan in plans:
                rewriter.rewrite(plan)
            rewriter.erase_dead()
            done += len(plans)
    return done


@dataclass(frozen=True)
class RaiseDelinearize:
    """Flat accesses `a[q * m + r]` with a symbolic `m` → affine accesses `[q, r]` on a view of
    the same memory, where `0 <= r < m` is proven (see the module docstring). No options."""

    name: ClassVar[str] = "raise-delinearize"

    def __call__(self, op: ir.Operation, pass_: Any) -> None:
        try:
            delinearize_accesses(op)
        except Exception as exc:  # a bug here must fail the pass with a message, not the process
            op.location.emit_error(f"{self.name}: internal error: {type(exc).__name__}: {exc}")
            pass_.signal_pass_failure()


__all__ = ["RaiseDelinearize", "delinearize_accesses"]
