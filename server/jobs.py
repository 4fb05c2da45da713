"""One compile, as a worker process runs it: a request in, a JSON-able outcome out.

Nothing here executes submitted code: C goes through the preprocessor (fake libc headers only,
no include directories, so `#include "x.h"` or any non-standard header is an error) and the
parser; TC through its own parser. Options that would run a program of the user's choosing or
read their files (`cc`, `include_dirs`, `cflags`) are refused before a job is made
(see `FORBIDDEN_OPTIONS`).
"""

from __future__ import annotations

import base64
import contextlib
import re
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from polyflow.errors import CompileError
from polyflow.options import Options, grad_spec
from polyflow.report import Remark
from polyflow.storage.tuning import apply_choices

from .explore import (
    MLIR_STAGES,
    build_explore,
    polyhedral_off,
    source_loops,
    split_locations,
    uncompiled_c_loops,
)

# Options a request may not set: `cc` names the program that preprocesses C, `include_dirs`
# would let the preprocessor read the service's files.
FORBIDDEN_OPTIONS = frozenset({"cc", "include_dirs", "cflags"})
# `#include <name>` of these is all a C request may include (C11's standard headers and the
# POSIX ones that the fake libc headers polyflow parses with provide).
STANDARD_HEADERS = frozenset(
    """assert.h complex.h ctype.h errno.h fenv.h float.h inttypes.h iso646.h limits.h locale.h
    math.h setjmp.h signal.h stdalign.h stdarg.h stdatomic.h stdbool.h stddef.h stdint.h stdio.h
    stdlib.h stdnoreturn.h string.h tgmath.h threads.h time.h uchar.h wchar.h wctype.h
    unistd.h sys/types.h sys/time.h""".split()
)
_SAFE_DIRECTIVES = frozenset(
    "define undef if ifdef ifndef elif elifdef elifndef else endif pragma line error warning".split()
)
_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(\w+)(.*)$")
_STANDARD_INCLUDE = re.compile(r"^[ \t]*<([\w/.]+)>[ \t]*(//.*|/\*.*)?$")


def run_job(request: dict[str, Any]) -> dict[str, Any]:
    """Compile `request` (the fields of a /v1/compile body, validated, and `tuning`: None or the
    tuned `choices` the service found for it, with the `note` the report gives; with `explore`,
    the answer's `explore` holds the web explorer's data, server/explore.py); returns
    `{"ok": {...response fields...}, "cacheable": bool}` (False: a function ran past the
    compile timeout, so the result depends on the machine's speed) or
    `{"error": {"status", "diagnostics"}}`."""
    try:
        response, cacheable = _compile(request)
        return {"ok": response, "cacheable": cacheable}
    except CompileError as exc:
        return {"error": {"status": 422, "diagnostics": [exc.to_dict()]}}


def _compile(request: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    from mlir import ir

    from polyflow.drivers.compile import check_target, compile_module
    from polyflow.ir.functions import source_names

    options = Options(**request["options"])
    # the tuned choices the service looked up for this request (its cache key holds them)
    tuning: dict[str, Any] | None = request.get("tuning")
    if tuning is not None:
        try:
            options = apply_choices(options, tuning["choices"])
        except ValueError:  # written by another release's options model: compile untuned
            tuning = None
    check_target(options)
    if options.grad and options.target == "cuda":
        raise CompileError("gradients are compiled for the CPU only for now", file="<input>")
    explore = bool(request.get("explore"))
    located = options.debug_locations  # whether the answer's stages keep their locations
    if explore:  # the explorer maps IR lines to source lines: the stages are printed with them
        options = options.model_copy(update={"debug_locations": True})
    keep = frozenset(request["emit"])
    timings: dict[str, float] = {}
    start = time.perf_counter()
    header: str | None = None
    left_out: list[Remark] = []
    uncompiled: list[dict[str, Any]] = []
    if request["language"] == "c":
        context, module, entry, header, left_out, cmod = _c_module(request, options)
        uncompiled = uncompiled_c_loops(cmod, "<input>", entry) if explore else []
    else:
        context, module, entry = _tc_module(request, options)
    timings["frontend"] = (time.perf_counter() - start) * 1e3
    files = ("<input>",) if request["language"] == "c" else ("<tc>",)
    loops: list[dict[str, Any]] = []
    if explore:  # the source's loops, before the pipeline changes the module in place
        with context:
            loops = source_loops(module, files)
    kernels_only = options.target == "cuda" and not options.gpu_emulate
    if kernels_only:  # a client launches the kernels on arrays already in GPU memory
        options = options.model_copy(update={"gpu_device_arrays": True})
        keep = keep | {"ptx"}
    names: dict[str, str] = {}

    def read_names(stage: str, staged: Any) -> None:
        if stage == "affine-opt":  # the symbols the polyhedral stage recorded, as C names
            names.update(source_names(staged))

    # the service keeps results itself (by request, in front of the workers): no cache here
    with context, ir.Location.unknown(), _recording(explore) as recorded:
        compiled = compile_module(
            module,
            options,
            produce="ptx" if kernels_only else "object",
            keep=keep,
            cache=None,
            workers=1,
            after_stage=read_names if explore else None,
        )
    printed = dict(compiled.stages)
    if explore and not located:  # the answer's stages as they are without `explore`
        for name, text in printed.items():
            if name in MLIR_STAGES:
                compiled.stages[name] = split_locations(text)[0]
    timings.update({name: seconds * 1e3 for name, seconds in compiled.timings.items()})
    said = compiled.report
    said.remarks[:0] = left_out
    if tuning is not None:
        said.add(Remark("build", "tuned", "note", tuning["note"]))
    diagnostics: list[dict[str, Any]] = [
        _diagnostic(r) for r in said.remarks if r.severity == "warning"
    ]
    diagnostics += [_diagnostic(r) for r in said.remarks if r.severity == "note"]
    start = time.perf_counter()
    if kernels_only:
        artifacts = _gpu_artifacts(compiled)
    else:
        artifacts = _binaries(compiled.object, compiled.openmp, diagnostics)
        timings["link"] = (time.perf_counter() - start) * 1e3
    if header is not None:
        artifacts["kernel.h"] = header.encode()
    response: dict[str, Any] = {
        "entry": entry,
        "diagnostics": diagnostics,
        "stages": {name: text for name, text in compiled.stages.items() if name in keep},
        "artifacts": {name: base64.b64encode(data).decode() for name, data in artifacts.items()},
        "timings": timings,
        "report": said.to_dict(),
        "tuned": None if tuning is None else tuning["choices"],
        "explore": None,
    }
    if explore:
        response["explore"] = build_explore(
            language=request["language"],
            stages={name: text for name, text in printed.items() if name in keep},
            report=response["report"],
            loops=loops,
            files=files,
            recorded=recorded,
            names=names,
            polyhedral_off=polyhedral_off(options),
            uncompiled=uncompiled,
        )
    return response, compiled.cacheable


@contextlib.contextmanager
def _recording(explore: bool) -> Iterator[dict[str, Any]]:
    """The dependences the polyhedral stage computes within, by function symbol (explore
    only: they cost the time of printing them)."""
    if not explore:
        yield {}
        return
    from polyflow.schedule import recording_dependences

    with recording_dependences() as recorded:
        yield recorded


def _gpu_artifacts(compiled: Any) -> dict[str, bytes]:
    """A CUDA build's artifacts: all kernels' PTX (`kernels.ptx`), each GPU module's PTX
    (`<module>.ptx`, one kernel each, for `cupy.RawModule`), and the host program (`host.mlir`,
    the `gpu` stage: the launches, their grids and arguments, which `polyflow.drivers.gpu_launch`
    runs)."""
    artifacts = {"kernels.ptx": compiled.stages["ptx"].encode(), "host.mlir": compiled.stages["gpu"].encode()}
    for name, text in compiled.ptx.items():
        artifacts[f"{name}.ptx"] = text.encode()
    return artifacts


def _diagnostic(remark: Any) -> dict[str, Any]:
    """A warning or note of the report as the response's `diagnostics` give it: the line a
    compiler prints, and where it points."""
    out: dict[str, Any] = {"severity": remark.severity, "message": remark.text()}
    if remark.position is not None:
        out.update(
            file=remark.position.file, line=remark.position.line, column=remark.position.column
        )
    return out


def _binaries(obj: bytes, openmp: bool, diagnostics: list[dict[str, Any]]) -> dict[str, bytes]:
    """kernel.o (position-independent) and kernel.so, linked against the OpenMP runtime when
    the code has parallel loops (the client then needs libiomp5 at run time; a note says so)."""
    from polyflow.drivers.objects import openmp_link_flags

    with tempfile.TemporaryDirectory(prefix="polyflow-serve-") as tmp:
        (Path(tmp) / "kernel.o").write_bytes(obj)
        runtime: list[str] = []
        if openmp:
            runtime = openmp_link_flags("<input>", static=False)
            diagnostics.append(
                {
                    "severity": "note",
                    "message": "the code has OpenMP loops: link kernel.o with -liomp5, and "
                    "kernel.so finds libiomp5.so at run time (pip install intel-openmp)",
                }
            )
        shared = Path(tmp) / "kernel.so"
        linked = subprocess.run(
            ["cc", "-shared", "-o", str(shared), str(Path(tmp) / "kernel.o"), "-lm", *runtime],
            capture_output=True,
            text=True,
        )
        if linked.returncode != 0:  # the object is ours: a link failure is our bug
            raise RuntimeError(f"linking kernel.so failed: {linked.stderr.strip()}")
        return {"kernel.o": obj, "kernel.so": shared.read_bytes()}


def _c_header(cmod: Any) -> str:
    """The C prototypes of the compiled functions, as kernel.o and kernel.so define them: each
    C function `f` is `__polyflow_f`, arrays are pointers, and file-scope variables it uses
    follow its parameters as pointers."""
    from polyflow.drivers.c_splice import prototype

    lines = [
        "/* polyflow: the functions of kernel.o / kernel.so. Arrays are passed as pointers to",
        "   their first element; file-scope variables a function uses follow its parameters. */",
    ]
    lines += [prototype(fn, cmod.globals) for _, fn in sorted(cmod.functions.items())]
    if cmod.gradients:
        lines.append(
            "/* Gradients (reverse mode): each active argument is followed by its shadow (a float"
        )
        lines.append(
            "   scalar's: a pointer to one value), a float result's seed last; see --emit=header. */"
        )
        lines += [prototype(fn, cmod.globals) for _, fn in sorted(cmod.gradients.items())]
    return "\n".join(lines) + "\n"


def warm_up() -> None:
    """Load everything a compile uses (MLIR, isl, the passes, llc's first run) by compiling a
    small C kernel, so that a worker's first job is as fast as its others."""
    outcome = run_job(
        {
            "language": "c",
            "source": "void warm(int n, double a[64]) { for (int i = 0; i < n; i++) a[i] += 1; }",
            "entry": None,
            "options": {"opt_level": 3},
            "emit": [],
        }
    )
    if "ok" not in outcome:
        raise RuntimeError(f"the compiler does not work in this worker: {outcome}")


def check_includes(source: str) -> None:
    """Refuse (CompileError at the line) any `#include` but `<standard header>`, and any
    directive of a form not known safe (`#/**/include`, `#include MACRO`): the preprocessor would
    otherwise read any file the service can (`#include "/etc/passwd"`)."""
    lines = source.replace("\r\n", "\n").split("\n")
    number = 0
    while number < len(lines):
        first = number
        line = lines[number]
        while line.endswith("\\") and number + 1 < len(lines):  # a continued directive
            number += 1
            line = line[:-1] + lines[number]
        number += 1
        if not line.lstrip().startswith("#"):
            continue
        match = _DIRECTIVE.match(line)
        name = match.group(1) if match else ""
        if name in _SAFE_DIRECTIVES and "dependency" not in line:  # `#pragma GCC dependency "f"`
            continue
        if name == "include" and match is not None:
            header = _STANDARD_INCLUDE.match(match.group(2))
            if header is not None and header.group(1) in STANDARD_HEADERS:
                continue
        raise CompileError(
            "the compile service includes only standard headers (#include <stdio.h>, "
            "<math.h>, ...): put the code of other headers in the source",
            file="<input>",
            line=first + 1,
            column=line.index("#") + 1,
            source_line=lines[first],
        )


def _c_module(
    request: dict[str, Any], options: Options
) -> tuple[Any, Any, str | None, str, list[Remark], Any]:
    """(the MLIR context, the module in it, the entry, the C header of its functions, a warning
    for each function left out, the frontend's CModule) of a C request."""
    from polyflow.drivers.sources import c_module, check_gradients

    check_includes(request["source"])
    entry = request.get("entry")
    differentiated = tuple(grad_spec(spec)[0] for spec in options.grad or ())
    only = (entry, *differentiated) if entry else None
    cmod = c_module(request["source"], "<input>", options, only=only)
    check_gradients(cmod.gradients, options, "<input>")
    if entry and entry not in cmod.functions:
        cmod = c_module(request["source"], "<input>", options)  # to say which ones compile
        known = ", ".join(sorted(cmod.functions)) or "none"
        if entry in cmod.skipped:
            raise _not_compiled(entry, cmod.skipped[entry], f" (compilable functions: {known})")
        raise CompileError(
            f"no function named '{entry}' in the source (compilable functions: {known})",
            file="<input>",
        )
    if not cmod.functions:
        if not cmod.skipped:
            raise CompileError("the source defines no function", file="<input>")
        name, why = next(iter(cmod.skipped.items()))
        others = [f"'{n}' ({_where(e)}: {e.reason})" for n, e in list(cmod.skipped.items())[1:]]
        also = f"; nor {', '.join(others)}" if others else ""
        raise _not_compiled(name, why, also, prefix="no function in the source can be compiled: ")
    return cmod.context, cmod.module, entry, _c_header(cmod), _left_out(cmod), cmod


def _left_out(cmod: Any) -> list[Remark]:
    """A warning for each function of the source that is not compiled (not in kernel.o nor
    kernel.h), at the construct that keeps it out."""
    out = []
    for name, exc in cmod.skipped.items():
        position, reason = cmod.why_skipped(name)
        out.append(
            Remark(
                "frontend",
                "not-compiled",
                "warning",
                f"function '{name}' is not compiled (not in kernel.o or kernel.h): {reason}",
                name,
                position,
                {"reason": exc.reason},
            )
        )
    return out


def _where(exc: Any) -> str:
    coord = getattr(exc.node, "coord", None)
    return f"{coord.line}:{coord.column or 0}" if coord else "?"


def _not_compiled(name: str, exc: Any, tail: str = "", *, prefix: str = "") -> CompileError:
    """CompileError at the construct that keeps function `name` from being compiled."""
    coord = getattr(exc.node, "coord", None)
    return CompileError(
        f"{prefix}cannot compile '{name}': {exc.reason}{tail}",
        file="<input>",
        line=coord.line if coord else 0,
        column=(coord.column or 0) if coord else 0,
    )


def _tc_module(request: dict[str, Any], options: Options) -> tuple[Any, Any, str | None]:
    """(the MLIR context, the module in it, the entry) of a TC request."""
    import polyflow.tc as tc

    try:
        fn = tc.define(request["source"], name=request.get("entry"), options=options)
    except ValueError as exc:  # no such definition, or several and no entry
        raise CompileError(str(exc), file="<tc>") from exc
    missing = [name for name in fn.size_names if name not in (request.get("sizes") or {})]
    if missing:
        raise CompileError(
            f"a TC compile needs the size of every symbolic dimension: give 'sizes' for "
            f"{', '.join(missing)}",
            file="<tc>",
        )
    differentiated = [grad_spec(spec) for spec in options.grad or ()]
    for name, wrt in differentiated:
        if name != fn.name:
            raise CompileError(f"no TC definition '{name}' to differentiate", file="<tc>")
        try:
            fn.grad(wrt)
        except ValueError as exc:  # an input that is not a float input of the definition
            raise CompileError(str(exc), file="<tc>") from None
    context, module = fn.module(request.get("sizes") or {}, grad=bool(differentiated))
    return context, module, fn.name
