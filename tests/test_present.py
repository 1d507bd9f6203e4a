"""Present mode: `make present` serves the notebooks with Voila (code hidden, widgets live).

The test starts Voila the way the Makefile does, on a copy of notebooks/, opens notebook 01 as
an app in headless Chromium, checks that no code shows, that the figure fills its area, and that
the batch slider still redraws the plot.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from _lab import TITLE_CONTAINS, layout_problems, press_and_time
from conftest import NOTEBOOKS_DIR, REPO_ROOT, free_port, isolated_jupyter_env

pytestmark = pytest.mark.browser


def present_command() -> list[str]:
    """The `voila ...` arguments of the Makefile's present target."""
    recipe = (REPO_ROOT / "Makefile").read_text().split("\npresent:", 1)[1].split("\n\n", 1)[0]
    line = " ".join(part.strip() for part in recipe.splitlines()[1:]).replace("\\", " ")
    words = line.split()
    assert words[0] == "$(BIN)/voila", words
    return words[1:]


@pytest.fixture(scope="module")
def voila_url(tmp_path_factory):
    base = tmp_path_factory.mktemp("voila")
    root = base / "notebooks"
    shutil.copytree(NOTEBOOKS_DIR, root, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    env = isolated_jupyter_env(base)
    port = free_port()
    args = [a for a in present_command() if not a.startswith("--port=")]
    assert args[0] == "notebooks"
    voila = Path(sys.executable).with_name("voila")
    command = [str(voila), str(root), *args[1:], f"--port={port}",
               f"--Voila.root_dir={root}"]  # fmt: skip
    log = base / "voila.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(command, cwd=base, env=env, stdout=out, stderr=out,
                                stdin=subprocess.DEVNULL)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:  # GET / only lists the tree; the notebook runs when its page is opened
            if proc.poll() is not None:
                raise RuntimeError(f"voila exited: {log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(url + "/", timeout=2):
                    break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"voila not ready: {log.read_text()[-2000:]}") from None
                time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_make_present_is_voila_with_code_hidden():
    args = present_command()
    assert args[0] == "notebooks" and "--no-browser" in args
    assert not any(re.match(r"--(strip_sources|Voila.strip_sources)=False", a) for a in args)


def test_notebook_01_presents_and_its_slider_redraws(voila_url, browser, page_errors,
                                                      artifacts_dir):  # fmt: skip
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    page.on("pageerror", lambda error: page_errors.append(str(error)))
    try:
        page.goto(f"{voila_url}/voila/render/01_decode_floor.ipynb", timeout=120_000)
        page.wait_for_function(TITLE_CONTAINS, arg="batch 64 ", timeout=120_000)
        assert page.locator(".jp-InputArea-editor:visible, .cm-editor:visible").count() == 0
        assert "DecodeExplorer" not in page.content()  # the code is not even in the page
        page.wait_for_timeout(500)
        assert layout_problems(page) == []
        milliseconds = press_and_time(page, ".itlkit-batch .noUi-handle", "ArrowRight")
        assert milliseconds > 0
        page.wait_for_function(TITLE_CONTAINS, arg="batch 65 ", timeout=30_000)
        assert page_errors == []
    finally:
        page.locator(".js-plotly-plot").first.scroll_into_view_if_needed()
        page.screenshot(path=artifacts_dir / "voila-01_decode_floor.png")
        context.close()
