"""Bundled example data: the top-level `data/` of a checkout (examples, golden incidents, the
calibration, real pages and runs with their provenance), which an installed package carries
inside itself (pyproject.toml maps it to itlkit/data; the third-party real pages and runs stay out,
see data/README.md)."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

_CHECKOUT_DATA = Path(__file__).resolve().parents[1] / "data"


def data_root() -> Path:
    """`data/` beside the package in a checkout (an editable install too), else the copy an
    installed package carries."""
    if (_CHECKOUT_DATA / "scenarios").is_dir():
        return _CHECKOUT_DATA
    return Path(os.fspath(resources.files("itlkit").joinpath("data")))


def bundled_path(*parts: str) -> Path:
    """The path of a bundled example file or folder, e.g. `bundled_path("scenarios", "mixed")`."""
    return data_root().joinpath(*parts)


def scenario_folder(name: str = "") -> Path:
    """A bundled golden incident (or, with no name, the folder that holds them all)."""
    return bundled_path("scenarios", name) if name else bundled_path("scenarios")
