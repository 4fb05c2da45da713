"""The base of a function's emitter (`ExpressionTypes`): its state (source locations, block
scopes, constants, control flags) and C's type rules for expressions: the type of an expression
found without emitting it (`type_of`, read from the AST: subscripts and `*(p + i)` included) and
the conversions between scalar types (`convert`, `to_bool`, `as_index`). ExpressionEmitter
(c_expressions.py) emits every expression form on top of it; kept apart so that the type rules
read in one place and each module stays under ~600 lines."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from mlir import ir
from mlir.dialects import arith, memref
from pycparser import c_ast

from polyflow.frontend import c_analysis as ana
from polyflow.frontend.c_builtins import is_math_function, math_result_type
from polyflow.frontend.c_scope import (
    CFunction,
    FileScope,
    Var,
    int_literal,
    is_int_literal,
    mlir_type,
)
from polyflow.frontend.c_types import (
    BOOL,
    DOUBLE,
    FLOAT,
    INT,
    LONG_DOUBLE,
    ULONG,
    Array,
    Scalar,
    Unsupported,
    Void,
    has_x87_long_double,
    integer_promote,
    usual_arithmetic_conversion,
)


class ExpressionTypes:
    """The state of one C function being emitted, the C type of its expressions and the
    conversions between them (raising Unsupported on anything outside the supported subset)."""

    def __init__(
        self,
        scope: FileScope,
        functions: dict[str, CFunction],
        fn: CFunction,
        *,
        external: dict[str, CFunction] | None = None,
    ) -> None:
        self.file = scope
        self.functions = functions
        self.fn = fn
        # Functions of the file left to the C compiler that this one may call through their
        # C-ABI trampolines (driver builds only); filled with the ones it actually calls.
        self.external = external
        self.called_externally: dict[str, CFunction] = {}
        self.module: ir.Module | None = None  # set by emit()
        self.statement_count = 0
        self.statement: str | None = None
        self.scopes: list[dict[str, Var]] = [{}]
        self.assigned = ana.assigned_names(fn.node.body)
        self.entry: ir.Block | None = None
        self.ret_flag: ir.Value | None = None
        self.ret_slot: ir.Value | None = None
        self.exit_flags: list[ir.Value] = []
        self.loop_flags: list[tuple[ir.Value | None, ir.Value | None]] = []

    # ----- locations, scopes, constants
    def loc(self, node: c_ast.Node | None) -> ir.Location:
        coord = getattr(node, "coord", None)
        if coord is None or coord.line is None:
            return ir.Location.unknown()
        loc = ir.Location.file(coord.file, coord.line, coord.column or 1)
        return loc if self.statement is None else ir.Location.name(self.statement, childLoc=loc)

    @contextmanager
    def scoped(self) -> Iterator[None]:
        self.scopes.append({})
        try:
            yield
        finally:
            self.scopes.pop()

    def bind(self, name: str, var: Var) -> None:
        self.scopes[-1][name] = var

    def lookup(self, name: str) -> Var | None:
        for s in reversed(self.scopes):
            if name in s:
                return s[name]
        return None

    def const(self, t: Scalar, v: int | float) -> ir.Value:
        ty = mlir_type(t)
        if t.is_float:
            return arith.constant(ty, ir.FloatAttr.get(ty, float(v)))
        bits = t.bits
        v = int(v) & ((1 << bits) - 1)
        if v >= 1 << (bits - 1) and bits > 1:
            v -= 1 << bits
        return arith.constant(ty, ir.IntegerAttr.get(ty, v))

    def cindex(self, v: int) -> ir.Value:
        return arith.constant(ir.IndexType.get(), v)

    def alloca_at_entry(self, ty: ir.MemRefType) -> ir.Value:
        assert self.entry is not None
        with ir.InsertionPoint.at_block_begin(self.entry):
            return memref.alloca(ty, [], [])

    # Control flags live in i8 memory: the MemRef→LLVM lowering cannot store i1.
    def new_flag(self) -> ir.Value:
        return self.alloca_at_entry(ir.MemRefType.get([], ir.IntegerType.get_signless(8)))

    def set_flag(self, flag: ir.Value, value: bool) -> None:
        memref.store(self.const(Scalar("int", 8, False), int(value)), flag, [])

    def flag_is_set(self, flag: ir.Value) -> ir.Value:
        return arith.trunci(ir.IntegerType.get_signless(1), memref.load(flag, []))

    # ----- conversions
    def convert(self, v: ir.Value, src: Scalar, dst: Scalar) -> ir.Value:
        if src == dst:
            return v
        if dst.boolean:
            return arith.extui(mlir_type(dst), self.to_bool(v, src))
        dt = mlir_type(dst)
        if src.is_int and dst.is_int:
            if src.bits == dst.bits:
                return v
            if dst.bits < src.bits:
                return arith.trunci(dt, v)
            return arith.extsi(dt, v) if src.signed and src.bits > 1 else arith.extui(dt, v)
        if src.is_int and dst.is_float:
            if src.bits == 1:
                v, src = arith.extui(ir.IntegerType.get_signless(32), v), INT
            return arith.sitofp(dt, v) if src.signed else arith.uitofp(dt, v)
        if src.is_float and dst.is_int:
            return arith.fptosi(dt, v) if dst.signed else arith.fptoui(dt, v)
        return arith.extf(dt, v) if dst.bits > src.bits else arith.truncf(dt, v)

    def to_bool(self, v: ir.Value, t: Scalar) -> ir.Value:
        if t == BOOL:
            return v
        if t.is_float:
            return arith.cmpf(arith.CmpFPredicate.UNE, v, self.const(t, 0.0))
        return arith.cmpi(arith.CmpIPredicate.ne, v, self.const(t, 0))

    def as_index(self, v: ir.Value, t: Scalar) -> ir.Value:
        if t.is_float:
            raise Unsupported("floating-point array subscript")
        if t.bits == 1:
            return arith.index_castui(ir.IndexType.get(), v)
        return (
            arith.index_cast(ir.IndexType.get(), v)
            if t.signed
            else arith.index_castui(ir.IndexType.get(), v)
        )

    # ----- types of expressions (without emitting them)
    def type_of(self, node: c_ast.Node) -> Scalar | Array:
        if isinstance(node, c_ast.Constant):
            return self.literal_type(node)
        if isinstance(node, c_ast.ID):
            var = self.lookup(node.name)
            if var is not None:
                return var.type
            if node.name in self.file.enums:
                return INT
            if node.name in self.file.globals:
                return self.file.globals[node.name].type
            raise Unsupported(f"'{node.name}' is not a variable polyflow knows", node)
        if isinstance(node, c_ast.ArrayRef):
            base, subs = self.split_subscripts(node)
            bt = self.type_of(base)
            if not isinstance(bt, Array):
                raise Unsupported("subscript of a non-array", node)
            if len(subs) == bt.rank:
                return bt.elem
            return Array(bt.elem, bt.dims[len(subs) :])
        if isinstance(node, c_ast.UnaryOp):
            if node.op == "*":
                bt = self.type_of(self.deref_base(node)[0])
                if not isinstance(bt, Array) or bt.rank != 1:
                    raise Unsupported("dereference of a multi-dimensional pointer", node)
                return bt.elem
            if node.op == "sizeof":
                return ULONG
            t = self.scalar_type_of(node.expr)
            if node.op == "!":
                return INT
            if node.op in ("-", "+", "~"):
                return integer_promote(t)
            return t
        if isinstance(node, c_ast.BinaryOp):
            if node.op in ("<", ">", "<=", ">=", "==", "!=", "&&", "||"):
                return INT
            lt, rt = self.scalar_type_of(node.left), self.scalar_type_of(node.right)
            if node.op in ("<<", ">>"):
                return integer_promote(lt)
            return usual_arithmetic_conversion(lt, rt)
        if isinstance(node, c_ast.Assignment):
            return self.scalar_type_of(node.lvalue)
        if isinstance(node, c_ast.TernaryOp):
            return usual_arithmetic_conversion(
                self.scalar_type_of(node.iftrue), self.scalar_type_of(node.iffalse)
            )
        if isinstance(node, c_ast.Cast):
            target = self.file.resolve(node.to_type.type, allow_vla=False)
            if not isinstance(target, Scalar):
                raise Unsupported(f"cast to '{target}' is not supported", node)
            return target
        if isinstance(node, c_ast.FuncCall):
            name = self.callee_name(node)
            callee = self.functions.get(name) or (self.external or {}).get(name)
            if callee is not None:
                r = callee.ret
                if isinstance(r, Void):
                    raise Unsupported(f"the value of void function '{name}' is used", node)
                return r
            if is_math_function(name):
                return math_result_type(name)
            if name in self.file.defs:
                raise Unsupported(f"calls '{name}', which is left to the C compiler", node)
            raise Unsupported(
                f"call to '{name}', which is not a function of this file or of math.h", node
            )
        if isinstance(node, c_ast.ExprList):
            return self.type_of(node.exprs[-1])
        raise Unsupported(f"expression '{type(node).__name__}' is not supported", node)

    def scalar_type_of(self, node: c_ast.Node) -> Scalar:
        t = self.type_of(node)
        if not isinstance(t, Scalar):
            raise Unsupported(
                "array or pointer used as a value (pointer arithmetic is not supported)", node
            )
        return t

    def literal_type(self, node: c_ast.Constant) -> Scalar:
        if is_int_literal(node):
            return int_literal(node.value, node)[1]
        if node.type == "char":
            return INT
        if node.type in ("float", "double"):
            return FLOAT if node.value[-1] in "fF" else DOUBLE
        if node.type == "long double":
            if not has_x87_long_double():
                raise Unsupported("'long double' is not supported on this machine", node)
            return LONG_DOUBLE
        raise Unsupported(f"{node.type} literals are not supported", node)

    def callee_name(self, node: c_ast.FuncCall) -> str:
        if not isinstance(node.name, c_ast.ID):
            raise Unsupported("calls through function pointers are not supported", node)
        return node.name.name

    # ----- array bases and subscripts (read from the AST)
    def split_subscripts(self, node: c_ast.ArrayRef) -> tuple[c_ast.Node, list[c_ast.Node]]:
        subs: list[c_ast.Node] = []
        base: c_ast.Node = node
        while isinstance(base, c_ast.ArrayRef):
            subs.append(base.subscript)
            base = base.name
        subs.reverse()
        if isinstance(base, c_ast.UnaryOp) and base.op == "*":
            inner, first = self.deref_base(base)
            return inner, [first, *subs]
        return base, subs

    def deref_base(self, node: c_ast.UnaryOp) -> tuple[c_ast.Node, c_ast.Node]:
        """`*p` → (p, 0); `*(p + a - b)` → (p, a - b): one pointer among the added terms."""
        terms: list[tuple[bool, c_ast.Node]] = []

        def flatten(e: c_ast.Node, negative: bool) -> None:
            if isinstance(e, c_ast.BinaryOp) and e.op in ("+", "-"):
                flatten(e.left, negative)
                flatten(e.right, negative != (e.op == "-"))
            else:
                terms.append((negative, e))

        flatten(node.expr, False)
        pointers = [
            (neg, t)
            for neg, t in terms
            if isinstance(t, c_ast.ID) and isinstance(self.type_of(t), Array)
        ]
        if len(pointers) != 1 or pointers[0][0]:
            raise Unsupported(
                "this pointer dereference is not supported (use p[i] or *(p + i))", node
            )
        base = pointers[0][1]
        offset: c_ast.Node | None = None
        for neg, t in terms:
            if t is base:
                continue
            if offset is None:
                offset = c_ast.UnaryOp("-", t, coord=t.coord) if neg else t
            else:
                offset = c_ast.BinaryOp("-" if neg else "+", offset, t, coord=t.coord)
        return base, offset if offset is not None else c_ast.Constant("int", "0", coord=node.coord)
