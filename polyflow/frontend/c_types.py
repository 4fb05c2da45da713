"""The C types polyflow compiles: scalars and (multi-dimensional) arrays, with C's conversion rules."""

from __future__ import annotations

import platform
from dataclasses import dataclass
from typing import TypeAlias

from pycparser import c_ast


class Unsupported(Exception):
    """A construct polyflow does not compile; the function is left to the C compiler."""

    def __init__(self, reason: str, node: c_ast.Node | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.node = node

    @property
    def where(self) -> str:
        coord = getattr(self.node, "coord", None)
        return f"{coord.file}:{coord.line}:{coord.column}" if coord else ""


@dataclass(frozen=True)
class Scalar:
    """An arithmetic C type: kind 'int' or 'float', its width in bits and signedness."""

    kind: str
    bits: int
    signed: bool = True
    boolean: bool = False  # C's _Bool: stored in 8 bits, every conversion to it tests != 0

    @property
    def is_int(self) -> bool:
        return self.kind == "int"

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def c_spelling(self) -> str:
        if self.boolean:
            return "_Bool"
        if self.is_float:
            return {32: "float", 64: "double", 80: "long double"}[self.bits]
        base = {8: "char", 16: "short", 32: "int", 64: "long"}[self.bits]
        if self.bits == 8:
            return "signed char" if self.signed else "unsigned char"
        return base if self.signed else f"unsigned {base}"

    @property
    def numpy_dtype(self) -> str:
        if self.boolean:
            return "bool"
        if self.is_float:
            return {32: "float32", 64: "float64", 80: "longdouble"}[self.bits]
        return f"{'' if self.signed else 'u'}int{self.bits}"

    def __str__(self) -> str:
        return self.c_spelling


@dataclass(frozen=True)
class Void:
    def __str__(self) -> str:
        return "void"


# A dimension of an array: a constant extent, a C expression over parameters (VLA), or None
# when C does not say (the decayed leading dimension of `T *p` or `T a[]`).
Dim: TypeAlias = int | c_ast.Node | None


@dataclass(frozen=True)
class Array:
    """A row-major array of scalars; pointers to scalars are arrays of unknown leading extent."""

    elem: Scalar
    dims: tuple[Dim, ...]

    @property
    def rank(self) -> int:
        return len(self.dims)

    def __str__(self) -> str:
        shown = "".join(f"[{d if isinstance(d, int) else '?'}]" for d in self.dims)
        return f"{self.elem}{shown}"


CType = Scalar | Array | Void

BOOL = Scalar("int", 1, False)  # an i1 condition, internal only
C_BOOL = Scalar("int", 8, False, boolean=True)
CHAR = Scalar("int", 8, True)
INT = Scalar("int", 32, True)
UINT = Scalar("int", 32, False)
LONG = Scalar("int", 64, True)
ULONG = Scalar("int", 64, False)
FLOAT = Scalar("float", 32)
DOUBLE = Scalar("float", 64)
# x86-64's long double: the x87 80-bit format, stored in 16 bytes (MLIR's f80)
LONG_DOUBLE = Scalar("float", 80)


def has_x87_long_double() -> bool:
    """Whether this machine's C long double is the x87 80-bit format polyflow compiles (x86-64;
    elsewhere it is a 128-bit or 64-bit format, and such functions stay with cc)."""
    return platform.machine() in ("x86_64", "AMD64")


# Library typedefs whose fake-libc definitions are wrong for the real ABI (size_t is `int` there).
KNOWN_TYPEDEFS: dict[str, Scalar] = {
    "size_t": ULONG,
    "ssize_t": LONG,
    "ptrdiff_t": LONG,
    "intptr_t": LONG,
    "uintptr_t": ULONG,
    "int8_t": CHAR,
    "int16_t": Scalar("int", 16, True),
    "int32_t": INT,
    "int64_t": LONG,
    "uint8_t": Scalar("int", 8, False),
    "uint16_t": Scalar("int", 16, False),
    "uint32_t": UINT,
    "uint64_t": ULONG,
    "bool": C_BOOL,
    "_Bool": C_BOOL,
}


def scalar_from_names(names: list[str], node: c_ast.Node) -> Scalar | Void:
    """The type named by a list of C type specifiers (`unsigned long int`, `double`...)."""
    words = [n for n in names if n not in ("signed", "int") or len(names) == 1]
    unsigned = "unsigned" in names
    rest = [w for w in words if w != "unsigned"]
    if not rest:
        return Scalar("int", 32, not unsigned)
    key = " ".join(rest)
    if key == "void":
        return Void()
    if key == "long double":
        if not has_x87_long_double():
            raise Unsupported("'long double' is not supported on this machine", node)
        return LONG_DOUBLE
    if key == "double":
        return DOUBLE
    if key == "float":
        return FLOAT
    if key == "_Bool":
        return C_BOOL
    bits = {"char": 8, "short": 16, "int": 32, "long": 64, "long long": 64}.get(key)
    if bits is None:
        raise Unsupported(f"type '{' '.join(names)}' is not supported", node)
    signed = not unsigned
    return Scalar("int", bits, signed)


def integer_promote(t: Scalar) -> Scalar:
    """C's integer promotions: anything narrower than int becomes int."""
    if t.is_int and t.bits < 32:
        return INT
    return t


def usual_arithmetic_conversion(a: Scalar, b: Scalar) -> Scalar:
    """The common type of a binary arithmetic operation (C11 6.3.1.8)."""
    if a.is_float or b.is_float:
        return max((t for t in (a, b) if t.is_float), key=lambda t: t.bits)
    a, b = integer_promote(a), integer_promote(b)
    if a == b:
        return a
    if a.signed == b.signed:
        return a if a.bits >= b.bits else b
    unsigned, signed = (a, b) if not a.signed else (b, a)
    if unsigned.bits >= signed.bits:
        return unsigned
    return signed  # the signed type is wider, so it holds every value of the unsigned one


def is_string_literal(node: c_ast.Node) -> bool:
    """Whether `node` is a narrow string literal ("text", not L"text")."""
    return (
        isinstance(node, c_ast.Constant)
        and node.type == "string"
        and str(node.value).startswith('"')
    )


_SIMPLE_ESCAPES = {
    "n": 10, "t": 9, "r": 13, "a": 7, "b": 8, "f": 12, "v": 11, "\\": 92, "'": 39, '"': 34,
    "?": 63,
}  # fmt: skip


def c_string_bytes(literal: str, node: c_ast.Node | None = None) -> bytes:
    """The bytes of C string literal `literal` (with its quotes; adjacent literals already
    joined), escapes decoded, UTF-8 for the rest; no terminating NUL."""
    body = literal[1:-1]
    out = bytearray()
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode()
            i += 1
            continue
        e = body[i + 1] if i + 1 < len(body) else ""
        if e in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[e])
            i += 2
        elif e in "01234567" and e:
            j = i + 1
            while j < len(body) and j < i + 4 and body[j] in "01234567":
                j += 1
            out.append(int(body[i + 1 : j], 8) & 0xFF)
            i = j
        elif e == "x":
            j = i + 2
            while j < len(body) and body[j] in "0123456789abcdefABCDEF":
                j += 1
            if j == i + 2:
                raise Unsupported("malformed \\x escape in a string literal", node)
            out.append(int(body[i + 2 : j], 16) & 0xFF)
            i = j
        else:
            raise Unsupported(f"escape '\\{e}' in a string literal is not supported", node)
    return bytes(out)
