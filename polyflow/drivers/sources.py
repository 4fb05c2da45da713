"""The frontend's module of a C source (reading what users hand in is polyflow/source_input.py,
which needs no MLIR), and the check that every gradient asked for was defined."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from polyflow.errors import CompileError
from polyflow.frontend.c import CModule, emit_c_module
from polyflow.frontend.c_parse import parse_c
from polyflow.options import Options, grad_spec


def c_module(
    text: str,
    filename: str,
    options: Options,
    source_dir: Path | None = None,
    *,
    only: tuple[str, ...] | None = None,
    external_calls: bool = False,
    elide_initializers: bool = False,
    bind_constant_arguments: bool = False,
) -> CModule:
    """The C frontend's module of `text`: every function it can compile (or those in `only`),
    with calls to the others as external calls where `external_calls` (a build links them);
    `elide_initializers` leaves large constant tables to cc when they are not compiled;
    `bind_constant_arguments` marks the parameters of static functions that every call of the
    unit passes as one constant (a program's build: no caller outside the unit)."""
    parsed = parse_c(text, filename, options, source_dir, elide_initializers=elide_initializers)
    return emit_c_module(
        parsed,
        only=only,
        external_calls=external_calls,
        grad=options.grad or (),
        bind_constant_arguments=bind_constant_arguments,
    )


def check_gradients(declared: Iterable[str], options: Options, filename: str) -> None:
    """CompileError for a function of `options.grad` that no unit defined (`declared`: the
    functions whose gradients the units declared)."""
    found = set(declared)
    for spec in options.grad or ():
        name, _ = grad_spec(spec)
        if name not in found:
            raise CompileError(
                f"cannot differentiate '{name}': no such function is defined", file=filename
            )
