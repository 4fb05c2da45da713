"""IR-in/IR-out tests: every `tests/lit/**/*.mlir` runs its `// RUN:` lines (polyflow-opt piped
into filecheck, as in LLVM's lit); `%s` is the file. A RUN line fails the test when its
pipeline exits non-zero (bash with pipefail), so a FileCheck mismatch or a crash both fail."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from polyflow.toolchain import llvm_bin

LIT_DIR = Path(__file__).parent / "lit"
BIN = Path(sys.executable).parent
FILES = sorted(LIT_DIR.rglob("*.mlir"))


def run_lines(path: Path) -> list[str]:
    lines, current = [], ""
    for line in path.read_text().splitlines():
        match = re.match(r"\s*//\s*RUN:\s?(.*)$", line)
        if not match:
            continue
        part = match.group(1)
        if part.endswith("\\"):
            current += part[:-1] + " "
            continue
        lines.append(current + part)
        current = ""
    return lines


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(LIT_DIR)) for p in FILES])
def test_lit(path: Path) -> None:
    runs = run_lines(path)
    assert runs, f"{path} has no RUN line"
    # polyflow-opt and filecheck from the venv, `not` from LLVM's tools
    tools = f"{BIN}{os.pathsep}{llvm_bin('llc').parent}"
    env = {**os.environ, "PATH": f"{tools}{os.pathsep}{os.environ.get('PATH', '')}"}
    for command in runs:
        command = command.replace("%s", str(path))
        proc = subprocess.run(
            ["bash", "-o", "pipefail", "-c", command],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        assert proc.returncode == 0, f"RUN: {command}\n{proc.stdout}\n{proc.stderr}"
