"""Lowering of a TC definition, specialized to actual sizes, to affine MLIR.

`lower_definition(specialized, *, callees, source, file)` returns an MLIR module with
    * `@<name>`: one memref argument per parameter (a scalar is a rank-0 memref) and per output,
      in signature order, each with its static shape;
    * `@__polyflow_<name>`: the same with one `!llvm.ptr` per argument, for the JIT to call.
Each comprehension becomes one loop nest, the left-hand indices outside the reduction indices,
in source order (the scheduler reorders them); a `!` reduction is preceded by a nest storing
the operator's identity. A `=` statement that reads the tensor it writes at other positions
reads a copy taken before it (TC reads the whole right-hand side before assigning). Subscripts
that read a tensor (gathers) become `memref.load`s marked `polyflow.gather`, which the
scheduler leaves alone; every other access is an `affine.load`/`affine.store`. A call
statement inlines the called definition, specialized to its arguments' sizes. Every op carries
the TC source location of the statement it implements.
"""

from __future__ import annotations

import math as pymath
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import affine, arith, func, math, memref

from polyflow.frontend.c_abi import memref_descriptor
from polyflow.ir.names import (
    ACTIVE_ARGUMENTS_ATTR,
    CABI_PREFIX,
    DISCARDED_ARGUMENTS_ATTR,
    GATHER_ATTR,
    NOALIAS_ATTR,
    gradient_name,
)

from . import syntax as ast
from .checks import FLOATS, CheckedCall, CheckedComprehension, join
from .ranges import InferredDefinition, Specialized, specialize

_BINARY_FLOAT = {"+": arith.addf, "-": arith.subf, "*": arith.mulf, "/": arith.divf}
_BINARY_SIGNED = {
    "+": arith.addi,
    "-": arith.subi,
    "*": arith.muli,
    "/": arith.divsi,
    "%": arith.remsi,
}
_BINARY_UNSIGNED = {**_BINARY_SIGNED, "/": arith.divui, "%": arith.remui}
_FLOAT_PREDICATES = {"<": "olt", "<=": "ole", ">": "ogt", ">=": "oge", "==": "oeq", "!=": "une"}
_SIGNED_PREDICATES = {"<": "slt", "<=": "sle", ">": "sgt", ">=": "sge", "==": "eq", "!=": "ne"}
_UNSIGNED_PREDICATES = {**_SIGNED_PREDICATES, "<": "ult", "<=": "ule", ">": "ugt", ">=": "uge"}
_UNARY_MATH = {
    "exp": math.exp, "exp2": math.exp2, "expm1": math.expm1, "log": math.log, "log2": math.log2,
    "log10": math.log10, "log1p": math.log1p, "sqrt": math.sqrt, "rsqrt": math.rsqrt,
    "cbrt": math.cbrt, "tanh": math.tanh, "fabs": math.absf, "erf": math.erf, "erfc": math.erfc,
    "sin": math.sin, "cos": math.cos, "tan": math.tan, "asin": math.asin, "acos": math.acos,
    "atan": math.atan, "sinh": math.sinh, "cosh": math.cosh, "asinh": math.asinh,
    "acosh": math.acosh, "atanh": math.atanh, "floor": math.floor, "ceil": math.ceil,
    "round": math.round, "trunc": math.trunc,
}  # fmt: skip
_BINARY_MATH = {
    "pow": math.powf,
    "atan2": math.atan2,
    "copysign": math.copysign,
    "fmod": arith.remf,
}


def memory_type(element: str) -> ir.Type:
    """The type a tensor of `element` holds in memory: booleans take a byte (as in NumPy; MLIR
    cannot lower stores of i1)."""
    return element_type("i8" if element == "i1" else element)


def element_type(element: str) -> ir.Type:
    """The MLIR type of a canonical TC element type (unsigned integers are signless)."""
    if element == "f16":
        return ir.F16Type.get()
    if element == "f32":
        return ir.F32Type.get()
    if element == "f64":
        return ir.F64Type.get()
    return ir.IntegerType.get_signless(int(element[1:]))


def lower_definition(
    specialized: Specialized,
    *,
    callees: Mapping[str, InferredDefinition],
    source: str,
    file: str = "<tc>",
    grad: bool | Collection[str] = False,
    discard_outputs: bool = False,
) -> ir.Module:
    """The module for `specialized` (see the module docstring); needs an active context. With
    `grad`, also `@<name>_grad` declared (arguments, then a shadow per float tensor: every
    output, and the inputs named in `grad`, or all for `True`) and its pointer entry, for the
    `grad` stage to define; `discard_outputs`: its caller ignores the outputs' final values
    (it wants the adjoints only)."""
    definition = specialized.inferred.definition
    module = ir.Module.create()
    tensors = [t.name for t in definition.inputs] + [t.name for t in definition.outputs]
    types = [
        ir.MemRefType.get(list(specialized.shapes[n]), memory_type(definition.tensors[n].element))
        for n in tensors
    ]
    with ir.InsertionPoint(module.body), _location(file, definition.source.pos):
        kernel = func.FuncOp(definition.name, (types, []))
        # TC tensors never overlap (polyflow.tc checks arrays given with out=).
        kernel.arg_attrs = ir.ArrayAttr.get(
            [ir.DictAttr.get({NOALIAS_ATTR: ir.UnitAttr.get()}) for _ in types]
        )
        entry = kernel.add_entry_block()
        with ir.InsertionPoint(entry):
            env = dict(zip(tensors, entry.arguments, strict=True))
            _Lowering(callees, source, file).body(specialized, env)
            func.ReturnOp([])
        _c_abi_entry(definition.name, types)
        if grad:
            # declared here, given its body by the `grad` stage (polyflow.autodiff)
            inputs = {t.name for t in definition.inputs}
            active = [
                isinstance(t.element_type, ir.FloatType)
                and (grad is True or name not in inputs or name in grad)  # type: ignore[operator]
                for name, t in zip(tensors, types, strict=True)
            ]
            shadows = [t for t, on in zip(types, active, strict=True) if on]
            gradient = func.FuncOp(
                gradient_name(definition.name), (types + shadows, []), visibility="private"
            )
            gradient.attributes[ACTIVE_ARGUMENTS_ATTR] = ir.ArrayAttr.get(
                [ir.BoolAttr.get(on) for on in active]
            )
            if discard_outputs:
                outputs = {t.name for t in definition.outputs}
                gradient.attributes[DISCARDED_ARGUMENTS_ATTR] = ir.ArrayAttr.get(
                    [ir.BoolAttr.get(name in outputs) for name in tensors]
                )
            gradient.arg_attrs = ir.ArrayAttr.get(
                [ir.DictAttr.get({NOALIAS_ATTR: ir.UnitAttr.get()}) for _ in types + shadows]
            )
            _c_abi_entry(gradient_name(definition.name), types + shadows)
    return module


def _c_abi_entry(name: str, types: list[ir.MemRefType]) -> None:
    """`@__polyflow_<name>(ptr...)`: builds a descriptor per pointer and calls `@<name>`."""
    ptr = ir.Type.parse("!llvm.ptr")
    wrapper = func.FuncOp(CABI_PREFIX + name, ([ptr] * len(types), []))
    block = wrapper.add_entry_block()
    with ir.InsertionPoint(block):
        operands = [
            memref_descriptor(arg, kind) for arg, kind in zip(block.arguments, types, strict=True)
        ]
        func.CallOp([], ir.FlatSymbolRefAttr.get(name), operands)
        func.ReturnOp([])


def _location(file: str, pos: ast.Pos) -> ir.Location:
    return ir.Location.file(file, pos.line, pos.column)


@dataclass
class _Value:
    value: ir.Value
    element: str


class _Lowering:
    def __init__(self, callees: Mapping[str, InferredDefinition], source: str, file: str) -> None:
        self.callees = callees
        self.source = source
        self.file = file
        self.sizes: Mapping[str, int] = {}  # of the definition being lowered

    def body(self, specialized: Specialized, env: dict[str, ir.Value]) -> None:
        inferred = specialized.inferred
        outer, self.sizes = self.sizes, specialized.sizes
        for statement, ranges in zip(inferred.statements, specialized.ranges, strict=True):
            checked = statement.statement
            with _location(self.file, checked.source.pos):
                if isinstance(checked, CheckedCall):
                    self.call(checked, env)
                else:
                    self.comprehension(checked, ranges, env, specialized)
        self.sizes = outer

    def call(self, statement: CheckedCall, env: dict[str, ir.Value]) -> None:
        callee = self.callees[statement.callee]
        sizes: dict[str, int] = {}
        for arg, param in zip(statement.source.args, callee.definition.inputs, strict=True):
            shape = ir.MemRefType(env[arg.name].type).shape
            for dim, extent in zip(param.dims or (), shape, strict=True):
                if isinstance(dim, str):
                    sizes[dim] = extent
        inner = specialize(callee, sizes, source=self.source, file=self.file)
        names = [t.name for t in callee.definition.inputs] + [
            t.name for t in callee.definition.outputs
        ]
        values = [env[a.name] for a in statement.source.args] + [
            env[o.name] for o in statement.source.outputs
        ]
        self.body(inner, dict(zip(names, values, strict=True)))

    def comprehension(
        self,
        statement: CheckedComprehension,
        ranges: Mapping[str, tuple[int, int]],
        env: dict[str, ir.Value],
        specialized: Specialized,
    ) -> None:
        source = statement.source
        target = env[source.tensor]
        element = specialized.inferred.definition.tensors[source.tensor].element
        if source.init:
            self.nest(
                [(i, ranges[i]) for i in statement.indices],
                lambda ivs: self.store_identity(source, element, target, ivs),
            )
        reads = dict(env)
        snapshot = None
        if source.op == "=" and any(
            r.tensor == source.tensor and not _same_point(r.subscripts, statement.indices)
            for r in statement.reads
        ):
            snapshot = memref.AllocOp(ir.MemRefType(target.type), [], []).result
            memref.CopyOp(target, snapshot)
            reads[source.tensor] = snapshot
        loops = [(i, ranges[i]) for i in (*statement.indices, *statement.reduction_indices)]

        def body(ivs: dict[str, ir.Value]) -> None:
            rhs = self.convert(self.expr(source.rhs, ivs, reads, statement), element)
            point = [ivs[i] for i in statement.indices]
            if source.op != "=":
                current = _Value(_from_memory(self.load_at(target, point), element), element)
                rhs = self.combine(source.op, current, rhs)
            self.store_at(_to_memory(rhs.value, element), target, point)

        self.nest(loops, body)
        if snapshot is not None:
            memref.DeallocOp(snapshot)

    # ----- loops and accesses

    def nest(
        self,
        loops: list[tuple[str, tuple[int, int]]],
        body: Callable[[dict[str, ir.Value]], None],
    ) -> None:
        ivs: dict[str, ir.Value] = {}
        ip = ir.InsertionPoint.current
        for name, (low, high) in loops:
            loop = affine.AffineForOp(
                ir.AffineMap.get_constant(low), ir.AffineMap.get_constant(high), 1, None, ip=ip
            )
            end = affine.AffineYieldOp([], ip=ir.InsertionPoint(loop.body))
            ivs[name] = loop.induction_variable
            ip = ir.InsertionPoint(end)
        with ip:
            body(ivs)

    def load_at(self, mem: ir.Value, point: list[ir.Value]) -> ir.Value:
        kind = ir.MemRefType(mem.type)
        amap = ir.AffineMap.get_identity(len(point))
        return affine.AffineLoadOp(kind.element_type, mem, point, amap).result

    def store_at(self, value: ir.Value, mem: ir.Value, point: list[ir.Value]) -> None:
        affine.AffineStoreOp(value, mem, point, ir.AffineMap.get_identity(len(point)))

    def store_identity(
        self, source: ast.Comprehension, element: str, target: ir.Value, ivs: dict[str, ir.Value]
    ) -> None:
        identity = _identity(source.op, element)
        value = arith.constant(memory_type(element), identity)
        self.store_at(value, target, [ivs[i.name] for i in source.indices])

    def read(
        self,
        expr: ast.Apply,
        ivs: dict[str, ir.Value],
        env: dict[str, ir.Value],
        statement: CheckedComprehension,
    ) -> ir.Value:
        mem = env[expr.name]
        kind = ir.MemRefType(mem.type)
        forms = [self.affine_form(arg, ivs, env) for arg in expr.args]
        if all(form is not None for form in forms):
            used = [name for name in ivs if any(name in f[0] for f in forms if f is not None)]
            position = {name: ir.AffineDimExpr.get(k) for k, name in enumerate(used)}
            results = []
            for form in forms:
                assert form is not None
                coefficients, constant = form
                result = ir.AffineConstantExpr.get(constant)
                for name, c in coefficients.items():
                    result = result + position[name] * c
                results.append(result)
            amap = ir.AffineMap.get(len(used), 0, results)
            return affine.AffineLoadOp(kind.element_type, mem, [ivs[n] for n in used], amap).result
        index = ir.IndexType.get()
        subscripts = []
        for arg in expr.args:
            value = self.expr(arg, ivs, env, statement)
            subscripts.append(arith.index_cast(index, self.convert(value, "i64").value))
        load = memref.LoadOp(mem, subscripts)
        load.operation.attributes[GATHER_ATTR] = ir.UnitAttr.get()
        return load.result

    def affine_form(
        self, expr: ast.Expr, ivs: Mapping[str, ir.Value], env: Mapping[str, ir.Value]
    ) -> tuple[dict[str, int], int] | None:
        """A subscript as (index coefficients, constant), or None when it reads data."""
        if isinstance(expr, ast.Number):
            return ({}, int(expr.value)) if not expr.is_float else None
        if isinstance(expr, ast.Name):
            if expr.name in ivs:
                return {expr.name: 1}, 0
            if expr.name in self.sizes:
                return {}, self.sizes[expr.name]
            return None  # a scalar's value
        if isinstance(expr, ast.DimSize):
            return {}, ir.MemRefType(env[expr.tensor].type).shape[expr.dim]
        if isinstance(expr, ast.Unary) and expr.op == "-":
            inner = self.affine_form(expr.operand, ivs, env)
            return None if inner is None else ({i: -c for i, c in inner[0].items()}, -inner[1])
        if isinstance(expr, ast.Binary) and expr.op in ("+", "-", "*"):
            left = self.affine_form(expr.left, ivs, env)
            right = self.affine_form(expr.right, ivs, env)
            if left is None or right is None:
                return None
            if expr.op == "*":
                if not left[0]:
                    return {i: c * left[1] for i, c in right[0].items()}, right[1] * left[1]
                if not right[0]:
                    return {i: c * right[1] for i, c in left[0].items()}, left[1] * right[1]
                return None
            sign = 1 if expr.op == "+" else -1
            terms = dict(left[0])
            for index, c in right[0].items():
                terms[index] = terms.get(index, 0) + sign * c
            return {i: c for i, c in terms.items() if c}, left[1] + sign * right[1]
        return None

    # ----- expressions

    def expr(
        self,
        expr: ast.Expr,
        ivs: dict[str, ir.Value],
        env: dict[str, ir.Value],
        statement: CheckedComprehension,
    ) -> _Value:
        kind = statement.types[expr]
        if isinstance(expr, ast.Number):
            value = expr.value
            if kind not in FLOATS:
                value = int(value)
            return _Value(arith.constant(element_type(kind), value), kind)
        if isinstance(expr, ast.Name):
            if expr.name in ivs:
                return _Value(
                    arith.index_cast(ir.IntegerType.get_signless(64), ivs[expr.name]), "i64"
                )
            if expr.name in env:  # a scalar parameter
                mem = env[expr.name]
                loaded = affine.AffineLoadOp(
                    ir.MemRefType(mem.type).element_type, mem, [], ir.AffineMap.get_empty()
                ).result
                return _Value(_from_memory(loaded, kind), kind)
            return _Value(
                arith.constant(ir.IntegerType.get_signless(64), self.sizes[expr.name]), "i64"
            )
        if isinstance(expr, ast.DimSize):
            extent = ir.MemRefType(env[expr.tensor].type).shape[expr.dim]
            return _Value(arith.constant(ir.IntegerType.get_signless(64), extent), "i64")
        if isinstance(expr, ast.Apply):
            if expr.name in env:
                return _Value(_from_memory(self.read(expr, ivs, env, statement), kind), kind)
            args = [self.expr(a, ivs, env, statement) for a in expr.args]
            return self.builtin(expr.name, [self.convert(a, kind) for a in args], kind)
        if isinstance(expr, ast.Unary):
            operand = self.expr(expr.operand, ivs, env, statement)
            if expr.op == "!":
                return _Value(self.is_zero(operand), "i1")
            operand = self.convert(operand, kind)
            if kind in FLOATS:
                return _Value(arith.negf(operand.value), kind)
            zero = arith.constant(element_type(kind), 0)
            return _Value(arith.subi(zero, operand.value), kind)
        if isinstance(expr, ast.Binary):
            left = self.expr(expr.left, ivs, env, statement)
            right = self.expr(expr.right, ivs, env, statement)
            if expr.op in ("&&", "||"):
                a, b = self.is_nonzero(left), self.is_nonzero(right)
                return _Value(arith.andi(a, b) if expr.op == "&&" else arith.ori(a, b), "i1")
            if expr.op in _FLOAT_PREDICATES:
                common = _operand_type(statement, expr.left, expr.right, left, right)
                a, b = self.convert(left, common), self.convert(right, common)
                return _Value(self.compare(expr.op, a.value, b.value, common), "i1")
            a, b = self.convert(left, kind), self.convert(right, kind)
            if kind in FLOATS:
                if expr.op == "%":
                    return _Value(arith.remf(a.value, b.value), kind)
                return _Value(_BINARY_FLOAT[expr.op](a.value, b.value), kind)
            table = _BINARY_UNSIGNED if kind.startswith("u") else _BINARY_SIGNED
            return _Value(table[expr.op](a.value, b.value), kind)
        cond = self.is_nonzero(self.expr(expr.cond, ivs, env, statement))
        then = self.convert(self.expr(expr.then, ivs, env, statement), kind)
        otherwise = self.convert(self.expr(expr.otherwise, ivs, env, statement), kind)
        return _Value(arith.select(cond, then.value, otherwise.value), kind)

    def builtin(self, name: str, args: list[_Value], kind: str) -> _Value:
        values = [a.value for a in args]
        if name in _UNARY_MATH:
            return _Value(_UNARY_MATH[name](values[0]), kind)
        if name in _BINARY_MATH:
            return _Value(_BINARY_MATH[name](values[0], values[1]), kind)
        if name == "fma":
            return _Value(math.fma(values[0], values[1], values[2]), kind)
        if name == "sigmoid":  # 1 / (1 + exp(-x))
            one = arith.constant(element_type(kind), 1.0)
            denominator = arith.addf(one, math.exp(arith.negf(values[0])))
            return _Value(arith.divf(one, denominator), kind)
        if name in ("fmax", "fmin", "max", "min"):
            largest = name in ("fmax", "max")
            if kind in FLOATS:
                op = arith.maximumf if largest else arith.minimumf
            elif kind.startswith("u"):
                op = arith.maxui if largest else arith.minui
            else:
                op = arith.maxsi if largest else arith.minsi
            return _Value(op(values[0], values[1]), kind)
        if name == "abs":
            if kind in FLOATS:
                return _Value(math.absf(values[0]), kind)
            return _Value(math.absi(values[0]), kind)
        raise AssertionError(f"builtin '{name}' has no lowering")

    def combine(self, op: str, current: _Value, value: _Value) -> _Value:
        kind = current.element
        a, b = current.value, value.value
        floats = kind in FLOATS
        unsigned = kind.startswith("u")
        if op == "+=":
            return _Value(arith.addf(a, b) if floats else arith.addi(a, b), kind)
        if op == "*=":
            return _Value(arith.mulf(a, b) if floats else arith.muli(a, b), kind)
        if op == "min=":
            fn = arith.minimumf if floats else arith.minui if unsigned else arith.minsi
            return _Value(fn(a, b), kind)
        fn = arith.maximumf if floats else arith.maxui if unsigned else arith.maxsi
        return _Value(fn(a, b), kind)

    def compare(self, op: str, a: ir.Value, b: ir.Value, kind: str) -> ir.Value:
        if kind in FLOATS:
            return arith.cmpf(getattr(arith.CmpFPredicate, _FLOAT_PREDICATES[op].upper()), a, b)
        table = _UNSIGNED_PREDICATES if kind.startswith("u") else _SIGNED_PREDICATES
        return arith.cmpi(getattr(arith.CmpIPredicate, table[op]), a, b)

    def is_nonzero(self, value: _Value) -> ir.Value:
        if value.element == "i1":
            return value.value
        zero = arith.constant(element_type(value.element), 0.0 if value.element in FLOATS else 0)
        return self.compare("!=", value.value, zero, value.element)

    def is_zero(self, value: _Value) -> ir.Value:
        zero = arith.constant(element_type(value.element), 0.0 if value.element in FLOATS else 0)
        return self.compare("==", value.value, zero, value.element)

    def convert(self, value: _Value, to: str) -> _Value:
        """`value` converted as C converts on assignment."""
        source = value.element
        if source == to:
            return value
        target = element_type(to)
        v = value.value
        if to in FLOATS and source in FLOATS:
            wider = FLOATS.index(to) > FLOATS.index(source)
            return _Value(arith.extf(target, v) if wider else arith.truncf(target, v), to)
        if to in FLOATS:
            unsigned = source.startswith("u") or source == "i1"
            return _Value(arith.uitofp(target, v) if unsigned else arith.sitofp(target, v), to)
        if source in FLOATS:
            if to == "i1":
                return _Value(self.is_nonzero(value), to)
            return _Value(
                arith.fptoui(target, v) if to.startswith("u") else arith.fptosi(target, v), to
            )
        if to == "i1":
            return _Value(self.is_nonzero(value), to)
        from_bits, to_bits = int(source[1:]), int(to[1:])
        if to_bits < from_bits:
            return _Value(arith.trunci(target, v), to)
        if to_bits == from_bits:
            return _Value(v, to)
        unsigned = source.startswith("u") or source == "i1"
        return _Value(arith.extui(target, v) if unsigned else arith.extsi(target, v), to)


def _from_memory(value: ir.Value, element: str) -> ir.Value:
    """A loaded element as the expression computes with it (a boolean's byte as an i1)."""
    if element != "i1":
        return value
    zero = arith.constant(memory_type(element), 0)
    return arith.cmpi(arith.CmpIPredicate.ne, value, zero)


def _to_memory(value: ir.Value, element: str) -> ir.Value:
    """A computed element as memory holds it (an i1 as a 0 or 1 byte)."""
    return arith.extui(memory_type(element), value) if element == "i1" else value


def _identity(op: str, element: str) -> int | float:
    floats = element in FLOATS
    if op == "+=":
        return 0.0 if floats else 0
    if op == "*=":
        return 1.0 if floats else 1
    if floats:
        return pymath.inf if op == "min=" else -pymath.inf
    bits = int(element[1:])
    if element.startswith("u") or element == "i1":
        return (1 << bits) - 1 if op == "min=" else 0
    return (1 << (bits - 1)) - 1 if op == "min=" else -(1 << (bits - 1))


def _same_point(subscripts: tuple[ast.Expr, ...], indices: tuple[str, ...]) -> bool:
    return len(subscripts) == len(indices) and all(
        isinstance(s, ast.Name) and s.name == i for s, i in zip(subscripts, indices, strict=True)
    )


def _operand_type(
    statement: CheckedComprehension,
    left_expr: ast.Expr,
    right_expr: ast.Expr,
    left: _Value,
    right: _Value,
) -> str:
    """The type two compared operands are converted to: as for arithmetic."""
    if isinstance(left_expr, ast.Number) and not isinstance(right_expr, ast.Number):
        if left.element not in FLOATS or right.element in FLOATS:
            return right.element
    if isinstance(right_expr, ast.Number) and not isinstance(left_expr, ast.Number):
        if right.element not in FLOATS or left.element in FLOATS:
            return left.element
    return join(left.element, right.element)
