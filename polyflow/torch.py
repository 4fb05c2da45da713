"""TC definitions inside PyTorch models: `polyflow.torch.function(fn)` turns a
`polyflow.tc.define(...)` kernel into a callable on torch tensors whose forward is the compiled
kernel and whose backward is its compiled reverse-mode gradient (`TcFunction.grad`), through a
`torch.autograd.Function`. CPU tensors only (the gradients run on the CPU); arrays cross without
copies where they are contiguous.

    layer = polyflow.torch.function(tc.define(src, "layer"))
    y = layer(x, w)          # torch tensors in, torch tensors out
    y.sum().backward()       # w.grad from polyflow's gradient kernel
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from polyflow.tc import TcFunction

_FLOATS = frozenset({"f16", "f32", "f64"})


def function(fn: TcFunction) -> Callable[..., Any]:
    """A callable on torch tensors running `fn` forward and its gradient backward (see the
    module docstring); gradients flow to the float inputs that require them."""
    inputs = fn.definition.inputs
    gradients: dict[tuple[str, ...], Any] = {}  # fn.grad(wrt), compiled once per wrt

    class _Kernel(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, *args: Any) -> Any:
            arrays = [_array(a, fn.name, t.name) for a, t in zip(args, inputs, strict=True)]
            ctx.save_for_backward(*[a for a in args if isinstance(a, torch.Tensor)])
            ctx.tensor_positions = [k for k, a in enumerate(args) if isinstance(a, torch.Tensor)]
            ctx.others = [a for a in args if not isinstance(a, torch.Tensor)]
            outputs = fn(*arrays)
            outputs = outputs if isinstance(outputs, tuple) else (outputs,)
            made = tuple(torch.from_numpy(np.ascontiguousarray(o)) for o in outputs)
            return made[0] if len(made) == 1 else made

        @staticmethod
        @torch.autograd.function.once_differentiable
        def backward(ctx: Any, *seeds: Any) -> Any:
            saved = iter(ctx.saved_tensors)
            others = iter(ctx.others)
            args = [
                next(saved) if k in ctx.tensor_positions else next(others)
                for k in range(len(inputs))
            ]
            wrt = tuple(
                t.name
                for t, needed in zip(inputs, ctx.needs_input_grad, strict=True)
                if needed and t.element in _FLOATS
            )
            if not wrt:
                return (None,) * len(inputs)
            if wrt not in gradients:
                gradients[wrt] = fn.grad(wrt)
            arrays = [_array(a, fn.name, t.name) for a, t in zip(args, inputs, strict=True)]
            given = [s.detach().cpu().numpy() if s is not None else None for s in seeds]
            adjoints = gradients[wrt](*arrays, seed=given if len(given) > 1 else given[0])
            adjoints = adjoints if isinstance(adjoints, tuple) else (adjoints,)
            by_name = dict(zip(wrt, adjoints, strict=True))
            return tuple(
                torch.from_numpy(by_name[t.name]) if t.name in by_name else None for t in inputs
            )

    def call(*args: Any) -> Any:
        if len(args) != len(inputs):
            raise TypeError(f"{fn.name}() takes {len(inputs)} arguments, {len(args)} given")
        return _Kernel.apply(*args)

    call.__name__ = fn.name
    call.__doc__ = f"polyflow's TC kernel {fn.name} on torch tensors, differentiable"
    return call


def _array(value: Any, function_name: str, name: str) -> Any:
    """A torch tensor as the NumPy array over its memory (a CPU tensor; made contiguous if it
    is not); anything else as given."""
    if not isinstance(value, torch.Tensor):
        return value
    if value.device.type != "cpu":
        raise ValueError(
            f"argument '{name}' of {function_name}() is on {value.device}: polyflow's torch "
            "functions run on the CPU"
        )
    return value.detach().contiguous().numpy()
