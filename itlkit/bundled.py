"""Bundled example data: package data under `itlkit/data/`, found with `importlib.resources`."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path


def bundled_path(*parts: str) -> Path:
    """The path of a bundled example file or folder, e.g. `bundled_path("scenarios", "mixed")`."""
    return Path(os.fspath(resources.files("itlkit").joinpath("data", *parts)))


def scenario_folder(name: str = "") -> Path:
    """A bundled golden incident (or, with no name, the folder that holds them all)."""
    return bundled_path("scenarios", name) if name else bundled_path("scenarios")
