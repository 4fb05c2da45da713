"""Every example of the README that needs neither a GPU, the service nor a benchmark run runs
as written: each ```python block as a program, each `polyflow ...` line of the ```sh blocks as
a command, in a directory holding a copy of `examples/` (the files the examples name)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)


def _blocks(language: str) -> list[str]:
    text = (ROOT / "README.md").read_text()
    return [body for lang, body in BLOCK.findall(text) if lang == language]


def _commands() -> list[str]:
    """The `polyflow build`/`tc`/`cc`/`explain` lines of the sh blocks, with their `F=...` variables
    substituted and comments dropped."""
    out = []
    for block in _blocks("sh"):
        variables: dict[str, str] = {}
        for line in block.splitlines():
            line = line.split(" #", 1)[0].strip()
            if match := re.fullmatch(r"(\w+)=(\S+)", line):
                variables[match.group(1)] = match.group(2)
            elif line.startswith(("polyflow build", "polyflow tc", "polyflow cc", "polyflow ex")):
                for name, value in variables.items():
                    line = line.replace(f"${name}", value)
                out.append(line)
    return out


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    return tmp_path


def test_the_readme_has_examples_to_run() -> None:
    assert len(_blocks("python")) >= 3 and len(_commands()) >= 10


@pytest.mark.parametrize("command", _commands())
def test_readme_command(command: str, workdir: Path) -> None:
    args = shlex.split(command)
    proc = subprocess.run(
        [sys.executable, "-m", "polyflow", *args[1:]],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"{command}\n{proc.stderr[-2000:]}"
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("index", range(len(_blocks("python"))))
def test_readme_python_block(index: int, workdir: Path) -> None:
    code = _blocks("python")[index]
    env = {**os.environ, "MPLBACKEND": "Agg"}
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, f"{code}\n{proc.stderr[-2000:]}"
