"""Build one kernel with polyflow, in its own process; the runner calls it for polyflow configs.

    python -m bench_polybench.polyflow_build SOURCE EXE OPTIONS_JSON
    python -m bench_polybench.polyflow_build --version

Prints the build report as JSON on stdout (`compiled`, `fallbacks`, `warnings`,
`parallel_functions`: the functions that start OpenMP threads); a compile error
or a crash of the compiler prints the reason on stderr and exits 1.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys


def version() -> str:
    import polyflow
    from polyflow.toolchain import llvm_bin

    out = subprocess.run(
        [str(llvm_bin("llc")), "--version"], capture_output=True, text=True, check=False
    ).stdout
    match = re.search(r"LLVM version (\S+)", out)
    return f"polyflow {polyflow.__version__} (LLVM {match.group(1) if match else 'unknown'})"


def main(argv: list[str]) -> int:
    if argv == ["--version"]:
        print(version())
        return 0
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    import polyflow

    source, exe, options_json = argv
    options = polyflow.Options.model_validate_json(options_json)
    try:
        report = polyflow.build_program(source, exe, options=options)
    except polyflow.CompileError as exc:
        print(exc.format(), file=sys.stderr)
        return 1
    except Exception as exc:  # a crash of the compiler is a build failure, with its reason
        print(f"polyflow crashed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(
        json.dumps(
            {
                "compiled": list(report.compiled),
                "fallbacks": dict(report.fallbacks),
                "warnings": list(report.warnings),
                "parallel_functions": list(report.parallel_functions),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
