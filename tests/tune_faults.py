"""Tasks that misbehave on purpose, for the tuner's tests (imported by the worker processes:
the tests put the repository root on PYTHONPATH).

Each is a `CProgram` that behaves normally for the default build and misbehaves for candidates
choosing one option value, so a test knows which candidates must be discarded and why.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from polyflow.options import Options
from polyflow.tune.tasks import Built, CProgram, Measured


@dataclass
class CrashingCompiler(CProgram):
    """The compiler process dies (abort) for candidates that do not tile."""

    def build(self, options: Options, scratch: Path) -> Built:
        if not options.tile:
            os.abort()
        return super().build(options, scratch)


@dataclass
class WrongOutput(CProgram):
    """Candidates without statement splitting print a different last number (as a miscompile
    would)."""

    def run(self, built: Built, cores: list[int], timeout: float) -> Measured:
        measured = super().run(built, cores, timeout)
        if not self.building_split:
            words = str(measured.output).split()
            words[-1] = str(float(words[-1]) + 1.0)
            measured.output = " ".join(words)
        return measured

    def build(self, options: Options, scratch: Path) -> Built:
        self.building_split = options.split
        return super().build(options, scratch)

    building_split: bool = True


@dataclass
class HangingBuild(CProgram):
    """The compile of candidates that use the 'isl' preset never ends."""

    def build(self, options: Options, scratch: Path) -> Any:
        if options.schedule_preset == "isl":
            time.sleep(3600)
        return super().build(options, scratch)
