"""Emitting C expressions: the part of a function's emitter that knows scopes, conversions,
types and every expression form (`ExpressionEmitter`); statements and loops build on it
(c_statements.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from mlir import ir
from mlir.dialects import arith, func, llvm, memref, scf
from pycparser import c_ast

from polyflow.frontend import c_analysis as ana
from polyflow.frontend.c_builtins import emit_math_call, is_math_function, math_signature
from polyflow.frontend.c_scope import (
    DYN,
    CFunction,
    FileScope,
    LValue,
    Var,
    char_literal,
    int_literal,
    is_int_literal,
    mlir_type,
    sizeof,
)
from polyflow.frontend.c_types import (
    BOOL,
    DOUBLE,
    FLOAT,
    INT,
    ULONG,
    Array,
    Scalar,
    Unsupported,
    Void,
    integer_promote,
    usual_arithmetic_conversion,
)
from polyflow.ir.names import TRAMPOLINE_PREFIX


class ExpressionEmitter:
    """The state of one C function being emitted, and its expressions (raising Unsupported on
    anything outside the supported subset)."""

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
            if name in self.functions:
                r = self.functions[name].ret
                if isinstance(r, Void):
                    raise Unsupported(f"the value of void function '{name}' is used", node)
                return r
            if is_math_function(name):
                return math_signature(name)[0]
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
        raise Unsupported(f"{node.type} literals are not supported", node)

    def callee_name(self, node: c_ast.FuncCall) -> str:
        if not isinstance(node.name, c_ast.ID):
            raise Unsupported("calls through function pointers are not supported", node)
        return node.name.name

    # ----- expressions
    def emit_expr(self, node: c_ast.Node) -> tuple[ir.Value, Scalar]:
        with self.loc(node):
            return self._emit_expr(node)

    def _emit_expr(self, node: c_ast.Node) -> tuple[ir.Value, Scalar]:
        if isinstance(node, c_ast.Constant):
            t = self.literal_type(node)
            if is_int_literal(node):
                return self.const(t, int_literal(node.value, node)[0]), t
            if node.type == "char":
                return self.const(t, char_literal(node.value)), t
            text = node.value.rstrip("fFlL")
            value = float.fromhex(text) if text.lower().startswith("0x") else float(text)
            return self.const(t, value), t
        if isinstance(node, c_ast.ID):
            return self.read_var(node)
        if isinstance(node, (c_ast.ArrayRef,)) or (
            isinstance(node, c_ast.UnaryOp) and node.op == "*"
        ):
            lv = self.emit_lvalue(node)
            return memref.load(lv.memref, lv.indices), lv.type
        if isinstance(node, c_ast.UnaryOp):
            return self.emit_unary(node)
        if isinstance(node, c_ast.BinaryOp):
            return self.emit_binary(node)
        if isinstance(node, c_ast.Assignment):
            return self.emit_assignment(node)
        if isinstance(node, c_ast.TernaryOp):
            return self.emit_ternary(node)
        if isinstance(node, c_ast.Cast):
            to = self.scalar_type_of(node)
            v, t = self.emit_expr(node.expr)
            return self.convert(v, t, to), to
        if isinstance(node, c_ast.FuncCall):
            results = self.emit_call(node)
            if not results:
                raise Unsupported("the value of a void call is used", node)
            return results[0]
        if isinstance(node, c_ast.ExprList):
            for e in node.exprs[:-1]:
                self.emit_effect(e)
            return self.emit_expr(node.exprs[-1])
        raise Unsupported(f"expression '{type(node).__name__}' is not supported", node)

    def emit_effect(self, node: c_ast.Node) -> None:
        """Evaluate an expression for its side effects only (expression statements)."""
        with self.loc(node):
            if isinstance(node, c_ast.FuncCall):
                self.emit_call(node)
            elif isinstance(node, c_ast.ExprList):
                for e in node.exprs:
                    self.emit_effect(e)
            else:
                self._emit_expr(node)

    def read_var(self, node: c_ast.ID) -> tuple[ir.Value, Scalar]:
        var = self.lookup(node.name)
        if var is None:
            if node.name in self.file.enums:
                return self.const(INT, self.file.enums[node.name]), INT
            raise Unsupported(f"'{node.name}' is not a variable polyflow knows", node)
        t = var.type
        if isinstance(t, Array):
            raise Unsupported(
                f"array '{node.name}' used as a value (pointer arithmetic is not supported)", node
            )
        if var.value is not None:
            return var.value, t
        if var.index is not None:
            return arith.index_cast(mlir_type(t), var.index), t
        assert var.slot is not None
        return memref.load(var.slot, []), t

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

    def emit_lvalue(self, node: c_ast.Node) -> LValue:
        if isinstance(node, c_ast.ID):
            var = self.lookup(node.name)
            if var is None or isinstance(var.type, Array) or var.slot is None:
                raise Unsupported(f"cannot assign to '{node.name}'", node)
            return LValue(var.slot, [], var.type)
        if isinstance(node, c_ast.UnaryOp) and node.op == "*":
            base, off = self.deref_base(node)
            subs = [off]
        elif isinstance(node, c_ast.ArrayRef):
            base, subs = self.split_subscripts(node)
        else:
            raise Unsupported("unsupported assignment target", node)
        if not isinstance(base, c_ast.ID):
            raise Unsupported("subscripted expression is not an array variable", node)
        var = self.lookup(base.name)
        if var is None or not isinstance(var.type, Array):
            raise Unsupported(f"'{base.name}' is not an array", base)
        if len(subs) != var.type.rank:
            raise Unsupported(
                f"'{base.name}' has {var.type.rank} dimensions but is subscripted with {len(subs)}",
                node,
            )
        assert var.slot is not None
        return LValue(var.slot, [self.emit_index(s) for s in subs], var.type.elem)

    def emit_index(self, node: c_ast.Node) -> ir.Value:
        """An integer expression as `index`; signed +,-,* stay in index arithmetic (C UB on overflow)."""
        with self.loc(node):
            if isinstance(node, c_ast.ID):
                var = self.lookup(node.name)
                if var is not None and var.index is not None:
                    return var.index
            if isinstance(node, c_ast.Constant) and is_int_literal(node):
                return self.cindex(int_literal(node.value, node)[0])
            if isinstance(node, c_ast.BinaryOp) and node.op in ("+", "-", "*"):
                t = self.scalar_type_of(node)
                if t.is_int and t.signed:
                    a, b = self.emit_index(node.left), self.emit_index(node.right)
                    op = {"+": arith.addi, "-": arith.subi, "*": arith.muli}[node.op]
                    return op(a, b)
            if isinstance(node, c_ast.UnaryOp) and node.op == "-":
                t = self.scalar_type_of(node)
                if t.is_int and t.signed:
                    return arith.subi(self.cindex(0), self.emit_index(node.expr))
            v, t = self.emit_expr(node)
            return self.as_index(v, t)

    def emit_unary(self, node: c_ast.UnaryOp) -> tuple[ir.Value, Scalar]:
        op = node.op
        if op == "sizeof":
            target = node.expr
            t = (
                self.file.resolve(target.type, allow_vla=False)
                if isinstance(target, c_ast.Typename)
                else self.type_of(target)
            )
            return self.const(ULONG, sizeof(t, node)), ULONG
        if op == "&":
            raise Unsupported("taking the address of a variable ('&') is not supported", node)
        if op in ("++", "--", "p++", "p--"):
            lv = self.emit_lvalue(node.expr)
            old = memref.load(lv.memref, lv.indices)
            t = integer_promote(lv.type)  # x++ is x = x + 1: computed in the promoted type
            wide, one = self.convert(old, lv.type, t), self.const(t, 1)
            if t.is_float:
                new = arith.addf(wide, one) if "+" in op else arith.subf(wide, one)
            else:
                new = arith.addi(wide, one) if "+" in op else arith.subi(wide, one)
            new = self.convert(new, t, lv.type)
            memref.store(new, lv.memref, lv.indices)
            return (old if op.startswith("p") else new), lv.type
        v, t = self.emit_expr(node.expr)
        if op == "!":
            b = self.to_bool(v, t)
            return arith.extui(mlir_type(INT), arith.xori(b, self.const(BOOL, 1))), INT
        pt = integer_promote(t)
        v = self.convert(v, t, pt)
        if op == "+":
            return v, pt
        if op == "-":
            return (arith.negf(v) if pt.is_float else arith.subi(self.const(pt, 0), v)), pt
        if op == "~":
            if pt.is_float:
                raise Unsupported("'~' on a floating-point value", node)
            return arith.xori(v, self.const(pt, -1)), pt
        raise Unsupported(f"unary operator '{op}' is not supported", node)

    def emit_binary(self, node: c_ast.BinaryOp) -> tuple[ir.Value, Scalar]:
        op = node.op
        if op in ("&&", "||"):
            return arith.extui(mlir_type(INT), self.emit_logical(node)), INT
        lt, rt = self.scalar_type_of(node.left), self.scalar_type_of(node.right)
        if op in ("<<", ">>"):
            t = integer_promote(lt)
            a = self.convert(*self.emit_expr(node.left), t)
            b = self.convert(*self.emit_expr(node.right), t)
            if t.is_float:
                raise Unsupported("shift of a floating-point value", node)
            if op == "<<":
                return arith.shli(a, b), t
            return (arith.shrsi(a, b) if t.signed else arith.shrui(a, b)), t
        t = usual_arithmetic_conversion(lt, rt)
        a = self.convert(*self.emit_expr(node.left), t)
        b = self.convert(*self.emit_expr(node.right), t)
        if op in ("<", ">", "<=", ">=", "==", "!="):
            return arith.extui(mlir_type(INT), self.compare(op, a, b, t)), INT
        return self.arith_op(op, a, b, t, node), t

    def compare(self, op: str, a: ir.Value, b: ir.Value, t: Scalar) -> ir.Value:
        if t.is_float:
            pred = {"<": "OLT", ">": "OGT", "<=": "OLE", ">=": "OGE", "==": "OEQ", "!=": "UNE"}[op]
            return arith.cmpf(getattr(arith.CmpFPredicate, pred), a, b)
        s = "s" if t.signed else "u"
        pred = {
            "<": f"{s}lt",
            ">": f"{s}gt",
            "<=": f"{s}le",
            ">=": f"{s}ge",
            "==": "eq",
            "!=": "ne",
        }[op]
        return arith.cmpi(getattr(arith.CmpIPredicate, pred), a, b)

    def arith_op(self, op: str, a: ir.Value, b: ir.Value, t: Scalar, node: c_ast.Node) -> ir.Value:
        if t.is_float:
            table = {"+": arith.addf, "-": arith.subf, "*": arith.mulf, "/": arith.divf}
            if op not in table:
                raise Unsupported(f"operator '{op}' on floating-point values", node)
            return table[op](a, b)
        if op == "/":
            return arith.divsi(a, b) if t.signed else arith.divui(a, b)
        if op == "%":
            return arith.remsi(a, b) if t.signed else arith.remui(a, b)
        table = {
            "+": arith.addi,
            "-": arith.subi,
            "*": arith.muli,
            "&": arith.andi,
            "|": arith.ori,
            "^": arith.xori,
        }
        if op not in table:
            raise Unsupported(f"operator '{op}' is not supported", node)
        return table[op](a, b)

    def emit_cond(self, node: c_ast.Node) -> ir.Value:
        """A C controlling expression as i1."""
        with self.loc(node):
            if isinstance(node, c_ast.BinaryOp) and node.op in ("&&", "||"):
                return self.emit_logical(node)
            if isinstance(node, c_ast.BinaryOp) and node.op in ("<", ">", "<=", ">=", "==", "!="):
                lt, rt = self.scalar_type_of(node.left), self.scalar_type_of(node.right)
                t = usual_arithmetic_conversion(lt, rt)
                a = self.convert(*self.emit_expr(node.left), t)
                b = self.convert(*self.emit_expr(node.right), t)
                return self.compare(node.op, a, b, t)
            if isinstance(node, c_ast.UnaryOp) and node.op == "!":
                return arith.xori(self.emit_cond(node.expr), self.const(BOOL, 1))
            return self.to_bool(*self.emit_expr(node))

    def emit_logical(self, node: c_ast.BinaryOp) -> ir.Value:
        a = self.emit_cond(node.left)
        if ana.is_speculatable(node.right):
            b = self.emit_cond(node.right)
            return arith.andi(a, b) if node.op == "&&" else arith.ori(a, b)
        i1 = ir.IntegerType.get_signless(1)
        ifop = scf.IfOp(a, [i1], has_else=True)
        with ir.InsertionPoint(ifop.then_block):
            scf.yield_([self.emit_cond(node.right) if node.op == "&&" else self.const(BOOL, 1)])
        with ir.InsertionPoint(ifop.else_block):
            scf.yield_([self.const(BOOL, 0) if node.op == "&&" else self.emit_cond(node.right)])
        return ifop.results[0]

    def emit_ternary(self, node: c_ast.TernaryOp) -> tuple[ir.Value, Scalar]:
        t = self.scalar_type_of(node)
        c = self.emit_cond(node.cond)
        if ana.is_speculatable(node.iftrue) and ana.is_speculatable(node.iffalse):
            a = self.convert(*self.emit_expr(node.iftrue), t)
            b = self.convert(*self.emit_expr(node.iffalse), t)
            return arith.select(c, a, b), t
        ifop = scf.IfOp(c, [mlir_type(t)], has_else=True)
        with ir.InsertionPoint(ifop.then_block):
            scf.yield_([self.convert(*self.emit_expr(node.iftrue), t)])
        with ir.InsertionPoint(ifop.else_block):
            scf.yield_([self.convert(*self.emit_expr(node.iffalse), t)])
        return ifop.results[0], t

    def emit_assignment(self, node: c_ast.Assignment) -> tuple[ir.Value, Scalar]:
        lv = self.emit_lvalue(node.lvalue)
        if node.op == "=":
            v = self.convert(*self.emit_expr(node.rvalue), lv.type)
        else:
            op = node.op[:-1]
            old = memref.load(lv.memref, lv.indices)
            rt = self.scalar_type_of(node.rvalue)
            r = self.emit_expr(node.rvalue)[0]
            if op in ("<<", ">>"):
                t = integer_promote(lv.type)
                a, b = self.convert(old, lv.type, t), self.convert(r, rt, t)
                res = (
                    arith.shli(a, b)
                    if op == "<<"
                    else (arith.shrsi(a, b) if t.signed else arith.shrui(a, b))
                )
            else:
                t = usual_arithmetic_conversion(lv.type, rt)
                res = self.arith_op(
                    op, self.convert(old, lv.type, t), self.convert(r, rt, t), t, node
                )
            v = self.convert(res, t, lv.type)
        memref.store(v, lv.memref, lv.indices)
        return v, lv.type

    def emit_call(self, node: c_ast.FuncCall) -> list[tuple[ir.Value, Scalar]]:
        name = self.callee_name(node)
        args = node.args.exprs if node.args else []
        if self.external is not None and name in self.external:
            return self.emit_external_call(self.external[name], args, node)
        if name in self.functions:
            return self.emit_user_call(name, args, node)
        if is_math_function(name):
            t, arity = math_signature(name)
            if len(args) != arity:
                raise Unsupported(f"'{name}' takes {arity} argument(s)", node)
            vals = [self.convert(*self.emit_expr(a), t) for a in args]
            return [(emit_math_call(name, vals), t)]
        if name in self.file.defs:
            raise Unsupported(f"calls '{name}', which is left to the C compiler", node)
        raise Unsupported(
            f"call to '{name}', which is not a function of this file or of math.h", node
        )

    def emit_user_call(
        self, name: str, args: list[c_ast.Node], node: c_ast.Node
    ) -> list[tuple[ir.Value, Scalar]]:
        callee = self.functions[name]
        self.fn.callees.add(name)
        if len(args) != len(callee.params):
            raise Unsupported(
                f"'{name}' takes {len(callee.params)} argument(s), {len(args)} given", node
            )
        operands: list[ir.Value] = []
        for arg, (pname, ptype) in zip(args, callee.params, strict=True):
            if isinstance(ptype, Array):
                operands.append(self.array_argument(arg, ptype, pname))
            else:
                operands.append(self.convert(*self.emit_expr(arg), ptype))
        for g in callee.globals:
            var = self.lookup(g)
            assert var is not None and var.slot is not None
            operands.append(var.slot)
        results = [] if isinstance(callee.ret, Void) else [mlir_type(callee.ret)]
        call = func.CallOp(results, ir.FlatSymbolRefAttr.get(name), operands)
        return [] if isinstance(callee.ret, Void) else [(call.results[0], callee.ret)]

    def emit_external_call(
        self, callee: CFunction, args: list[c_ast.Node], node: c_ast.Node
    ) -> list[tuple[ir.Value, Scalar]]:
        """Call a function left to the C compiler through `__polyflow_cc_<name>` (C ABI)."""
        if len(args) != len(callee.params):
            raise Unsupported(
                f"'{callee.name}' takes {len(callee.params)} argument(s), {len(args)} given", node
            )
        self.called_externally[callee.name] = callee
        ptr = ir.Type.parse("!llvm.ptr")
        operands: list[ir.Value] = []
        for arg, (pname, ptype) in zip(args, callee.params, strict=True):
            if isinstance(ptype, Array):
                base = memref.extract_aligned_pointer_as_index(
                    self.array_argument(arg, ptype, pname)
                )
                address = arith.index_cast(ir.IntegerType.get_signless(64), base)
                operands.append(llvm.inttoptr(ptr, address))
            else:
                operands.append(self.convert(*self.emit_expr(arg), ptype))
        results = [] if isinstance(callee.ret, Void) else [mlir_type(callee.ret)]
        call = func.CallOp(
            results, ir.FlatSymbolRefAttr.get(TRAMPOLINE_PREFIX + callee.name), operands
        )
        return [] if isinstance(callee.ret, Void) else [(call.results[0], callee.ret)]

    def array_argument(self, arg: c_ast.Node, ptype: Array, pname: str) -> ir.Value:
        if not isinstance(arg, c_ast.ID):
            raise Unsupported(
                f"argument for array parameter '{pname}' must be an array variable", arg
            )
        var = self.lookup(arg.name)
        if var is None or not isinstance(var.type, Array) or var.slot is None:
            raise Unsupported(f"'{arg.name}' is not an array", arg)
        at = var.type
        if at.elem != ptype.elem or at.rank != ptype.rank:
            raise Unsupported(
                f"passing '{at}' for parameter '{pname}' of type '{ptype}' is not supported", arg
            )
        for i, (d, p) in enumerate(zip(at.dims, ptype.dims, strict=True)):
            if i > 0 and isinstance(d, int) and isinstance(p, int) and d != p:
                raise Unsupported(
                    f"passing '{at}' for parameter '{pname}' of type '{ptype}' changes its row length",
                    arg,
                )
        target = mlir_type(ptype)
        value = var.slot
        if value.type != target:
            # Static extents C does not check may differ from the callee's view: go through `?`.
            dyn = ir.MemRefType.get([DYN] * at.rank, mlir_type(at.elem))
            value = memref.cast(dyn, value)
            if dyn != target:
                value = memref.cast(target, value)
        return value
