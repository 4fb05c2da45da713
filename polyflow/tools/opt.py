"""polyflow-opt: run polyflow's and MLIR's passes on an MLIR file, for IR-in/IR-out tests.

    polyflow-opt --pass 'raise-mem2reg,canonicalize' input.mlir
    polyflow-opt --list-passes

Reads the file (or stdin for `-`), runs the comma-separated pipeline on every `func.func`
(polyflow passes by name, with `{key=value}` options; any other name is an upstream MLIR pass)
and prints the module. Exit status 1 with the diagnostics when parsing or a pass fails.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from mlir import ir

from polyflow.ir.contexts import new_context
from polyflow.passes import PASSES, run_on_functions


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="polyflow-opt", description=__doc__.split("\n")[0])
    parser.add_argument("input", nargs="?", default="-", help="MLIR file ('-': stdin)")
    parser.add_argument("--pass", dest="pipeline", default="", help="comma-separated passes")
    parser.add_argument("--list-passes", action="store_true", help="list polyflow's passes")
    parser.add_argument(
        "--debug-info", action="store_true", help="print locations (C line and column)"
    )
    args = parser.parse_args(argv)
    if args.list_passes:
        print("\n".join(PASSES))
        return 0
    text = sys.stdin.read() if args.input == "-" else open(args.input).read()
    with new_context() as ctx:
        ctx.allow_unregistered_dialects = False
        try:
            module = ir.Module.parse(text)
            if args.pipeline:
                run_on_functions(module, args.pipeline)
        except (ir.MLIRError, ValueError) as exc:
            print(f"polyflow-opt: error: {exc}", file=sys.stderr)
            return 1
        print(module.operation.get_asm(enable_debug_info=args.debug_info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
