"""Write what polyflow makes of a fixed corpus, to check that a restructuring changed nothing:
``python scripts/ir_corpus.py write DIR`` then, after the change, ``write DIR2`` and
``python scripts/ir_corpus.py compare DIR DIR2`` (exit status 1 on any difference).

The corpus: the C test programs (``tests/programs``, the example) at -O2 and -O3, the 30
PolyBench kernels at LARGE and -O3, 30 harder random programs (``tests/fuzz/hard_gen.py``) at
-O3, and the TC library's definitions (all sizes 16) at -O3. For each, the ``affine-opt`` IR and
the object file of the compiled functions (for TC: the service's ``kernel.o``). Only public
entry points are used (``polyflow.build_program``, the service's ``run_job``), so the script runs
unchanged against the code before and after (``PYTHONPATH=<old checkout>`` for the old one).
A build that fails is recorded as its error text, so failures must match too.
"""

from __future__ import annotations

import argparse
import base64
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# a fixed place for the generated programs: their path ends up in messages and objects
SOURCES = Path(tempfile.gettempdir()) / "polyflow-ir-corpus"


def _c_corpus() -> list[tuple[str, Path, int, tuple[str, ...], tuple[str, ...]]]:
    """(name, source, opt level, include dirs, defines) of every C input."""
    items = []
    programs = sorted(Path("tests/programs").glob("*.c")) + sorted(Path("examples").glob("*.c"))
    for path in programs:
        for level in (2, 3):
            items.append((f"c-{path.stem}-O{level}", path, level, (), ()))
    harness = "bench_polybench/harness"
    for path in sorted(Path("bench_polybench/kernels").glob("*.c")):
        items.append((f"bench-{path.stem}", path, 3, (harness,), ("LARGE_DATASET",)))
    return items


def _write_c(out: Path) -> None:
    import polyflow

    for name, path, level, includes, defines in _c_corpus():
        options = polyflow.Options(opt_level=level, include_dirs=includes, defines=defines)
        for emit, suffix in (("affine-opt", "mlir"), ("obj", "o")):
            target = out / f"{name}.{suffix}"
            try:
                polyflow.build_program(path, target, options=options, emit=emit, cache=None)
            except Exception as exc:  # the failure is what is compared
                target.with_suffix(".error").write_text(f"{type(exc).__name__}: {exc}\n")
        print(name, flush=True)
    sys.path.insert(0, str(ROOT / "tests" / "fuzz"))
    from hard_gen import generate_hard_program

    for seed in range(30):
        source = SOURCES / f"hard{seed}.c"
        source.write_text(generate_hard_program(seed))
        options = polyflow.Options(opt_level=3)
        for emit, suffix in (("affine-opt", "mlir"), ("obj", "o")):
            polyflow.build_program(
                source, out / f"hard-{seed}.{suffix}", options=options, emit=emit, cache=None
            )
        print(f"hard-{seed}", flush=True)


def _write_tc(out: Path) -> None:
    sys.path.insert(0, str(ROOT))
    import polyflow.tc as tc
    from polyflow.tc_library import LIBRARY
    from server.jobs import run_job

    for name, source in sorted(LIBRARY.items()):
        fn = tc.define(source, name=name)
        dims = {d for p in fn.definition.inputs for d in (p.dims or ()) if isinstance(d, str)}
        outcome = run_job(
            {
                "language": "tc",
                "source": source,
                "entry": name,
                "options": {"opt_level": 3},
                "emit": ["affine-opt"],
                "sizes": {d: 16 for d in dims},
            }
        )
        if "ok" not in outcome:
            (out / f"tc-{name}.error").write_text(repr(outcome) + "\n")
            continue
        ok = outcome["ok"]
        (out / f"tc-{name}.mlir").write_text(ok["stages"]["affine-opt"])
        (out / f"tc-{name}.o").write_bytes(base64.b64decode(ok["artifacts"]["kernel.o"]))
        print(f"tc-{name}", flush=True)


def _compare(a: Path, b: Path) -> int:
    names = sorted({p.name for p in a.iterdir()} | {p.name for p in b.iterdir()})
    differ = [n for n in names if not (a / n).exists() or not (b / n).exists()]
    differ += [
        n
        for n in names
        if (a / n).exists() and (b / n).exists() and (a / n).read_bytes() != (b / n).read_bytes()
    ]
    for name in sorted(set(differ)):
        print(f"differs: {name}")
    print(f"{len(names)} files, {len(set(differ))} differ")
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    write = sub.add_parser("write", help="build the corpus into DIR")
    write.add_argument("dir", type=Path)
    write.add_argument("--only", choices=["c", "tc"], help="only the C or only the TC part")
    compare = sub.add_parser("compare", help="compare two written corpora byte for byte")
    compare.add_argument("a", type=Path)
    compare.add_argument("b", type=Path)
    args = parser.parse_args()
    if args.command == "compare":
        return _compare(args.a, args.b)
    out = args.dir.resolve()
    out.mkdir(parents=True, exist_ok=True)
    SOURCES.mkdir(exist_ok=True)
    os.chdir(ROOT)  # relative source paths: the same messages from any checkout
    if args.only != "tc":
        _write_c(out)
    if args.only != "c":
        _write_tc(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
