"""Emitting C statements and loops (counted `for` loops as `scf.for`, the rest as `scf.while`),
and a whole function: `FunctionEmitter`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from mlir import ir
from mlir.dialects import arith, func, llvm, memref, scf
from pycparser import c_ast

from polyflow.frontend import c_analysis as ana
from polyflow.frontend.c_builtins import is_math_function
from polyflow.frontend.c_expressions import ExpressionEmitter
from polyflow.frontend.c_scope import (
    Var,
    flatten_initializer,
    global_mlir_type,
    mlir_type,
)
from polyflow.frontend.c_types import (
    BOOL,
    Array,
    Scalar,
    Unsupported,
    Void,
    usual_arithmetic_conversion,
)
from polyflow.ir.names import C_LOOP_ATTR, UNKNOWN_EXTENT_ATTR


class FunctionEmitter(ExpressionEmitter):
    """Emits one C function as `func.func` over memrefs, raising Unsupported on anything else."""

    # ----- statements
    def emit_stmt(self, node: c_ast.Node | None) -> None:
        if node is None:
            return
        with self.loc(node):
            self._emit_stmt(node)

    def _emit_stmt(self, node: c_ast.Node) -> None:
        if isinstance(node, c_ast.Compound):
            items = node.block_items or []
            if self.loop_flags and any(self.declares_vla(i) for i in items):
                # Free the block's variable-length arrays each iteration, as C does. Control
                # always reaches the block's end (exits are flags), so one restore suffices.
                saved = llvm.intr_stacksave(ir.Type.parse("!llvm.ptr"))
                with self.scoped():
                    self.emit_block(items)
                llvm.intr_stackrestore(saved)
                return
            with self.scoped():
                self.emit_block(items)
        elif isinstance(node, (c_ast.Decl, c_ast.DeclList)):
            for d in node.decls if isinstance(node, c_ast.DeclList) else [node]:
                self.emit_decl(d)
        elif isinstance(node, c_ast.If):
            self.emit_if(node)
        elif isinstance(node, c_ast.For):
            with self.scoped():
                self.emit_for(node)
        elif isinstance(node, c_ast.While):
            self.emit_loop(node.cond, node.stmt, None, do_while=False)
        elif isinstance(node, c_ast.DoWhile) and self.runs_once(node):
            with self.scoped():  # a macro's `do { ... } while (0)`: its body, no loop
                self.emit_stmt(node.stmt)
        elif isinstance(node, c_ast.DoWhile):
            self.emit_loop(node.cond, node.stmt, None, do_while=True, kind="do")
        elif isinstance(node, c_ast.Break):
            self.set_flag(self.loop_flags[-1][0], True)
        elif isinstance(node, c_ast.Continue):
            self.set_flag(self.loop_flags[-1][1], True)
        elif isinstance(node, c_ast.Return):
            self.emit_return(node)
        elif isinstance(node, c_ast.EmptyStatement):
            pass
        elif isinstance(node, (c_ast.Switch, c_ast.Goto, c_ast.Label, c_ast.Case, c_ast.Default)):
            raise Unsupported(f"'{type(node).__name__.lower()}' statements are not supported", node)
        elif isinstance(node, (c_ast.Typedef, c_ast.Pragma)):
            pass
        else:
            # Expression statements are the future polyhedral statements: name them S0, S1, ...
            # so that schedules and reports can point back at source lines.
            self.statement = f"S{self.statement_count}"
            self.statement_count += 1
            try:
                self.emit_effect(node)
            finally:
                self.statement = None

    def declares_vla(self, node: c_ast.Node) -> bool:
        if not isinstance(node, c_ast.Decl) or not isinstance(node.type, c_ast.ArrayDecl):
            return False
        t = self.file.resolve(node.type, allow_vla=True)
        return isinstance(t, Array) and not all(isinstance(d, int) for d in t.dims)

    def may_exit(self, node: c_ast.Node) -> bool:
        """Whether `node` can set a flag that the rest of its block must respect."""
        if self.ret_flag is not None and ana.contains_return(node):
            return True
        return bool(self.loop_flags) and (ana.contains_break(node) or ana.contains_continue(node))

    def emit_block(self, items: list[c_ast.Node]) -> None:
        for i, item in enumerate(items):
            self.emit_stmt(item)
            rest = items[i + 1 :]
            if rest and self.exit_flags and self.may_exit(item):
                ifop = scf.IfOp(self.not_exited(self.exit_flags))
                with ir.InsertionPoint(ifop.then_block):
                    self.emit_block(rest)
                    scf.yield_([])
                return

    def runs_once(self, node: c_ast.DoWhile) -> bool:
        """`do S while (0)` with no `break` or `continue` of its own: it is S."""
        if ana.contains_break(node.stmt) or ana.contains_continue(node.stmt):
            return False
        try:
            return self.file.const_int(node.cond) == 0
        except Unsupported:
            return False

    def not_exited(self, flags: list[ir.Value]) -> ir.Value:
        live = self.const(BOOL, 1)
        for f in flags:
            live = arith.andi(live, arith.xori(self.flag_is_set(f), self.const(BOOL, 1)))
        return live

    def emit_decl(self, d: c_ast.Decl) -> None:
        if "static" in d.storage or "extern" in d.storage:
            raise Unsupported("static or extern local variables are not supported", d)
        if isinstance(d.type, c_ast.FuncDecl):
            return
        t = self.file.resolve(d.type, allow_vla=True)
        if isinstance(t, Void):
            raise Unsupported("void variable", d)
        if isinstance(t, Array):
            self.emit_local_array(d, t)
            return
        if d.init is not None and d.name not in self.assigned:
            self.bind(d.name, Var(t, value=self.convert(*self.emit_expr(d.init), t)))
            return
        slot = self.alloca_at_entry(ir.MemRefType.get([], mlir_type(t)))
        self.bind(d.name, Var(t, slot=slot))
        if d.init is not None:
            memref.store(self.convert(*self.emit_expr(d.init), t), slot, [])

    def emit_local_array(self, d: c_ast.Decl, t: Array) -> None:
        if t.dims and t.dims[0] is None and isinstance(d.type, c_ast.ArrayDecl):
            t = Array(t.elem, (self.size_from_initializer(d, t), *t.dims[1:]))
        if any(dim is None for dim in t.dims):
            if isinstance(d.type, c_ast.PtrDecl):
                raise Unsupported("local pointer variables are not supported", d)
            raise Unsupported("local array without a size", d)
        if all(isinstance(dim, int) for dim in t.dims):
            slot = self.alloca_at_entry(mlir_type(t))  # type: ignore[arg-type]
        else:
            sizes = [self.emit_index(dim) for dim in t.dims if not isinstance(dim, int)]  # type: ignore[arg-type]
            slot = memref.alloca(mlir_type(t), sizes, [])
        self.bind(d.name, Var(t, slot=slot))
        if d.init is not None:
            self.emit_array_init(d.init, slot, t)

    def size_from_initializer(self, d: c_ast.Decl, t: Array) -> int | None:
        """The outer size of `T a[] = {...}`: its braced rows, or its values over the size of
        a row (brace elision); None where designators or a mix leave it to cc."""
        init = d.init
        inner = t.dims[1:]
        if not isinstance(init, c_ast.InitList) or not init.exprs:
            return None
        if not all(isinstance(dim, int) for dim in inner):
            return None
        if any(isinstance(e, c_ast.NamedInitializer) for e in init.exprs):
            return None
        if not inner:
            return len(init.exprs)
        rows = [isinstance(e, c_ast.InitList) for e in init.exprs]
        if all(rows):
            return len(init.exprs)
        if any(rows):
            return None
        row = 1
        for dim in inner:
            row *= dim  # type: ignore[operator]
        return -(-len(init.exprs) // row)

    def emit_array_init(self, init: c_ast.Node, slot: ir.Value, t: Array) -> None:
        if not isinstance(init, c_ast.InitList):
            raise Unsupported("array initializer must be a braced list", init)
        if not all(isinstance(dim, int) for dim in t.dims):
            raise Unsupported("variable-length arrays cannot be initialized", init)
        dims: list[int] = list(t.dims)  # type: ignore[arg-type]
        values = flatten_initializer(init, dims)
        total = 1
        for dim in dims:
            total *= dim
        for flat in range(total):
            idx, rem = [], flat
            for dim in reversed(dims):
                idx.append(rem % dim)
                rem //= dim
            idx.reverse()
            expr = values.get(flat)
            v = (
                self.convert(*self.emit_expr(expr), t.elem)
                if expr is not None
                else self.const(t.elem, 0)
            )
            memref.store(v, slot, [self.cindex(i) for i in idx])

    def emit_if(self, node: c_ast.If) -> None:
        c = self.emit_cond(node.cond)
        ifop = scf.IfOp(c, [], has_else=node.iffalse is not None)
        with ir.InsertionPoint(ifop.then_block):
            with self.scoped():
                self.emit_stmt(node.iftrue)
            scf.yield_([])
        if node.iffalse is not None:
            with ir.InsertionPoint(ifop.else_block):
                with self.scoped():
                    self.emit_stmt(node.iffalse)
                scf.yield_([])

    def emit_return(self, node: c_ast.Return) -> None:
        if self.ret_flag is None:
            raise AssertionError("return outside tail position without a return flag")
        if node.expr is not None:
            if isinstance(self.fn.ret, Void):
                self.emit_effect(node.expr)
            else:
                assert self.ret_slot is not None
                memref.store(
                    self.convert(*self.emit_expr(node.expr), self.fn.ret), self.ret_slot, []
                )
        self.set_flag(self.ret_flag, True)

    # ----- loops
    def loop_context(self, body: c_ast.Node | None) -> tuple[ir.Value | None, ir.Value | None]:
        brk = self.new_flag() if ana.contains_break(body) else None
        cont = self.new_flag() if ana.contains_continue(body) else None
        return brk, cont

    @contextmanager
    def in_loop(self, brk: ir.Value | None, cont: ir.Value | None) -> Iterator[None]:
        saved = self.exit_flags
        self.exit_flags = [f for f in (self.ret_flag, brk, cont) if f is not None]
        self.loop_flags.append((brk, cont))  # type: ignore[arg-type]
        try:
            yield
        finally:
            self.loop_flags.pop()
            self.exit_flags = saved

    def emit_loop(
        self,
        cond: c_ast.Node | None,
        body: c_ast.Node | None,
        step: c_ast.Node | None,
        *,
        do_while: bool,
        kind: str = "while",
    ) -> None:
        """Any C loop as `scf.while`; break/continue/return become flags the loop respects.
        `kind`: the C statement ("for", "while", "do"), kept on the op for the reports."""
        brk, cont = self.loop_context(body)
        if brk is not None:
            self.set_flag(brk, False)
        stop_flags = [f for f in (self.ret_flag, brk) if f is not None]
        loop = scf.WhileOp([], [])
        if kind != "while":
            loop.operation.attributes[C_LOOP_ATTR] = ir.StringAttr.get(kind)
        before = loop.before.blocks.append()
        after = loop.after.blocks.append()

        def run_body() -> None:
            if cont is not None:
                self.set_flag(cont, False)
            with self.in_loop(brk, cont), self.scoped():
                self.emit_stmt(body)

        def continue_condition() -> ir.Value:
            if cond is None:
                return self.not_exited(stop_flags)
            if not stop_flags:
                return self.emit_cond(cond)
            live = self.not_exited(stop_flags)
            ifop = scf.IfOp(live, [ir.IntegerType.get_signless(1)], has_else=True)
            with ir.InsertionPoint(ifop.then_block):
                scf.yield_([self.emit_cond(cond)])
            with ir.InsertionPoint(ifop.else_block):
                scf.yield_([self.const(BOOL, 0)])
            return ifop.results[0]

        with ir.InsertionPoint(before):
            if do_while:
                run_body()
            scf.condition(continue_condition(), [])
        with ir.InsertionPoint(after):
            if not do_while:
                run_body()
                if step is not None:
                    if stop_flags:
                        guard = scf.IfOp(self.not_exited(stop_flags))
                        with ir.InsertionPoint(guard.then_block):
                            self.emit_effect(step)
                            scf.yield_([])
                    else:
                        self.emit_effect(step)
            scf.yield_([])

    def emit_for(self, node: c_ast.For) -> None:
        canonical = self.match_canonical_for(node)
        if canonical is not None:
            self.emit_scf_for(node, *canonical)
            return
        if isinstance(node.init, c_ast.DeclList):
            for d in node.init.decls:
                self.emit_decl(d)
        elif node.init is not None:
            self.emit_effect(node.init)
        self.emit_loop(node.cond, node.stmt, node.next, do_while=False, kind="for")

    def match_canonical_for(
        self, node: c_ast.For
    ) -> tuple[str, Scalar, c_ast.Node, c_ast.Node, str, int, bool] | None:
        """(var, type, init, bound, comparison, step, declared-here) when `node` is a counted loop."""
        init = node.init
        declared = False
        if (
            isinstance(init, c_ast.DeclList)
            and len(init.decls) == 1
            and init.decls[0].init is not None
        ):
            d = init.decls[0]
            if not isinstance(d.type, c_ast.TypeDecl):
                return None
            var, start, declared = d.name, d.init, True
            try:
                vt = self.file.resolve(d.type, allow_vla=False)
            except Unsupported:
                return None
        elif (
            isinstance(init, c_ast.Assignment)
            and init.op == "="
            and isinstance(init.lvalue, c_ast.ID)
        ):
            var, start = init.lvalue.name, init.rvalue
            found = self.lookup(var)
            if found is None or found.slot is None:
                return None
            vt = found.type
        else:
            return None
        if not isinstance(vt, Scalar) or not vt.is_int or vt.bits not in (32, 64):
            return None
        step = self.match_step(node.next, var)
        cond = node.cond
        if step is None or not isinstance(cond, c_ast.BinaryOp):
            return None
        flip = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}
        if cond.op not in flip:
            return None
        if isinstance(cond.left, c_ast.ID) and cond.left.name == var:
            cmp, bound = cond.op, cond.right
        elif isinstance(cond.right, c_ast.ID) and cond.right.name == var:
            cmp, bound = flip[cond.op], cond.left
        else:
            return None
        if (step > 0) != (cmp in ("<", "<=")):
            return None
        body_writes = ana.assigned_names(node.stmt)
        if var in body_writes or var in ana.referenced_names(bound):
            return None
        if ana.contains_break(node.stmt) or (
            self.ret_flag is not None and ana.contains_return(node.stmt)
        ):
            return None
        if not self.is_loop_invariant(bound, body_writes, node.stmt):
            return None
        try:
            bt = self.scalar_type_of(bound)
            self.scalar_type_of(start)
        except Unsupported:
            return None
        common = usual_arithmetic_conversion(vt, bt)
        if not common.is_int:
            return None
        # compared as unsigned: a signed start or bound takes part only as a constant >= 0 (a
        # negative one would become a huge unsigned value, which the index arithmetic misses)
        if not common.signed and (
            step < 0
            or (vt.signed and not self.is_constant_at_least_zero(start))
            or (bt.signed and not self.is_constant_at_least_zero(bound))
        ):
            return None
        return var, vt, start, bound, cmp, step, declared

    def is_constant_at_least_zero(self, expr: c_ast.Node) -> bool:
        try:
            return self.file.const_int(expr) >= 0
        except Unsupported:
            return False

    def match_step(self, nxt: c_ast.Node | None, var: str) -> int | None:
        def is_var(n: c_ast.Node) -> bool:
            return isinstance(n, c_ast.ID) and n.name == var

        def const(n: c_ast.Node) -> int | None:
            try:
                v = self.file.const_int(n)
            except Unsupported:
                return None
            return v if v > 0 else None

        if isinstance(nxt, c_ast.UnaryOp) and is_var(nxt.expr):
            return {"++": 1, "p++": 1, "--": -1, "p--": -1}.get(nxt.op)
        if isinstance(nxt, c_ast.Assignment) and is_var(nxt.lvalue):
            if nxt.op in ("+=", "-=") and (c := const(nxt.rvalue)) is not None:
                return c if nxt.op == "+=" else -c
            r = nxt.rvalue
            if (
                nxt.op == "="
                and isinstance(r, c_ast.BinaryOp)
                and r.op in ("+", "-")
                and is_var(r.left)
            ):
                if (c := const(r.right)) is not None:
                    return c if r.op == "+" else -c
        return None

    def is_loop_invariant(
        self, expr: c_ast.Node, body_writes: set[str], body: c_ast.Node | None
    ) -> bool:
        if ana.has_side_effects(expr) or not ana.is_speculatable(expr):
            return False
        names = ana.referenced_names(expr)
        if names & body_writes:
            return False
        calls = ana.called_names(body) - {n for n in ana.called_names(body) if is_math_function(n)}
        for n in names:
            var = self.lookup(n)
            if var is None:
                if n in self.file.enums:
                    continue
                return False
            if n in self.fn.globals and calls:
                return False
        return True

    def emit_scf_for(
        self,
        node: c_ast.For,
        var: str,
        vt: Scalar,
        start: c_ast.Node,
        bound: c_ast.Node,
        cmp: str,
        step: int,
        declared: bool,
    ) -> None:
        """A counted loop as `scf.for`; decreasing loops count up a normalized counter."""
        bt = self.scalar_type_of(bound)
        common = usual_arithmetic_conversion(vt, bt)
        st = self.scalar_type_of(start)
        if vt.signed and st.is_int and st.signed and st.bits <= vt.bits:
            a = self.emit_index(start)
        else:
            a = self.as_index(self.convert(*self.emit_expr(start), vt), vt)
        if common.signed:
            b = self.emit_index(bound)
        else:
            b = self.as_index(self.convert(*self.emit_expr(bound), common), common)
        if step > 0:
            lb, ub = a, (arith.addi(b, self.cindex(1)) if cmp == "<=" else b)
            loop = scf.ForOp(lb, ub, self.cindex(step))
        else:
            span = arith.subi(a, b)
            s = self.cindex(-step)
            trips = (
                arith.addi(arith.floordivsi(span, s), self.cindex(1))
                if cmp == ">="
                else arith.ceildivsi(span, s)
            )
            loop = scf.ForOp(self.cindex(0), trips, self.cindex(1))
        brk, cont = self.loop_context(node.stmt)
        with ir.InsertionPoint(loop.body), self.scoped():
            iv = loop.induction_variable
            value = iv if step > 0 else arith.subi(a, arith.muli(iv, self.cindex(-step)))
            self.bind(var, Var(vt, index=value))
            if cont is not None:
                self.set_flag(cont, False)
            with self.in_loop(brk, cont), self.scoped():
                self.emit_stmt(node.stmt)
            scf.yield_([])
        if not declared:
            # C leaves the counter one step past the last iteration (or at its start value).
            if step > 0:
                count = arith.maxsi(
                    arith.ceildivsi(arith.subi(ub, lb), self.cindex(step)), self.cindex(0)
                )
                final = arith.addi(lb, arith.muli(count, self.cindex(step)))
            else:
                final = arith.subi(
                    a, arith.muli(arith.maxsi(trips, self.cindex(0)), self.cindex(-step))
                )
            slot = self.lookup(var)
            assert slot is not None and slot.slot is not None
            memref.store(arith.index_cast(mlir_type(vt), final), slot.slot, [])

    # ----- the function
    def emit(self, module: ir.Module) -> func.FuncOp:
        fn = self.fn
        self.module = module
        arg_types = [mlir_type(t) for _, t in fn.params] + [
            global_mlir_type(self.file.globals[g].type) for g in fn.globals
        ]
        results = [] if isinstance(fn.ret, Void) else [mlir_type(fn.ret)]
        with ir.InsertionPoint(module.body), self.loc(fn.node.decl):
            fop = func.FuncOp(fn.name, (arg_types, results))
            fop.attributes["sym_visibility"] = ir.StringAttr.get("private")
            fop.attributes["llvm.linkage"] = ir.Attribute.parse("#llvm.linkage<internal>")
            # A pointer parameter's extent is unknown: passes must not assume it is disjoint
            # from the other arrays (the entry can check the others at run time).
            unknown = ir.DictAttr.get({UNKNOWN_EXTENT_ATTR: ir.UnitAttr.get()})
            arg_attrs = [
                unknown
                if isinstance(t, Array) and t.dims and t.dims[0] is None
                else ir.DictAttr.get()
                for _, t in fn.params
            ] + [ir.DictAttr.get() for _ in fn.globals]
            if any(len(a) for a in arg_attrs):
                fop.arg_attrs = ir.ArrayAttr.get(list(arg_attrs))
        try:
            self.entry = fop.add_entry_block()
            with ir.InsertionPoint(self.entry), self.loc(fn.node.body):
                args = list(self.entry.arguments)
                for g, arg in zip(fn.globals, args[len(fn.params) :], strict=True):
                    self.bind(g, Var(self.file.globals[g].type, slot=arg))
                for (pname, ptype), arg in zip(fn.params, args, strict=False):
                    if isinstance(ptype, Array) or pname not in self.assigned:
                        self.bind(
                            pname,
                            Var(ptype, slot=arg)
                            if isinstance(ptype, Array)
                            else Var(ptype, value=arg),
                        )
                    else:
                        slot = self.alloca_at_entry(ir.MemRefType.get([], mlir_type(ptype)))
                        memref.store(arg, slot, [])
                        self.bind(pname, Var(ptype, slot=slot))
                self.emit_body(fn.node.body)
        except Exception:  # Unsupported, or a bug of ours: leave no half-built function behind
            fop.operation.erase()
            raise
        return fop

    def emit_body(self, body: c_ast.Compound) -> None:
        items = list(body.block_items or [])
        tail = items[-1] if items and isinstance(items[-1], c_ast.Return) else None
        if tail is not None:
            items = items[:-1]
        if any(ana.contains_return(i) for i in items):
            self.ret_flag = self.new_flag()
            self.set_flag(self.ret_flag, False)
            if not isinstance(self.fn.ret, Void):
                self.ret_slot = self.alloca_at_entry(ir.MemRefType.get([], mlir_type(self.fn.ret)))
                memref.store(self.const(self.fn.ret, 0), self.ret_slot, [])
            self.exit_flags = [self.ret_flag]
            if tail is not None:
                items.append(tail)
                tail = None
        with self.scoped():
            self.emit_block(items)
            if tail is not None:
                with self.loc(tail):
                    if tail.expr is None or isinstance(self.fn.ret, Void):
                        if tail.expr is not None:
                            self.emit_effect(tail.expr)
                        func.ReturnOp([])
                    else:
                        func.ReturnOp([self.convert(*self.emit_expr(tail.expr), self.fn.ret)])
                return
        if isinstance(self.fn.ret, Void):
            func.ReturnOp([])
        elif self.ret_slot is not None:
            func.ReturnOp([memref.load(self.ret_slot, [])])
        else:
            func.ReturnOp([self.const(self.fn.ret, 0)])
