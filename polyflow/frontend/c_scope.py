"""What the C frontend knows about a file's names: variables and lvalues, C types as MLIR types,
the file scope (functions, globals, enums, constant expressions), literals, `sizeof` and array
initializers."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from mlir import ir
from pycparser import c_ast

from polyflow.frontend import c_analysis as ana
from polyflow.frontend.c_parse import ParsedC, is_stand_in_header
from polyflow.frontend.c_pointer_locals import inline_pointer_locals, parameter_names
from polyflow.frontend.c_struct_forwarding import forward_struct_arguments
from polyflow.frontend.c_struct_params import struct_of_pointer, unpack_struct_parameters
from polyflow.frontend.c_types import (
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
    scalar_from_names,
)

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
    # struct pointer parameters replaced by the fields it reads (c_struct_params.py): callers
    # pass the struct, so only the C compiler's forwarding body can call the compiled code
    unpacked: bool = False
    # a header's function (`static inline`, GSL's `gsl_vector_get`) compiled only for the
    # file's compiled functions to call: not this unit's definition, so never exported
    helper: bool = False
    # of a gradient (`f_grad`, c_gradient.py): the parameters that are shadows
    shadows: frozenset[str] = frozenset()


@dataclass
class CGlobal:
    name: str
    type: Scalar | Array
    node: c_ast.Decl  # the last declaration (the definition, with the initializer, if any)
    first_line: int = 0  # where the name first becomes visible


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
        if t.bits == 80:
            return ir.Type.parse("f80")
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
        # functions only declared, with a prototype, in the file or the project's headers (not
        # in the stand-in system headers the parse reads, whose types are not the real ones)
        self.prototypes: dict[str, c_ast.Decl] = {}
        self.bad_globals: dict[str, Unsupported] = {}
        # the module's string constants (c_expressions.string_constant), by symbol name
        self.string_constants: set[str] = set()
        self.structs: dict[str, c_ast.Struct] = {}  # struct definitions, by tag
        self._interfaces: dict[int, CFunction] = {}
        self._interfaces_in_progress: set[int] = set()
        # calls that pass a struct parameter's fields to a function of this file that unpacks
        # the same struct (c_struct_forwarding.py), by id
        self.forwarded_calls: set[int] = set()
        for ext in parsed.ast.ext:
            self._collect_enums(ext)
            if isinstance(ext, c_ast.Typedef):
                self.typedefs[ext.name] = ext.type
            elif isinstance(ext, c_ast.FuncDef):
                self.defs[ext.decl.name] = ext
            elif isinstance(ext, c_ast.Decl) and isinstance(ext.type, c_ast.FuncDecl):
                self.declared_functions.add(ext.name)
                if ext.type.args is not None and not is_stand_in_header(ext.coord.file):
                    self.prototypes.setdefault(ext.name, ext)
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
            if isinstance(n, c_ast.Struct) and n.name and n.decls is not None:
                self.structs.setdefault(n.name, n)
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
        # once per definition: unpacking struct parameters rewrites the body (c_struct_params)
        known = self._interfaces.get(id(fdef))
        if known is None:
            if id(fdef) in self._interfaces_in_progress:  # functions that call each other
                raise Unsupported("a recursive call passes a struct parameter on", fdef.decl)
            self._interfaces_in_progress.add(id(fdef))
            try:
                inline_pointer_locals(fdef.body, parameter_names(fdef))
                known = self._interfaces[id(fdef)] = self._interface(fdef.decl, fdef)
            finally:
                self._interfaces_in_progress.discard(id(fdef))
        return known

    def prototype_interface(self, name: str) -> CFunction:
        """The interface of a function this file only declares (`prototypes`), for calls to it
        through a trampoline; unnamed parameters get names."""
        decl = self.prototypes[name]
        return self._interface(decl, c_ast.FuncDef(decl, None, None), unnamed_ok=True)

    def _interface(
        self, decl: c_ast.Decl, fdef: c_ast.FuncDef, *, unnamed_ok: bool = False
    ) -> CFunction:
        ftype = decl.type
        ret = self.resolve(ftype.type, allow_vla=False)
        if isinstance(ret, Array):
            raise Unsupported("functions returning pointers are not supported", decl)
        params: list[tuple[str, Scalar | Array]] = []
        struct_params: dict[str, c_ast.Struct] = {}
        # an old-style (K&R) definition names its parameters and declares them after the ')'
        old_style = {d.name: d for d in fdef.param_decls or [] if isinstance(d, c_ast.Decl)}
        for p in ftype.args.params if ftype.args else []:
            if isinstance(p, c_ast.ID):
                if p.name not in old_style:
                    raise Unsupported(f"parameter '{p.name}' has no declaration (implicit int)", p)
                p = old_style[p.name]
            if isinstance(p, c_ast.EllipsisParam):
                raise Unsupported("variadic functions are not supported", p)
            if isinstance(p, c_ast.Typename):
                t = self.resolve(p.type, allow_vla=True)
                if isinstance(t, Void):
                    continue
                if not unnamed_ok:
                    raise Unsupported("unnamed parameter", p)
                params.append((f"arg{len(params)}", t))
                continue
            try:
                t = self.resolve(p.type, allow_vla=True)
            except Unsupported:
                struct = struct_of_pointer(self, p.type) if fdef.body is not None else None
                if struct is None:
                    raise
                struct_params[p.name] = struct  # its fields may become parameters
                continue
            if isinstance(t, Void):
                raise Unsupported("void parameter", p)
            params.append((p.name, t))
        if struct_params:
            harmless = forward_struct_arguments(self, fdef, struct_params)
            self.forwarded_calls |= harmless
            params = unpack_struct_parameters(self, fdef, struct_params, params, harmless)
            return CFunction(decl.name, params, ret, fdef, unpacked=True)
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


def float_literal_value(text: str) -> Fraction:
    """The exact value of a C floating literal's text (decimal or hexadecimal, any suffix)."""
    body = text.rstrip("fFlL")
    if not body.lower().startswith("0x"):
        return Fraction(body)
    mantissa, _, exponent = body[2:].lower().partition("p")
    whole, _, fraction = mantissa.partition(".")
    digits = int(whole + fraction or "0", 16)
    return Fraction(digits, 16 ** len(fraction)) * Fraction(2) ** int(exponent or "0")


def x87_bits(value: Fraction) -> int | None:
    """The 80-bit x87 pattern nearest `value` (ties to even), or None for a value outside the
    normal range (subnormal, infinite)."""
    if value == 0:
        return 0
    sign, magnitude = (1, -value) if value < 0 else (0, value)
    exponent = magnitude.numerator.bit_length() - magnitude.denominator.bit_length()
    if Fraction(2) ** exponent > magnitude:
        exponent -= 1
    significand = round(magnitude / Fraction(2) ** (exponent - 63))  # round(): ties to even
    if significand == 1 << 64:
        significand, exponent = significand >> 1, exponent + 1
    biased = exponent + 16383
    if not 0 < biased < 0x7FFF:
        return None
    return (sign << 79) | (biased << 64) | significand


def scalar_bytes(t: Scalar) -> int:
    """sizeof of a scalar type: long double's 80 bits take 16 bytes (its alignment)."""
    return 16 if t.bits == 80 else max(t.bits // 8, 1)


def sizeof(t: CType, node: c_ast.Node) -> int:
    if isinstance(t, Scalar):
        return scalar_bytes(t)
    if isinstance(t, Array) and all(isinstance(d, int) for d in t.dims):
        n = scalar_bytes(t.elem)
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
