"""`polyflow.raise_report`: what raising makes of the functions of a C file (`--report`'s
first part), for users who want to know why a loop stays unoptimized."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from polyflow.drivers.sources import c_module
from polyflow.options import Options
from polyflow.raising import raise_to_affine
from polyflow.raising.report import RaiseReport
from polyflow.source_input import given_c_source


def raise_report(
    source: str | bytes | os.PathLike[str] | None = None,
    *,
    path: str | os.PathLike[str] | None = None,
    functions: Sequence[str] | None = None,
    options: Options | Mapping[str, Any] | None = None,
) -> RaiseReport:
    """Compile C `source` (text) or the C file at `path` to MLIR, raise its functions (all
    that polyflow compiles, or just `functions`) and report what raising made of each.

    Raising runs whatever `options.raise_affine` and `opt_level` say: the report is about what
    it does. The options still give the preprocessor settings (`include_dirs`, `defines`).
    """
    base = Options.of(options)
    options = base.model_copy(update={"raise_affine": True, "opt_level": max(1, base.opt_level)})
    text, filename, source_dir = given_c_source(source, path)
    # The whole file is compiled, as in a build (so calls between its functions work, and calls
    # to those left to the C compiler go through trampolines); only `functions` are raised.
    cmod = c_module(text, filename, options, source_dir, external_calls=True)
    only = tuple(functions) if functions is not None else None
    start, cpu_start = time.perf_counter(), time.process_time()
    module = raise_to_affine(cmod.module, options, functions=only)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    report = RaiseReport.from_module(
        module, functions=only, enabled=options.raising_enabled, seconds=seconds
    )
    skipped = {
        name: exc.reason for name, exc in cmod.skipped.items() if only is None or name in only
    }
    return RaiseReport(report.functions, report.enabled, report.seconds, cpu_seconds, skipped)
