"""Range inference for TC: the range of every index of every comprehension, and the shape of
every output, as symbolic sizes; then, for actual sizes, the concrete values with every read
checked in bounds.

`infer_ranges(definition, *, source, file)` runs statement by statement, in order:
    * an index with a `where i in low:high` clause takes that range;
    * the others are found in rounds (TC's algorithm): each round looks at every subscript with
      exactly one index not yet known, and takes the largest range of that index that keeps the
      subscript inside the tensor's dimension for every value of the known ones; the ranges one
      index gets from several subscripts are intersected; the next round sees the indices this
      one resolved. Tensors read must have known shapes (inputs, outputs of earlier statements);
      so must the tensor written, when an earlier statement gave it one;
    * indices count from 0: a lower bound is never below 0;
    * a round that finds nothing while indices are left is an error at the statement: the
      ranges are ambiguous, and a `where` clause must say which one is meant;
    * an output's shape is the upper bound of each index that writes it, from the first
      statement that writes it.
Data-dependent subscripts (gathers) constrain nothing; their inner reads do.

`specialize(inferred, sizes)` evaluates everything for actual sizes, and checks what could not
be checked symbolically: ranges are not empty, and every affine read stays inside its tensor
(a `where` clause can make one go out).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import NoReturn

from . import syntax as ast
from .checks import CheckedCall, CheckedComprehension, CheckedDefinition, Read
from .lexer import error_at
from .sizes import Size, largest, smallest


@dataclass(frozen=True)
class Range:
    low: Size
    high: Size  # exclusive

    def __str__(self) -> str:
        return f"{self.low}:{self.high}"


@dataclass(frozen=True)
class InferredStatement:
    statement: CheckedComprehension | CheckedCall
    ranges: dict[str, Range]  # left-hand indices first, then reduction indices


@dataclass(frozen=True)
class InferredDefinition:
    definition: CheckedDefinition
    shapes: dict[str, tuple[Size, ...]]  # every tensor: parameters and outputs
    statements: tuple[InferredStatement, ...]

    def explain(self) -> str:
        """The inferred ranges and output shapes, one line each, as `polyflow tc --explain`
        prints them."""
        d = self.definition
        lines = [f"def {d.name}:"]
        for output in d.outputs:
            dims = ", ".join(str(s) for s in self.shapes[output.name])
            lines.append(f"  output {output.name}: {output.element}({dims})")
        for inferred in self.statements:
            statement = inferred.statement
            pos = statement.source.pos
            if isinstance(statement, CheckedCall):
                lines.append(f"  line {pos.line}: call {statement.callee}")
                continue
            ranges = ", ".join(f"{i} in {r}" for i, r in inferred.ranges.items())
            lines.append(f"  line {pos.line}: {statement.source.tensor}: {ranges}")
        return "\n".join(lines)


@dataclass(frozen=True)
class Specialized:
    """An inferred definition for actual sizes."""

    inferred: InferredDefinition
    sizes: dict[str, int]
    shapes: dict[str, tuple[int, ...]]
    ranges: tuple[dict[str, tuple[int, int]], ...]  # per statement


def infer_ranges(
    definition: CheckedDefinition,
    *,
    source: str,
    file: str = "<tc>",
    callees: Mapping[str, InferredDefinition] | None = None,
) -> InferredDefinition:
    """The ranges and shapes of `definition` (see the module docstring); `callees`: the
    inferred definitions its call statements name."""
    return _Inference(definition, source, file, callees or {}).run()


def specialize(inferred: InferredDefinition, sizes: Mapping[str, int], *, source: str,
               file: str = "<tc>") -> Specialized:  # fmt: skip
    """`inferred` evaluated for `sizes` (every size name of the signature bound); a
    `CompileError` when a range is empty or a read leaves its tensor."""
    fail = _Fail(source, file)
    shapes = {
        name: tuple(dim.evaluate(sizes) for dim in dims) for name, dims in inferred.shapes.items()
    }
    # A zero extent is NumPy's empty array: ranges over it are empty, and the statements over
    # them do nothing (a `+=!` over an empty reduction range leaves its identity).
    empty_inputs = any(extent == 0 for extent in sizes.values())
    for name, shape in shapes.items():
        if any(extent < 0 for extent in shape) or (
            not empty_inputs and any(extent == 0 for extent in shape)
        ):
            tensor = inferred.definition.tensors[name]
            pos = _declared_at(inferred.definition, name)
            fail(f"'{tensor.name}' would have shape {shape} for these sizes", pos)
    ranges = []
    for statement in inferred.statements:
        concrete = {
            i: (r.low.evaluate(sizes), r.high.evaluate(sizes)) for i, r in statement.ranges.items()
        }
        ranges.append(concrete)
        checked = statement.statement
        if isinstance(checked, CheckedCall):
            continue
        empty = [(i, low, high) for i, (low, high) in concrete.items() if high <= low]
        if empty and not empty_inputs:
            index, low, high = empty[0]
            fail(
                f"index '{index}' has an empty range {low}:{high} for these sizes",
                checked.source.pos,
            )
        if empty:  # the statement runs no iteration: it reads nothing
            continue
        for read in checked.reads:
            _check_in_bounds(read, concrete, shapes[read.tensor], sizes, shapes, fail)
    return Specialized(inferred, dict(sizes), shapes, tuple(ranges))


# ----- inference


class _Inference:
    def __init__(
        self,
        definition: CheckedDefinition,
        source: str,
        file: str,
        callees: Mapping[str, InferredDefinition],
    ) -> None:
        self.definition = definition
        self.fail = _Fail(source, file)
        self.callees = callees
        self.shapes: dict[str, tuple[Size, ...]] = {}
        for tensor in definition.tensors.values():
            if tensor.dims is not None:
                self.shapes[tensor.name] = tuple(Size.of(d) for d in tensor.dims)

    def run(self) -> InferredDefinition:
        statements = []
        for statement in self.definition.statements:
            if isinstance(statement, CheckedCall):
                statements.append(self.call(statement))
            else:
                statements.append(self.comprehension(statement))
        return InferredDefinition(self.definition, dict(self.shapes), tuple(statements))

    def call(self, statement: CheckedCall) -> InferredStatement:
        callee = self.callees[statement.callee]
        bindings: dict[str, Size] = {}
        for arg, param in zip(statement.source.args, callee.definition.inputs, strict=True):
            shape = self.shapes.get(arg.name)
            if shape is None:
                self.fail(f"'{arg.name}' has no shape yet: write it before passing it", arg.pos)
            for dim, extent in zip(param.dims or (), shape, strict=True):
                if isinstance(dim, str):
                    known = bindings.setdefault(dim, extent)
                    if known != extent:
                        self.fail(
                            f"'{statement.callee}' needs the same size for '{dim}' in all its "
                            f"arguments, given {known} and {extent}",
                            arg.pos,
                        )
                elif not extent.is_constant() or extent.constant != dim:
                    self.fail(
                        f"'{statement.callee}' takes size {dim} here, given {extent}", arg.pos
                    )
        for out, result in zip(statement.source.outputs, callee.definition.outputs, strict=True):
            shape = tuple(_substitute(s, bindings) for s in callee.shapes[result.name])
            before = self.shapes.setdefault(out.name, shape)
            if before != shape:
                self.fail(
                    f"'{out.name}' has shape ({', '.join(map(str, before))}); "
                    f"'{statement.callee}' returns ({', '.join(map(str, shape))})",
                    out.pos,
                )
        return InferredStatement(statement, {})

    def comprehension(self, statement: CheckedComprehension) -> InferredStatement:
        source = statement.source
        indices = [*statement.indices, *statement.reduction_indices]
        known: dict[str, Range] = {}
        for clause in source.ranges:
            known[clause.index] = Range(self.size_of(clause.low), self.size_of(clause.high))
        constraints: list[tuple[Read, int]] = []
        for read in statement.reads:
            shape = self.shapes.get(read.tensor)
            if shape is None:
                self.fail(
                    f"'{read.tensor}' is read before any statement gives it a shape", read.pos
                )
            constraints.extend((read, dim) for dim in range(len(shape)))
        target_shape = self.shapes.get(source.tensor)
        writes = Read(source.tensor, tuple(source.indices), source.pos)
        if target_shape is not None:
            constraints.extend((writes, dim) for dim in range(len(target_shape)))
        while unresolved := [i for i in indices if i not in known]:
            found: dict[str, list[Range]] = {}
            for read, dim in constraints:
                form = self.linear(read.subscripts[dim])
                if form is None:
                    continue
                coefficients, rest = form
                open_ = [i for i in coefficients if i not in known]
                if len(open_) != 1:
                    continue
                extent = self.shapes[read.tensor][dim]
                found.setdefault(open_[0], []).append(
                    _range_within(open_[0], coefficients, rest, extent, known)
                )
            if not found:
                self.fail(
                    f"cannot infer the range of index '{unresolved[0]}': no subscript bounds it "
                    f"alone; add 'where {unresolved[0]} in low:high'",
                    source.pos,
                )
            for index, candidates in found.items():
                low = largest([Size.of(0), *(c.low for c in candidates)])
                high = smallest(c.high for c in candidates)
                known[index] = Range(low, high)
        if target_shape is None:
            self.shapes[source.tensor] = tuple(known[i].high for i in statement.indices)
        return InferredStatement(statement, {i: known[i] for i in indices})

    def linear(self, expr: ast.Expr) -> tuple[dict[str, int], Size] | None:
        """`expr` as (index coefficients, the rest as a size), or None when it is not affine
        (a gather, a scalar's value)."""
        d = self.definition
        if isinstance(expr, ast.Number):
            return ({}, Size.of(int(expr.value))) if not expr.is_float else None
        if isinstance(expr, ast.Name):
            if expr.name in d.size_names:
                return {}, Size.of(expr.name)
            if expr.name in d.tensors:
                return None
            return {expr.name: 1}, Size.of(0)
        if isinstance(expr, ast.DimSize):
            return {}, self.dim_size(expr)
        if isinstance(expr, ast.Unary) and expr.op == "-":
            inner = self.linear(expr.operand)
            return None if inner is None else ({i: -c for i, c in inner[0].items()}, -inner[1])
        if isinstance(expr, ast.Binary) and expr.op in ("+", "-", "*"):
            left, right = self.linear(expr.left), self.linear(expr.right)
            if left is None or right is None:
                return None
            if expr.op == "*":
                if not left[0] and left[1].is_constant():
                    factor, (terms, rest) = left[1].constant, right
                elif not right[0] and right[1].is_constant():
                    factor, (terms, rest) = right[1].constant, left
                else:
                    return None
                return {i: c * factor for i, c in terms.items()}, rest * factor
            sign = 1 if expr.op == "+" else -1
            terms = dict(left[0])
            for index, coefficient in right[0].items():
                terms[index] = terms.get(index, 0) + sign * coefficient
            return {i: c for i, c in terms.items() if c}, left[1] + right[1] * sign
        return None

    def size_of(self, expr: ast.Expr) -> Size:
        """A range bound (sizes and constants only; the checks made sure) as a size."""
        if isinstance(expr, ast.Binary) and expr.op == "/":
            divisor = self.size_of(expr.right)
            if not divisor.is_constant() or divisor.constant <= 0:
                self.fail("a range bound divides by positive constants only", expr.pos)
            return self.size_of(expr.left).floordiv(divisor.constant)
        form = self.linear(expr)
        if form is None or form[0]:
            self.fail("a range bound must be affine in the sizes (like N - 1 or 2 * K)", expr.pos)
        return form[1]

    def dim_size(self, expr: ast.DimSize) -> Size:
        shape = self.shapes.get(expr.tensor)
        if shape is None:
            self.fail(f"'{expr.tensor}' has no shape yet", expr.pos)
        return shape[expr.dim]


def _range_within(
    index: str, coefficients: dict[str, int], rest: Size, extent: Size, known: dict[str, Range]
) -> Range:
    """The largest range of `index` keeping c*index + rest + sum(a_j * j) in [0, extent) for
    every value of the known indices j."""
    low_rest, high_rest = rest, rest  # the extremes of everything but c*index
    for other, a in coefficients.items():
        if other == index:
            continue
        r = known[other]
        first, last = r.low * a, (r.high - 1) * a
        low_rest, high_rest = (low_rest + first, high_rest + last) if a > 0 else (
            low_rest + last, high_rest + first)  # fmt: skip
    c = coefficients[index]
    if c > 0:
        return Range((-low_rest).ceildiv(c), (extent - 1 - high_rest).floordiv(c) + 1)
    return Range((high_rest - extent + 1).ceildiv(-c), low_rest.floordiv(-c) + 1)


def _substitute(size: Size, bindings: Mapping[str, Size]) -> Size:
    """`size` with size names replaced (callee sizes in terms of the caller's)."""
    result = Size.of(size.constant)
    for atom, coefficient in size.terms:
        if isinstance(atom, str) and atom in bindings:
            result = result + bindings[atom] * coefficient
        elif isinstance(atom, str):
            result = result + Size.of(atom) * coefficient
        else:
            raise ValueError(f"cannot pass a size like {atom} to another definition")
    return result


def _check_in_bounds(
    read: Read,
    ranges: Mapping[str, tuple[int, int]],
    shape: tuple[int, ...],
    sizes: Mapping[str, int],
    shapes: Mapping[str, tuple[int, ...]],
    fail: _Fail,
) -> None:
    for dim, subscript in enumerate(read.subscripts):
        bounds = _interval(subscript, ranges, sizes, shapes)
        if bounds is None:  # data-dependent: checked on the data, at the call
            continue
        low, high = bounds
        if low < 0 or high >= shape[dim]:
            fail(
                f"'{read.tensor}' is read at {low}..{high} in dimension {dim}, outside 0..{shape[dim] - 1}"
                " for these sizes; narrow the ranges with 'where'",
                read.pos,
            )


def _interval(
    expr: ast.Expr,
    ranges: Mapping[str, tuple[int, int]],
    sizes: Mapping[str, int],
    shapes: Mapping[str, tuple[int, ...]],
) -> tuple[int, int] | None:
    """The smallest and largest value of an affine subscript over the ranges (inclusive), or
    None when it depends on data."""
    if isinstance(expr, ast.Number):
        value = int(expr.value)
        return value, value
    if isinstance(expr, ast.Name):
        if expr.name in sizes:
            return sizes[expr.name], sizes[expr.name]
        if expr.name in ranges:
            low, high = ranges[expr.name]
            return low, high - 1
        return None
    if isinstance(expr, ast.DimSize):
        extent = shapes[expr.tensor][expr.dim]
        return extent, extent
    if isinstance(expr, ast.Unary) and expr.op == "-":
        inner = _interval(expr.operand, ranges, sizes, shapes)
        return None if inner is None else (-inner[1], -inner[0])
    if isinstance(expr, ast.Binary) and expr.op in ("+", "-", "*"):
        left = _interval(expr.left, ranges, sizes, shapes)
        right = _interval(expr.right, ranges, sizes, shapes)
        if left is None or right is None:
            return None
        if expr.op == "+":
            return left[0] + right[0], left[1] + right[1]
        if expr.op == "-":
            return left[0] - right[1], left[1] - right[0]
        products = [a * b for a in left for b in right]
        return min(products), max(products)
    return None


class _Fail:
    def __init__(self, source: str, file: str) -> None:
        self.source = source
        self.file = file

    def __call__(self, message: str, pos: ast.Pos) -> NoReturn:
        raise error_at(message, self.source, self.file, pos.line, pos.column)


def _declared_at(definition: CheckedDefinition, name: str) -> ast.Pos:
    for param in definition.source.params:
        if param.name == name:
            return param.pos
    for output in definition.source.outputs:
        if output.name == name:
            return output.pos
    return definition.source.pos


def inferred_definitions(
    source: str, name: str | None, *, file: str = "<tc>"
) -> tuple[str, dict[str, InferredDefinition]]:
    """(the name of the definition wanted: `name`, or the only one when None; every
    definition of `source` parsed, checked and with its ranges inferred, in order).
    CompileError for a mistake in the source, ValueError for an unknown or ambiguous name."""
    from .checks import check_program
    from .parser import parse

    checked = check_program(parse(source, file=file), source=source, file=file)
    inferred: dict[str, InferredDefinition] = {}
    for each, definition in checked.items():
        inferred[each] = infer_ranges(definition, source=source, file=file, callees=inferred)
    if name is None:
        if len(checked) > 1:
            raise ValueError(
                f"the source defines {', '.join(checked)}: say which one with name=..."
            )
        name = next(iter(checked))
    if name not in checked:
        raise ValueError(f"no definition named '{name}' (defined: {', '.join(checked)})")
    return name, inferred
