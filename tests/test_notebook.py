"""The demo notebook (examples/demo.ipynb) runs top to bottom in a real Jupyter kernel (this
venv's python3, through nbclient), every cell without error, its kernels' results checked
against NumPy in the notebook itself; the kernel's rich repr shows the per-loop table and
`polyflow.show` displays highlighted HTML."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbclient
import nbformat

NOTEBOOK = Path(__file__).resolve().parents[1] / "examples" / "demo.ipynb"


def html_outputs(cell: Any) -> list[str]:
    return [o["data"]["text/html"] for o in cell.outputs if "text/html" in o.get("data", {})]


def test_the_demo_notebook_is_committed_without_outputs() -> None:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(notebook)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert code and all(not c.outputs and c.execution_count is None for c in code)


def test_the_demo_notebook_runs_top_to_bottom() -> None:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},  # the kernel's directory
    )
    client.execute()  # CellExecutionError at the first cell that raises (a failed assert too)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert not [o for o in cell.outputs if o.output_type == "error"], cell.source

    [shown] = [c for c in notebook.cells if "kernel-repr" in c.metadata.get("tags", [])]
    [page] = html_outputs(shown)
    assert '<table class="polyflow-loops"' in page
    assert "<th" in page and ">micro-kernel</th>" in page and ">why not</th>" in page
    assert "last call: M=96, K=64, N=80" in page
    assert "<code>affine-opt</code>" in page  # a block per stage
    bundle = shown.outputs[0]["data"]
    assert "| function | where | raised |" in bundle["text/markdown"]

    shows = [c for c in notebook.cells if c.source.startswith("polyflow.show(")]
    assert len(shows) == 2
    for cell in shows:
        [highlighted] = html_outputs(cell)
        assert highlighted.lstrip().startswith('<div class="highlight"><pre')
        assert "affine.for" in highlighted or "scf.for" in highlighted
