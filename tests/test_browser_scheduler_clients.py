"""Notebook 02's traffic controls in a real JupyterLab at 1,280 and 1,920 px (file browser open,
JupyterLab's default): choosing a client or a spread through the page shows that client's own
sliders and hides the others, the title says which client ran, and with the most controls shown
(a closed loop with spread lengths: eight rows of traffic controls) the figure stays in view
below them and no label is cut. Screenshots with the cell at the top go to test-artifacts/."""

from __future__ import annotations

from pathlib import Path

import pytest
from _lab import (
    FIRST_FIGURE_IN_VIEW,
    TITLE_CONTAINS,
    cell_errors,
    kernel_errors,
    layout_problems,
    open_in_lab,
)

pytestmark = pytest.mark.browser

NOTEBOOK = "02_chunked_prefill.ipynb"
FIGURE_IN_VIEW = 0.5  # as tests/test_browser_layout.py asks of the default controls


def _choose(page, handle: str, label: str, title_part: str) -> None:
    """Pick `label` in the dropdown `handle` and wait for the figure's title to show it."""
    page.locator(f"{handle} select").first.select_option(label=label)
    page.wait_for_function(TITLE_CONTAINS, arg=title_part, timeout=60_000)


def _visible(page, handle: str) -> bool:
    return page.locator(handle).first.is_visible()


def _figure_in_view(page) -> dict:
    page.wait_for_timeout(500)  # the redraw settles
    return page.evaluate(FIRST_FIGURE_IN_VIEW)  # scrolls the cell to the top


def test_the_clients_controls_keep_the_figure_in_view(
    sized_page, lab_server, page_errors, artifacts_dir: Path
):
    page, width = sized_page
    shot = artifacts_dir / f"clients-02_chunked_prefill-{width}"
    try:
        open_in_lab(page, lab_server, NOTEBOOK)
        assert not _visible(page, ".itlkit-concurrency")
        _choose(page, ".itlkit-client", "closed loop (max concurrency)", "at most 16 in flight")
        _choose(page, ".itlkit-spread", "lognormal with a spread", "at most 16 in flight")
        page.wait_for_function(
            "() => document.body.textContent.includes('lognormal lengths (sigma 0.5)')"
        )
        assert _visible(page, ".itlkit-concurrency") and _visible(page, ".itlkit-rate")
        seen = _figure_in_view(page)
        page.screenshot(path=f"{shot}-closed.png")
        assert seen["shown"] >= FIGURE_IN_VIEW, (
            f"{seen['shown']:.0%} of the figure in view below the closed loop's controls: its "
            f"top {seen['top']:.0f} px down a {page.viewport_size['height']} px window"
        )
        assert layout_problems(page) == []
        _choose(page, ".itlkit-client", "burst (all at t = 0)", "a burst of 100 at t = 0")
        assert not _visible(page, ".itlkit-concurrency") and not _visible(page, ".itlkit-rate")
        _figure_in_view(page)
        page.screenshot(path=f"{shot}-burst.png")
        assert layout_problems(page) == []
        assert cell_errors(page) == []
        assert kernel_errors(page) == []
        assert page_errors == []
    finally:  # the figure as the last client drew it
        plots = page.locator(".js-plotly-plot")
        if plots.count():
            plots.first.scroll_into_view_if_needed()
            page.wait_for_timeout(500)  # the notebook draws the cells scrolled into view
        page.screenshot(path=f"{shot}-figure.png")
