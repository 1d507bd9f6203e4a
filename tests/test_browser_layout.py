"""Notebooks 01 to 05 in a real JupyterLab at 1,280 and 1,920 px, JupyterLab's default
layout (file browser open): no error from a cell or a widget callback, every figure inside its
output area, no clipped title or legend, no cut label, measured from the DOM."""

from __future__ import annotations

from pathlib import Path

import pytest
from _lab import cell_errors, kernel_errors, layout_problems, open_in_lab, press_and_time

pytestmark = pytest.mark.browser

# notebook, figures it draws, the main control's slider handle, the key that moves it, and the
# figure whose title that redraws
NOTEBOOKS = {
    "01_decode_floor.ipynb": (1, ".itlkit-batch .noUi-handle", "ArrowRight", 0),
    "02_chunked_prefill.ipynb": (1, ".itlkit-rate .noUi-handle", "ArrowRight", 0),
    "03_reading_the_histogram.ipynb": (1, ".itlkit-hist-batch .noUi-handle", "ArrowRight", 0),
    "04_postmortem.ipynb": (2, ".itlkit-whatif-budget .noUi-handle", "ArrowRight", 1),
    "05_interview_drill.ipynb": (1, None, None, 0),
}


# Text drawn on the plots that overlaps other such text in the same figure: marker labels, the
# figure's title, the subplot titles (annotations), x tick labels and the legend.
OVERLAPPING_TEXT = """() => {
    const problems = [];
    const texts = '.scatterlayer .textpoint text, .gtitle, .annotation-text, .xtick text, .legend';
    document.querySelectorAll('.js-plotly-plot').forEach((plot, i) => {
        const boxes = [...plot.querySelectorAll(texts)]
            .filter((t) => t.textContent.trim())
            .map((t) => [t.textContent.slice(0, 40), t.getBoundingClientRect()]);
        boxes.forEach(([a, p], j) => boxes.slice(j + 1).forEach(([b, q]) => {
            const dx = Math.min(p.right, q.right) - Math.max(p.left, q.left);
            const dy = Math.min(p.bottom, q.bottom) - Math.max(p.top, q.top);
            if (dx > 1 && dy > 1) problems.push(`figure ${i}: "${a}" overlaps "${b}"`);
        }));
    });
    return problems;
}"""


@pytest.fixture(params=[1280, 1920], ids=lambda w: f"{w}px")
def sized_page(request, browser, page_errors, artifacts_dir: Path):
    context = browser.new_context(viewport={"width": request.param, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.on("pageerror", lambda error: page_errors.append(str(error)))
    yield page, request.param
    context.close()


@pytest.mark.parametrize("notebook", list(NOTEBOOKS))
def test_notebook_layout_and_errors(sized_page, lab_server, page_errors, artifacts_dir, notebook):
    page, width = sized_page
    figures, handle, key, redrawn = NOTEBOOKS[notebook]
    shot = artifacts_dir / f"layout-{notebook.removesuffix('.ipynb')}-{width}.png"
    try:
        open_in_lab(page, lab_server, notebook, figures=figures)
        assert page.locator(".jp-FileBrowser").first.is_visible()  # the default layout
        assert layout_problems(page) == []
        assert page.evaluate(OVERLAPPING_TEXT) == []
        page.evaluate("() => { window.jupyterapp.shell.collapseLeft(); }")  # wider output area
        page.wait_for_timeout(800)
        assert layout_problems(page) == []  # the figures followed
        page.evaluate("() => { window.jupyterapp.shell.expandLeft(); }")
        page.wait_for_timeout(800)
        assert layout_problems(page) == []
        if handle:
            press_and_time(page, handle, key, figure=redrawn)
            page.wait_for_timeout(1500)  # the browser's echo reaches the kernel after the redraw
            assert layout_problems(page) == []
            assert page.evaluate(OVERLAPPING_TEXT) == []
        assert cell_errors(page) == []
        assert kernel_errors(page) == []
        assert page_errors == []
    finally:
        plots = page.locator(".js-plotly-plot")
        if plots.count():
            plots.first.scroll_into_view_if_needed()
        page.screenshot(path=shot)
