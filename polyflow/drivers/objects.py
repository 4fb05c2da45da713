"""What an object of compiled functions needs around it: whether its code forks OpenMP threads,
which C functions do, and the flags that link it with the OpenMP runtime."""

from __future__ import annotations

import re

from polyflow.errors import CompileError
from polyflow.ir.names import CABI_PREFIX
from polyflow.toolchain import openmp_library_dir

_DEFINE = re.compile(r"^define\b[^@]*@([\w.$]+)\(")


def uses_openmp(llvm_ir: str) -> bool:
    """Whether LLVM IR calls the OpenMP runtime (it has parallel loops)."""
    return "@__kmpc_" in llvm_ir


def openmp_functions(llvm_ir: str) -> list[str]:
    """The C functions whose compiled body starts OpenMP threads (calls `__kmpc_fork_call`),
    by their C name, sorted."""
    found: set[str] = set()
    current: str | None = None
    for line in llvm_ir.splitlines():
        if line.startswith("define"):
            match = _DEFINE.match(line)
            current = match.group(1) if match else None
        elif line.startswith("}"):  # the body ends (a `declare` after it names the runtime)
            current = None
        elif current is not None and "@__kmpc_fork_call(" in line:
            found.add(current.removeprefix(CABI_PREFIX).split(".")[0])
    return sorted(found)


def openmp_link_flags(filename: str, *, static: bool = True) -> list[str]:
    """The link flags of the OpenMP runtime libiomp5 from the intel-openmp wheel. `static`
    (executables): its archive is linked in, so the program runs after the virtual environment
    is gone or on another machine of the same kind; otherwise (an object or a shared library
    handed to someone else's link) `-liomp5`, with a run path to the wheel's directory, so that
    the library loads where that directory exists (and through the loader's search elsewhere)."""
    directory = openmp_library_dir()
    if directory is None:  # the pipeline parallelizes nothing without it: a bug if reached
        raise CompileError(
            "parallel code needs the OpenMP runtime libiomp5 (pip install intel-openmp)",
            file=filename,
        )
    archive = directory / "libiomp5.a"
    if static and archive.exists():
        return [str(archive), "-lpthread", "-ldl", "-lm"]
    return [f"-L{directory}", f"-Wl,-rpath,{directory}", "-liomp5"]
