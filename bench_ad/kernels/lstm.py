"""ADBench's LSTM objective (a stack of diagonal LSTM cells over a character sequence, scored
by the log-likelihood of each next character), differentiated with respect to the cell
parameters `main` and the input/output parameters `extra`.

Per layer m, with input u (the character times extra(0) for the first layer, the hidden state
of the layer below otherwise) and the previous hidden and cell states h, c, each gate reads the
input or the hidden state through a diagonal weight (w ⊙ v + bias):
    c' = c ⊙ σ(gate_0(u)) + σ(gate_1(h)) ⊙ tanh(gate_3(h)),   h' = σ(gate_2(u)) ⊙ tanh(c')
The prediction y = h_top ⊙ extra(1) + extra(2) is normalized by log(Σ exp(y) + 2) (ADBench's
+2) and scored against the next character; the objective is minus the mean score.

A time loop is not expressible in TC: a statement sees its tensors as they were before it (a
statement reading what it writes at t−1 reads the old values), so the recurrence is unrolled
into one group of statements per step, each step's states in tensors of their own. The source
grows with the sequence, so sequences are much shorter than ADBench's (c = 1024, 4096).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from bench_ad.case import Case, CaseSpec, Size, random_inputs
from bench_ad.kernels.tc_case import tc_case

# (layers, sequence length, characters)
SIZES: dict[Size, list[tuple[int, int, int]]] = {
    "small": [(2, 4, 5)],
    "full": [(2, 16, 14), (4, 8, 14)],
}


def cases(size: Size) -> list[CaseSpec]:
    return [CaseSpec("lstm", _label(*shape), partial(_build, *shape)) for shape in SIZES[size]]


def _label(layers: int, length: int, chars: int) -> str:
    return f"l={layers} c={length} b={chars} (unrolled)"


def source(layers: int, length: int) -> str:
    """The objective for `layers` layers over a sequence of `length` characters, unrolled."""
    lines: list[str] = []
    outputs: list[str] = []
    for t in range(length - 1):
        for m in range(layers):
            u = f"seq({t},j) * extra(0,j)" if m == 0 else f"h{t}_{m - 1}(j)"
            h = f"state({m},0,j)" if t == 0 else f"h{t - 1}_{m}(j)"
            c = f"state({m},1,j)" if t == 0 else f"c{t - 1}_{m}(j)"

            def gate(g: int, v: str, m: int = m) -> str:
                return f"main({m},0,{g},j) * ({v}) + main({m},1,{g},j)"

            lines.append(
                f"c{t}_{m}(j) = {c} * sigmoid({gate(0, u)}) "
                f"+ sigmoid({gate(1, h)}) * tanh({gate(3, h)})"
            )
            lines.append(f"h{t}_{m}(j) = sigmoid({gate(2, u)}) * tanh(c{t}_{m}(j))")
            outputs += [f"c{t}_{m}", f"h{t}_{m}"]
        lines.append(f"y{t}(j) = h{t}_{layers - 1}(j) * extra(1,j) + extra(2,j)")
        lines.append(f"z{t}() +=! exp(y{t}(j))")
        reduce = "+=!" if t == 0 else "+="
        lines.append(
            f"loss() {reduce} -seq({t + 1},j) * (y{t}(j) - log(z{t}() + 2.0)) / ({length - 1} * B)"
        )
        outputs += [f"y{t}", f"z{t}"]
    body = "\n  ".join(lines)
    return (
        "def lstm(double(L,P,G,B) main, double(E,B) extra, double(L,S,B) state, double(C,B) seq)"
        f" -> ({', '.join(outputs)}, loss) {{\n  {body}\n}}\n"
    )


def _build(layers: int, length: int, chars: int) -> Case:
    rng = np.random.default_rng(27)
    main, extra, state = random_inputs(rng, (layers, 2, 4, chars), (3, chars), (layers, 2, chars))
    # one-hot characters, as ADBench's text data
    seq = np.eye(chars)[rng.integers(0, chars, length)]
    return tc_case(
        kernel="lstm",
        label=_label(layers, length, chars),
        source=source(layers, length),
        name="lstm",
        inputs={"main": main, "extra": extra, "state": state, "seq": np.ascontiguousarray(seq)},
        wrt=("main", "extra"),
        seeds={"loss": np.array(1.0)},
        reference=__name__,
        notes=["time loop unrolled: one group of statements per step (TC has no recurrences)"],
    )


def _step(sigmoid: Any, tanh: Any, log: Any, exp: Any, main: Any, extra: Any) -> Any:
    """One step of the model on (hidden, cell) lists, generic over the array library."""

    def step(hidden: list[Any], cell: list[Any], char: Any) -> tuple[Any, list[Any], list[Any]]:
        u = char * extra[0]
        new_hidden, new_cell = [], []
        for m in range(main.shape[0]):
            w, b = main[m, 0], main[m, 1]
            c = cell[m] * sigmoid(w[0] * u + b[0]) + sigmoid(w[1] * hidden[m] + b[1]) * tanh(
                w[3] * hidden[m] + b[3]
            )
            h = sigmoid(w[2] * u + b[2]) * tanh(c)
            new_hidden.append(h)
            new_cell.append(c)
            u = h
        y = u * extra[1] + extra[2]
        return y - log(exp(y).sum() + 2.0), new_hidden, new_cell

    return step


def jax_function() -> Callable[..., Any]:
    import jax
    import jax.numpy as jnp

    def lstm(main: Any, extra: Any, state: Any, seq: Any) -> tuple[Any, ...]:
        step = _step(jax.nn.sigmoid, jnp.tanh, jnp.log, jnp.exp, main, extra)

        def body(carry: Any, chars: Any) -> Any:
            hidden, cell = carry
            ynorm, hidden, cell = step(list(hidden), list(cell), chars[0])
            return (jnp.stack(hidden), jnp.stack(cell)), jnp.sum(chars[1] * ynorm)

        carry = (state[:, 0], state[:, 1])
        pairs = jnp.stack([seq[:-1], seq[1:]], axis=1)
        _, scores = jax.lax.scan(body, carry, pairs)
        return (-jnp.sum(scores) / ((seq.shape[0] - 1) * seq.shape[1]),)

    return lstm


def torch_function() -> Callable[..., Any]:
    import torch

    def lstm(main: Any, extra: Any, state: Any, seq: Any) -> tuple[Any, ...]:
        step = _step(torch.sigmoid, torch.tanh, torch.log, torch.exp, main, extra)
        hidden = [state[m, 0] for m in range(main.shape[0])]
        cell = [state[m, 1] for m in range(main.shape[0])]
        total = torch.zeros((), dtype=main.dtype)
        for t in range(seq.shape[0] - 1):
            ynorm, hidden, cell = step(hidden, cell, seq[t])
            total = total + torch.sum(seq[t + 1] * ynorm)
        return (-total / ((seq.shape[0] - 1) * seq.shape[1]),)

    return lstm
