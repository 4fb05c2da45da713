"""Write what polyflow makes of a fixed corpus, to check that a restructuring changed nothing:
``python scripts/ir_corpus.py write DIR`` then, after the change, ``write DIR2`` and
``python scripts/ir_corpus.py compare DIR DIR2`` (exit status 1 on any difference).

The corpus: the C test programs (``tests/programs``, the example) at -O2 and -O3, the 30
PolyBench kernels at LARGE and -O3, 30 harder random programs (``tests/fuzz/hard_gen.py``) at
-O3, and the TC library's definitions (all sizes 16) at -O3. For each, the ``affine-opt`` IR and
the object file of the compiled functions (for TC: the service's ``kernel.o``). Only public
entry points are used (``polyflow.build_program``, the service's ``run_job``), so the script runs
unchanged against the code before and after (``PYTHONPATH=<old checkout>`` for the old one).

Each item is built in a fresh process (``--jobs`` at a time): isl keeps one context per
process, and what earlier compiles left in it can change how a later one prints the same sets
(`s0 - d1 - 1` or `s0 - 1 - d1`), so only fresh processes compare byte for byte. An item that
fails is recorded as its error text, one that runs past ``--timeout`` seconds as a timeout.
"""

from __future__ import annotations

import argparse
import base64
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# a fixed place for the generated programs: their path ends up in messages and objects
SOURCES = Path(tempfile.gettempdir()) / "polyflow-ir-corpus"


def items() -> list[str]:
    """Every item of the corpus, by name."""
    names = []
    programs = sorted(Path("tests/programs").glob("*.c")) + sorted(Path("examples").glob("*.c"))
    for path in programs:
        names += [f"c-{path.stem}-O2", f"c-{path.stem}-O3"]
    names += [f"bench-{p.stem}" for p in sorted(Path("bench_polybench/kernels").glob("*.c"))]
    names += [f"hard-{seed}" for seed in range(30)]
    sys.path.insert(0, str(ROOT))
    from polyflow.tc_library import LIBRARY

    names += [f"tc-{name}" for name in sorted(LIBRARY)]
    return names


def build_one(name: str, out: Path) -> None:
    """Build item `name` into `out` (in this process)."""
    import polyflow

    if name.startswith("tc-"):
        _build_tc(name.removeprefix("tc-"), out)
        return
    includes: tuple[str, ...] = ()
    defines: tuple[str, ...] = ()
    if name.startswith("c-"):
        stem, level = name.removeprefix("c-").rsplit("-O", 1)
        path = next(
            p
            for p in [Path(f"tests/programs/{stem}.c"), Path(f"examples/{stem}.c")]
            if p.exists()
        )
        opt = int(level)
    elif name.startswith("bench-"):
        path = Path(f"bench_polybench/kernels/{name.removeprefix('bench-')}.c")
        opt, includes, defines = 3, ("bench_polybench/harness",), ("LARGE_DATASET",)
    else:
        sys.path.insert(0, str(ROOT / "tests" / "fuzz"))
        from hard_gen import generate_hard_program

        seed = int(name.removeprefix("hard-"))
        path = SOURCES / f"hard{seed}.c"
        path.write_text(generate_hard_program(seed))
        opt = 3
    options = polyflow.Options(opt_level=opt, include_dirs=includes, defines=defines)
    for emit, suffix in (("affine-opt", "mlir"), ("obj", "o")):
        target = out / f"{name}.{suffix}"
        try:
            polyflow.build_program(path, target, options=options, emit=emit, cache=None)
        except Exception as exc:  # the failure is what is compared
            target.with_suffix(".error").write_text(f"{type(exc).__name__}: {exc}\n")


def _build_tc(name: str, out: Path) -> None:
    sys.path.insert(0, str(ROOT))
    import polyflow.tc as tc
    from polyflow.tc_library import LIBRARY
    from server.jobs import run_job

    source = LIBRARY[name]
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
        return
    ok = outcome["ok"]
    (out / f"tc-{name}.mlir").write_text(ok["stages"]["affine-opt"])
    (out / f"tc-{name}.o").write_bytes(base64.b64decode(ok["artifacts"]["kernel.o"]))


def _run_item(name: str, out: Path, timeout: float) -> str:
    cmd = [sys.executable, str(Path(__file__).resolve()), "one", name, str(out)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        (out / f"{name}.timeout").write_text(f"past {timeout:g} s\n")
        return f"{name}: timeout"
    if done.returncode != 0:
        (out / f"{name}.crash").write_text(done.stderr[-4000:])
        return f"{name}: crashed"
    return name


# An MLIR string literal, for dropping attributes whose values are strings or lists of them.
_STRING = r'"(?:[^"\\]|\\.)*"'


def _without(text: bytes, attributes: list[str]) -> bytes:
    """`text` (MLIR) without the discardable attributes named (`name = "..."` or a list of
    strings), for comparing across a change that moved them out of the IR on purpose."""
    for name in attributes:
        value = rf"(?:{_STRING}|\[(?:{_STRING}(?:, )?)*\])"
        pattern = rf"(?:, )?{re.escape(name)} = {value}"
        text = re.sub(pattern.encode(), b"", text)
        text = text.replace(b"attributes {}", b"").replace(b"{, ", b"{").replace(b"  {", b" {")
    return text


def _compare(a: Path, b: Path, ignore: list[str]) -> int:
    names = sorted({p.name for p in a.iterdir()} | {p.name for p in b.iterdir()})
    differ = [n for n in names if not (a / n).exists() or not (b / n).exists()]

    def same(name: str) -> bool:
        old, new = (a / name).read_bytes(), (b / name).read_bytes()
        if old == new:
            return True
        return bool(ignore) and name.endswith(".mlir") and _without(old, ignore) == _without(
            new, ignore
        )

    differ += [n for n in names if (a / n).exists() and (b / n).exists() and not same(n)]
    for name in sorted(set(differ)):
        print(f"differs: {name}")
    print(f"{len(names)} files, {len(set(differ))} differ")
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    write = sub.add_parser("write", help="build the corpus into DIR")
    write.add_argument("dir", type=Path)
    write.add_argument("--only", help="comma-separated items (c-gemm-O3, bench-lu, tc-matmul...)")
    write.add_argument("--jobs", type=int, default=2, help="items built at a time")
    write.add_argument("--timeout", type=float, default=300, help="seconds per item")
    one = sub.add_parser("one", help="build one item into DIR (what `write` runs per item)")
    one.add_argument("name")
    one.add_argument("dir", type=Path)
    compare = sub.add_parser("compare", help="compare two written corpora byte for byte")
    compare.add_argument("a", type=Path)
    compare.add_argument("b", type=Path)
    compare.add_argument(
        "--ignore-attribute",
        action="append",
        default=[],
        metavar="NAME",
        help="compare the MLIR without this attribute (one the change moved out of the IR)",
    )
    args = parser.parse_args()
    if args.command == "compare":
        return _compare(args.a, args.b, args.ignore_attribute)
    os.chdir(ROOT)  # relative source paths: the same messages from any checkout
    out = args.dir.resolve()
    out.mkdir(parents=True, exist_ok=True)
    SOURCES.mkdir(exist_ok=True)
    if args.command == "one":
        build_one(args.name, out)
        return 0
    wanted = items() if args.only is None else args.only.split(",")
    with ThreadPoolExecutor(args.jobs) as pool:
        for line in pool.map(lambda n: _run_item(n, out, args.timeout), wanted):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
