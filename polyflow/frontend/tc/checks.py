"""Semantic checks of a parsed TC program: names, arities and types, with a `CompileError` at
the offending text for each mistake.

`check_program(program, *, source, file)` returns, per definition, what range inference and
lowering need: the declared tensors (inputs with their sizes, outputs with their element type),
and for each comprehension its left-hand indices, its reduction indices (those only on the
right), and every tensor read with its subscripts. Rules:
    * a name in an expression is, in order: a scalar parameter, a size name of the signature
      (its value), an index; `T(...)` is a tensor read or a builtin call; `T.n` a dimension size;
    * only outputs are written; an input never is;
    * subscripts are integer expressions, affine in the indices (integer coefficients), or read
      a tensor (a gather);
    * `=` takes no reduction index; a statement reduces with one operator, and does not read the
      tensor it reduces into with a different one;
    * `where` names an index the statement uses, once;
    * element types: inputs as declared; an output takes the type its statements compute (C's
      usual conversions: the wider float, else the wider integer; literals adapt);
    * a call statement names an earlier definition, with as many tensors as it takes, of the
      ranks and element types it declares, and as many outputs as it returns.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NoReturn

from . import syntax as ast
from .lexer import error_at

# Canonical element types, narrowest first within each family.
FLOATS = ("f16", "f32", "f64")
INTEGERS = ("i1", "i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64")
ELEMENT_OF = {
    "float": "f32", "float32": "f32", "double": "f64", "float64": "f64", "half": "f16",
    "float16": "f16", "bool": "i1", "int": "i32",
    **{f"int{b}": f"i{b}" for b in (8, 16, 32, 64)},
    **{f"uint{b}": f"u{b}" for b in (8, 16, 32, 64)},
}  # fmt: skip

# Builtins: name -> number of arguments. Float builtins compute in the float type of their
# arguments (integers become f32); min/max keep their arguments' common type.
FLOAT_BUILTINS = {
    **dict.fromkeys(
        "exp exp2 expm1 log log2 log10 log1p sqrt rsqrt cbrt tanh sigmoid fabs erf erfc sin cos "
        "tan asin acos atan sinh cosh asinh acosh atanh floor ceil round trunc".split(),
        1,
    ),
    **dict.fromkeys("fmax fmin pow atan2 fmod copysign".split(), 2),
    "fma": 3,
}
GENERIC_BUILTINS = {"min": 2, "max": 2, "abs": 1}


@dataclass(frozen=True)
class Tensor:
    name: str
    element: str
    dims: tuple[str | int, ...] | None  # None: an output whose shape range inference finds
    is_input: bool

    @property
    def rank(self) -> int | None:
        return None if self.dims is None else len(self.dims)


@dataclass(frozen=True)
class Read:
    """A tensor read `tensor(subscripts)` in a statement."""

    tensor: str
    subscripts: tuple[ast.Expr, ...]
    pos: ast.Pos


@dataclass(frozen=True)
class CheckedComprehension:
    source: ast.Comprehension
    indices: tuple[str, ...]  # left-hand side, in order
    reduction_indices: tuple[str, ...]  # right-hand side only, in order of appearance
    reads: tuple[Read, ...]
    element: str  # the type the right-hand side computes
    types: dict[ast.Expr, str]  # the element type of every expression node of the statement


@dataclass(frozen=True)
class CheckedCall:
    source: ast.CallStatement
    callee: str


@dataclass(frozen=True)
class CheckedDefinition:
    source: ast.Definition
    tensors: dict[str, Tensor]  # parameters (scalars have rank 0) and outputs
    size_names: tuple[str, ...]
    statements: tuple[CheckedComprehension | CheckedCall, ...]

    @property
    def name(self) -> str:
        return self.source.name

    @property
    def inputs(self) -> list[Tensor]:
        return [self.tensors[p.name] for p in self.source.params]

    @property
    def outputs(self) -> list[Tensor]:
        return [self.tensors[o.name] for o in self.source.outputs]


def check_program(
    program: ast.Program, *, source: str, file: str = "<tc>"
) -> dict[str, CheckedDefinition]:
    """Every definition of `program`, checked, by name (in source order)."""
    checked: dict[str, CheckedDefinition] = {}
    for definition in program.definitions:
        if definition.name in checked:
            _Checker(source, file, checked).fail(
                f"definition '{definition.name}' is defined twice", definition.pos
            )
        checked[definition.name] = _Checker(source, file, checked).definition(definition)
    return checked


def join(a: str, b: str) -> str:
    """The type of a binary operation on `a` and `b`: the wider float, else the wider integer."""
    if a in FLOATS or b in FLOATS:
        floats = [t for t in (a, b) if t in FLOATS]
        return max(floats, key=FLOATS.index)
    return max((a, b), key=INTEGERS.index)


@dataclass
class _Statement:
    """What one comprehension's walk collects."""

    lhs: set[str]
    reduction: list[str] = field(default_factory=list)
    reads: list[Read] = field(default_factory=list)
    types: dict[ast.Expr, str] = field(default_factory=dict)


class _Checker:
    def __init__(self, source: str, file: str, earlier: dict[str, CheckedDefinition]) -> None:
        self.source = source
        self.file = file
        self.earlier = earlier
        self.tensors: dict[str, Tensor] = {}
        self.size_names: list[str] = []

    def fail(self, message: str, pos: ast.Pos) -> NoReturn:
        raise error_at(message, self.source, self.file, pos.line, pos.column)

    # ----- signature

    def definition(self, definition: ast.Definition) -> CheckedDefinition:
        for param in definition.params:
            self.declare(param.name, param.type, param.pos, is_input=True)
        for output in definition.outputs:
            if output.type is not None:
                self.declare(output.name, output.type, output.pos, is_input=False)
            elif output.name in self.tensors:
                self.fail(f"'{output.name}' is declared twice", output.pos)
            else:
                # The element type is the one its statements compute (set below).
                self.tensors[output.name] = Tensor(output.name, "", None, is_input=False)
        for name in self.size_names:
            if name in self.tensors:
                pos = next(p.pos for p in definition.params if p.name == name)
                self.fail(f"'{name}' names both a size and a tensor", pos)
        statements = [self.statement(s) for s in definition.body]
        for output in definition.outputs:
            tensor = self.tensors[output.name]
            written = any(output.name in _written_by(s) for s in statements)
            if not written:
                self.fail(f"output '{output.name}' is never written", output.pos)
            if not tensor.element:
                self.fail(f"output '{output.name}' has no type", output.pos)
        return CheckedDefinition(
            definition, dict(self.tensors), tuple(self.size_names), tuple(statements)
        )

    def declare(self, name: str, kind: ast.TensorType, pos: ast.Pos, *, is_input: bool) -> None:
        if name in self.tensors:
            self.fail(f"'{name}' is declared twice", pos)
        for dim in kind.dims:
            if isinstance(dim, str) and dim not in self.size_names:
                self.size_names.append(dim)
            if isinstance(dim, int) and dim <= 0:
                self.fail(f"a dimension size must be positive, got {dim}", kind.pos)
        self.tensors[name] = Tensor(name, ELEMENT_OF[kind.element], kind.dims, is_input)

    # ----- statements

    def statement(self, statement: ast.Statement) -> CheckedComprehension | CheckedCall:
        if isinstance(statement, ast.CallStatement):
            return self.call(statement)
        target = self.tensors.get(statement.tensor)
        if target is None:
            self.fail(
                f"unknown tensor '{statement.tensor}': only the outputs listed after '->' "
                "can be written",
                statement.pos,
            )
        if target.is_input:
            self.fail(f"cannot write input '{statement.tensor}'", statement.pos)
        seen: set[str] = set()
        for index in statement.indices:
            if index.name in seen:
                self.fail(f"index '{index.name}' appears twice on the left-hand side", index.pos)
            if self.is_value_name(index.name):
                self.fail(f"'{index.name}' is not an index: it names a size or a scalar", index.pos)
            seen.add(index.name)
        if target.rank is not None and target.rank != len(statement.indices):
            self.fail(
                f"'{statement.tensor}' has {target.rank} dimension(s), written with "
                f"{len(statement.indices)} index(es)",
                statement.pos,
            )
        walk = _Statement(lhs=seen)
        element = self.expr(statement.rhs, walk)
        for read in walk.reads:
            if read.tensor == statement.tensor and statement.op != "=":
                self.fail(
                    f"'{statement.tensor}' is reduced with '{statement.op}' and also read on the "
                    "right-hand side: a statement reduces with one operator; read it in a "
                    "separate statement",
                    read.pos,
                )
        if statement.op == "=" and walk.reduction:
            first = walk.reduction[0]
            self.fail(
                f"index '{first}' appears only on the right-hand side of '=': use a reduction "
                "('+=', '*=', 'min=', 'max=', with '!' to initialize) or index the output with it",
                self.first_use(statement.rhs, first),
            )
        named: set[str] = set()
        for clause in statement.ranges:
            if clause.index in named:
                self.fail(f"index '{clause.index}' has two 'where' ranges", clause.pos)
            if clause.index not in walk.lhs and clause.index not in walk.reduction:
                self.fail(
                    f"unknown index '{clause.index}': the statement does not use it", clause.pos
                )
            named.add(clause.index)
            for bound in (clause.low, clause.high):
                for name in _names_in(bound):
                    if not self.is_value_name(name.name):
                        self.fail(
                            f"a range bound may use sizes and constants, not index '{name.name}'",
                            name.pos,
                        )
                if self.expr(bound, _Statement(lhs=set())) not in INTEGERS:
                    self.fail("a range bound must be an integer", clause.pos)
        if target.dims is None:
            self.tensors[statement.tensor] = Tensor(
                target.name, join(target.element, element) if target.element else element,
                None, is_input=False,
            )  # fmt: skip
        return CheckedComprehension(
            statement,
            tuple(i.name for i in statement.indices),
            tuple(walk.reduction),
            tuple(walk.reads),
            element,
            walk.types,
        )

    def call(self, statement: ast.CallStatement) -> CheckedCall:
        callee = self.earlier.get(statement.callee)
        if callee is None:
            self.fail(
                f"unknown definition '{statement.callee}' (a definition can call the ones "
                "before it)",
                statement.pos,
            )
        if len(statement.args) != len(callee.inputs):
            self.fail(
                f"'{statement.callee}' takes {len(callee.inputs)} argument(s), "
                f"given {len(statement.args)}",
                statement.pos,
            )
        for arg, param in zip(statement.args, callee.inputs, strict=True):
            tensor = self.tensors.get(arg.name)
            if tensor is None:
                self.fail(f"unknown tensor '{arg.name}'", arg.pos)
            if tensor.rank is not None and tensor.rank != param.rank:
                self.fail(
                    f"'{statement.callee}' takes a rank-{param.rank} tensor for "
                    f"'{param.name}', given '{arg.name}' of rank {tensor.rank}",
                    arg.pos,
                )
            if tensor.element and tensor.element != param.element:
                self.fail(
                    f"'{statement.callee}' takes {param.element} for '{param.name}', given "
                    f"'{arg.name}' of {tensor.element}",
                    arg.pos,
                )
        if len(statement.outputs) != len(callee.outputs):
            self.fail(
                f"'{statement.callee}' returns {len(callee.outputs)} tensor(s), "
                f"assigned to {len(statement.outputs)}",
                statement.pos,
            )
        for out, result in zip(statement.outputs, callee.outputs, strict=True):
            target = self.tensors.get(out.name)
            if target is None:
                self.fail(f"unknown tensor '{out.name}': only outputs can be written", out.pos)
            if target.is_input:
                self.fail(f"cannot write input '{out.name}'", out.pos)
            if target.dims is None:
                self.tensors[out.name] = Tensor(out.name, result.element, None, is_input=False)
        return CheckedCall(statement, callee.name)

    # ----- expressions (each returns its element type)

    def is_value_name(self, name: str) -> bool:
        tensor = self.tensors.get(name)
        return name in self.size_names or (tensor is not None and tensor.rank == 0)

    def expr(self, expr: ast.Expr, walk: _Statement) -> str:
        kind = self.expr_type(expr, walk)
        walk.types[expr] = kind
        return kind

    def expr_type(self, expr: ast.Expr, walk: _Statement) -> str:
        if isinstance(expr, ast.Number):
            return "f32" if expr.is_float else "i32"
        if isinstance(expr, ast.Name):
            return self.name(expr, walk)
        if isinstance(expr, ast.DimSize):
            tensor = self.tensors.get(expr.tensor)
            if tensor is None:
                self.fail(f"unknown tensor '{expr.tensor}'", expr.pos)
            if tensor.rank is not None and not 0 <= expr.dim < tensor.rank:
                self.fail(
                    f"'{expr.tensor}' has {tensor.rank} dimension(s): there is no "
                    f"'{expr.tensor}.{expr.dim}'",
                    expr.pos,
                )
            return "i64"
        if isinstance(expr, ast.Apply):
            return self.apply(expr, walk)
        if isinstance(expr, ast.Unary):
            operand = self.expr(expr.operand, walk)
            return "i1" if expr.op == "!" else operand
        if isinstance(expr, ast.Binary):
            left, right = self.expr(expr.left, walk), self.expr(expr.right, walk)
            if expr.op in ("&&", "||", "<", "<=", ">", ">=", "==", "!="):
                return "i1"
            if expr.op == "%" and (left in FLOATS or right in FLOATS):
                self.fail("'%' takes integers (use fmod for floats)", expr.pos)
            return self.arithmetic(expr, left, right)
        self.expr(expr.cond, walk)
        then, otherwise = self.expr(expr.then, walk), self.expr(expr.otherwise, walk)
        return self.arithmetic(expr, then, otherwise)

    def arithmetic(self, expr: ast.Binary | ast.Ternary, left: str, right: str) -> str:
        """The type of an operation whose operands have types left and right; an integer
        literal takes the other operand's type, a float literal the other's if it is a float."""
        sides = (
            (expr.left, expr.right) if isinstance(expr, ast.Binary) else (expr.then, expr.otherwise)
        )
        literal = [isinstance(side, ast.Number) for side in sides]
        if literal[0] and not literal[1] and (left not in FLOATS or right in FLOATS):
            return right
        if literal[1] and not literal[0] and (right not in FLOATS or left in FLOATS):
            return left
        return join(left, right)

    def name(self, expr: ast.Name, walk: _Statement) -> str:
        tensor = self.tensors.get(expr.name)
        if tensor is not None:
            if tensor.rank == 0:
                return tensor.element
            self.fail(
                f"tensor '{expr.name}' needs {tensor.rank or 'its'} subscript(s): "
                f"'{expr.name}(...)'",
                expr.pos,
            )
        if expr.name in self.size_names:
            return "i64"
        if expr.name in FLOAT_BUILTINS or expr.name in GENERIC_BUILTINS:
            self.fail(f"'{expr.name}' is a function: call it with '(...)'", expr.pos)
        if expr.name not in walk.lhs and expr.name not in walk.reduction:
            walk.reduction.append(expr.name)
        return "i64"

    def apply(self, expr: ast.Apply, walk: _Statement) -> str:
        tensor = self.tensors.get(expr.name)
        if tensor is None:
            arity = FLOAT_BUILTINS.get(expr.name, GENERIC_BUILTINS.get(expr.name))
            if arity is None:
                self.fail(f"unknown tensor or function '{expr.name}'", expr.pos)
            if len(expr.args) != arity:
                self.fail(
                    f"'{expr.name}' takes {arity} argument(s), given {len(expr.args)}", expr.pos
                )
            types = [self.expr(arg, walk) for arg in expr.args]
            # Literals adapt to the other arguments, as in arithmetic.
            typed = [
                t for t, a in zip(types, expr.args, strict=True) if not isinstance(a, ast.Number)
            ]
            common = (typed or types)[0]
            for other in (typed or types)[1:]:
                common = join(common, other)
            if expr.name in GENERIC_BUILTINS:
                return common
            return common if common in FLOATS else "f32"
        if tensor.rank is not None and len(expr.args) != tensor.rank:
            self.fail(
                f"'{expr.name}' has {tensor.rank} dimension(s), accessed with "
                f"{len(expr.args)} subscript(s)",
                expr.pos,
            )
        for arg in expr.args:
            kind = self.expr(arg, walk)
            if kind not in INTEGERS:
                self.fail(f"a subscript must be an integer, this one is {kind}", _pos_of(arg))
            if not _is_affine(arg, self) and not _reads_tensor(arg, self):
                self.fail(
                    "a subscript must be affine in the indices (like 2 * i + k) or read a "
                    "tensor (a gather)",
                    _pos_of(arg),
                )
        walk.reads.append(Read(expr.name, expr.args, expr.pos))
        return tensor.element

    def first_use(self, expr: ast.Expr, index: str) -> ast.Pos:
        return next(name.pos for name in _names_in(expr) if name.name == index)


def _written_by(statement: CheckedComprehension | CheckedCall) -> set[str]:
    if isinstance(statement, CheckedComprehension):
        return {statement.source.tensor}
    return {out.name for out in statement.source.outputs}


def _pos_of(expr: ast.Expr) -> ast.Pos:
    """Where `expr` starts in the source (a binary expression's own position is its operator)."""
    if isinstance(expr, ast.Binary):
        return _pos_of(expr.left)
    if isinstance(expr, ast.Ternary):
        return _pos_of(expr.cond)
    return expr.pos


def _names_in(expr: ast.Expr) -> Iterator[ast.Name]:
    """Every Name in `expr`, in source order."""
    if isinstance(expr, ast.Name):
        yield expr
    elif isinstance(expr, ast.Apply):
        for arg in expr.args:
            yield from _names_in(arg)
    elif isinstance(expr, ast.Unary):
        yield from _names_in(expr.operand)
    elif isinstance(expr, ast.Binary):
        yield from _names_in(expr.left)
        yield from _names_in(expr.right)
    elif isinstance(expr, ast.Ternary):
        yield from _names_in(expr.cond)
        yield from _names_in(expr.then)
        yield from _names_in(expr.otherwise)


def _is_affine(expr: ast.Expr, checker: _Checker) -> bool:
    """Whether `expr` is an integer-coefficient affine form of indices, sizes and constants."""
    if isinstance(expr, ast.Number):
        return not expr.is_float
    if isinstance(expr, (ast.Name, ast.DimSize)):
        return True
    if isinstance(expr, ast.Unary):
        return expr.op == "-" and _is_affine(expr.operand, checker)
    if isinstance(expr, ast.Binary):
        if expr.op in ("+", "-"):
            return _is_affine(expr.left, checker) and _is_affine(expr.right, checker)
        if expr.op == "*":
            return (_is_constant(expr.left, checker) and _is_affine(expr.right, checker)) or (
                _is_constant(expr.right, checker) and _is_affine(expr.left, checker)
            )
    return False


def _is_constant(expr: ast.Expr, checker: _Checker) -> bool:
    """An integer literal (or a negated or multiplied one): a coefficient range inference can
    divide by."""
    if isinstance(expr, ast.Number):
        return not expr.is_float
    if isinstance(expr, ast.Unary):
        return expr.op == "-" and _is_constant(expr.operand, checker)
    if isinstance(expr, ast.Binary) and expr.op in ("+", "-", "*"):
        return _is_constant(expr.left, checker) and _is_constant(expr.right, checker)
    return False


def _reads_tensor(expr: ast.Expr, checker: _Checker) -> bool:
    if isinstance(expr, ast.Apply):
        return expr.name in checker.tensors or any(_reads_tensor(a, checker) for a in expr.args)
    if isinstance(expr, ast.Unary):
        return _reads_tensor(expr.operand, checker)
    if isinstance(expr, ast.Binary):
        return _reads_tensor(expr.left, checker) or _reads_tensor(expr.right, checker)
    if isinstance(expr, ast.Ternary):
        return any(_reads_tensor(e, checker) for e in (expr.cond, expr.then, expr.otherwise))
    return False
