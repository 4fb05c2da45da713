"""Emitting C expressions: every expression form of a function's emitter (`ExpressionEmitter`):
values, lvalues and subscripts, operators, conditions and calls. Its state and the type rules it
applies (the type of an expression, conversions) are its base, `ExpressionTypes`
(c_expression_types.py); statements and loops build on it (c_statements.py)."""

from __future__ import annotations

import hashlib

from mlir import ir
from mlir.dialects import arith, func, llvm, memref, scf
from pycparser import c_ast

from polyflow.frontend import c_analysis as ana
from polyflow.frontend.c_builtins import (
    emit_math_call,
    is_classification,
    is_math_function,
    math_result_type,
    math_signature,
)
from polyflow.frontend.c_expression_types import ExpressionTypes
from polyflow.frontend.c_scope import (
    DYN,
    CFunction,
    LValue,
    char_literal,
    float_literal_value,
    int_literal,
    is_int_literal,
    mlir_type,
    sizeof,
    x87_bits,
)
from polyflow.frontend.c_types import (
    BOOL,
    INT,
    ULONG,
    Array,
    Scalar,
    Unsupported,
    Void,
    c_string_bytes,
    integer_promote,
    is_string_literal,
    usual_arithmetic_conversion,
)
from polyflow.ir.names import TRAMPOLINE_PREFIX


class ExpressionEmitter(ExpressionTypes):
    """The expressions of one C function being emitted (raising Unsupported on anything outside
    the supported subset)."""

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
            if t.bits == 80:  # exactly: a double in between would round twice
                bits = x87_bits(float_literal_value(node.value))
                if bits is None:
                    raise Unsupported("a long double literal outside the normal range", node)
                attr = ir.Attribute.parse(f"0x{bits:020X} : f80")
                return arith.constant(mlir_type(t), attr), t
            text = node.value.rstrip("fFlL")  # 1e400 is inf, as in C
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
        for known in (self.functions, self.external or {}):
            forwarded = known is self.functions and id(node) in self.file.forwarded_calls
            if name in known and known[name].unpacked and not forwarded:
                raise Unsupported(f"'{name}' takes a struct (its fields were unpacked)", node)
        if self.external is not None and name in self.external:
            return self.emit_external_call(self.external[name], args, node)
        if name in self.functions:
            return self.emit_user_call(name, args, node)
        if is_math_function(name):
            t, arity = math_signature(name)
            if len(args) != arity:
                raise Unsupported(f"'{name}' takes {arity} argument(s)", node)
            vals = []
            for a in args:
                v, at = self.emit_expr(a)
                vals.append(
                    self.convert(v, at, at if is_classification(name) and at.is_float else t)
                )
            return [(emit_math_call(name, vals), math_result_type(name))]
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
            if isinstance(ptype, Array) and is_string_literal(arg):
                # an error message, __FILE__: a constant of the module, passed by address
                operands.append(self.string_constant(arg))
            elif isinstance(ptype, Array):
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

    def string_constant(self, node: c_ast.Constant) -> ir.Value:
        """The address of a private constant holding C string literal `node` (NUL-terminated),
        one per distinct string in the module."""
        data = c_string_bytes(str(node.value), node) + b"\0"
        name = f"__polyflow_str_{hashlib.sha1(data).hexdigest()[:16]}"
        module = self.module
        assert module is not None
        if name not in self.file.string_constants:
            text = "".join(
                chr(b) if 32 <= b < 127 and b not in (34, 92) else f"\\{b:02X}" for b in data
            )
            op = ir.Operation.parse(
                f'llvm.mlir.global private constant @{name}("{text}") '
                f"{{addr_space = 0 : i32}} : !llvm.array<{len(data)} x i8>"
            )
            ir.InsertionPoint.at_block_begin(module.body).insert(op)
            self.file.string_constants.add(name)
        return llvm.mlir_addressof(ir.Type.parse("!llvm.ptr"), name)

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
