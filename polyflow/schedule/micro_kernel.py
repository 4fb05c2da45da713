"""schedule-micro-kernels: a loop nest that accumulates into one array element per iteration of
its output loops over its reduction loops (`C[i][j] += A[i][k] * B[k][j]`, a convolution
`out[n][k][h][w] += in[n][c][h + kh][w + kw] * wt[k][c][kh][kw]`, and every such nest) →
register-tiled vector code: MR rows × NR vectors of the element are kept in registers across
all the reduction loops.

Why: after tiling, LLVM vectorizes the innermost loop of gemm but loads and stores C in every
iteration of k and keeps one accumulator; the FMA units then idle on the store-to-load chain
(TC matmul 1024³: 4.2 GFLOP/s on 2 threads, 36x slower than NumPy's OpenBLAS). A BLIS-style
micro-kernel keeps MR*NR vector accumulators live, loads each vector of B once per k for MR
rows and broadcasts each element of A once per k for NR vectors: 81 GFLOP/s, 1.6x NumPy. The
panel copy of B removes the cache-set conflicts of a power-of-two row stride (1024 floats).
A convolution gets the same kernel with u = k (output channels), v = w (output columns) and
the reduction c, kh, kw: each vector of `in` (read at w + kw, unaligned) serves MR channels,
each weight is broadcast once for NR vectors (TC conv2d N=8 C=K=64 56x56 3x3 on one Zen 4
core: 48 → 18 ms, about 100 GFLOP/s, as fast as PyTorch's oneDNN; N=32 C=K=32 32x32: 13 → 6
ms, also oneDNN's time).

What is rewritten: the nest of an innermost loop "bottom" (an `affine.for` without results,
tried from the innermost loop outwards, up to `MAX_BODY_DEPTH` of them): the loops perfectly
nested around it, step 1, up to one whose value a bound below uses (a tile loop), each an
`affine.for` without results or a one-dimensional `affine.parallel`; and the body, bottom's
ops, made of loads, stores, floating-point arithmetic, guards (`affine.if` without else,
around the same kinds of ops) and body loops (step 1, bounds computed outside the body):
loops carrying one register sum (`iter_args`, loads and arithmetic inside, maybe more such
loops: a convolution's kh and kw) or, at the body's level, loops with what a body holds
inside (X updated in place); such that
- every store writes array X at one access f (map and operands); every subscript of f uses at
  most one loop of the nest, as `i + e` (e free of them), each such loop (an output loop) is
  used in one subscript only, the last subscript uses one (v, unit stride), and no body loop
  is used: distinct iterations of the output loops store distinct elements; every load of X
  reads exactly there (not inside a register sum's loops);
- the other loops of the nest and the body loops are the reductions; there is at least one;
- any other array is only read (and may not alias X); a read that varies with v must use v
  only in its last subscript, as `v + e` (e may use any other loop: `w + kw` reads W
  consecutive elements for W consecutive w, at any kw), unless it is copied into a panel;
- u, the row loop, is the output loop (other than v) whose blocks read the least; the nest
  is then cut to the loops from the outermost of u, v and the reductions inward, and the
  output loops left (a convolution's n and h: `others`) run outside the blocks; a parallel
  loop in it must be an output loop other than v;
- guards do not test u or v.
Then each element of X is owned by one iteration of the output loops and only it reads and
writes there, and the blocks run each element's reductions in their order (the nest's
reduction loops, outermost first, around the body, whose loops keep theirs), so running
(u, v) blocks in any order, inside the other output loops in any order, computes the same
values as the source order, bit for bit up to the `contract` of a multiply-add. The
reductions are never reordered (c, then kh, then kw for a convolution): with fp_contract
"off", TC conv2d's output is bit for bit the one of the build without micro-kernels, and C
convolutions print gcc -O2's digits (tests/test_schedule_micro_kernel.py).

The nest becomes: panels, where the nest has no other output loop and one reduction loop r
(heap, per nest instance, laid out [column block][r][NR·W]; a read that varies with v and r
but not u, run by r unconditionally, any subscripts: `B[k][j]`, `W[j][k]`), then the other
output loops, then blocks of MR rows × NR vectors of W lanes, then edge blocks of fewer rows
(powers of two below MR) and, for the columns left, with `masked_tails` (AVX, AVX-512: masked
loads and stores are native there) one block of whole vectors and a vector of the fewest lanes
that hold the rest, masked (TC conv2d 1x128x28x28 with AVX-512: 16 + 16 masked to 12 columns,
1.53 → 1.18 ms on 2 cores), or without it single vectors of W, W/2, ... lanes down to 128 bits,
then scalar columns: each block loads its accumulators, runs the reductions with them as
loop-carried values (a body loop with its own, a register sum's per element), and stores
them. A guard becomes an `scf.if` yielding them; the one guard that tests the nest's one
reduction loop r (the `+=!` initialization fused into the first r) instead cuts the r loop
into the parts before, at and after the iterations where it can hold. The nest's parallel
loop stays parallel (an `scf.parallel`): u's full blocks, or the other output loop it is,
or, if it is u and there are others, the outermost of those.

Row vectors: where X is indexed by v alone (`sum[p] += A[r][q][s] * C4[s][p]`, doitgen; a
column sum `mean[j] += data[i][j]`), there is no u: each block is one row of up to MR·NR
vectors (no more than v's longest run needs), its sums kept in registers across the
reductions. Only where every reduction is a tile's (at most `ROWLESS_MAX_DEPTH` iterations,
whose reads stay in the cache; an untiled matrix-vector product would walk down B's columns),
with no panels (no other row would share one) and no loops in the body (LARGE, 1 thread:
doitgen 0.098 -> 0.066 s, gcc 0.086; correlation 0.26 -> 0.12 s; covariance 0.26 -> 0.12 s).

Transposed blocks (`transposed`): v may instead be a loop of another subscript of X than the
last (a convolution's output channels k, with u its columns w and the image rows h among the
others). Every read that varies with v is then either contiguous along it and free of u (a
bias `b[k]`: read as vectors) or becomes a panel: it may not vary with u or the others and
must run in every iteration of the reductions; panels are laid out [column block][the
reductions' iteration, flattened][NR·W], packed once before the other output loops (in
parallel where the nest has a parallel loop), the last block padded with zeros. Each block
gathers its accumulators from X (lanes a stride apart: `vector.gather` with constant offsets,
or offsets from the array's shape), runs the reductions as above with every read that varies
with u broadcast per row, and scatters them back. Each block of columns is outermost, around
the other output loops and the rows, so that its part of the panels stays in cache; the
columns left after the full blocks run in one block of ceil(n / W) vectors, the last masked;
the rows, where u's extent is known, in the fewest blocks of MR to MR + 2 rows that fit the
registers, as even as possible. Why: a convolution with 28 output columns fills 28 of the 32
lanes of two AVX-512 vectors along w, all of them along 128 channels (TC conv2d 1x128x28x28
on 2 cores: 1.18 → 1.08 ms, PyTorch 1.11), and a strided convolution, whose input is no
vector along w, gets a micro-kernel at all. "auto" takes the transposed block where
`prefer_transposed` says it pays.

Options: `vector_bits` (the register width, 256 for AVX2), `rows` (MR) and `vectors` (NR),
`masked_tails` (the scheduler sets it for registers of 256 bits or more), `transposed`
("auto", "true", "false"; `Options.micro_kernel_transposed`);
`contract` marks the new multiplies and adds `contract` so the backend fuses them (the
scheduler passes `Options.micro_kernel_rows` and `_vectors`; tiling.py sizes the tiles of
contractions and convolutions by `Options.contraction_tile_*`). Each nest rewritten gets a
`micro-kernel` remark whose data says its shape and whether it is a convolution (a vector
read slides with a reduction loop).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import pairwise
from typing import Any, ClassVar

from mlir import ir
from mlir.dialects import arith, scf, vector

from polyflow.ir.affine import affine_if_condition, positions_of, trip_bound, uses_operand
from polyflow.ir.aliasing import may_alias
from polyflow.ir.ops import block_ops
from polyflow.ir.remarks import attach_remarks, remark_at
from polyflow.report import Remark

_ELEMENTWISE = frozenset(
    {
        "arith.addf",
        "arith.subf",
        "arith.mulf",
        "arith.divf",
        "arith.negf",
        "arith.maximumf",
        "arith.minimumf",
        "arith.maxnumf",
        "arith.minnumf",
        "math.absf",
        "math.sqrt",
        "math.fma",
        # ReLU written as a comparison and a choice (`y > 0 ? y : 0`)
        "arith.cmpf",
        "arith.select",
    }
)
_CONTRACTING = frozenset({"arith.addf", "arith.subf", "arith.mulf"})


def _pair_map() -> ir.AffineMap:
    return ir.AffineMap.get(2, 0, [ir.AffineDimExpr.get(0), ir.AffineDimExpr.get(1)])


@dataclass
class Contraction:
    """A nest `match_contraction` accepted (see the module docstring): its loops by role, the
    target array X and the canonical access to it, and the element type."""

    outer: ir.Operation  # the outermost loop of the nest: the rewrite replaces it
    loops: list[ir.Operation]  # the nest's perfectly nested loops, outermost first
    # The row loop (MR rows per block); None for a row vector (`rowless`): X indexed by v only.
    u: ir.Operation | None
    v: ir.Operation  # the vector loop (NR vectors of W lanes per block)
    # The other loops that index X, in nest order: each (u, v) block runs inside them.
    others: list[ir.Operation]
    # The nest's loops that do not index X (X updated in place across them), in nest order.
    reductions: list[ir.Operation]
    # The loops inside the body, outermost first: each carries a register sum (`iter_args`) or
    # updates X in place (a convolution's kh and kw where the sum is not a register's).
    body_loops: list[ir.Operation]
    target: ir.Value
    access_map: ir.AffineMap
    access_operands: list[ir.Value]
    element: ir.Type
    body: list[ir.Operation] = field(default_factory=list)  # innermost loop's ops, no terminator
    # Loads that vary with v and the one reduction loop but not u (B[k][j], or W[j][k]): each
    # full vector block reads them from a panel, a copy laid out [column block][r][lanes].
    panels: list[ir.Operation] = field(default_factory=list)
    parallel: ir.Operation | None = None  # the nest's `affine.parallel` (u or another X loop)
    # Whether some vector read slides with a reduction loop (`in[c][h + kh][w + kw]`).
    convolution: bool = False
    # v indexes X in a subscript other than the last (`transposed` blocks): X's elements of
    # one vector lie a stride apart (gathered and scattered once per block), and every read
    # that varies with v comes from a panel.
    transposed: bool = False

    @property
    def r(self) -> ir.Operation | None:
        """The one reduction loop (of the nest or the body), when there is exactly one."""
        loops = [*self.reductions, *self.body_loops]
        return loops[0] if len(loops) == 1 else None


def _bits(element: ir.Type) -> int:
    """The width of an f32 or f64 element."""
    return 32 if isinstance(element, ir.F32Type) else 64


def _iv(loop: ir.Operation) -> ir.Value:
    return loop.regions[0].blocks[0].arguments[0]


def _map_attr(op: ir.Operation) -> ir.AffineMap:
    return ir.AffineMapAttr(op.attributes["map"]).value


def _access(op: ir.Operation) -> tuple[ir.Value, ir.AffineMap, list[ir.Value]]:
    """(memref, map, map operands) of an affine.load or affine.store."""
    if op.name == "affine.load":
        return op.operands[0], _map_attr(op), list(op.operands[1:])
    return op.operands[1], _map_attr(op), list(op.operands[2:])


def _is_unit_plus_rest(
    expr: ir.AffineExpr, operands: Sequence[ir.Value], n_dims: int, value: ir.Value
) -> bool:
    """Whether `expr` is `value + e` with e free of `value`."""
    bound = _bound_on(expr, operands, n_dims, value)
    return bound is not None and bound[0] == 1


def _only_child(loop: ir.Operation) -> ir.Operation | None:
    """The op `loop`'s body holds besides its terminator, if it holds just one."""
    ops = block_ops(loop.regions[0].blocks[0])
    return ops[0] if len(ops) == 2 else None


def _step_one(loop: ir.Operation) -> bool:
    if loop.name == "affine.parallel":
        return [ir.IntegerAttr(s).value for s in ir.ArrayAttr(loop.attributes["steps"])] == [1]
    return ir.IntegerAttr(loop.attributes["step"]).value == 1


def _simple_parallel(loop: ir.Operation) -> bool:
    """A one-dimensional `affine.parallel` without reductions, one map result per bound."""
    if len(loop.regions[0].blocks[0].arguments) != 1 or len(loop.results) > 0:
        return False
    lower = ir.AffineMapAttr(loop.attributes["lowerBoundsMap"]).value
    upper = ir.AffineMapAttr(loop.attributes["upperBoundsMap"]).value
    return len(lower.results) == 1 and len(upper.results) == 1


def _nest_loop(op: ir.Operation) -> bool:
    """A loop that may be one of a nest's: an `affine.for` without results or a simple
    `affine.parallel`, step 1."""
    if op.name == "affine.for":
        return len(op.results) == 0 and _step_one(op)
    return op.name == "affine.parallel" and _simple_parallel(op) and _step_one(op)


def _bound_maps(
    loop: ir.Operation,
) -> tuple[ir.AffineMap, list[ir.Value], ir.AffineMap, list[ir.Value]]:
    """(lower map, its operands, upper map, its operands) of an affine.for or a simple
    affine.parallel; an affine.for's lower bound is the max of its results, the upper the min."""
    suffix = "sMap" if loop.name == "affine.parallel" else "Map"
    lower = ir.AffineMapAttr(loop.attributes[f"lowerBound{suffix}"]).value
    upper = ir.AffineMapAttr(loop.attributes[f"upperBound{suffix}"]).value
    operands = list(loop.operands)  # lower bound's, upper bound's, then iter_args inits
    n_lower = lower.n_inputs
    return lower, operands[:n_lower], upper, operands[n_lower : n_lower + upper.n_inputs]


def _bound_operands(loop: ir.Operation) -> list[ir.Value]:
    _, lower_operands, _, upper_operands = _bound_maps(loop)
    return [*lower_operands, *upper_operands]


def _defined_in(value: ir.Value, op: ir.Operation) -> bool:
    """Whether `value` is defined inside `op` (by an op in it, or as one of its block's
    arguments): the rewrite computes all bounds before the nest."""
    owner = value.owner
    current: Any = owner.owner if isinstance(owner, ir.Block) else owner
    while current is not None:
        current = current.operation if isinstance(current, ir.OpView) else current
        if current == op:
            return True
        current = current.parent
    return False


@dataclass
class _Scan:
    """The ops of a nest's body by kind (`_collect`)."""

    stores: list[ir.Operation] = field(default_factory=list)
    loads: list[ir.Operation] = field(default_factory=list)
    reduction_loads: list[ir.Operation] = field(default_factory=list)  # in register sums' loops
    guards: list[ir.Operation] = field(default_factory=list)
    body_loops: list[ir.Operation] = field(default_factory=list)


def _collect(ops: Sequence[ir.Operation], scan: _Scan, inside: str) -> str | None:
    """Sort `ops` (recursively through guards and register loops) into `scan`; why not, if an op
    is of a kind the rewrite does not handle. `inside`: "body" (the innermost loop's body),
    "guard" or "reduction" (a register loop's body: loads and arithmetic only)."""
    for op in ops:
        if op.name in ("affine.store", "affine.if") and inside == "reduction":
            return "the reduction loop stores or tests"
        if op.name == "affine.store":
            scan.stores.append(op)
        elif op.name == "affine.load":
            scan.loads.append(op)
            if inside == "reduction":
                scan.reduction_loads.append(op)
        elif op.name == "affine.if":
            if len(op.regions[1].blocks) > 0 or len(op.results) > 0:
                return "a guard has an else branch or results"
            try:
                affine_if_condition(op)
            except Exception:
                return "a guard's condition cannot be read back"
            scan.guards.append(op)
            problem = _collect(block_ops(op.regions[0].blocks[0])[:-1], scan, "guard")
            if problem:
                return problem
        elif op.name == "affine.for":
            # A register sum (`s = X[u][v]; for r: s += ...; X[u][v] = s`), maybe over several
            # nested loops (a convolution's kh and kw): one value carried, step 1, loads and
            # arithmetic inside; or, in the body only, a loop that updates X in place, with
            # what a body may hold inside.
            if inside == "guard":
                return "a loop inside a guard"
            if not _step_one(op):
                return "a loop in the body steps by more than 1"
            if len(op.results) == 1:
                within = "reduction"
            elif len(op.results) == 0 and inside == "body":
                within = "body"
            else:
                return "a loop in the body carries other than one value"
            scan.body_loops.append(op)
            problem = _collect(block_ops(op.regions[0].blocks[0])[:-1], scan, within)
            if problem:
                return problem
        elif op.name == "arith.constant":
            if not isinstance(op.results[0].type, ir.FloatType):
                return "an integer constant in the body"
        elif op.name not in _ELEMENTWISE:
            return f"'{op.name}' in the body"
    return None


def match_contraction(
    inner: ir.Operation, fn: ir.Operation, *, transposed: bool = False
) -> Contraction | str:
    """The contraction around `inner` (an innermost `affine.for`), or why not: the first that
    `_match_at` finds with `inner` or one of the `affine.for` loops around it (innermost first,
    those without results, at most `MAX_BODY_DEPTH`) as the innermost loop of the nest, the
    loops below it being the body's. See the module docstring for what is matched; with
    `transposed`, v is a loop of another subscript than X's last (its reads from panels)."""
    reason: str | None = None
    tries = MAX_BODY_DEPTH
    bottom: ir.Operation | None = inner
    while bottom is not None and bottom.name == "affine.for" and tries > 0:
        if len(bottom.results) == 0:
            found = _match_at(bottom, transposed)
            if not isinstance(found, str):
                return found
            reason = reason or found
            tries -= 1
        bottom = bottom.parent
    return reason or "not in a loop nest"


# The longest reduction a row vector's block runs (module docstring): a tile's, whose reads
# stay in the cache; an untiled matrix-vector product (bicg's `s[j] += r[i] * A[i][j]`) would
# walk down A's columns instead of along its rows.
ROWLESS_MAX_DEPTH = 256

# How many loops without results around an innermost loop are tried as the nest's innermost
# (each try reads the body below it): a convolution whose kh and kw update X in place needs 3.
MAX_BODY_DEPTH = 4


def _match_at(bottom: ir.Operation, transposed: bool = False) -> Contraction | str:
    """The contraction whose nest's innermost loop is `bottom`, or why not."""
    if not _nest_loop(bottom):
        return "a loop has a step other than 1"
    body = block_ops(bottom.regions[0].blocks[0])[:-1]
    scan = _Scan()
    problem = _collect(body, scan, "body")
    if problem:
        return problem
    # The nest: perfectly nested loops of step 1 around the body, up to one whose value a
    # bound below uses (a tile loop, or a triangle's outer loop).
    loops = [bottom]
    parent = bottom.parent
    while parent is not None and _nest_loop(parent):
        child = _only_child(parent)
        if child is None or child != loops[0]:
            break
        iv = _iv(parent)
        if any(iv in _bound_operands(loop) for loop in [*loops, *scan.body_loops]):
            break
        loops.insert(0, parent)
        parent = parent.parent
    for loop in scan.body_loops:
        if any(_defined_in(o, bottom) for o in _bound_operands(loop)):
            return "a reduction loop's bounds are computed in the nest"
    if not scan.stores:
        return "nothing is stored"
    target, access_map, access_operands = _access(scan.stores[0])
    for store in scan.stores[1:]:
        if _access(store) != (target, access_map, access_operands):
            return "stores to more than one element"
    element = ir.MemRefType(target.type).element_type
    if not (isinstance(element, ir.F32Type) or isinstance(element, ir.F64Type)):
        return "the stored element is not f32 or f64"
    if not _identity_layout(target):
        return "the stored array has a strided layout"
    if any(loop.results[0].type != element for loop in scan.body_loops if len(loop.results)):
        return "a reduction loop carries another type"
    if any(o != _iv(bottom) and _defined_in(o, bottom) for o in access_operands):
        return "the stored element moves with a loop of the body"
    ivs = [_iv(loop) for loop in loops]
    outputs = _output_loops(access_map, access_operands, ivs)
    if isinstance(outputs, str):
        return outputs
    reductions = [loop for k, loop in enumerate(loops) if k not in outputs]
    if not reductions and not scan.body_loops:
        return "nothing is reduced"
    for load in scan.loads:
        memref, load_map, operands = _access(load)
        if memref == target:
            if (load_map, operands) != (access_map, access_operands):
                return "the stored array is read at another element"
            if load in scan.reduction_loads:
                return "the reduction loop reads the stored array"
            continue
        if may_alias(memref, target):
            return "a read array may alias the stored one"
        if ir.MemRefType(memref.type).element_type != element:
            return "a read has another element type"
    # Each other loop indexing X may be the row loop u: the one whose blocks load the least.
    # Transposed, v is one of the loops of the other subscripts and u any other loop of X.
    pairs: list[tuple[int | None, int]] = (
        [(u, v) for v in outputs[:-1] for u in outputs if u != v]
        if transposed
        else [(u, outputs[-1]) for u in outputs[:-1]] or [(None, outputs[-1])]
    )
    best: tuple[int, Contraction] | str = "no loop indexes the stored element's rows"
    for u, v in pairs:
        candidate = _with_rows(
            loops,
            None if u is None else loops[u],
            loops[v],
            reductions,
            scan,
            body,
            (target, access_map, access_operands),
            transposed=transposed,
        )
        if isinstance(candidate, str):
            best = candidate if isinstance(best, str) else best
            continue
        cost = _block_loads(candidate, scan)
        if isinstance(best, str) or cost <= best[0]:
            best = (cost, candidate)  # ties: the innermost u, which moves least
    return best if isinstance(best, str) else best[1]


def _output_loops(
    access_map: ir.AffineMap, operands: Sequence[ir.Value], ivs: Sequence[ir.Value]
) -> list[int] | str:
    """The positions among the nest's loops (`ivs`) of those that index the stored element,
    the one of the last subscript (v) last, or why the access is not one the rewrite takes:
    every subscript must use at most one of them, as `iv + e` (e free of the nest's loops),
    and each of them must occur in one subscript only, so that distinct iterations of them
    store distinct elements; the last subscript must use one (v alone: a row vector)."""
    n_dims = access_map.n_dims
    results = list(access_map.results)
    found: list[int] = []
    for pos, expr in enumerate(results):
        used = [k for k, iv in enumerate(ivs) if uses_operand(expr, operands, n_dims, iv)]
        if len(used) > 1:
            return "a subscript of the stored element uses two loops"
        if not used:
            if pos == len(results) - 1:
                return "the stored element's last subscript uses no loop of the nest"
            continue
        if used[0] in found or not _is_unit_plus_rest(expr, operands, n_dims, ivs[used[0]]):
            return "a loop indexes the stored element other than once with coefficient 1"
        found.append(used[0])
    return [*sorted(found[:-1]), found[-1]]


def _with_rows(
    loops: list[ir.Operation],
    u: ir.Operation | None,
    v: ir.Operation,
    reductions: list[ir.Operation],
    scan: _Scan,
    body: list[ir.Operation],
    access: tuple[ir.Value, ir.AffineMap, list[ir.Value]],
    *,
    transposed: bool = False,
) -> Contraction | str:
    """The contraction with `u` as its row loop, or why not: the nest cut to the loops from the
    outermost of u, v and the reductions in, and each read of another array checked. Without
    u (X a row vector, `sum[p] += A[s] * B[s][p]`), each block is one row of NR·MR vectors, and
    only where the reductions are short (a tile's: `ROWLESS_MAX_DEPTH`), its reads contiguous
    along v (no panel: no other row would share it), and no loop in the body."""
    target, access_map, access_operands = access
    iv_v = _iv(v)
    blocked_ivs = [iv_v] if u is None else [_iv(u), iv_v]
    if u is None:
        if transposed or scan.body_loops:
            return "the stored element is not indexed by two loops (one in the last subscript)"
        depths = [trip_bound(loop) for loop in reductions]
        if any(d is None or d > ROWLESS_MAX_DEPTH for d in depths):
            return "a row vector's reduction is not a tile's (it would walk down columns)"
    top = min(loops.index(loop) for loop in [*([] if u is None else [u]), v, *reductions])
    nest = loops[top:]
    n_dims = access_map.n_dims
    indexing = [
        loop
        for loop in nest
        if any(uses_operand(e, access_operands, n_dims, _iv(loop)) for e in access_map.results)
    ]
    blocked = [v] if u is None else [u, v]
    others = [loop for loop in indexing if loop not in blocked]
    parallel = [loop for loop in nest if loop.name == "affine.parallel"]
    if len(parallel) > 1 or (parallel and parallel[0] not in indexing):
        return "the parallel loop is not a loop of the stored element"
    if v in parallel and not transposed:
        return "the parallel loop is not a loop of rows"
    for guard in scan.guards:
        if any(o in blocked_ivs for o in guard.operands):
            return "a guard tests a vectorized loop"
    contraction = Contraction(
        outer=nest[0],
        loops=nest,
        u=u,
        v=v,
        others=others,
        reductions=reductions,
        body_loops=scan.body_loops,
        target=target,
        access_map=access_map,
        access_operands=access_operands,
        element=ir.MemRefType(target.type).element_type,
        body=body,
        parallel=parallel[0] if parallel else None,
        transposed=transposed,
    )
    if transposed:
        return _with_transposed_panels(contraction, scan)
    r = contraction.r
    # Panels only where the nest is the plain three loops (one reduction, no other loop of X):
    # a panel is packed once per nest instance. Only loads the r loop runs unconditionally may
    # be read ahead into one.
    unconditional: list[ir.Operation] = []
    if r is not None and not others and u is not None:
        r_body = body if r in reductions else block_ops(r.regions[0].blocks[0])
        unconditional = [op for op in r_body if op.name == "affine.load"]
    slides = {_iv(loop) for loop in [*reductions, *scan.body_loops]}
    for load in scan.loads:
        memref, load_map, operands = _access(load)
        if memref == target or iv_v not in operands:
            continue
        if u is not None and _iv(u) not in operands and load in unconditional:
            contraction.panels.append(load)  # copied into a panel: any subscripts will do
        elif not _contiguous(load, iv_v):
            return "a read is not contiguous along the vector loop"
        else:
            last = load_map.results[-1]
            if any(uses_operand(last, operands, load_map.n_dims, iv) for iv in slides):
                contraction.convolution = True
    return contraction


def _with_transposed_panels(nest: Contraction, scan: _Scan) -> Contraction | str:
    """`nest` (transposed) with its reads that vary with v sorted, or why not: one that is
    contiguous along v and does not vary with u is read as vectors (a bias `b[k]`); any other
    becomes a panel, so it may not vary with u or the other loops of X (the panels are packed
    once, before them) and must run in every iteration of the reductions (not guarded)."""
    assert nest.u is not None  # transposed blocks have rows
    iv_u, iv_v = _iv(nest.u), _iv(nest.v)
    fixed = {iv_u, *(_iv(loop) for loop in nest.others)}
    slides = {_iv(loop) for loop in [*nest.reductions, *nest.body_loops]}
    # A panel row is one iteration of all the reductions: the body's loops must nest in one
    # another, and the panel reads lie in the innermost.
    chain = [nest.loops[-1], *nest.body_loops]
    if any(inner.parent.operation != outer.operation for outer, inner in pairwise(chain)):
        return "the reduction loops of the body do not nest in one another"
    innermost = chain[-1].operation
    along = 0
    for load in scan.loads:
        memref, load_map, operands = _access(load)
        if memref == nest.target:
            continue
        if iv_v in operands:
            along += 1
            if iv_u not in operands and _contiguous(load, iv_v):
                continue
            if any(o in fixed for o in operands):
                return "a read along the vector loop varies with another loop of the output"
            if load.parent.operation != innermost:
                return "a read along the vector loop is guarded or outside a reduction loop"
            nest.panels.append(load)
        elif iv_u in operands:
            # a row's broadcast read that slides with a reduction (`in[c][h + kh][w + kw]`)
            if any(
                uses_operand(e, operands, load_map.n_dims, iv_u)
                and any(uses_operand(e, operands, load_map.n_dims, iv) for iv in slides)
                for e in load_map.results
            ):
                nest.convolution = True
    if not along:
        return "no read varies with the vector loop"
    return nest


def _strided_position(load: ir.Operation, iv: ir.Value) -> int | None:
    """The subscript of `load` that `iv` indexes as `iv + e` (the only one using it), in an
    array laid out row-major; None if there is no such one."""
    memref, amap, operands = _access(load)
    if not _identity_layout(memref):
        return None
    using = [
        pos for pos, e in enumerate(amap.results) if uses_operand(e, operands, amap.n_dims, iv)
    ]
    if len(using) != 1:
        return None
    if not _is_unit_plus_rest(amap.results[using[0]], operands, amap.n_dims, iv):
        return None
    return using[0]


def _block_loads(nest: Contraction, scan: _Scan) -> int:
    """The loads (and broadcasts) one step of the reductions costs a block of 6 rows x 2
    vectors: to choose the row loop, the one that shares most reads among the block."""
    rows, vectors = 6, 2
    iv_v = _iv(nest.v)
    cost = 0
    for load in scan.loads:
        memref, _, operands = _access(load)
        if memref == nest.target:
            continue
        by_row = nest.u is not None and _iv(nest.u) in operands
        by_col = iv_v in operands
        cost += (rows if by_row else 1) * (vectors if by_col else 1)
    return cost


def _contiguous(load: ir.Operation, iv: ir.Value) -> bool:
    """Whether `load` reads consecutive elements for consecutive `iv`: `iv` only in its last
    subscript, with coefficient 1, of an array laid out row-major. The rest of that subscript
    may use any other value (a reduction loop's too: `w + kw`), so W lanes from `iv` read the
    W elements that the W iterations from `iv` read."""
    memref, amap, operands = _access(load)
    if not _identity_layout(memref):
        return False
    results = list(amap.results)
    if any(uses_operand(e, operands, amap.n_dims, iv) for e in results[:-1]):
        return False
    return _is_unit_plus_rest(results[-1], operands, amap.n_dims, iv)


def _bound_on(
    expr: ir.AffineExpr, operands: Sequence[ir.Value], n_dims: int, iv: ir.Value
) -> tuple[int, ir.AffineExpr] | None:
    """`expr` as sign * iv + rest with sign in {-1, 0, 1} and rest free of iv, or None."""
    if not uses_operand(expr, operands, n_dims, iv):
        return 0, expr
    n_symbols = len(operands) - n_dims
    for probe in positions_of(iv, operands, n_dims):
        for sign in (1, -1):
            rest = ir.AffineExpr.simplify_affine_expr(expr - probe * sign, n_dims, n_symbols)
            if not uses_operand(rest, operands, n_dims, iv):
                return sign, rest
    return None


def _identity_layout(memref: ir.Value) -> bool:
    layout = ir.MemRefType(memref.type).layout
    if not isinstance(layout, ir.AffineMapAttr):
        return False
    amap = layout.value
    return amap == ir.AffineMap.get_identity(amap.n_dims)


# ----- emission


@dataclass
class _Block:
    """One register block being emitted: its row and column start values, the lanes of each
    column (1: scalars), and which columns are masked."""

    rows: list[ir.Value]  # u for each row
    cols: list[ir.Value]  # v of each column's first lane
    widths: list[int]  # lanes of each column
    full: bool = False  # MR-or-fewer rows x NR vectors of W lanes: reads the panels
    # Per column ending inside its vector: the lanes that exist (a `vector.create_mask`).
    masks: dict[int, ir.Value] = field(default_factory=dict)

    def lanes(self, c: int | None) -> int:
        """Lanes of column c (1 for None: a value that does not vary by column)."""
        return 1 if c is None else self.widths[c]

    def mask(self, c: int | None) -> ir.Value | None:
        """The mask of column c's reads and writes along v (None: all lanes)."""
        return None if c is None else self.masks.get(c)


class _Emitter:
    """Builds the replacement of one contraction (see the module docstring)."""

    def __init__(
        self,
        nest: Contraction,
        *,
        rows: int,
        vectors: int,
        width: int,
        contract: bool,
        masked_tails: bool = False,
    ) -> None:
        self.nest = nest
        self.mr, self.nr, self.width = rows, vectors, width
        if nest.u is None:
            self.mr, self.nr = 1, rowless_vectors(nest, rows, vectors, width)
        self.registers = 32 if width * _bits(nest.element) >= 512 else 16  # vector registers
        self.contract = contract
        self.masked_tails = masked_tails
        self.window: tuple[ir.Operation, ir.Value, ir.Value] | None = None
        self.loc = nest.outer.location
        self.index = ir.IndexType.get()
        # The new value of each loop of the nest outside the blocks (`others`), as emitted.
        self.ivs: dict[ir.Value, ir.Value] = {}
        self.bounds: dict[ir.Operation, tuple[ir.Value, ir.Value]] = {}
        self.panels: dict[Any, ir.Value] = {}
        self.offsets: ir.Value | None = None  # transposed: `_lane_offsets`
        self.parallel_loop: ir.Operation | None = None  # the loop emitted as `scf.parallel`
        # Every induction variable of the nest and its body: each must be mapped when used.
        self.nest_ivs = {_iv(loop) for loop in [*nest.loops, *nest.body_loops]}

    # -- small builders
    def const(self, value: int) -> ir.Value:
        return arith.ConstantOp(self.index, value, loc=self.loc).result

    def apply(
        self, expr: ir.AffineExpr, n_dims: int, n_syms: int, operands: Sequence[ir.Value]
    ) -> ir.Value:
        return self.minmax("affine.apply", ir.AffineMap.get(n_dims, n_syms, [expr]), operands)

    def bound(self, loop: ir.Operation, which: str) -> ir.Value:
        """The lower (max of its map) or upper (min) bound of `loop`, as one value."""
        lower, lower_operands, upper, upper_operands = _bound_maps(loop)
        amap, operands = (lower, lower_operands) if which == "lower" else (upper, upper_operands)
        if len(amap.results) == 1:
            return self.apply(amap.results[0], amap.n_dims, amap.n_symbols, operands)
        return self.minmax("affine.max" if which == "lower" else "affine.min", amap, operands)

    def minmax(self, kind: str, amap: ir.AffineMap, operands: Sequence[ir.Value]) -> ir.Value:
        """The largest (`affine.max`) or smallest (`affine.min`) result of `amap`, or its one
        result (`affine.apply`)."""
        return ir.Operation.create(
            kind,
            results=[self.index],
            operands=list(operands),
            attributes={"map": ir.AffineMapAttr.get(amap)},
            loc=self.loc,
        ).results[0]

    def full_end(self, lower: ir.Value, upper: ir.Value, step: int) -> ir.Value:
        """lower + the largest multiple of `step` that fits below `upper` (lower if none)."""
        d0, d1 = ir.AffineDimExpr.get(0), ir.AffineDimExpr.get(1)
        fitted = d0 + ir.AffineFloorDivExpr.get(d1 - d0, ir.AffineConstantExpr.get(step)) * step
        return self.minmax("affine.max", ir.AffineMap.get(2, 0, [d0, fitted]), [lower, upper])

    def loop(
        self,
        lower: ir.Value,
        upper: ir.Value,
        step: int,
        body: Callable[[ir.Value], None],
        *,
        parallel: bool = False,
    ) -> None:
        if parallel:  # the nest's OpenMP loop stays one
            op = scf.ParallelOp([], [lower], [upper], [self.const(step)], [], loc=self.loc)
            block = op.regions[0].blocks.append(self.index)
            with ir.InsertionPoint(block):
                body(block.arguments[0])
                scf.ReduceOp([], 0, loc=self.loc)
            return
        for_op = scf.ForOp(lower, upper, self.const(step), loc=self.loc)
        with ir.InsertionPoint(for_op.body):
            body(for_op.induction_variable)
            scf.YieldOp([], loc=self.loc)

    # -- the whole nest
    def emit(self) -> None:
        nest = self.nest
        with ir.InsertionPoint(nest.outer), self.loc:
            for loop in [*nest.loops, *nest.body_loops]:
                self.bounds[loop] = (self.bound(loop, "lower"), self.bound(loop, "upper"))
            # Nothing runs (and nothing may be read) unless every loop of the nest runs.
            nonempty = self._all(
                [
                    arith.CmpIOp(arith.CmpIPredicate.slt, lo, hi, loc=self.loc).result
                    for lo, hi in (self.bounds[loop] for loop in nest.loops)
                ]
            )
            guard = scf.IfOp(nonempty, loc=self.loc)
            with ir.InsertionPoint(guard.then_block):
                self._emit_blocks()
                scf.YieldOp([], loc=self.loc)
        nest.outer.erase()

    def _emit_blocks(self) -> None:
        nest = self.nest
        lv, uv = self.bounds[nest.v]
        self.lv = lv
        self.window = self._guard_window()
        if nest.transposed:
            if nest.panels:
                self.panels = self._pack_panels(lv, uv, padded=True)
            self.offsets = self._lane_offsets()
        elif nest.panels and self.width > 1:
            self.panels = self._pack_panels(lv, self.full_end(lv, uv, self.nr * self.width))
        # The other loops of X run outside the blocks (each (u, v) block owns its elements
        # for each of their values, so any order of them is the same). The nest's parallel loop
        # stays parallel; if it is u (or a transposed block's v) and there are others, the
        # outermost of those is instead: a convolution's image rows share out evenly, its 64
        # output channels in 10 blocks of 6 and a block of 4 do not.
        self.parallel_loop = nest.parallel
        blocked = [nest.v] if nest.u is None else [nest.u, nest.v]
        if nest.parallel is not None and nest.parallel in blocked and nest.others:
            self.parallel_loop = nest.others[0]
        elif nest.parallel is not None and nest.parallel == nest.v:
            self.parallel_loop = nest.u

        Columns = Callable[[list[ir.Value]], None]  # the column blocks of one row block

        def row_block(u0: ir.Value, count: int, columns: Columns) -> None:
            columns([self._offset(u0, k) for k in range(count)])

        def all_rows(columns: Columns) -> None:
            if nest.u is None:  # a row vector: its one row
                columns([self.const(0)])
                return
            lu, uu = self.bounds[nest.u]
            rows = _static_extent(nest.u) if nest.transposed else None
            if rows:
                # Transposed, u is a short loop (an image's columns) whose extent is known:
                # the fewest blocks of MR to MR + 2 rows that fit the registers, as even as
                # possible, no block of few rows (whose sums form too few independent chains
                # to keep the FMA units busy): 14 columns in blocks of 7 rather than 6, 6 and
                # 2 (TC conv2d 8x256x14x14: 9.26 ms in blocks of 5, 5, 4; 8.88 in blocks of 7).
                fits = [
                    r
                    for r in range(self.mr, self.mr + 3)
                    if r == self.mr or r * self.nr + self.nr + 1 <= self.registers
                ]
                blocks = min(-(-rows // r) for r in fits)
                most = -(-rows // blocks)
                middle = self._offset(lu, (rows - blocks * (most - 1)) * most)
                parallel = self._is_parallel(nest.u)
                block = partial(row_block, count=most, columns=columns)
                self.loop(lu, middle, most, block, parallel=parallel)
                if most > 1:  # (an empty loop where every block has `most` rows)
                    fewer = partial(row_block, count=most - 1, columns=columns)
                    self.loop(middle, uu, most - 1, fewer, parallel=parallel)
                return
            start = lu
            for count in self._row_counts():
                end = self.full_end(start, uu, count) if count > 1 else uu
                # The parallel loop, if u, shares out the full blocks; the few rows left run
                # after them.
                parallel = count == self.mr and self._is_parallel(nest.u)
                block = partial(row_block, count=count, columns=columns)
                self.loop(start, end, count, block, parallel=parallel)
                start = end

        if nest.transposed:
            # each block of columns (output channels) outermost: its part of the panels is
            # read by every block of rows and every other loop's value while it is in cache
            # (TC conv2d 8x256x14x14: 2.4 MB of packed weights, 300 KB a block of 32 channels)
            self._transposed_columns(
                lv, uv, lambda columns: self._around(nest.others, partial(all_rows, columns))
            )
        else:
            self._around(
                nest.others, partial(all_rows, lambda rows: self._columns(rows, lv, uv))
            )
        for buffer in self.panels.values():
            ir.Operation.create("memref.dealloc", operands=[buffer], loc=self.loc)

    def _row_counts(self) -> list[int]:
        """Rows of the row blocks, most first: MR, then the powers of two below it (each runs at
        most once), so that rows that are no multiple of MR (a convolution's 64 output
        channels: 10 x 6 + 4) run in a block or two rather than one by one."""
        counts = [self.mr]
        count = 1 << (self.mr.bit_length() - 1)
        if count == self.mr:
            count //= 2
        while count >= 1:
            counts.append(count)
            count //= 2
        return counts

    def _around(self, loops: list[ir.Operation], inner: Callable[[], None]) -> None:
        """`inner` inside loops over the ranges of `loops` (nest loops outside the blocks), in
        order; `parallel_loop` among them runs in parallel."""
        if not loops:
            inner()
            return
        loop, rest = loops[0], loops[1:]
        lower, upper = self.bounds[loop]

        def body(value: ir.Value) -> None:
            self.ivs[_iv(loop)] = value
            self._around(rest, inner)
            del self.ivs[_iv(loop)]

        self.loop(lower, upper, 1, body, parallel=self._is_parallel(loop))

    def _is_parallel(self, loop: ir.Operation) -> bool:
        return self.parallel_loop is not None and self.parallel_loop == loop

    def _all(self, tests: list[ir.Value]) -> ir.Value:
        result = tests[0]
        for test in tests[1:]:
            result = arith.AndIOp(result, test, loc=self.loc).result
        return result

    def _pack_panels(
        self, lv: ir.Value, v_end: ir.Value, *, padded: bool = False
    ) -> dict[Any, ir.Value]:
        """A panel per load of `nest.panels`: its values over the vector blocks' columns from
        lv and all iterations of the reductions, laid out [column block][reduction
        iteration][NR·W] so that a block reads it in order. The blocks end at `v_end` (a
        multiple of NR·W from lv), or `padded`, at the first multiple at or after it, the
        lanes past v_end holding 0. (Untransposed, panels exist only for nests without
        `others` and with one reduction loop r; transposed, none of their reads varies with
        u or the others, so one packing serves all of them.)"""
        nest = self.nest
        span = self.nr * self.width
        d0, d1 = ir.AffineDimExpr.get(0), ir.AffineDimExpr.get(1)
        ceil = ir.AffineExpr.get_ceil_div if padded else ir.AffineExpr.get_floor_div
        blocks = self.apply(ceil(d1 - d0, ir.AffineConstantExpr.get(span)), 2, 0, [lv, v_end])
        full = self.apply(
            ir.AffineExpr.get_floor_div(d1 - d0, ir.AffineConstantExpr.get(span)),
            2,
            0,
            [lv, v_end],
        )
        # (a register loop's range is empty maybe; only the nest's loops are known to run)
        depth = self.const(1)
        for loop in self.panel_loops:
            depth = arith.MulIOp(depth, self.extent(loop), loc=self.loc).result
        panel_type = ir.MemRefType.get(
            [ir.ShapedType.get_dynamic_size()] * 2 + [span], nest.element
        )
        panels: dict[Any, ir.Value] = {}
        for load in nest.panels:
            panels[load] = ir.Operation.create(
                "memref.alloc",
                results=[panel_type],
                operands=[blocks, depth],
                attributes={
                    "operandSegmentSizes": ir.DenseI32ArrayAttr.get([2, 0]),
                    "alignment": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 64),
                },
                loc=self.loc,
            ).results[0]

        # Transposed, a read whose v is one subscript `v + e` is gathered, W lanes at once (the
        # weights of 16 output channels, 1152 elements apart), masked past v_end.
        gathered = {
            load: self._offsets_along(_access(load)[0], position)
            for load in panels
            if nest.transposed and (position := _strided_position(load, _iv(nest.v))) is not None
        }
        mask_type = ir.VectorType.get([self.width], ir.IntegerType.get_signless(1))

        def copy_block(block: ir.Value, last_block: bool) -> None:
            v0 = self.apply(d0 + d1 * span, 2, 0, [lv, block])
            last = self.apply(d0 - 1, 1, 0, [v_end])

            def copy_row(ivs: dict[ir.Value, ir.Value]) -> None:
                row = self.panel_row(ivs)
                for load, panel in panels.items():
                    memref, amap, operands = _access(load)
                    if load in gathered:
                        for c in range(self.nr):
                            v = self._offset(v0, c * self.width)
                            mapped = [v if o == _iv(nest.v) else ivs.get(o, o) for o in operands]
                            indices = [
                                self.apply(e, amap.n_dims, amap.n_symbols, mapped)
                                for e in amap.results
                            ]
                            lanes = arith.SubIOp(v_end, v, loc=self.loc).result
                            mask = vector.CreateMaskOp(mask_type, [lanes], loc=self.loc).result
                            value = self._gather(memref, indices, gathered[load], mask)
                            at = [block, row, self.const(c * self.width)]
                            self._store(value, panel, at, self.width)
                        continue
                    contiguous = not nest.transposed and _contiguous(load, _iv(nest.v))
                    for c in range(self.nr):
                        lanes = (
                            [c * self.width]
                            if contiguous
                            else [c * self.width + lane for lane in range(self.width)]
                        )
                        for first in lanes:
                            v = self._offset(v0, first)
                            # a padded block's lanes past the end read the last column, 0 kept
                            read_at = (
                                self.minmax("affine.min", _pair_map(), [v, last])
                                if last_block
                                else v
                            )
                            mapped = [
                                read_at if o == _iv(nest.v) else ivs.get(o, o) for o in operands
                            ]
                            indices = [
                                self.apply(e, amap.n_dims, amap.n_symbols, mapped)
                                for e in amap.results
                            ]
                            width = self.width if contiguous else 1
                            value = self._load(memref, indices, width)
                            if last_block:
                                inside = arith.CmpIOp(
                                    arith.CmpIPredicate.slt, v, v_end, loc=self.loc
                                ).result
                                zero = arith.ConstantOp(
                                    nest.element,
                                    ir.FloatAttr.get(nest.element, 0.0),
                                    loc=self.loc,
                                ).result
                                value = arith.SelectOp(inside, value, zero, loc=self.loc).result
                            self._store(value, panel, [block, row, self.const(first)], width)

            self._nested(self.panel_loops, {}, copy_row)

        # Transposed, the nest's parallel loop packs too (every block is a transpose).
        parallel = nest.transposed and nest.parallel is not None
        self.loop(
            self.const(0), full, 1, partial(copy_block, last_block=False), parallel=parallel
        )
        if padded:
            self.loop(full, blocks, 1, partial(copy_block, last_block=True))
        return panels

    @property
    def panel_loops(self) -> list[ir.Operation]:
        """The reduction loops a panel's rows run over, in the order of its layout."""
        return [*self.nest.reductions, *self.nest.body_loops]

    def extent(self, loop: ir.Operation) -> ir.Value:
        """The trip count of `loop` (0 if its range is empty)."""
        lower, upper = self.bounds[loop]
        d0, d1 = ir.AffineDimExpr.get(0), ir.AffineDimExpr.get(1)
        nonnegative = ir.AffineMap.get(2, 0, [d1 - d0, d1 * 0])
        return self.minmax("affine.max", nonnegative, [lower, upper])

    def panel_row(self, ivs: dict[ir.Value, ir.Value]) -> ir.Value:
        """The row of a panel that the reductions' iteration `ivs` (each reduction loop's
        induction variable → its value) reads: their iteration, flattened."""
        row: ir.Value | None = None
        d0, d1 = ir.AffineDimExpr.get(0), ir.AffineDimExpr.get(1)
        for loop in self.panel_loops:
            offset = self.apply(d0 - d1, 2, 0, [ivs[_iv(loop)], self.bounds[loop][0]])
            if row is None:
                row = offset
            else:
                scaled = arith.MulIOp(row, self.extent(loop), loc=self.loc).result
                row = arith.AddIOp(scaled, offset, loc=self.loc).result
        assert row is not None
        return row

    def _nested(
        self,
        loops: list[ir.Operation],
        ivs: dict[ir.Value, ir.Value],
        inner: Callable[[dict[ir.Value, ir.Value]], None],
    ) -> None:
        """`inner` inside loops over the ranges of `loops`, with their values in `ivs`."""
        if not loops:
            inner(ivs)
            return
        lower, upper = self.bounds[loops[0]]

        def body(value: ir.Value) -> None:
            self._nested(loops[1:], {**ivs, _iv(loops[0]): value}, inner)

        self.loop(lower, upper, 1, body)

    def _offset(self, base: ir.Value, offset: int) -> ir.Value:
        if offset == 0:
            return base
        return arith.AddIOp(base, self.const(offset), loc=self.loc).result

    def _column_shapes(self) -> list[tuple[int, int]]:
        """(vectors, lanes) of the column blocks, widest first: NR vectors of W lanes, then
        single vectors of W, W/2, ... down to 128 bits (each runs at most once), so that a
        width that is no multiple of NR·W (a convolution's 56 output columns: 32 + 16 + 8)
        leaves at most a few scalar columns. Only NR x W when a panel read is not contiguous
        along v (it could not be read as a vector from the array)."""
        shapes = [(self.nr, self.width)]
        if not self._vector_tails():
            return shapes
        return shapes + [(1, w) for w in self._narrow_widths() if self.nr > 1 or w < self.width]

    def _narrow_widths(self) -> list[int]:
        """W, W/2, ... lanes, down to 128 bits (at least 2 lanes): the vectors edge columns run in."""
        bits = _bits(self.nest.element)
        widths = [self.width]
        while widths[-1] // 2 >= 2 and (widths[-1] // 2) * bits >= 128:
            widths.append(widths[-1] // 2)
        return widths

    def _vector_tails(self) -> bool:
        """Whether the columns after the full blocks may be read as (narrower or masked)
        vectors from the arrays: not when a panel read is not contiguous along v."""
        return self.width > 1 and all(
            _contiguous(load, _iv(self.nest.v)) for load in self.nest.panels
        )

    def _columns(self, rows: list[ir.Value], lv: ir.Value, uv: ir.Value) -> None:
        if self.masked_tails and self._vector_tails():
            self._tail_columns(rows, lv, uv)
            return
        start = lv
        for count, width in self._column_shapes():
            step = count * width
            end = self.full_end(start, uv, step)
            full = count == self.nr and width == self.width and width > 1

            def vector_block(
                v0: ir.Value, count: int = count, width: int = width, full: bool = full
            ) -> None:
                cols = [self._offset(v0, c * width) for c in range(count)]
                self._block(_Block(rows, cols, [width] * count, full))

            self.loop(start, end, step, vector_block)
            start = end

        def scalar_block(v: ir.Value) -> None:
            self._block(_Block(rows, [v], [1]))

        self.loop(start, uv, 1, scalar_block)

    def _tail_columns(self, rows: list[ir.Value], lv: ir.Value, uv: ir.Value) -> None:
        """Full blocks of NR vectors, then the n < NR·W columns left in one block: floor(n / W)
        vectors of W lanes and one of the fewest lanes (a power of two, 128 bits at least)
        holding the rest, masked to the lanes that exist. A convolution's 56 output columns
        (AVX-512) run as a block of 2 x 16 and one of 16 + 8 lanes, its 28 as one of 16 + 16
        masked to 12, instead of blocks of 16, 8 and 4 lanes that each broadcast every weight
        again. Which block runs is decided by n (known when the extents are: the others fold)."""
        step = self.nr * self.width
        start = self.full_end(lv, uv, step)

        def full_block(v0: ir.Value) -> None:
            cols = [self._offset(v0, c * self.width) for c in range(self.nr)]
            self._block(_Block(rows, cols, [self.width] * self.nr, True))

        self.loop(lv, start, step, full_block)
        d0, d1 = ir.AffineDimExpr.get(0), ir.AffineDimExpr.get(1)
        left = self.apply(d1 - d0, 2, 0, [start, uv])
        widths = self._narrow_widths()[::-1]  # fewest lanes first
        for vectors in range(self.nr):
            low = 0
            for width in widths:
                # this block when vectors·W + low < n <= vectors·W + width
                base = vectors * self.width
                above = arith.CmpIOp(
                    arith.CmpIPredicate.sgt, left, self.const(base + low), loc=self.loc
                ).result
                within = arith.CmpIOp(
                    arith.CmpIPredicate.sle, left, self.const(base + width), loc=self.loc
                ).result
                test = arith.AndIOp(above, within, loc=self.loc).result
                branch = scf.IfOp(test, loc=self.loc)
                with ir.InsertionPoint(branch.then_block):
                    lanes = self.apply(d0 - base, 1, 0, [left])
                    mask_type = ir.VectorType.get([width], ir.IntegerType.get_signless(1))
                    mask = vector.CreateMaskOp(mask_type, [lanes], loc=self.loc).result
                    cols = [self._offset(start, c * self.width) for c in range(vectors + 1)]
                    self._block(
                        _Block(
                            rows,
                            cols,
                            [self.width] * vectors + [width],
                            masks={vectors: mask},
                        )
                    )
                    scf.YieldOp([], loc=self.loc)
                low = width

    def _transposed_columns(
        self,
        lv: ir.Value,
        uv: ir.Value,
        around: Callable[[Callable[[list[ir.Value]], None]], None],
    ) -> None:
        """Transposed: blocks of NR vectors, then the n < NR·W columns left in one block of
        ceil(n / W) vectors, the last masked (the panels are padded to whole blocks with 0);
        `around(columns)` runs the row blocks (and the other loops) of each, `columns(rows)`
        emitting one block."""
        step = self.nr * self.width

        def block(
            cols: list[ir.Value],
            widths: list[int],
            masks: dict[int, ir.Value],
            rows: list[ir.Value],
        ) -> None:
            self._block(_Block(rows, cols, widths, True, masks=masks))

        def full_blocks(v0: ir.Value) -> None:
            cols = [self._offset(v0, c * self.width) for c in range(self.nr)]
            around(partial(block, cols, [self.width] * self.nr, {}))

        start = self.full_end(lv, uv, step)
        self.loop(lv, start, step, full_blocks)
        d0 = ir.AffineDimExpr.get(0)
        left = arith.SubIOp(uv, start, loc=self.loc).result
        for vectors in range(1, self.nr + 1):
            low, high = (vectors - 1) * self.width, vectors * self.width
            above = arith.CmpIOp(
                arith.CmpIPredicate.sgt, left, self.const(low), loc=self.loc
            ).result
            within = arith.CmpIOp(
                arith.CmpIPredicate.sle, left, self.const(high), loc=self.loc
            ).result
            branch = scf.IfOp(arith.AndIOp(above, within, loc=self.loc).result, loc=self.loc)
            with ir.InsertionPoint(branch.then_block):
                lanes = self.apply(d0 - low, 1, 0, [left])
                mask_type = ir.VectorType.get([self.width], ir.IntegerType.get_signless(1))
                mask = vector.CreateMaskOp(mask_type, [lanes], loc=self.loc).result
                cols = [self._offset(start, c * self.width) for c in range(vectors)]
                around(partial(block, cols, [self.width] * vectors, {vectors - 1: mask}))
                scf.YieldOp([], loc=self.loc)

    def _lane_offsets(self) -> ir.Value:
        """Transposed: the distance in elements between X's elements of consecutive v, for
        each lane (0, S, 2S, ...; S the stride of v's subscript), for gathers and scatters."""
        return self._offsets_along(self.nest.target, _subscript_of(self.nest, self.nest.v))

    def _offsets_along(self, memref: ir.Value, position: int) -> ir.Value:
        """The distance in elements of `memref` (row-major) between consecutive values of its
        subscript `position`, times each lane (0, S, 2S, ...)."""
        shape = ir.MemRefType(memref.type).shape
        after = shape[position + 1 :]
        if all(size != ir.ShapedType.get_dynamic_size() for size in after):
            stride = 1
            for size in after:
                stride *= size
            if stride * self.width < 2**31:  # i32 offsets: the backend's dword gathers
                offsets_type = ir.VectorType.get([self.width], ir.IntegerType.get_signless(32))
                attr = ir.DenseElementsAttr.get(
                    [ir.IntegerAttr.get(ir.IntegerType.get_signless(32), lane * stride)
                     for lane in range(self.width)],
                    type=offsets_type,
                )
                return arith.ConstantOp(offsets_type, attr, loc=self.loc).result
        stride_value = self.const(1)
        for dim in range(position + 1, len(shape)):
            size = ir.Operation.create(
                "memref.dim",
                results=[self.index],
                operands=[memref, self.const(dim)],
                loc=self.loc,
            ).results[0]
            stride_value = arith.MulIOp(stride_value, size, loc=self.loc).result
        index_vector = ir.VectorType.get([self.width], self.index)
        steps = vector.StepOp(index_vector, loc=self.loc).result
        spread = vector.BroadcastOp(index_vector, stride_value, loc=self.loc).result
        return arith.MulIOp(steps, spread, loc=self.loc).result

    def _zeros(self, width: int) -> ir.Value:
        vector_type = self._type(width)
        zero = ir.FloatAttr.get(self.nest.element, 0.0)
        return arith.ConstantOp(
            vector_type, ir.DenseElementsAttr.get_splat(vector_type, zero), loc=self.loc
        ).result

    def _gather(
        self, memref: ir.Value, indices: list[ir.Value], offsets: ir.Value, mask: ir.Value
    ) -> ir.Value:
        """W elements of `memref` at `indices` plus `offsets`, those of `mask` (the others 0,
        not read)."""
        vector_type = self._type(self.width)
        return vector.GatherOp(
            vector_type, memref, indices, offsets, mask, self._zeros(self.width), loc=self.loc
        ).result

    def _target_load(self, block: _Block, r: int, c: int) -> ir.Value:
        """X's elements of row r, column c of `block` (gathered when transposed)."""
        indices = self._target_indices(block, r, c)
        if not self.nest.transposed:
            return self._load(self.nest.target, indices, block.lanes(c), block.mask(c))
        assert self.offsets is not None
        return self._gather(self.nest.target, indices, self.offsets, self._mask_or_all(block, c))

    def _target_store(self, value: ir.Value, block: _Block, r: int, c: int) -> None:
        indices = self._target_indices(block, r, c)
        if not self.nest.transposed:
            self._store(value, self.nest.target, indices, block.lanes(c), block.mask(c))
            return
        assert self.offsets is not None
        vector.ScatterOp(
            None,
            self.nest.target,
            indices,
            self.offsets,
            self._mask_or_all(block, c),
            value,
            loc=self.loc,
        )

    def _mask_or_all(self, block: _Block, c: int) -> ir.Value:
        mask = block.mask(c)
        if mask is not None:
            return mask
        mask_type = ir.VectorType.get([self.width], ir.IntegerType.get_signless(1))
        return vector.ConstantMaskOp(mask_type, [self.width], loc=self.loc).result

    # -- one register block
    def _type(self, width: int) -> ir.Type:
        if width == 1:
            return self.nest.element
        return ir.VectorType.get([width], self.nest.element)

    def _target_indices(self, block: _Block, r: int, c: int) -> list[ir.Value]:
        return self._indices(self.nest.access_map, self.nest.access_operands, block, r, c, self.ivs)

    def _indices(
        self,
        amap: ir.AffineMap,
        operands: Sequence[ir.Value],
        block: _Block,
        r: int | None,
        c: int | None,
        ivs: dict[ir.Value, ir.Value],
    ) -> list[ir.Value]:
        """`amap`'s results over `operands`, with u and v at the block's row r and column c,
        and every other loop of the nest at its value in `ivs`."""
        nest = self.nest
        mapped = []
        for operand in operands:
            if nest.u is not None and operand == _iv(nest.u):
                assert r is not None
                mapped.append(block.rows[r])
            elif operand == _iv(nest.v):
                assert c is not None
                mapped.append(block.cols[c])
            elif operand in self.nest_ivs:
                mapped.append(ivs[operand])  # a KeyError here is a bug, and fails the pass
            else:
                mapped.append(operand)
        return [self.apply(e, amap.n_dims, amap.n_symbols, mapped) for e in amap.results]

    def _block(self, block: _Block) -> None:
        nest = self.nest
        keys = [(r, c) for r in range(len(block.rows)) for c in range(len(block.cols))]
        current = {(r, c): self._target_load(block, r, c) for r, c in keys}
        body = _Body(self, block, current)
        if self.window is None:
            body.carry(list(nest.reductions), skip=None)
        else:
            # The guard holds only for r in [first, last): outside, its test is known false.
            guard, first, last = self.window
            (r,) = nest.reductions
            lr, ur = self.bounds[r]
            body.carry([r], skip=guard, lower=lr, upper=first)
            body.carry([r], skip=None, lower=first, upper=last)
            body.carry([r], skip=guard, lower=last, upper=ur)
        for (r, c), value in body.current.items():
            self._target_store(value, block, r, c)

    def _guard_window(self) -> tuple[ir.Operation, ir.Value, ir.Value] | None:
        """For the one guard that tests the nest's one reduction loop r (if there is exactly
        one, each constraint of the form ±r + e, e over values from outside the nest): the guard
        and the clamped range [first, last) of r where it can hold."""
        if len(self.nest.reductions) != 1:
            return None
        (r,) = self.nest.reductions
        iv_r = _iv(r)
        guards = [op for op in self.nest.body if op.name == "affine.if" and iv_r in op.operands]
        if len(guards) != 1:
            return None
        guard = guards[0]
        if any(o != iv_r and o in self.nest_ivs for o in guard.operands):
            return None
        exprs, equalities, n_dims = affine_if_condition(guard)
        operands = list(guard.operands)
        lows: list[ir.AffineExpr] = []
        highs: list[ir.AffineExpr] = []  # inclusive
        for expr, is_eq in zip(exprs, equalities, strict=True):
            bound = _bound_on(expr, operands, n_dims, iv_r)
            if bound is None:
                return None
            sign, rest = bound
            if sign == 0:
                continue
            # sign 1: r + rest >= 0 (r >= -rest); sign -1: -r + rest >= 0 (r <= rest)
            if sign == 1 or is_eq:
                lows.append(rest * -1 if sign == 1 else rest)
            if sign == -1 or is_eq:
                highs.append(rest if sign == -1 else rest * -1)
        if not lows and not highs:
            return None
        lr, ur = self.bounds[r]
        mapped = [lr if o == iv_r else o for o in operands]  # r does not occur in the bounds
        first = self._clamp(lows, "affine.max", mapped, n_dims, 0, (lr, ur))
        last = self._clamp(highs, "affine.min", mapped, n_dims, 1, (lr, ur))
        last = self.minmax("affine.max", _pair_map(), [first, last])
        return guard, first, last

    def _clamp(
        self,
        exprs: list[ir.AffineExpr],
        kind: str,
        operands: list[ir.Value],
        n_dims: int,
        shift: int,
        r_bounds: tuple[ir.Value, ir.Value],
    ) -> ir.Value:
        """`kind` (affine.max or affine.min) of `exprs` + shift over `operands`, clamped into
        [lr, ur]; lr (shift 0) or ur (shift 1) without exprs."""
        lr, ur = r_bounds
        if not exprs:
            return lr if shift == 0 else ur
        amap = ir.AffineMap.get(n_dims, len(operands) - n_dims, [e + shift for e in exprs])
        value = self.minmax(kind, amap, operands)
        return self.minmax(
            "affine.min", _pair_map(), [self.minmax("affine.max", _pair_map(), [value, lr]), ur]
        )

    def _load(
        self,
        memref: ir.Value,
        indices: list[ir.Value],
        width: int,
        mask: ir.Value | None = None,
    ) -> ir.Value:
        """A scalar (width 1) or a vector of `width` lanes; with `mask`, only its lanes are
        read (the others are 0: nothing past the array's end is touched)."""
        if mask is not None:
            return vector.MaskedLoadOp(
                self._type(width), memref, indices, mask, self._zeros(width), loc=self.loc
            ).result
        if width == 1:
            return ir.Operation.create(
                "memref.load",
                results=[self.nest.element],
                operands=[memref, *indices],
                loc=self.loc,
            ).results[0]
        return vector.LoadOp(self._type(width), memref, indices, loc=self.loc).result

    def _store(
        self,
        value: ir.Value,
        memref: ir.Value,
        indices: list[ir.Value],
        width: int,
        mask: ir.Value | None = None,
    ) -> None:
        if mask is not None:
            vector.MaskedStoreOp(memref, indices, mask, value, loc=self.loc)
        elif width == 1:
            ir.Operation.create("memref.store", operands=[value, memref, *indices], loc=self.loc)
        else:
            vector.StoreOp(value, memref, indices, loc=self.loc)


Lanes = dict[tuple[int | None, int | None], ir.Value]


class _Body:
    """The innermost body of the nest, re-emitted for one register block and one iteration of
    the reductions: each original value becomes a value per (row, column) it depends on (None:
    does not vary)."""

    def __init__(
        self, emitter: _Emitter, block: _Block, current: dict[tuple[int, int], ir.Value]
    ) -> None:
        self.e = emitter
        self.block = block
        self.ivs = dict(emitter.ivs)  # the nest's loops' values here (not u and v)
        self.skip: ir.Operation | None = None  # a guard known false in this r loop
        self.current = current  # the value of X's element for each (row, column)
        self.values: dict[Any, Lanes] = {}
        self.broadcasts: dict[Any, ir.Value] = {}

    def carry(
        self,
        loops: list[ir.Operation],
        *,
        skip: ir.Operation | None,
        lower: ir.Value | None = None,
        upper: ir.Value | None = None,
    ) -> None:
        """The nest's reduction loops `loops` (outermost first; the first over [lower, upper)
        when given) around the body, X's elements carried in registers; the guard `skip` is
        left out. No loops: the body once."""
        if not loops:
            self.skip = skip
            self.run(self.e.nest.body)
            self.skip = None
            return
        loop, rest = loops[0], loops[1:]
        lo, hi = self.e.bounds[loop]
        keys = list(self.current)
        new = scf.ForOp(
            lower if lower is not None else lo,
            upper if upper is not None else hi,
            self.e.const(1),
            [self.current[k] for k in keys],
        )
        saved = dict(self.broadcasts)
        with ir.InsertionPoint(new.body):
            self.ivs[_iv(loop)] = new.induction_variable
            self.current = dict(zip(keys, new.inner_iter_args, strict=True))
            self.carry(rest, skip=skip)
            scf.YieldOp([self.current[k] for k in keys], loc=self.e.loc)
        del self.ivs[_iv(loop)]
        self.broadcasts = saved  # values made in the loop do not dominate what follows
        self.current = dict(zip(keys, new.results, strict=True))

    def reduce(self, reduction: ir.Operation) -> None:
        """A register loop of the body: its sum becomes one per (row, column) of the block."""
        keys = list(self.current)
        block = reduction.regions[0].blocks[0]
        start = self._lanes(reduction.operands[len(reduction.operands) - 1])
        lower, upper = self.e.bounds[reduction]
        loop = scf.ForOp(
            lower, upper, self.e.const(1), [self._at(start, r, c, True) for r, c in keys]
        )
        saved = dict(self.broadcasts)
        with ir.InsertionPoint(loop.body):
            self.ivs[_iv(reduction)] = loop.induction_variable
            self.values[block.arguments[1]] = dict(zip(keys, loop.inner_iter_args, strict=True))
            self.run(block_ops(block)[:-1])
            yielded = self._lanes(block_ops(block)[-1].operands[0])
            scf.YieldOp([self._at(yielded, r, c, True) for r, c in keys], loc=self.e.loc)
        del self.ivs[_iv(reduction)]
        self.broadcasts = saved
        self.values[reduction.results[0]] = dict(zip(keys, loop.results, strict=True))

    def in_place(self, loop: ir.Operation) -> None:
        """A loop of the body that updates X in place: X's elements carried in registers."""
        keys = list(self.current)
        lower, upper = self.e.bounds[loop]
        new = scf.ForOp(lower, upper, self.e.const(1), [self.current[k] for k in keys])
        saved = dict(self.broadcasts)
        with ir.InsertionPoint(new.body):
            self.ivs[_iv(loop)] = new.induction_variable
            self.current = dict(zip(keys, new.inner_iter_args, strict=True))
            self.run(block_ops(loop.regions[0].blocks[0])[:-1])
            scf.YieldOp([self.current[k] for k in keys], loc=self.e.loc)
        del self.ivs[_iv(loop)]
        self.broadcasts = saved
        self.current = dict(zip(keys, new.results, strict=True))

    def run(self, ops: Sequence[ir.Operation]) -> None:
        for op in ops:
            self._op(op)

    def _lanes(self, value: ir.Value) -> Lanes:
        found = self.values.get(value)
        if found is not None:
            return found
        return {(None, None): value}  # defined outside the nest: invariant

    def _keys(self, by_row: bool, by_col: bool) -> list[tuple[int | None, int | None]]:
        rows: list[int | None] = list(range(len(self.block.rows))) if by_row else [None]
        cols: list[int | None] = list(range(len(self.block.cols))) if by_col else [None]
        return [(r, c) for r in rows for c in cols]

    def _at(self, lanes: Lanes, r: int | None, c: int | None, as_vector: bool) -> ir.Value:
        """The value of `lanes` for row r, column c; broadcast when a vector is wanted from a
        value that does not vary by column."""
        for key in ((r, c), (r, None), (None, c), (None, None)):
            if key in lanes:
                value = lanes[key]
                break
        else:
            raise KeyError(f"no value for row {r}, column {c}")
        lanes_c = self.block.lanes(c)
        if not as_vector or lanes_c == 1 or isinstance(value.type, ir.VectorType):
            return value
        cached = self.broadcasts.get((value, lanes_c))
        if cached is None:
            wide = ir.VectorType.get([lanes_c], value.type)  # f32, f64 or i1
            cached = vector.BroadcastOp(wide, value, loc=self.e.loc).result
            self.broadcasts[(value, lanes_c)] = cached
        return cached

    def _varies(self, lanes: Lanes) -> tuple[bool, bool]:
        return (any(r is not None for r, _ in lanes), any(c is not None for _, c in lanes))

    def _op(self, op: ir.Operation) -> None:
        nest = self.e.nest
        if op.name == "affine.load":
            memref, amap, operands = _access(op)
            if memref == nest.target and (amap, operands) == (
                nest.access_map,
                nest.access_operands,
            ):
                self.values[op.results[0]] = {key: value for key, value in self.current.items()}
                return
            by_row = nest.u is not None and _iv(nest.u) in operands
            by_col = _iv(nest.v) in operands
            panel = self.e.panels.get(op) if self.block.full else None
            if panel is not None:
                self.values[op.results[0]] = self._panel_lanes(panel)
                return
            lanes: Lanes = {}
            for r, c in self._keys(by_row, by_col):
                indices = self.e._indices(amap, operands, self.block, r, c, self.ivs)
                lanes[(r, c)] = self.e._load(
                    memref, indices, self.block.lanes(c), self.block.mask(c)
                )
            self.values[op.results[0]] = lanes
        elif op.name == "affine.store":
            value = self._lanes(op.operands[0])
            for key in self.current:
                self.current[key] = self._at(value, key[0], key[1], True)
        elif op.name == "affine.if":
            if self.skip is None or op != self.skip:
                self._guard(op)
        elif op.name == "affine.for" and len(op.results) == 1:
            self.reduce(op)
        elif op.name == "affine.for":
            self.in_place(op)
        elif op.name == "arith.constant":
            self.values[op.results[0]] = {(None, None): op.clone().results[0]}
        else:
            self._elementwise(op)

    def _panel_lanes(self, panel: ir.Value) -> Lanes:
        e = self.e
        d0, d1 = ir.AffineDimExpr.get(0), ir.AffineDimExpr.get(1)
        span = e.nr * e.width
        block = e.apply(
            ir.AffineFloorDivExpr.get(d0 - d1, ir.AffineConstantExpr.get(span)),
            2,
            0,
            [self.block.cols[0], e.lv],
        )
        row = e.panel_row(self.ivs)
        return {
            (None, c): e._load(panel, [block, row, e.const(c * e.width)], e.width)
            for c in range(len(self.block.cols))
        }

    def _elementwise(self, op: ir.Operation) -> None:
        inputs = [self._lanes(o) for o in op.operands]
        by_row = any(self._varies(lanes)[0] for lanes in inputs)
        by_col = any(self._varies(lanes)[1] for lanes in inputs)
        as_vector = by_col and max(self.block.widths) > 1
        scalar_type = op.results[0].type  # the element type, or i1 for a comparison
        attributes = {name: op.attributes[name] for name in op.attributes}
        if self.e.contract and op.name in _CONTRACTING:
            attributes["fastmath"] = ir.Attribute.parse("#arith.fastmath<contract>")
        out: Lanes = {}
        for r, c in self._keys(by_row, by_col):
            operands = [self._at(lanes, r, c, as_vector) for lanes in inputs]
            lanes_c = self.block.lanes(c)
            result_type = (
                ir.VectorType.get([lanes_c], scalar_type)
                if as_vector and lanes_c > 1
                else scalar_type
            )
            out[(r, c)] = ir.Operation.create(
                op.name,
                results=[result_type],
                operands=operands,
                attributes=attributes,
                loc=op.location,
            ).results[0]
        self.values[op.results[0]] = out

    def _guard(self, op: ir.Operation) -> None:
        exprs, equalities, n_dims = affine_if_condition(op)
        mapped = [self.ivs[o] if o in self.e.nest_ivs else o for o in op.operands]
        n_symbols = len(mapped) - n_dims
        test: ir.Value | None = None
        for expr, is_eq in zip(exprs, equalities, strict=True):
            value = self.e.apply(expr, n_dims, n_symbols, mapped)
            zero = self.e.const(0)
            predicate = arith.CmpIPredicate.eq if is_eq else arith.CmpIPredicate.sge
            check = arith.CmpIOp(predicate, value, zero, loc=self.e.loc).result
            test = check if test is None else arith.AndIOp(test, check, loc=self.e.loc).result
        if test is None:
            self.run(block_ops(op.regions[0].blocks[0])[:-1])
            return
        keys = list(self.current)
        types = [self.current[key].type for key in keys]
        branch = scf.IfOp(test, types, has_else=True, loc=self.e.loc)
        before = dict(self.current)
        with ir.InsertionPoint(branch.then_block):
            saved = dict(self.broadcasts)
            self.run(block_ops(op.regions[0].blocks[0])[:-1])
            scf.YieldOp([self.current[key] for key in keys], loc=self.e.loc)
            self.broadcasts = saved  # values made in the branch do not dominate what follows
        with ir.InsertionPoint(branch.else_block):
            scf.YieldOp([before[key] for key in keys], loc=self.e.loc)
        self.current = dict(zip(keys, branch.results, strict=True))


def _innermost_loops(fn: ir.Operation) -> list[ir.Operation]:
    """The `affine.for` loops of `fn` with no loop inside."""
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "affine.for" and not any(
            o.name in ("affine.for", "affine.parallel", "scf.for")
            for o in block_ops(op.regions[0].blocks[0])
        ):
            found.append(op)
        return ir.WalkResult.ADVANCE

    fn.walk(visit)
    return found


def _within(op: ir.Operation, ancestor: ir.Operation) -> bool:
    """Whether `op` is `ancestor` or nested in it."""
    current: ir.Operation | None = op
    while current is not None:
        if current == ancestor:
            return True
        current = current.parent
    return False


def vectorize_contractions(
    fn: ir.Operation,
    *,
    rows: int = 6,
    vectors: int = 2,
    vector_bits: int = 256,
    contract: bool = True,
    masked_tails: bool = False,
    transposed: str = "auto",
) -> int:
    """Rewrite every contraction nest of `fn` (see the module docstring) into register blocks;
    returns how many were rewritten, and says so in remarks on `fn` (the compile report's).
    `transposed` ("auto", "true", "false"): whether the vectors run along a loop of another
    subscript of X than the last (`prefer_transposed` decides for "auto"). Other code is
    untouched."""
    # All nests are found before any is rewritten: a nest with several innermost loops (two
    # register sums) is found once per loop, and the rewrite erases them all.
    nests: list[Contraction] = []
    for inner in _innermost_loops(fn):
        nest = match_contraction(inner, fn)
        if transposed != "false" and vector_bits >= 128:
            across = match_contraction(inner, fn, transposed=True)
            if not isinstance(across, str) and (
                transposed == "true" or prefer_transposed(nest, across, vector_bits)
            ):
                nest = across
        if isinstance(nest, str):
            continue
        if not any(_within(nest.outer, n.outer) or _within(n.outer, nest.outer) for n in nests):
            nests.append(nest)
    said: list[Remark] = []  # for the compile report
    for nest in nests:
        width = vector_bits // _bits(nest.element)
        kind = "convolution" if nest.convolution else "contraction"
        along = (
            f", vectors along the loop of subscript {_subscript_of(nest, nest.v)} (transposed)"
            if nest.transposed
            else ""
        )
        block_rows, block_vectors = rows, vectors
        if nest.u is None:
            block_rows, block_vectors = 1, rowless_vectors(nest, rows, vectors, width)
            along = ", a row vector"
        said.append(
            remark_at(
                nest.outer.location,
                "schedule",
                "micro-kernel",
                "remark",
                f"{kind} computed in register blocks of {block_rows} rows x {block_vectors} "
                f"vectors of {width} {nest.element}{along}",
                {
                    "rows": block_rows,
                    "vectors": block_vectors,
                    "lanes": width,
                    "element": str(nest.element),
                    "convolution": nest.convolution,
                    "reduction_loops": len(nest.reductions) + len(nest.body_loops),
                    "transposed": nest.transposed,
                },
            )
        )
        _Emitter(
            nest,
            rows=rows,
            vectors=vectors,
            width=width,
            contract=contract,
            masked_tails=masked_tails,
        ).emit()
    attach_remarks(fn, said)
    return len(nests)


def rowless_vectors(nest: Contraction, rows: int, vectors: int, width: int) -> int:
    """The vectors of a row vector's block: the registers of MR x NR accumulators, but no
    more than v's longest run needs (a tile of 32 doubles: 4 vectors of 8)."""
    longest = trip_bound(nest.v)
    most = rows * vectors
    return most if longest is None else max(1, min(most, -(-longest // width)))


def _subscript_of(nest: Contraction, loop: ir.Operation) -> int:
    """The position of the subscript of X that `loop` indexes."""
    amap = nest.access_map
    return next(
        pos
        for pos, expr in enumerate(amap.results)
        if uses_operand(expr, nest.access_operands, amap.n_dims, _iv(loop))
    )


def _static_extent(loop: ir.Operation) -> int | None:
    """The trip count of `loop` when its bounds are constants."""
    lower, _, upper, _ = _bound_maps(loop)
    if len(lower.results) != 1 or len(upper.results) != 1:
        return None
    low, high = lower.results[0].maybe_downcast(), upper.results[0].maybe_downcast()
    if not isinstance(low, ir.AffineConstantExpr) or not isinstance(high, ir.AffineConstantExpr):
        return None
    return max(0, high.value - low.value)


def _static_trips(loops: list[ir.Operation]) -> int | None:
    """The product of the trip counts of `loops` when all are known at compile time."""
    product = 1
    for loop in loops:
        extent = _static_extent(loop)
        if extent is None:
            return None
        product *= extent
    return product


# A transposed block costs a gather and a scatter per accumulator and a packed copy of the
# panel reads; it pays where it fills the lanes better by this much (of the vector work),
# where the reductions are long enough to hide the gathers, and where each packed element
# serves enough blocks (the u and other output loops' iterations) to repay its copy: TC
# conv2d 1x256x14x14 (196 each) ran 1.22 ms transposed, 1.18 not; 1x512x7x7 (49) 3.87 and
# 1.84 ms: the copy of its 9 MB of weights cost more than the lanes gained.
TRANSPOSED_GAIN = 0.05
TRANSPOSED_MIN_DEPTH = 64
TRANSPOSED_MIN_USES = 256


def prefer_transposed(
    normal: Contraction | str, transposed: Contraction, vector_bits: int
) -> bool:
    """Whether the transposed block fills more lanes than the untransposed one (TC conv2d
    with 28 output columns and 128 channels, AVX-512: 28 of 32 lanes along the columns, all
    along the channels), or is the only one and fills a vector at least (a convolution with
    a stride: its input is no vector along the columns). Only with extents known at compile
    time, reductions long enough to pay for the gathers, and enough uses of each packed
    element to pay for its copy."""
    width = vector_bits // _bits(transposed.element)
    depth = _static_trips([*transposed.reductions, *transposed.body_loops])
    if depth is None or depth < TRANSPOSED_MIN_DEPTH:
        return False
    uses = _static_trips([transposed.u, *transposed.others])
    if uses is None or uses < TRANSPOSED_MIN_USES:
        return False

    def filled(loop: ir.Operation) -> float | None:
        extent = _static_extent(loop)
        if not extent:
            return None
        return extent / (-(-extent // width) * width)

    along_other = filled(transposed.v)
    if isinstance(normal, str):
        extent = _static_extent(transposed.v)
        return extent is not None and extent >= width
    along_columns = filled(normal.v)
    if along_columns is None or along_other is None:
        return False
    return along_other >= along_columns + TRANSPOSED_GAIN


@dataclass(frozen=True)
class ScheduleMicroKernels:
    """Contraction nests → register-blocked vector code (see the module docstring)."""

    name: ClassVar[str] = "schedule-micro-kernels"
    rows: int = 6
    vectors: int = 2
    vector_bits: int = 256
    contract: bool = True
    masked_tails: bool = False
    transposed: str = "auto"  # auto, true, false

    def __call__(self, op: ir.Operation, pass_: Any) -> None:
        try:
            if self.transposed not in ("auto", "true", "false"):
                raise ValueError(f"transposed is auto, true or false, not {self.transposed!r}")
            vectorize_contractions(
                op,
                rows=self.rows,
                vectors=self.vectors,
                vector_bits=self.vector_bits,
                contract=self.contract,
                masked_tails=self.masked_tails,
                transposed=self.transposed,
            )
        except Exception as exc:  # a bug here must fail the pass, not the process
            op.location.emit_error(f"schedule-micro-kernels: {type(exc).__name__}: {exc}")
            pass_.signal_pass_failure()


__all__ = [
    "Contraction",
    "ScheduleMicroKernels",
    "match_contraction",
    "vectorize_contractions",
]
