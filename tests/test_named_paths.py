"""Every path the README, data/README.md and the notebooks name exists (issue 19, item 10: the
README and notebook 04 sent readers to a data/README.md that did not exist)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# a repository path: starts at a top-level folder of the project, or ../ from notebooks/
PATH = re.compile(
    r"(?<![\w/.-])((?:\.\./)?(?:data|tests|notebooks|docs|benchmarks|itlkit)/[\w./-]*[\w/])"
)


def _texts() -> list[tuple[str, Path, str]]:
    """(where, folder its relative paths start from, text) for each document."""
    texts = [(name, ROOT, (ROOT / name).read_text()) for name in ("README.md", "data/README.md")]
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for i, cell in enumerate(json.loads(notebook.read_text())["cells"]):
            texts.append((f"{notebook.name} cell {i}", notebook.parent, "".join(cell["source"])))
    return texts


def _named() -> list[tuple[str, str, Path]]:
    found = []
    for where, base, text in _texts():
        for path in PATH.findall(text):
            if "<" in path or "*" in path:
                continue
            start = base if path.startswith("../") else ROOT
            found.append((where, path, start))
    return found


def test_the_documents_name_paths():
    named = {path for _, path, _ in _named()}
    assert "data/README.md" in named and "data/scenarios/prefill_interference" in named


@pytest.mark.parametrize(("where", "path", "start"), _named(), ids=lambda v: str(v)[:60])
def test_a_named_path_exists(where, path, start):
    assert (start / path).exists(), f"{where} names {path}, which does not exist"
