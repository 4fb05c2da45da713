"""isl operation budgets: how much work each isl step of the polyhedral stage may do, and the
error that says one was spent.

isl counts elementary operations (`isl_ctx_set_max_operations`; here roughly one per
microsecond) and fails a call that needs more than its context allows. Every isl step that can
explode on some input runs under a budget: a count, not a clock, so the same input always gets
the same IR and cached results stay valid. One option scales them all:
`Options.isl_max_operations` (the *base*, default `DEFAULT_ISL_MAX_OPERATIONS`; 0 means
unbounded), and each step gets its share of it (`STEP_SHARES`):

| step | share | what it bounds |
|---|---|---|
| dependences | 0.5 | value-based dataflow of one scop (RAW, WAR, WAW together) |
| scheduling | 5 | one run of isl's scheduler on one scop (a second, unfused try gets as much) |
| tiling | 2 | the tiling stage of one scop: smart fusion, tiling, their legality checks |
| index splitting | 1 | cutting one untiled band at one iteration |
| panels | 2 | ordering one factorization's tiles |
| ast | 2 | isl's AST for one scop's schedule |
| independence | 1 | whether one generated loop carries a dependence |

A spent budget raises `BudgetExhausted` (naming the step); the stage then falls back for that
scop only (schedule/__init__.py says how), never for the whole program.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

import islpy as isl

from polyflow.options import Options

# Every kernel of the benchmark suite is optimized in full under the default (see the README's
# compile-time section for what the largest need).
DEFAULT_ISL_MAX_OPERATIONS: int = Options.model_fields["isl_max_operations"].default

Step = Literal[
    "dependences",
    "scheduling",
    "tiling",
    "index splitting",
    "panels",
    "ast",
    "independence",
]

STEP_SHARES: dict[Step, float] = {
    "dependences": 0.5,
    "scheduling": 5,
    "tiling": 2,
    "index splitting": 1,
    "panels": 2,
    "ast": 2,
    "independence": 1,
}


class BudgetExhausted(Exception):
    """An isl step needed more operations than its budget."""

    def __init__(self, step: Step, operations: int) -> None:
        super().__init__(f"{step} ran out of its isl budget ({operations:,} operations)")
        self.step = step
        self.operations = operations


def step_budget(step: Step, base: int | Options = DEFAULT_ISL_MAX_OPERATIONS) -> int:
    """The operations `step` may take for the base budget `base` (an int, or the options'
    `isl_max_operations`); 0 (unbounded) stays 0."""
    if not isinstance(base, int):
        base = base.isl_max_operations
    return int(base * STEP_SHARES[step])


def is_quota_error(error: isl.Error) -> bool:
    """Whether an isl error says that the operation budget is spent."""
    return "maximal number of operations exceeded" in str(error)


def budget_spent(ctx: isl.Context, error: isl.Error) -> bool:
    """Whether `error`, raised under a budget still set on `ctx`, comes from spending it. isl does
    not always say so: a call that hits the limit may just return nothing, and islpy then
    reports the next call's missing argument ("failed to copy arg ..."), or a parse cut short
    as a syntax error. Past the limit every isl call that counts fails, even building a
    universe set: that is the test."""
    if is_quota_error(error):
        return True
    if not ctx.get_max_operations():
        return False
    try:
        isl.BasicSet.universe(isl.Space.set_alloc(ctx, 0, 1))
    except isl.Error:
        return True
    return False


@contextmanager
def isl_budget(ctx: isl.Context, step: Step, operations: int) -> Iterator[None]:
    """Run the block with `operations` isl operations on `ctx` (0: unbounded); a spent budget
    raises `BudgetExhausted(step)`. The context's limit is restored and its count reset after,
    so whoever runs next starts from zero (an enclosing budget restarts its count too)."""
    saved = ctx.get_max_operations()
    ctx.set_max_operations(operations)
    ctx.reset_operations()
    try:
        yield
    except isl.Error as error:
        if budget_spent(ctx, error):
            raise BudgetExhausted(step, operations) from error
        raise
    finally:
        ctx.set_max_operations(saved)
        ctx.reset_operations()


__all__ = [
    "DEFAULT_ISL_MAX_OPERATIONS",
    "STEP_SHARES",
    "BudgetExhausted",
    "Step",
    "budget_spent",
    "is_quota_error",
    "isl_budget",
    "step_budget",
]
