"""Reverse-mode automatic differentiation of affine functions (the `grad` stage, between raising
and scheduling): for each function `f` named in `Options.grad` whose gradient `f_grad` the
frontend declared (f's arguments, then one shadow array per float array argument), `f_grad`
gets f's body followed by its adjoint sweep (`reverse.py`). The adjoint is plain affine code, so
the scheduler, the parallelizer and the GPU mapping treat it like any other function.

Convention (Enzyme's duplicated arguments): on entry each shadow holds the seed of its array
(the adjoint of its final value: the seed of an output, zeros for an input); on return it holds
the adjoint of the array's value on entry — for an input, the vector–Jacobian product.
"""

from __future__ import annotations

from mlir import ir

from polyflow.errors import CompileError
from polyflow.ir.locations import compile_error_at
from polyflow.ir.names import (
    ACTIVE_ARGUMENTS_ATTR,
    DISCARDED_ARGUMENTS_ATTR,
    DISPATCHER_ATTR,
    gradient_name,
)
from polyflow.options import Options, grad_spec

from .reverse import NotDifferentiable, differentiate


def active_arguments(types: list[ir.Type]) -> list[bool]:
    """Which arguments of these types get a shadow: arrays of floating-point elements."""
    return [
        isinstance(t, ir.MemRefType) and isinstance(ir.MemRefType(t).element_type, ir.FloatType)
        for t in types
    ]


def differentiate_module(module: ir.Module, options: Options) -> ir.Module:
    """Give every gradient declared for a function of `options.grad` its body; a function that
    cannot be differentiated is a `CompileError` at the op that stops it."""
    functions = {
        ir.StringAttr(op.attributes["sym_name"]).value: op.operation
        for op in module.body.operations
        if op.operation.name == "func.func"
    }
    for spec in options.grad or ():
        name, _ = grad_spec(spec)
        primal = functions.get(name)
        gradient = functions.get(gradient_name(name))
        if gradient is None:
            continue  # defined by another unit of a C program (the driver checks one does)
        if primal is None:
            raise CompileError(f"no function '{name}' to differentiate")
        if gradient.regions[0].blocks:
            continue  # defined already
        if DISPATCHER_ATTR in primal.attributes:
            # raising split f by whether its arrays overlap: the gradient's arrays do not
            # (Enzyme's convention), so it differentiates the version for that case
            primal = functions[ir.StringAttr(primal.attributes[DISPATCHER_ATTR]).value]
        types = [a.type for a in primal.regions[0].blocks[0].arguments]
        active = (
            [ir.BoolAttr(a).value for a in ir.ArrayAttr(gradient.attributes[ACTIVE_ARGUMENTS_ATTR])]
            if ACTIVE_ARGUMENTS_ATTR in gradient.attributes
            else active_arguments(types)
        )
        discarded = (
            [
                ir.BoolAttr(a).value
                for a in ir.ArrayAttr(gradient.attributes[DISCARDED_ARGUMENTS_ATTR])
            ]
            if DISCARDED_ARGUMENTS_ATTR in gradient.attributes
            else None
        )
        with module.context, primal.location:
            try:
                differentiate(
                    primal,
                    gradient,
                    active,
                    fast=options.reassociation,
                    checkpoint_steps=options.checkpoint_steps,
                    discarded=discarded,
                    for_cpu=options.target == "cpu",
                )
            except NotDifferentiable as error:
                message = f"cannot differentiate '{name}': {error.message}"
                raise compile_error_at(error.location, message) from None
            for attribute in (ACTIVE_ARGUMENTS_ATTR, DISCARDED_ARGUMENTS_ATTR):
                if attribute in gradient.attributes:
                    del gradient.attributes[attribute]
    return module
