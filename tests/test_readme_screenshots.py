"""The README's screenshots: every image it references is in the repository, a PNG, small.

They come from the present-mode browser tests (test-artifacts/voila-*.png, taken at a device scale
of 0.7) and are committed compressed under docs/screenshots/ (pngquant).
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
README = REPO_ROOT / "README.md"
MAX_BYTES = 200_000
MAX_WIDTH_PX = 1_000  # about 900 px: sharp on the page, small in the repository
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# ![alt](path "title") and <img src="path">
IMAGE_REFERENCE = re.compile(r"!\[[^\]]*\]\(\s*([^)\s]+)[^)]*\)|<img\s[^>]*src=\"([^\"]+)\"")


def referenced_images(markdown: str) -> list[str]:
    return [a or b for a, b in IMAGE_REFERENCE.findall(markdown)]


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from the PNG's IHDR chunk, which the PNG spec puts first."""
    head = path.read_bytes()[:24]
    assert head[:8] == PNG_SIGNATURE and head[12:16] == b"IHDR", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


def test_references_are_found():
    text = ('![a](docs/x.png) text ![b](docs/y.png "a title")\n'
            '<img src="docs/w.png" width="400"> [a link](docs/not-an-image.md)')  # fmt: skip
    assert referenced_images(text) == ["docs/x.png", "docs/y.png", "docs/w.png"]


IMAGES = referenced_images(README.read_text())


def test_readme_shows_screenshots():
    assert any(image.startswith("docs/screenshots/") for image in IMAGES), IMAGES


@pytest.mark.parametrize("image", IMAGES)
def test_referenced_image_exists_and_is_small(image: str):
    assert not re.match(r"[a-z]+://", image), f"{image}: the README's images live in the repository"
    path = REPO_ROOT / image
    assert path.is_file(), f"README references {image}, which does not exist"
    size = path.stat().st_size
    assert size < MAX_BYTES, f"{image} is {size:,} bytes (limit {MAX_BYTES:,}): pngquant it"
    width, _ = png_size(path)
    assert width <= MAX_WIDTH_PX, f"{image} is {width} px wide (limit {MAX_WIDTH_PX})"
