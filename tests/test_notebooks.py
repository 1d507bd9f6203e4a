"""Every notebook in notebooks/: stored clean, only wiring in its cells, and it runs headless.

Notebooks are discovered by glob, so a new notebook is covered without touching this file.
"""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from itlkit.physics.roofline import Deployment, decode_step

NOTEBOOKS_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
CELL_TIMEOUT_SECONDS = 120


def code_cells(path: Path) -> list[tuple[int, str]]:
    notebook = nbformat.read(path, as_version=4)
    return [(i, cell.source) for i, cell in enumerate(notebook.cells) if cell.cell_type == "code"]


def parsed_cells(path: Path) -> list[tuple[int, ast.Module]]:
    """Each code cell as Python; a magic or shell escape that is not plain Python fails here."""
    trees = []
    for i, source in code_cells(path):
        try:
            trees.append((i, ast.parse(source)))
        except SyntaxError as error:
            pytest.fail(f"{path.name} cell {i} is not plain Python (magic?): {error}")
    return trees


def run_notebook(path: Path, extra_cells: list[str] = ()) -> nbformat.NotebookNode:
    """Execute all cells, then ``extra_cells`` in the same kernel, with the notebook dir as cwd."""
    notebook = nbformat.read(path, as_version=4)
    notebook.cells.extend(nbformat.v4.new_code_cell(source) for source in extra_cells)
    client = NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT_SECONDS,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        store_widget_state=False,  # each FigureWidget would add ~5 MB of plotly.js
    )
    client.execute()  # raises CellExecutionError, naming the cell, on the first error
    return notebook


def test_notebooks_are_found():
    assert NOTEBOOKS_DIR / "01_decode_floor.ipynb" in NOTEBOOKS, NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_stored_without_outputs(path: Path):
    notebook = nbformat.read(path, as_version=4)
    dirty = [
        i
        for i, cell in enumerate(notebook.cells)
        if cell.cell_type == "code" and (cell.outputs or cell.execution_count is not None)
    ]
    assert not dirty, f"{path.name}: cells {dirty} have outputs or execution counts (nbstripout)"
    assert "widgets" not in notebook.metadata, f"{path.name} stores widget state (nbstripout)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_cells_define_no_functions_or_classes(path: Path):
    definitions = [
        f"cell {i} line {node.lineno}: {node.name}"
        for i, tree in parsed_cells(path)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    ]
    assert not definitions, f"{path.name} defines code that belongs in itlkit: {definitions}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_cells_do_not_touch_sys_path(path: Path):
    edits = [
        f"cell {i} line {node.lineno}"
        for i, tree in parsed_cells(path)
        for node in ast.walk(tree)
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "path"
            and isinstance(node.value, ast.Name)
            and node.value.id == "sys"
        )
        or (
            isinstance(node, ast.ImportFrom)
            and node.module == "sys"
            and any(alias.name == "path" for alias in node.names)
        )
    ]
    assert not edits, f"{path.name} uses sys.path (itlkit is pip-installed): {edits}"


@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_executes(path: Path, isolated_jupyter):
    notebook = run_notebook(path)
    stderr = [
        f"cell {i}: {output.text.strip()[:300]}"
        for i, cell in enumerate(notebook.cells)
        if cell.cell_type == "code"
        for output in cell.outputs
        if output.output_type == "stream" and output.name == "stderr"
    ]
    assert not stderr, f"{path.name} shows the user warnings or errors: {stderr}"


@pytest.mark.notebook
def test_decode_notebook_batch_slider_updates_figure(isolated_jupyter):
    """Notebook 01 in a live kernel: moving explorer.batch redraws explorer.figure."""
    expected = decode_step(
        Deployment.create(model="llama-3.1-8b", gpu="h100-sxm"),
        batch_size=65,
        context_tokens=4096,
    )
    poke = f"""
import json
from plotly.utils import PlotlyJSONEncoder
before_title = explorer.figure.layout.title.text
before_data = json.dumps([t.to_plotly_json() for t in explorer.figure.data], cls=PlotlyJSONEncoder)
assert explorer.batch.value == 64, explorer.batch.value
assert "batch 64 " in before_title, before_title
explorer.batch.value = 65
title = explorer.figure.layout.title.text
assert "batch 65 " in title, title
assert "floor {expected.floor_seconds * 1e3:.2f} ms" in title, title
after_data = json.dumps([t.to_plotly_json() for t in explorer.figure.data], cls=PlotlyJSONEncoder)
assert after_data != before_data, "the traces did not change"
# the chunk table: no step longer than the whole prefill it belongs to (8,192 > the prompt)
slow, whole = chunk_table["slow step (ms)"], chunk_table["prefill time (ms)"]
assert (slow <= whole).all(), chunk_table
assert chunk_table["slow step (ms)"].iloc[-1] == chunk_table["slow step (ms)"].iloc[-2]
"""
    run_notebook(NOTEBOOKS_DIR / "01_decode_floor.ipynb", extra_cells=[poke])
