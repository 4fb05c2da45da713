"""The gradients of C functions (`--grad f[:a,b]`): the frontend declares `@f_grad` for the
`grad` stage (polyflow.autodiff) to define, and its C entry `f_grad`, with Enzyme's duplicated
arguments: each active parameter followed by its shadow (an array's shadow is an array of the
same shape; a float scalar's a pointer to one value the adjoint is added to), the seed of a
float result last; `f_grad` returns nothing.

`@f_grad` itself takes f's arguments (its parameters, then the file-scope variables it reaches),
then the shadows in parameter order, then the seed: the order polyflow.autodiff expects. The C
entry reorders. File-scope variables are never active.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import func

from polyflow.frontend.c_abi import emit_c_abi_entry
from polyflow.frontend.c_scope import CFunction, FileScope, mlir_type
from polyflow.frontend.c_types import Array, Scalar, Void
from polyflow.ir.names import ACTIVE_ARGUMENTS_ATTR, NOALIAS_ATTR, gradient_name


class NotDifferentiable(Exception):
    """A `--grad` request the function's interface cannot meet (its message says why)."""


@dataclass
class GradientInterface:
    """`f_grad` as C sees it, and how its arguments map onto `@f_grad`'s."""

    c: CFunction  # the C parameters, in Enzyme's order; f's file-scope variables
    active: list[bool]  # per argument of `@f` (parameters, then file-scope variables)
    order: list[int]  # per argument of `@f_grad`: its position among the C entry's operands


def is_float(t: Scalar | Array) -> bool:
    return (t.elem if isinstance(t, Array) else t).is_float


def gradient_interface(fn: CFunction, active: tuple[str, ...] | None) -> GradientInterface:
    """`f_grad`'s interface for the active parameters `active` (None: every float parameter)."""
    names = [name for name, _ in fn.params]
    floats = [name for name, t in fn.params if is_float(t)]
    if active is None:
        wanted = set(floats)
    else:
        for name in active:
            if name not in names:
                raise NotDifferentiable(
                    f"'{fn.name}' has no parameter '{name}' (parameters: {', '.join(names)})"
                )
            if name not in floats:
                raise NotDifferentiable(
                    f"parameter '{name}' of '{fn.name}' is not floating-point: it has no derivative"
                )
        wanted = set(active)
    taken = set(names)
    params: list[tuple[str, Scalar | Array]] = []
    primal: list[int] = []
    shadows: list[int] = []
    for name, t in fn.params:
        primal.append(len(params))
        params.append((name, t))
        if name in wanted:
            shadows.append(len(params))
            params.append(
                (_fresh(f"d_{name}", taken), t if isinstance(t, Array) else Array(t, (1,)))
            )
    seed: list[int] = []
    if isinstance(fn.ret, Scalar) and fn.ret.is_float:
        seed.append(len(params))
        params.append((_fresh("d_return", taken), fn.ret))
    file_scope = [len(params) + k for k in range(len(fn.globals))]
    c = CFunction(
        gradient_name(fn.name),
        params,
        Void(),
        fn.node,
        globals=list(fn.globals),
        shadows=frozenset(params[k][0] for k in shadows),
    )
    return GradientInterface(
        c,
        [name in wanted for name in names] + [False] * len(fn.globals),
        primal + file_scope + shadows + seed,
    )


def declare_gradient(
    module: ir.Module, impl: func.FuncOp, interface: GradientInterface, scope: FileScope
) -> list[func.FuncOp]:
    """`@f_grad` (declared, private: the `grad` stage gives it its body) and its C entry."""
    primal_types = list(impl.type.inputs)
    c_types = [mlir_type(t) for _, t in interface.c.params]
    extra = [c_types[position] for position in interface.order[len(primal_types) :]]
    with ir.InsertionPoint(module.body), impl.location:
        gradient = func.FuncOp(interface.c.name, (primal_types + extra, []), visibility="private")
        gradient.attributes[ACTIVE_ARGUMENTS_ATTR] = ir.ArrayAttr.get(
            [ir.BoolAttr.get(a) for a in interface.active]
        )
        # the arrays of one call do not overlap (Enzyme's convention, said in the header)
        noalias = ir.DictAttr.get({NOALIAS_ATTR: ir.UnitAttr.get()})
        gradient.arg_attrs = ir.ArrayAttr.get(
            [
                noalias if isinstance(t, ir.MemRefType) else ir.DictAttr.get({})
                for t in primal_types + extra
            ]
        )
        gradient.attributes["llvm.linkage"] = ir.Attribute.parse("#llvm.linkage<internal>")
    entry = emit_c_abi_entry(module, interface.c, scope, order=interface.order)
    return [gradient, entry]


def _fresh(name: str, taken: set[str]) -> str:
    while name in taken:
        name += "_"
    taken.add(name)
    return name
