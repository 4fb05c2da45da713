"""C → MLIR (func, scf, memref, arith, math): every function polyflow can compile, with C semantics.

Each compiled C function `f` becomes `func.func private @f` over memrefs (its C parameters, then
the file-scope variables it reaches, in `CFunction.globals` order) and a C-ABI entry
`@__polyflow_f` taking plain pointers and scalars, which builds the memref descriptors and calls
`@f`. Functions using constructs outside the supported subset are not emitted; `CModule.skipped`
says why, so the driver can leave them to the system C compiler.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from mlir import ir
from mlir.dialects import arith, func, llvm, memref, scf
from pycparser import c_ast

from polyflow.frontend import c_analysis as ana
from polyflow.frontend.c_builtins import emit_math_call, is_math_function, math_signature
from polyflow.frontend.c_parse import ParsedC
from polyflow.frontend.c_types import (
    BOOL,
    DOUBLE,
    FLOAT,
    INT,
    KNOWN_TYPEDEFS,
    LONG,
    UINT,
    ULONG,
    Array,
    CType,
    Scalar,
    Unsupported,
    Void,
    integer_promote,
    scalar_from_names,
    usual_arithmetic_conversion,
)
from polyflow.ir.names import CABI_PREFIX, TRAMPOLINE_PREFIX, UNKNOWN_EXTENT_ATTR

DYN = -(2**63)  # MLIR's ShapedType::kDynamic
# Extent reported for a dimension C leaves unknown (`T *p`, `T a[]`): nothing reads it, but it
# must be a valid non-negative size.
UNKNOWN_EXTENT = 2**31 - 1


@dataclass
class CFunction:
    """A C function definition as polyflow sees its interface."""

    name: str
    params: list[tuple[str, Scalar | Array]]
    ret: Scalar | Void
    node: c_ast.FuncDef
    globals: list[str] = field(default_factory=list)
    callees: set[str] = field(default_factory=set)


@dataclass
class CGlobal:
    name: str
    type: Scalar | Array
    node: c_ast.Decl  # the last declaration (the definition, with the initializer, if any)
    first_line: int = 0  # where the name first becomes visible


@dataclass
class CModule:
    """The MLIR module of the compilable functions, and the verdict on every other one."""

    module: ir.Module
    filename: str
    functions: dict[str, CFunction]
    skipped: dict[str, Unsupported]
    globals: dict[str, CGlobal]
    scope: FileScope
    trampolines: dict[str, CFunction] = field(default_factory=dict)

    @property
    def context(self) -> ir.Context:
        return self.module.context


@dataclass
class Var:
    """A C variable: a memref slot (assignable scalar or array), an SSA value, or a loop counter."""

    type: Scalar | Array
    slot: ir.Value | None = None
    value: ir.Value | None = None
    index: ir.Value | None = None


@dataclass
class LValue:
    memref: ir.Value
    indices: list[ir.Value]
    type: Scalar


def global_mlir_type(t: Scalar | Array) -> ir.Type:
    """File-scope variables are passed by reference: arrays as memrefs, scalars as 0-d memrefs."""
    return mlir_type(t) if isinstance(t, Array) else ir.MemRefType.get([], mlir_type(t))


def mlir_type(t: Scalar | Array) -> ir.Type:
    if isinstance(t, Array):
        shape = [d if isinstance(d, int) else DYN for d in t.dims]
        return ir.MemRefType.get(shape, mlir_type(t.elem))
    if t.is_float:
        return ir.F32Type.get() if t.bits == 32 else ir.F64Type.get()
    return ir.IntegerType.get_signless(t.bits)


class FileScope:
    """Typedefs, enum constants, globals and function interfaces of one translation unit."""

    def __init__(self, parsed: ParsedC) -> None:
        self.filename = parsed.filename
        self.typedefs: dict[str, c_ast.Node] = {}
        self.enums: dict[str, int] = {}
        self.globals: dict[str, CGlobal] = {}
        self.defs: dict[str, c_ast.FuncDef] = {}
        self.declared_functions: set[str] = set()
        self.bad_globals: dict[str, Unsupported] = {}
        for ext in parsed.ast.ext:
            self._collect_enums(ext)
            if isinstance(ext, c_ast.Typedef):
                self.typedefs[ext.name] = ext.type
            elif isinstance(ext, c_ast.FuncDef):
                self.defs[ext.decl.name] = ext
            elif isinstance(ext, c_ast.Decl) and isinstance(ext.type, c_ast.FuncDecl):
                self.declared_functions.add(ext.name)
            elif isinstance(ext, c_ast.Decl) and ext.name:
                try:
                    t = self.resolve(ext.type, allow_vla=False)
                    if isinstance(t, Void):
                        raise Unsupported("void variable", ext)
                    first = (
                        self.globals[ext.name].first_line
                        if ext.name in self.globals
                        else ext.coord.line
                    )
                    self.globals[ext.name] = CGlobal(ext.name, t, ext, first)
                except Unsupported as exc:
                    self.bad_globals[ext.name] = exc

    def _collect_enums(self, node: c_ast.Node) -> None:
        for n in ana.walk(node):
            if isinstance(n, c_ast.EnumeratorList):
                value = -1
                for e in n.enumerators:
                    value = self.const_int(e.value) if e.value is not None else value + 1
                    self.enums[e.name] = value

    def const_int(self, node: c_ast.Node) -> int:
        """Fold an integer constant expression (array extents, enum values)."""
        if isinstance(node, c_ast.Constant) and (is_int_literal(node) or node.type == "char"):
            return (
                int_literal(node.value, node)[0]
                if is_int_literal(node)
                else char_literal(node.value)
            )
        if isinstance(node, c_ast.ID) and node.name in self.enums:
            return self.enums[node.name]
        if isinstance(node, c_ast.UnaryOp) and node.op in ("-", "+"):
            v = self.const_int(node.expr)
            return -v if node.op == "-" else v
        if isinstance(node, c_ast.Cast):
            return self.const_int(node.expr)
        if isinstance(node, c_ast.BinaryOp) and node.op in ("+", "-", "*", "/", "%", "<<", ">>"):
            a, b = self.const_int(node.left), self.const_int(node.right)
            if node.op in ("/", "%") and b == 0:
                raise Unsupported("division by zero in a constant expression", node)
            return {
                "+": lambda: a + b,
                "-": lambda: a - b,
                "*": lambda: a * b,
                "/": lambda: int(a / b),
                "%": lambda: a - int(a / b) * b,
                "<<": lambda: a << b,
                ">>": lambda: a >> b,
            }[node.op]()
        raise Unsupported("not an integer constant expression", node)

    def resolve(self, node: c_ast.Node, *, allow_vla: bool) -> CType:
        """The polyflow type of a declarator; pointers to scalars are arrays of unknown extent."""
        if isinstance(node, c_ast.TypeDecl):
            inner = node.type
            if isinstance(inner, c_ast.IdentifierType):
                names = inner.names
                if len(names) == 1 and names[0] in KNOWN_TYPEDEFS:
                    return KNOWN_TYPEDEFS[names[0]]
                if len(names) == 1 and names[0] in self.typedefs:
                    return self.resolve(self.typedefs[names[0]], allow_vla=allow_vla)
                return scalar_from_names(names, node)
            if isinstance(inner, c_ast.Enum):
                return INT
            raise Unsupported(f"{type(inner).__name__.lower()} types are not supported", node)
        if isinstance(node, c_ast.ArrayDecl):
            elem = self.resolve(node.type, allow_vla=allow_vla)
            dim = self._dim(node.dim, allow_vla)
            if isinstance(elem, Scalar):
                return Array(elem, (dim,))
            if isinstance(elem, Array):
                return Array(elem.elem, (dim, *elem.dims))
            raise Unsupported("array of void", node)
        if isinstance(node, c_ast.PtrDecl):
            target = self.resolve(node.type, allow_vla=allow_vla)
            if isinstance(target, Scalar):
                return Array(target, (None,))
            if isinstance(target, Array) and all(d is not None for d in target.dims):
                return Array(target.elem, (None, *target.dims))
            if isinstance(target, Void):
                raise Unsupported("'void *' pointers are not supported", node)
            raise Unsupported("pointers to pointers are not supported", node)
        raise Unsupported(f"{type(node).__name__} declarators are not supported", node)

    def _dim(self, dim: c_ast.Node | None, allow_vla: bool) -> int | c_ast.Node | None:
        if dim is None:
            return None
        try:
            return self.const_int(dim)
        except Unsupported:
            if not allow_vla:
                raise Unsupported("variable-length array outside a function", dim) from None
            return dim

    def interface(self, fdef: c_ast.FuncDef) -> CFunction:
        decl = fdef.decl
        ftype = decl.type
        ret = self.resolve(ftype.type, allow_vla=False)
        if isinstance(ret, Array):
            raise Unsupported("functions returning pointers are not supported", decl)
        params: list[tuple[str, Scalar | Array]] = []
        for p in ftype.args.params if ftype.args else []:
            if isinstance(p, c_ast.EllipsisParam):
                raise Unsupported("variadic functions are not supported", p)
            if isinstance(p, c_ast.Typename):
                t = self.resolve(p.type, allow_vla=True)
                if isinstance(t, Void):
                    continue
                raise Unsupported("unnamed parameter", p)
            t = self.resolve(p.type, allow_vla=True)
            if isinstance(t, Void):
                raise Unsupported("void parameter", p)
            params.append((p.name, t))
        return CFunction(decl.name, params, ret, fdef)


def is_int_literal(node: c_ast.Constant) -> bool:
    """pycparser spells integer literal types out: 'int', 'unsigned long int', ..."""
    return node.type.endswith("int")


def int_literal(text: str, node: c_ast.Node | None = None) -> tuple[int, Scalar]:
    """The value and C type of an integer literal (C11 6.4.4.1)."""
    body = text.rstrip("uUlL")
    suffix = text[len(body) :].lower()
    if body.lower().startswith("0x"):
        value, decimal = int(body, 16), False
    elif body.lower().startswith("0b"):
        value, decimal = int(body[2:], 2), False
    elif len(body) > 1 and body.startswith("0"):
        value, decimal = int(body, 8), False
    else:
        value, decimal = int(body), True
    unsigned = "u" in suffix
    long_ = "l" in suffix
    candidates: list[Scalar] = []
    if not long_:
        candidates += [UINT] if unsigned else ([INT] if decimal else [INT, UINT])
    candidates += [ULONG] if unsigned else ([LONG] if decimal else [LONG, ULONG])
    for t in candidates:
        limit = 2 ** (t.bits - 1) if t.signed else 2**t.bits
        if value < limit:
            return value, t
    raise Unsupported(f"integer literal {text} is too large", node)


def char_literal(text: str) -> int:
    import ast as pyast

    inner = text[1:-1]
    value = pyast.literal_eval(f"'{inner}'") if inner else "\0"
    code = ord(value) if isinstance(value, str) else int(value)
    return code - 256 if code > 127 else code


class FunctionEmitter:
    """Emits one C function as `func.func` over memrefs, raising Unsupported on anything else."""

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
        elif isinstance(node, c_ast.DoWhile):
            self.emit_loop(node.cond, node.stmt, None, do_while=True)
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
    ) -> None:
        """Any C loop as `scf.while`; break/continue/return become flags the loop respects."""
        brk, cont = self.loop_context(body)
        if brk is not None:
            self.set_flag(brk, False)
        stop_flags = [f for f in (self.ret_flag, brk) if f is not None]
        loop = scf.WhileOp([], [])
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
        self.emit_loop(node.cond, node.stmt, node.next, do_while=False)

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
        if not common.signed and (vt.signed or bt.signed or step < 0):
            return None
        return var, vt, start, bound, cmp, step, declared

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


def sizeof(t: CType, node: c_ast.Node) -> int:
    if isinstance(t, Scalar):
        return max(t.bits // 8, 1)
    if isinstance(t, Array) and all(isinstance(d, int) for d in t.dims):
        n = t.elem.bits // 8
        for d in t.dims:
            n *= d  # type: ignore[operator]
        return n
    raise Unsupported("sizeof of this type is not supported", node)


def flatten_initializer(init: c_ast.InitList, dims: list[int]) -> dict[int, c_ast.Node]:
    """Row-major positions of the expressions in a (possibly brace-elided) array initializer."""
    values: dict[int, c_ast.Node] = {}
    strides = [1] * len(dims)
    for i in range(len(dims) - 2, -1, -1):
        strides[i] = strides[i + 1] * dims[i + 1]

    def fill(lst: c_ast.InitList, level: int, base: int) -> None:
        pos = base
        for e in lst.exprs:
            if isinstance(e, c_ast.NamedInitializer):
                raise Unsupported("designated initializers are not supported", e)
            if isinstance(e, c_ast.InitList):
                if level + 1 >= len(dims):
                    raise Unsupported("too many braces in initializer", e)
                # A nested list starts at the next sub-array boundary.
                stride = strides[level]
                pos = base + ((pos - base + stride - 1) // stride) * stride
                fill(e, level + 1, pos)
                pos += stride
            else:
                values[pos] = e
                pos += 1

    fill(init, 0, 0)
    return values


def collect_globals(scope: FileScope, functions: dict[str, CFunction]) -> None:
    """Set each function's `globals`: file-scope variables it or its callees reference."""
    direct = {
        name: sorted(ana.referenced_names(f.node.body) & scope.globals.keys())
        for name, f in functions.items()
    }
    calls = {
        name: ana.called_names(f.node.body) & functions.keys() for name, f in functions.items()
    }
    for name, f in functions.items():
        seen, stack, reach = {name}, [name], set(direct[name])
        while stack:
            for c in calls[stack.pop()]:
                if c not in seen:
                    seen.add(c)
                    stack.append(c)
                    reach |= set(direct[c])
        f.globals = sorted(reach)


def emit_c_abi_entry(module: ir.Module, fn: CFunction, scope: FileScope) -> func.FuncOp:
    """`@__polyflow_f`: the C signature of `f` (pointers for arrays, then one pointer per global)."""
    ptr = ir.Type.parse("!llvm.ptr")
    arg_types = [ptr if isinstance(t, Array) else mlir_type(t) for _, t in fn.params] + [
        ptr for _ in fn.globals
    ]
    results = [] if isinstance(fn.ret, Void) else [mlir_type(fn.ret)]
    emitter = FunctionEmitter(scope, {}, fn)
    with ir.InsertionPoint(module.body), emitter.loc(fn.node.decl):
        fop = func.FuncOp(CABI_PREFIX + fn.name, (arg_types, results))
        entry = fop.add_entry_block()
        emitter.entry = entry
    try:
        with ir.InsertionPoint(entry), emitter.loc(fn.node.decl):
            args = list(entry.arguments)
            for (pname, ptype), arg in zip(fn.params, args, strict=False):
                if isinstance(ptype, Scalar):
                    emitter.bind(pname, Var(ptype, value=arg))
            operands = [
                memref_from_pointer(emitter, arg, t) if isinstance(t, Array) else arg
                for (_, t), arg in zip(fn.params, args, strict=False)
            ]
            for g, arg in zip(fn.globals, args[len(fn.params) :], strict=True):
                gt = scope.globals[g].type
                operands.append(
                    memref_from_pointer(
                        emitter, arg, gt if isinstance(gt, Array) else Array(gt, ())
                    )
                )
            call = func.CallOp(results, ir.FlatSymbolRefAttr.get(fn.name), operands)
            func.ReturnOp(list(call.results))
    except Exception:
        fop.operation.erase()
        raise
    return fop


def memref_from_pointer(emitter: FunctionEmitter, ptr: ir.Value, t: Array) -> ir.Value:
    """A memref descriptor over a C pointer: row-major, extents from the declared dimensions."""
    i64 = ir.IntegerType.get_signless(64)
    rank = t.rank
    fields = "ptr, ptr, i64" + (f", array<{rank} x i64>, array<{rank} x i64>" if rank else "")
    struct = ir.Type.parse(f"!llvm.struct<({fields})>")
    sizes: list[ir.Value] = []
    for d in t.dims:
        if isinstance(d, int):
            sizes.append(arith.constant(i64, d))
        elif d is None:
            sizes.append(arith.constant(i64, UNKNOWN_EXTENT))
        else:
            sizes.append(arith.index_cast(i64, emitter.emit_index(d)))
    strides: list[ir.Value] = [arith.constant(i64, 1)] * rank
    for k in range(rank - 2, -1, -1):
        strides[k] = arith.muli(strides[k + 1], sizes[k + 1])
    desc = llvm.mlir_undef(struct)
    desc = llvm.insertvalue(desc, ptr, [0])
    desc = llvm.insertvalue(desc, ptr, [1])
    desc = llvm.insertvalue(desc, arith.constant(i64, 0), [2])
    for k in range(rank):
        desc = llvm.insertvalue(desc, sizes[k], [3, k])
        desc = llvm.insertvalue(desc, strides[k], [4, k])
    cast = ir.Operation.create(
        "builtin.unrealized_conversion_cast", results=[mlir_type(t)], operands=[desc]
    )
    return cast.results[0]


def emit_c_module(
    parsed: ParsedC, *, only: tuple[str, ...] | None = None, external_calls: bool = False
) -> CModule:
    """Emit every function of the file polyflow can compile (all but `main`, or just `only`).

    With `external_calls`, compiled code may call the file's other functions through C-ABI
    trampolines (`CModule.trampolines`, for the driver to define); without it, a function that
    calls one that is not compiled is not compiled either.
    """
    scope = FileScope(parsed)
    skipped: dict[str, Unsupported] = {}
    functions: dict[str, CFunction] = {}
    for name, fdef in scope.defs.items():
        if fdef.decl.coord.file != parsed.filename or name == "main":
            continue
        if only is not None and name not in only:
            continue
        try:
            functions[name] = scope.interface(fdef)
        except Unsupported as exc:
            skipped[name] = exc
    collect_globals(scope, functions)
    for f in functions.values():
        bad = [g for g in ana.referenced_names(f.node.body) if g in scope.bad_globals]
        if bad and f.name not in skipped:
            g = bad[0]
            skipped[f.name] = Unsupported(
                f"uses global '{g}': {scope.bad_globals[g].reason}", f.node.decl
            )
    ctx = ir.Context()
    with ctx, ir.Location.unknown():
        module = ir.Module.create()
        emitted: dict[str, _Emitted] = {}
        # Functions that fail while being emitted are handled below, by re-emitting their callers.
        external = _external(scope, functions, skipped, external_calls)
        for name, f in functions.items():
            if name not in skipped:
                _emit_one(module, scope, functions, f, external, emitted, skipped)
        # Callers of functions left to the C compiler: call them through trampolines, or give up.
        changed = True
        while changed:
            changed = False
            for name in list(emitted):
                bad = sorted(functions[name].callees & skipped.keys())
                if not bad:
                    continue
                emitted.pop(name).erase()
                functions[name].callees = set()
                changed = True
                if not external_calls:
                    skipped[name] = Unsupported(
                        f"calls '{bad[0]}', which is left to the C compiler",
                        functions[name].node.decl,
                    )
                    continue
                _emit_one(
                    module,
                    scope,
                    functions,
                    functions[name],
                    _external(scope, functions, skipped, True),
                    emitted,
                    skipped,
                )
        trampolines: dict[str, CFunction] = {}
        for e in emitted.values():
            trampolines.update(e.external)
        for callee in trampolines.values():
            _declare_trampoline(module, callee)
        compiled = {n: functions[n] for n in emitted}
        if not module.operation.verify():
            raise RuntimeError("polyflow produced invalid MLIR (a bug in the C frontend)")
    return CModule(module, parsed.filename, compiled, skipped, scope.globals, scope, trampolines)


@dataclass
class _Emitted:
    ops: list[func.FuncOp]
    external: dict[str, CFunction]

    def erase(self) -> None:
        for op in self.ops:
            op.operation.erase()


def _external(
    scope: FileScope,
    functions: dict[str, CFunction],
    skipped: dict[str, Unsupported],
    enabled: bool,
) -> dict[str, CFunction] | None:
    """The file's functions that compiled code must reach through the C compiler's build."""
    if not enabled:
        return None
    out: dict[str, CFunction] = {}
    for name, fdef in scope.defs.items():
        if name in functions and name not in skipped:
            continue
        try:
            out[name] = functions[name] if name in functions else scope.interface(fdef)
        except Unsupported:
            continue
    return out


def _emit_one(
    module: ir.Module,
    scope: FileScope,
    functions: dict[str, CFunction],
    f: CFunction,
    external: dict[str, CFunction] | None,
    emitted: dict[str, _Emitted],
    skipped: dict[str, Unsupported],
) -> None:
    emitter = FunctionEmitter(scope, functions, f, external=external)
    impl: func.FuncOp | None = None
    try:
        impl = emitter.emit(module)  # on failure, emit() has removed what it built
        impl.operation.verify()
        entry = emit_c_abi_entry(module, f, scope)
    except Exception as exc:  # a bug of ours must cost speed, never correctness
        if impl is not None:
            impl.operation.erase()
        skipped[f.name] = (
            exc
            if isinstance(exc, Unsupported)
            else Unsupported(
                f"internal error in polyflow ({type(exc).__name__}: {exc})", f.node.decl
            )
        )
        return
    emitted[f.name] = _Emitted([impl, entry], emitter.called_externally)


def _declare_trampoline(module: ir.Module, callee: CFunction) -> None:
    ptr = ir.Type.parse("!llvm.ptr")
    args = [ptr if isinstance(t, Array) else mlir_type(t) for _, t in callee.params]
    results = [] if isinstance(callee.ret, Void) else [mlir_type(callee.ret)]
    with ir.InsertionPoint(module.body):
        decl = func.FuncOp(TRAMPOLINE_PREFIX + callee.name, (args, results))
        decl.attributes["sym_visibility"] = ir.StringAttr.get("private")
