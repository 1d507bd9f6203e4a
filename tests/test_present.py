"""Present mode: `make present` serves the notebooks with Voila (code hidden, widgets live).

The tests start Voila the way the Makefile does, on a copy of notebooks/, and open notebooks as
apps in headless Chromium: no code shows, no cell or page error, the figures fill their output
areas, and the main control still redraws its figure. Notebook 04 is the walk-through a team
follows: its four section headings show in order.

Their screenshots (test-artifacts/voila-*.png) are taken at a device scale of 0.7, about 900 px
wide, so they can go into docs/screenshots/ for the README as they are (after pngquant).
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from _lab import TITLE_CONTAINS, cell_errors, layout_problems, press_and_time
from conftest import NOTEBOOKS_DIR, REPO_ROOT, free_port, isolated_jupyter_env

pytestmark = pytest.mark.browser

SCREENSHOT_SCALE = 0.7  # 1,280 px pages give ~900 px screenshots, the README's size

# Notebook 04's walk-through, in the order a team follows it (markdown headings).
SECTIONS = ["1 · The evidence", "2 · The verdict", "3 · What if", "4 · The report"]

# Each heading's text (without JupyterLab's "¶" anchor), its top in px, and whether it shows.
HEADINGS = """() => [...document.querySelectorAll('.jp-RenderedMarkdown h2')].map((h) => {
    const box = h.getBoundingClientRect();
    return [h.textContent.replace('¶', '').trim(), box.top + window.scrollY,
            box.width > 0 && box.height > 0 && getComputedStyle(h).visibility !== 'hidden'];
})"""
STDERR_OUTPUTS = ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
# Outputs that are not widgets: printed text, a bare value (issue 19: a monospace print that broke
# words, a bare 4853241)
RAW_OUTPUTS = ".jp-OutputArea-output.jp-RenderedText, .jp-OutputArea-output pre"
# Each section's live part: the top of its first match, in page px (None when absent)
LIVE_PARTS = {
    "1 · The evidence": ".js-plotly-plot",  # the heatmap
    "2 · The verdict": ".itlkit-verdict",
    "3 · What if": ".itlkit-whatif-budget",
    "4 · The report": ".itlkit-report-link",
}
TOPS = """(selectors) => selectors.map((s) => {
    const all = [...document.querySelectorAll(s)];
    const el = s === '.js-plotly-plot' ? all[0] : all[all.length - 1];
    return el ? el.getBoundingClientRect().top + window.scrollY : null;
})"""


def present_command() -> list[str]:
    """The `voila ...` arguments of the Makefile's present target."""
    recipe = (REPO_ROOT / "Makefile").read_text().split("\npresent:", 1)[1].split("\n\n", 1)[0]
    line = " ".join(part.strip() for part in recipe.splitlines()[1:]).replace("\\", " ")
    words = line.split()
    assert words[0] == "$(BIN)/voila", words
    return words[1:]


def present_page(browser, page_errors):
    """A 1,280 px page (screenshots at SCREENSHOT_SCALE) that records uncaught page errors."""
    context = browser.new_context(viewport={"width": 1280, "height": 1000},
                                  device_scale_factor=SCREENSHOT_SCALE)  # fmt: skip
    page = context.new_page()
    page.on("pageerror", lambda error: page_errors.append(str(error)))
    return context, page


@contextlib.contextmanager
def serve_voila(root: Path, base: Path) -> Iterator[str]:
    """Voila started as `make present` starts it, serving `root`; yields its URL."""
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


@pytest.fixture(scope="module")
def voila_url(tmp_path_factory):
    base = tmp_path_factory.mktemp("voila")
    root = base / "notebooks"
    shutil.copytree(NOTEBOOKS_DIR, root, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    with serve_voila(root, base) as url:
        yield url


def test_make_present_is_voila_with_code_hidden():
    args = present_command()
    assert args[0] == "notebooks" and "--no-browser" in args
    assert not any(re.match(r"--(strip_sources|Voila.strip_sources)=False", a) for a in args)


def test_notebook_01_presents_and_its_slider_redraws(voila_url, browser, page_errors,
                                                      artifacts_dir):  # fmt: skip
    context, page = present_page(browser, page_errors)
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


def test_notebook_04_presents_as_a_walk_through(voila_url, browser, page_errors, artifacts_dir):
    context, page = present_page(browser, page_errors)
    try:
        page.goto(f"{voila_url}/voila/render/04_postmortem.ipynb", timeout=120_000)
        page.wait_for_function(TITLE_CONTAINS, arg="what-if (budget 512,", timeout=120_000)
        page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot .gtitle')"
                               ".length >= 2", timeout=60_000)  # fmt: skip
        page.get_by_text("4 · The report").first.wait_for(timeout=60_000)
        page.locator(".itlkit-report-link").first.wait_for(timeout=60_000)  # the export ran
        assert page.locator(".jp-InputArea-editor:visible, .cm-editor:visible").count() == 0
        assert "PostmortemExplorer(" not in page.content()  # the code is not even in the page

        headings = page.evaluate(HEADINGS)
        found = [(text, top, shown) for text, top, shown in headings
                 if any(text.startswith(section) for section in SECTIONS)]  # fmt: skip
        assert [text for text, _, _ in found] == SECTIONS, headings
        assert all(shown for _, _, shown in found), found
        tops = [top for _, top, _ in found]
        assert tops == sorted(tops) and len(set(tops)) == len(tops), found
        # each section holds its own live part, between its heading and the next
        parts = page.evaluate(TOPS, list(LIVE_PARTS.values()))
        bounds = [*tops, float("inf")]
        for i, (section, top) in enumerate(zip(LIVE_PARTS, parts, strict=True)):
            assert top is not None and bounds[i] < top < bounds[i + 1], (section, top, bounds)
        assert page.locator(RAW_OUTPUTS).all_text_contents() == []
        assert "go back to the panel" not in page.content().lower()

        assert layout_problems(page) == []
        assert cell_errors(page) == []
        assert page.locator(STDERR_OUTPUTS).all_text_contents() == []

        # every press redraws (it froze in about 1 run in 3 before the figure's ESM was made
        # small: see itlkit/widgets/_figure.py and tests/test_figure_widget_loading.py)
        for budget in range(576, 576 + 10 * 64, 64):
            milliseconds = press_and_time(page, ".itlkit-whatif-budget .noUi-handle",
                                          "ArrowRight", figure=1, timeout_ms=30_000)  # fmt: skip
            assert milliseconds > 0  # the title changed: "recomputing…" first, then the numbers
            page.wait_for_function(TITLE_CONTAINS, arg=f"what-if (budget {budget},",
                                   timeout=30_000)  # fmt: skip
        page.wait_for_timeout(1_000)  # the slider's echo reaches the kernel after the redraw
        assert layout_problems(page) == []
        assert cell_errors(page) == []
        assert page.locator(STDERR_OUTPUTS).all_text_contents() == []
        assert page_errors == []
    finally:
        plots = page.locator(".js-plotly-plot")
        for index, name in [(1, "voila-04_postmortem-whatif.png"), (0, "voila-04_postmortem.png")]:
            if plots.count() > index:
                plots.nth(index).scroll_into_view_if_needed()
                page.wait_for_timeout(300)
            page.screenshot(path=artifacts_dir / name)
        context.close()


@pytest.mark.parametrize("notebook", ["02_chunked_prefill.ipynb", "03_reading_the_histogram.ipynb"])
def test_notebook_presents_without_errors(voila_url, browser, page_errors, artifacts_dir,
                                          notebook):  # fmt: skip
    context, page = present_page(browser, page_errors)
    try:
        page.goto(f"{voila_url}/voila/render/{notebook}", timeout=120_000)
        page.wait_for_function("() => document.querySelector('.js-plotly-plot .gtitle')",
                               timeout=120_000)  # fmt: skip
        page.wait_for_timeout(500)
        assert page.locator(".jp-InputArea-editor:visible, .cm-editor:visible").count() == 0
        assert layout_problems(page) == []
        assert cell_errors(page) == []
        assert page.locator(STDERR_OUTPUTS).all_text_contents() == []
        assert page_errors == []
    finally:
        plots = page.locator(".js-plotly-plot")
        if plots.count():
            plots.first.scroll_into_view_if_needed()
            page.wait_for_timeout(300)
        page.screenshot(path=artifacts_dir / f"voila-{notebook.removesuffix('.ipynb')}.png")
        context.close()
