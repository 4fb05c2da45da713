"""The math.h functions polyflow turns into `math`/`arith` ops."""

from __future__ import annotations

from collections.abc import Callable

from mlir import ir
from mlir.dialects import arith, math

from polyflow.frontend.c_types import DOUBLE, FLOAT, INT, LONG, Scalar

_UNARY_FLOAT: dict[str, Callable[[ir.Value], ir.Value]] = {
    "sqrt": math.sqrt,
    "exp": math.exp,
    "exp2": math.exp2,
    "expm1": math.expm1,
    "log": math.log,
    "log2": math.log2,
    "log10": math.log10,
    "log1p": math.log1p,
    "fabs": math.absf,
    "floor": math.floor,
    "ceil": math.ceil,
    "round": math.round,
    "trunc": math.trunc,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "asin": math.asin,
    "acos": math.acos,
    "atan": math.atan,
    "sinh": math.sinh,
    "cosh": math.cosh,
    "tanh": math.tanh,
    "erf": math.erf,
    "cbrt": math.cbrt,
    "erfc": math.erfc,
    "asinh": math.asinh,
    "acosh": math.acosh,
    "atanh": math.atanh,
}

_BINARY_FLOAT: dict[str, Callable[[ir.Value, ir.Value], ir.Value]] = {
    "pow": math.powf,
    "fmin": arith.minnumf,
    "fmax": arith.maxnumf,
    "fmod": arith.remf,
    "atan2": math.atan2,
    "copysign": math.copysign,
}

_INT_ABS = {"abs": INT, "labs": LONG, "llabs": LONG}

# math.h's classification macros (type-generic; glibc spells them as gcc's builtins). A float
# converts to double exactly, NaN and infinities included, so they all take a double. glibc's
# isinf is __builtin_isinf_sign: -1 for -inf, 1 for +inf.
_CLASSIFY = {
    "isnan": "isnan", "__builtin_isnan": "isnan",
    "isinf": "isinf_sign", "__builtin_isinf_sign": "isinf_sign", "__builtin_isinf": "isinf",
    "isfinite": "isfinite", "__builtin_isfinite": "isfinite",
}  # fmt: skip


def _split_suffix(name: str) -> tuple[str, Scalar] | None:
    """`sqrtf` → (`sqrt`, float); `sqrt` → (`sqrt`, double)."""
    if name in _UNARY_FLOAT or name in _BINARY_FLOAT:
        return name, DOUBLE
    if name.endswith("f") and (name[:-1] in _UNARY_FLOAT or name[:-1] in _BINARY_FLOAT):
        return name[:-1], FLOAT
    return None


def is_math_function(name: str) -> bool:
    return _split_suffix(name) is not None or name in _INT_ABS or name in _CLASSIFY


def math_signature(name: str) -> tuple[Scalar, int]:
    """The argument type and the arity of a math function."""
    if name in _INT_ABS:
        return _INT_ABS[name], 1
    if name in _CLASSIFY:
        return DOUBLE, 1
    base, t = _split_suffix(name)  # type: ignore[misc]
    return t, (1 if base in _UNARY_FLOAT else 2)


def is_classification(name: str) -> bool:
    """isnan, isinf, isfinite (and their __builtin_ spellings): C macros that take any
    floating type, so a long double is classified as itself, not as a double."""
    return name in _CLASSIFY


def math_result_type(name: str) -> Scalar:
    """The type a math function returns (its argument type, but int for classifications)."""
    return INT if name in _CLASSIFY else math_signature(name)[0]


def emit_math_call(name: str, args: list[ir.Value]) -> ir.Value:
    """Emit the op for `name(args)`; arguments are already converted to the signature's type."""
    if name in _INT_ABS:
        return math.absi(args[0])
    if name in _CLASSIFY:
        return _classify(_CLASSIFY[name], args[0])
    base, _ = _split_suffix(name)  # type: ignore[misc]
    if base in _UNARY_FLOAT:
        return _UNARY_FLOAT[base](args[0])
    return _BINARY_FLOAT[base](args[0], args[1])


def _classify(kind: str, x: ir.Value) -> ir.Value:
    """isnan/isfinite/isinf as 0 or 1; glibc's isinf (isinf_sign) as -1, 0 or 1."""
    i32 = ir.IntegerType.get_signless(32)
    inf = arith.constant(x.type, float("inf"))
    if kind == "isnan":
        return arith.extui(i32, arith.cmpf(arith.CmpFPredicate.UNO, x, x))
    if kind == "isfinite":
        return arith.extui(i32, arith.cmpf(arith.CmpFPredicate.OLT, math.absf(x), inf))
    infinite = arith.extui(i32, arith.cmpf(arith.CmpFPredicate.OEQ, math.absf(x), inf))
    if kind == "isinf":
        return infinite
    negative = arith.cmpf(arith.CmpFPredicate.OLT, x, arith.constant(x.type, 0.0))
    return arith.select(negative, arith.subi(arith.constant(i32, 0), infinite), infinite)
