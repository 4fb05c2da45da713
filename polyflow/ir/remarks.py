"""Remarks in the IR: a stage attaches what it has to say about a function to the function
itself (`attach_remarks`), where it survives copies, swaps and forked workers the way the
function does, and the pipeline moves it into the compile report after the stage
(`take_remarks`), so that no stage IR printed for users carries it."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from mlir import ir

from polyflow.ir.functions import source_names
from polyflow.ir.locations import source_position
from polyflow.ir.names import REMARKS_ATTR, symbol_name
from polyflow.report import Json, Remark, Severity


def remark_at(
    loc: ir.Location | None,
    stage: str,
    kind: str,
    severity: Severity,
    message: str,
    data: Mapping[str, Json] | None = None,
    *,
    function: str | None = None,
) -> Remark:
    """A remark at the C/TC position of `loc` (its function filled in by `take_remarks`)."""
    position = source_position(loc) if loc is not None else None
    return Remark(stage, kind, severity, message, function, position, dict(data or {}))


def attach_remarks(fn: ir.Operation, remarks: Iterable[Remark]) -> None:
    """Append `remarks` to those function `fn` (or a module's operation) carries."""
    texts = [json.dumps(r.to_dict()) for r in remarks]
    if not texts:
        return
    held = list(ir.ArrayAttr(fn.attributes[REMARKS_ATTR])) if REMARKS_ATTR in fn.attributes else []
    fn.attributes[REMARKS_ATTR] = ir.ArrayAttr.get(held + [ir.StringAttr.get(t) for t in texts])


def take_remarks(module: ir.Module, names: Mapping[str, str] | None = None) -> list[Remark]:
    """The remarks of every function of `module`, in order, with each one's C/TC name (from
    `names`, the module's `source_names`, when the caller has them), then those the module
    itself holds (a lowering's, once functions are no longer `func.func`); removes them from
    the IR."""
    out: list[Remark] = []
    with module.context:
        for op in module.body.operations:
            fn = op.operation
            if fn.name != "func.func" or REMARKS_ATTR not in fn.attributes:
                continue
            if names is None:
                names = source_names(module)
            symbol = symbol_name(fn)
            name = names.get(symbol, symbol)
            for text in ir.ArrayAttr(fn.attributes[REMARKS_ATTR]):
                remark = Remark.from_dict(json.loads(ir.StringAttr(text).value))
                if remark.function is None:
                    remark = Remark(
                        remark.stage,
                        remark.kind,
                        remark.severity,
                        remark.message,
                        name,
                        remark.position,
                        remark.data,
                    )
                out.append(remark)
            del fn.attributes[REMARKS_ATTR]
        held = module.operation.attributes
        if REMARKS_ATTR in held:  # what a stage said of the whole module
            for text in ir.ArrayAttr(held[REMARKS_ATTR]):
                out.append(Remark.from_dict(json.loads(ir.StringAttr(text).value)))
            del held[REMARKS_ATTR]
    return out
