"""`RaiseReport`: what raising made of each function, read off the raised IR alone.

Every loop is listed (`affine.for` raised; `scf.for`/`scf.while` not, with the reason the passes
left in `polyflow.not_affine`), then every `scf.if`, `memref.load` and `memref.store` left
unraised, the reductions the passes found (`polyflow.reductions`) and the C line and column of
each. A function is fully affine when no `scf` op and no `memref` access is left, accesses to
C scalar locals (0-d or 1-element allocas) aside. Nothing here depends on how the passes work:
only on the attributes of CONTRACT.md.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from mlir import ir

from polyflow.errors import SourcePosition
from polyflow.ir.functions import raisable_functions, source_names
from polyflow.ir.locations import source_position, statement_name
from polyflow.ir.names import C_LOOP_ATTR, NOT_AFFINE_ATTR, REDUCTIONS_ATTR
from polyflow.report import Json, Remark

_LOOPS = {
    "affine.for": "for",
    "affine.parallel": "parallel",
    "scf.for": "for",
    "scf.while": "while",
}
# What the report calls a loop (the C statement, or `parallel`).
_LOOP_CONSTRUCTS = ("for", "while", "do", "parallel")
_UNRAISED = {
    "scf.if": "if",
    "scf.index_switch": "switch",
    "memref.load": "load",
    "memref.store": "store",
}


@dataclass(frozen=True)
class RaiseItem:
    """One loop, or one `if` or access left unraised, in a function."""

    construct: str  # for, while, do, parallel, if, switch, load, store
    op: str  # the MLIR op, e.g. "scf.while"
    raised: bool
    position: SourcePosition | None
    statement: str | None = None
    reason: str | None = None
    reductions: tuple[str, ...] = ()  # one kind per iter_arg: add mul min max and or xor none

    @property
    def where(self) -> str:
        """`line:col` in the C source, `?` when unknown."""
        return f"{self.position.line}:{self.position.column}" if self.position else "?"

    def to_dict(self) -> dict[str, Any]:
        return {
            "construct": self.construct,
            "op": self.op,
            "raised": self.raised,
            "file": self.position.file if self.position else None,
            "line": self.position.line if self.position else None,
            "column": self.position.column if self.position else None,
            "statement": self.statement,
            "reason": self.reason,
            "reductions": list(self.reductions),
        }


@dataclass(frozen=True)
class FunctionRaise:
    """What raising made of one function."""

    name: str
    position: SourcePosition | None
    items: tuple[RaiseItem, ...] = ()
    fully_affine: bool = False
    error: str | None = None  # why the whole function was not raised

    @property
    def loops(self) -> list[RaiseItem]:
        return [i for i in self.items if i.construct in _LOOP_CONSTRUCTS]

    @property
    def loops_raised(self) -> int:
        return sum(1 for i in self.loops if i.raised)

    @property
    def reasons(self) -> list[str]:
        """Every distinct reason something was not raised, in order of appearance."""
        seen = [self.error] if self.error else []
        for item in self.items:
            if not item.raised and item.reason and item.reason not in seen:
                seen.append(item.reason)
        return seen

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "file": self.position.file if self.position else None,
            "line": self.position.line if self.position else None,
            "column": self.position.column if self.position else None,
            "fully_affine": self.fully_affine,
            "loops": len(self.loops),
            "loops_raised": self.loops_raised,
            "error": self.error,
            "items": [i.to_dict() for i in self.items],
        }


@dataclass(frozen=True)
class RaiseReport:
    """Per function: every loop, raised or not and why, unraised ifs and accesses, reductions."""

    functions: tuple[FunctionRaise, ...] = ()
    enabled: bool = True  # False: the options turned raising off, nothing was tried
    seconds: float | None = None  # wall time raising took, when known
    # CPU time of that (all threads of this process): what raising costs on a busy machine
    cpu_seconds: float | None = None
    skipped: dict[str, str] = field(default_factory=dict)  # left to the C compiler: why

    @classmethod
    def from_module(
        cls,
        module: ir.Module,
        *,
        functions: Iterable[str] | None = None,
        enabled: bool = True,
        seconds: float | None = None,
    ) -> RaiseReport:
        """Read the report off a raised module (all raisable functions, or just `functions`)."""
        wanted = set(functions) if functions is not None else None
        out: list[FunctionRaise] = []
        with module.context:
            names = source_names(module)
            for fn in raisable_functions(module):
                symbol = ir.StringAttr(fn.attributes["sym_name"]).value
                name = names.get(symbol, symbol)  # the alias guard's `f.affine` is reported as `f`
                if wanted is None or name in wanted:
                    out.append(_function_report(fn, name, enabled))
        return cls(functions=tuple(out), enabled=enabled, seconds=seconds)

    def function(self, name: str) -> FunctionRaise:
        """The report of function `name` (KeyError when it has none)."""
        for fn in self.functions:
            if fn.name == name:
                return fn
        raise KeyError(name)

    @property
    def fully_affine(self) -> list[str]:
        """The names of the fully affine functions."""
        return [fn.name for fn in self.functions if fn.fully_affine]

    def format(self) -> str:
        """An aligned text table (function, line:col, construct, raised?, reason) and a summary
        line per function."""
        head = f"raising to affine: {len(self.functions)} function(s), {len(self.fully_affine)} fully affine"
        if not self.enabled:
            head += " (raising is off: -O0 or raise_affine=False)"
        elif self.seconds is not None:
            head += f", {self.seconds * 1000:.1f} ms"
        rows = [("function", "line:col", "construct", "raised", "reason")]
        for fn in self.functions:
            if fn.error:
                where = f"{fn.position.line}:{fn.position.column}" if fn.position else "?"
                rows.append((fn.name, where, "function", "no", fn.error))
            for item in fn.items:
                detail = item.reason or ""
                if item.raised and item.reductions:
                    detail = "carries: " + ", ".join(_carried(k) for k in item.reductions)
                rows.append(
                    (fn.name, item.where, item.construct, "yes" if item.raised else "no", detail)
                )
        widths = [max(len(row[k]) for row in rows) for k in range(4)]
        lines = [head]
        if len(rows) > 1:
            lines += [
                (
                    "  ".join(cell.ljust(w) for cell, w in zip(row[:4], widths, strict=True))
                    + "  "
                    + row[4]
                ).rstrip()
                for row in rows
            ]
        for fn in self.functions:
            verdict = "fully affine" if fn.fully_affine else "not fully affine"
            lines.append(
                f"{fn.name}: {verdict}, {fn.loops_raised}/{len(fn.loops)} loops raised"
                + _reduction_summary(fn)
            )
        for name, reason in self.skipped.items():
            lines.append(f"{name}: not compiled by polyflow: {reason}")
        return "\n".join(lines)

    def remarks(self) -> list[Remark]:
        """The report as the compile report's remarks: one per item (kind `loop` for loops,
        `unraised` for the rest), in order."""
        out: list[Remark] = []
        for fn in self.functions:
            for item in fn.items:
                loop = item.construct in _LOOP_CONSTRUCTS
                if item.raised:
                    message = f"{item.construct} loop raised to affine"
                    if item.reductions:
                        message += f" (carries: {', '.join(_carried(k) for k in item.reductions)})"
                else:
                    what = f"{item.construct} loop" if loop else item.construct
                    message = f"{what} not raised: {item.reason}"
                data: dict[str, Json] = {
                    "construct": item.construct,
                    "op": item.op,
                    "raised": item.raised,
                    "reason": item.reason,
                    "statement": item.statement,
                    "reductions": list(item.reductions),
                }
                out.append(
                    Remark(
                        "raising",
                        "loop" if loop else "unraised",
                        "remark",
                        message,
                        fn.name,
                        item.position,
                        data,
                    )
                )
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "enabled": self.enabled,
            "seconds": self.seconds,
            "cpu_seconds": self.cpu_seconds,
            "fully_affine": self.fully_affine,
            "functions": [fn.to_dict() for fn in self.functions],
            "skipped": dict(self.skipped),
        }

    def to_json(self, *, indent: int | None = 2) -> str:
        """The report as JSON text (see `to_dict`)."""
        return json.dumps(self.to_dict(), indent=indent)


def _carried(kind: str) -> str:
    """What a loop-carried value is, for people: a reduction (`add reduction`) or, for `none`,
    a value each iteration computes from the last (an LCG's state, a running product of a
    non-associative kind): a recurrence, which keeps the loop sequential."""
    return "recurrence" if kind == "none" else f"{kind} reduction"


def _reduction_summary(fn: FunctionRaise) -> str:
    kinds = [k for item in fn.items for k in item.reductions if k != "none"]
    return f", reductions: {', '.join(kinds)}" if kinds else ""


def _collect_ops(fn: ir.Operation) -> list[ir.Operation]:
    ops: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        ops.append(op)
        return ir.WalkResult.ADVANCE

    fn.walk(visit, ir.WalkOrder.PRE_ORDER)
    return ops[1:]  # the function itself first


def _is_scalar_local(memref: ir.Value) -> bool:
    """Whether `memref` is a C scalar local: a 0-d or 1-element `memref.alloca`."""
    if not isinstance(memref, ir.OpResult) or memref.owner.operation.name != "memref.alloca":
        return False
    shape = ir.MemRefType(memref.type).shape
    return shape == [] or shape == [1]


def _string(op: ir.Operation, attr: str) -> str | None:
    if attr not in op.attributes:
        return None
    value = op.attributes[attr]
    return ir.StringAttr(value).value if isinstance(value, ir.StringAttr) else str(value)


def _reductions(op: ir.Operation) -> tuple[str, ...]:
    if REDUCTIONS_ATTR not in op.attributes:
        return ()
    value = op.attributes[REDUCTIONS_ATTR]
    if not isinstance(value, ir.ArrayAttr):
        return (str(value),)
    return tuple(ir.StringAttr(a).value if isinstance(a, ir.StringAttr) else str(a) for a in value)


def _function_report(fn: ir.Operation, name: str, enabled: bool) -> FunctionRaise:
    error = _string(fn, NOT_AFFINE_ATTR)
    if error is not None:
        missing = "the function's raising failed"
    elif enabled:
        missing = "no reason recorded"
    else:
        missing = "raising is off"
    items: list[RaiseItem] = []
    leftover = False  # an scf op or a memref access that keeps the function from being affine
    for op in _collect_ops(fn):
        kind = op.name
        if kind.startswith("scf."):
            leftover = True
        if kind in _LOOPS:
            raised = kind.startswith("affine.")
            construct = _LOOPS[kind]
            reason = None if raised else (_string(op, NOT_AFFINE_ATTR) or missing)
            if kind == "scf.while" and C_LOOP_ATTR in op.attributes:
                construct = ir.StringAttr(op.attributes[C_LOOP_ATTR]).value  # as the C source
                if reason is not None and reason.startswith("while loop: "):
                    made = "a do-while loop" if construct == "do" else "a for loop made a while loop"
                    if construct == "for":
                        made += " by a break, a second exit or a variable step"
                    reason = f"{made}: {reason.removeprefix('while loop: ')}"
            items.append(
                RaiseItem(
                    construct=construct,
                    op=kind,
                    raised=raised,
                    position=source_position(op.location),
                    statement=statement_name(op.location),
                    reason=reason,
                    reductions=_reductions(op),
                )
            )
        elif kind in _UNRAISED:
            reason = _string(op, NOT_AFFINE_ATTR)
            if kind.startswith("memref."):
                memref = op.operands[0 if kind == "memref.load" else 1]
                if _is_scalar_local(memref):
                    if reason is None:
                        continue  # a C scalar local the passes did not need to touch
                else:
                    leftover = True
            items.append(
                RaiseItem(
                    construct=_UNRAISED[kind],
                    op=kind,
                    raised=False,
                    position=source_position(op.location),
                    statement=statement_name(op.location),
                    reason=reason or missing,
                )
            )
    return FunctionRaise(
        name=name,
        position=source_position(fn.location),
        items=tuple(items),
        fully_affine=enabled and error is None and not leftover,
        error=error,
    )
