"""A release outside the checkout: the wheel built from this tree, installed into a fresh virtual
environment elsewhere, gives a working `polyflow`, `polyflow-cc`, Python API and `polyflow
serve`, with nothing read from the checkout.

The wheel and the OpenMP runtime's package (intel-openmp: its libraries land in the
environment's lib/, where polyflow links them from) are installed for real; the other pinned
dependencies (MLIR, LLVM, isl, ...: hundreds of MB) are reused from the test's own environment
through a .pth file over a directory of links that leaves out polyflow's own packages, so that
only the wheel can provide them.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# polyflow's packages come from the wheel; intel-openmp is installed for real (its runtime files)
OURS = ("polyflow", "server", "bench_polybench", "__editable__", "_polyflow", "intel_openmp")

PROGRAM = """#include <stdio.h>
static double a[2000][300];
void smooth(int n, int m, double a[2000][300]) {
  for (int i = 0; i < n; i++)
    for (int j = 1; j < m; j++) a[i][j] = 0.5 * (a[i][j] + a[i][j - 1]);
}
int main(void) {
  for (int i = 0; i < 2000; i++) for (int j = 0; j < 300; j++) a[i][j] = (i * j) % 11;
  smooth(2000, 300, a);
  double s = 0;
  for (int i = 0; i < 2000; i++) s += a[i][299];
  printf("%.6f\\n", s);
  return 0;
}
"""


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment outside the checkout with the wheel of this tree installed."""
    tmp = tmp_path_factory.mktemp("wheel")
    dist = tmp / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(dist), str(ROOT)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    (wheel,) = dist.glob("polyflow-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for needed in ("polyflow/cli.py", "polyflow/frontend/c_pragmas.py", "server/app.py"):
        assert needed in names, needed
    env_dir = tmp / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    python = env_dir / "bin" / "python"
    # the heavy dependencies, without polyflow's own packages
    deps = tmp / "deps"
    deps.mkdir()
    site = Path(sysconfig.get_paths()["purelib"])
    for entry in site.iterdir():
        if not entry.name.startswith(OURS) and entry.suffix != ".pth":
            (deps / entry.name).symlink_to(entry)
    target_site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    (target_site / "build-dependencies.pth").write_text(f"{deps}\n")
    openmp = next(line for line in (ROOT / "pyproject.toml").read_text().splitlines()
                  if '"intel-openmp==' in line).strip().strip('",')  # fmt: skip
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
         str(wheel), openmp],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return env_dir


def _env(tmp: Path) -> dict[str, str]:
    # nothing of this checkout: no PYTHONPATH, a cache of its own
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return {**env, "POLYFLOW_CACHE_DIR": str(tmp / "cache"), "PATH": "/usr/bin:/bin"}


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=_env(cwd), capture_output=True, text=True)


def test_the_commands_and_the_api_work_from_the_wheel(fresh: Path, tmp_path: Path) -> None:
    bin_dir = fresh / "bin"
    version = _run([str(bin_dir / "polyflow"), "--version"], tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("polyflow "), version.stderr
    where = _run(
        [str(bin_dir / "python"), "-c", "import polyflow; print(polyflow.__file__)"], tmp_path
    )
    assert where.stdout.startswith(str(fresh)), where.stdout  # the wheel's, not the checkout's
    (tmp_path / "smooth.c").write_text(PROGRAM)
    subprocess.run(["gcc", "-O2", "smooth.c", "-o", "ref"], cwd=tmp_path, check=True)
    built = _run([str(bin_dir / "polyflow-cc"), "-O3", "smooth.c", "-o", "prog"], tmp_path)
    assert built.returncode == 0, built.stderr
    assert "Traceback" not in built.stderr and "no OpenMP runtime" not in built.stderr
    expected = subprocess.run(["./ref"], cwd=tmp_path, capture_output=True, text=True).stdout
    actual = subprocess.run(
        ["./prog"], cwd=tmp_path, capture_output=True, text=True, env={"OMP_NUM_THREADS": "2"}
    ).stdout
    assert actual == expected
    symbols = subprocess.run(["nm", "prog"], cwd=tmp_path, capture_output=True, text=True).stdout
    assert "__kmpc_fork_call" in symbols  # parallel, with the runtime linked in
    api = _run(
        [str(bin_dir / "python"), "-c",
         "import numpy as np, polyflow\n"
         "f = polyflow.compile_c('void twice(int n, double *x) "
         "{ for (int i = 0; i < n; i++) x[i] *= 2; }', 'twice')\n"
         "x = np.arange(4.0); f(4, x); print(x.tolist())"],
        tmp_path,
    )  # fmt: skip
    assert api.returncode == 0, api.stderr
    assert api.stdout.strip() == "[0.0, 2.0, 4.0, 6.0]"


def test_the_service_runs_from_the_wheel(fresh: Path, tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [str(fresh / "bin" / "polyflow"), "serve", "--port", str(port), "--workers", "1"],
        cwd=tmp_path,
        env=_env(tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(300):
            try:
                with urllib.request.urlopen(url + "/v1/healthz", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail("the service did not start")
        body = json.dumps(
            {"language": "c", "source": "int add(int a, int b) { return a + b; }"}
        ).encode()
        request = urllib.request.Request(
            url + "/v1/compile", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=120) as response:
            result = json.loads(response.read())
        assert response.status == 200 and "kernel.o" in result["artifacts"]
    finally:
        server.terminate()
        server.wait(timeout=30)
