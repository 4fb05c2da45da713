"""polyflow: a polyhedral optimizing compiler for C loop nests and Tensor Comprehensions."""

from polyflow.errors import CompileError, GpuUnavailable
from polyflow.options import Options
from polyflow.version import __version__

__all__ = ["CompileError", "GpuUnavailable", "Options", "__version__", "build_program", "compile_c", "raise_report", "show"]


# submodules reachable as attributes of `import polyflow` (loaded on first use)
_SUBMODULES = ("tc", "remote")


def __getattr__(name: str):  # lazy: importing polyflow must not load MLIR
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module(f"polyflow.{name}")
    if name == "compile_c":
        from polyflow.drivers.jit import compile_c

        return compile_c
    if name == "build_program":
        from polyflow.drivers.build import build_program

        return build_program
    if name == "show":
        from polyflow.display import show

        return show
    if name == "raise_report":
        from polyflow.drivers.reports import raise_report

        return raise_report
    raise AttributeError(name)
