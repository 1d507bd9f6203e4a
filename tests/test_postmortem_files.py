"""Notebook 04's files: uploads and the report never touch shared temp paths, nothing is left.

The attack this guards against: another user of the machine plants a symlink at the fixed name
the report used to be written to in the shared temp folder, and the export overwrote its target.
"""

from __future__ import annotations

import os
import stat
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import pytest

from itlkit.bundled import scenario_folder
from itlkit.widgets.postmortem import UPLOAD, PostmortemExplorer

NOW = datetime(2026, 12, 3, tzinfo=UTC)


@pytest.fixture(scope="module")
def explorer():
    return PostmortemExplorer(scenario="mixed")


def _upload(explorer, items):
    """Set the FileUpload's value as the browser does (ipywidgets 8: name, type, size, content)."""
    explorer.source.value = UPLOAD
    explorer.upload.value = tuple(
        {"type": "text/plain", "size": len(i["content"]), "last_modified": NOW, **i} for i in items
    )
    explorer.reload()


def _uploads_left() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("itlkit-upload-*")}


def test_report_without_a_path_goes_to_a_private_new_folder(explorer, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (tmp_path / "itlkit-postmortem.html").symlink_to(victim)  # planted at the old fixed name
    path = explorer.export_report()
    assert victim.read_text() == "keep me"
    assert path.parent != tmp_path and path.parent.parent == tmp_path
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "<html" in path.read_text().lower()


def test_uploads_are_read_then_removed(explorer, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # not /tmp: others use it too
    before = _uploads_left()
    assert before == set()
    files = sorted(scenario_folder("preemption").glob("metrics-*.prom"))[:8]
    _upload(explorer, [{"name": f.name, "content": memoryview(f.read_bytes())} for f in files])
    assert "Cannot diagnose" not in explorer.verdict.value
    assert _uploads_left() == before


def test_upload_names_cannot_escape_the_folder(explorer, tmp_path):
    page = next(scenario_folder("healthy").glob("metrics-*.prom")).read_bytes()
    outside = Path(tempfile.gettempdir()) / "escaped.prom"
    _upload(explorer, [{"name": "../escaped.prom", "content": page}])
    assert not outside.exists()
    _upload(explorer, [{"name": "..", "content": page}])
    assert "is not a file name" in explorer.verdict.value
    explorer.source.value = "mixed"
    explorer.reload()


def test_write_never_follows_a_symlink(tmp_path):
    from itlkit.widgets.postmortem import _write_new_file

    victim = tmp_path / "victim"
    victim.write_text("keep")
    os.symlink(victim, tmp_path / "link")
    with pytest.raises(FileExistsError):
        _write_new_file(tmp_path / "link", "x")
    assert victim.read_text() == "keep"
