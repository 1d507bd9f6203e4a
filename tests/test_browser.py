"""Notebook 01 in a real JupyterLab, driven by headless Chromium: the batch slider moves the plot.

Every wait is bounded (shared/spec/jupyter-testing.md, pitfalls 2 and 3): JavaScript commands are
fired and forgotten, and the test then waits on the page with Playwright's timed waits.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _lab import KERNEL_READY

from itlkit.bundled import scenario_folder
from itlkit.physics.roofline import Deployment, decode_step

pytestmark = pytest.mark.browser

NOTEBOOK = "01_decode_floor.ipynb"
TITLE = ".js-plotly-plot .gtitle"
BATCH_HANDLE = ".itlkit-batch .noUi-handle"
BATCH_READOUT = ".itlkit-batch .widget-readout"

TITLE_CONTAINS = """(parts) => {
    const title = document.querySelector('.js-plotly-plot .gtitle');
    return !!title && parts.every((part) => title.textContent.includes(part));
}"""


def floor_ms(batch_size: int) -> str:
    step = decode_step(
        Deployment.create(model="llama-3.1-8b", gpu="h100-sxm"),
        batch_size=batch_size,
        context_tokens=4096,
    )
    return f"floor {step.floor_seconds * 1e3:.2f} ms"


def wait_for_title(page, *parts: str, timeout_ms: int) -> str:
    """Wait until the plot title shows every part; fail with the title actually shown."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(TITLE_CONTAINS, arg=list(parts), timeout=timeout_ms)
    except PlaywrightTimeout:
        titles = page.locator(TITLE).all_text_contents()
        pytest.fail(f"plot title never showed {parts} within {timeout_ms} ms; it shows {titles}")
    return page.locator(TITLE).first.text_content()


def test_batch_slider_redraws_plot_in_jupyterlab(
    page, lab_server, page_errors, console_errors, artifacts_dir: Path
):
    # `page` first: without Chromium the test skips (or fails under CI) before starting the server.
    try:
        page.goto(lab_server.lab_url(NOTEBOOK))
        page.wait_for_function(
            "() => window.jupyterapp && document.querySelector('.jp-Notebook .jp-Cell')",
            timeout=60_000,
        )
        page.wait_for_function(KERNEL_READY, timeout=90_000)
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")

        title_before = wait_for_title(page, "batch 64 ", floor_ms(64), timeout_ms=90_000)
        assert page.locator(BATCH_READOUT).first.text_content().strip() == "64"

        page.evaluate("() => { window.jupyterapp.shell.collapseLeft(); }")  # room for the plot
        page.locator(BATCH_HANDLE).first.focus()
        page.keyboard.press("ArrowRight")

        title_after = wait_for_title(page, "batch 65 ", floor_ms(65), timeout_ms=30_000)
        assert title_after != title_before
        assert page.locator(BATCH_READOUT).first.text_content().strip() == "65"
    finally:
        page.screenshot(path=artifacts_dir / "jupyterlab_01_decode_floor.png")
    assert not page_errors, f"uncaught errors in the page: {page_errors}; console: {console_errors}"


TITLES_CONTAIN = """(parts) => {
    const nodes = document.querySelectorAll('.js-plotly-plot .gtitle');
    const titles = [...nodes].map((t) => t.textContent);
    return parts.every((part) => titles.some((title) => title.includes(part)));
}"""


def test_postmortem_verdict_and_whatif_in_jupyterlab(
    page, lab_server, page_errors, console_errors, artifacts_dir: Path
):
    from itlkit.diagnosis.evidence import timeline_from_frame
    from itlkit.diagnosis.scoring import diagnose
    from itlkit.metrics.readers import read_scrape_folder

    scenario = scenario_folder() / "mixed"
    expected = diagnose(
        timeline_from_frame(read_scrape_folder(scenario)),
        Deployment.create(model="llama-3.1-8b", gpu="h100-sxm"),
        max_num_batched_tokens=2048,
    )
    floor = f"floor {expected.floor_seconds * 1e3:.2f} ms"
    try:
        page.goto(lab_server.lab_url("04_postmortem.ipynb"))
        page.wait_for_function(
            "() => window.jupyterapp && document.querySelector('.jp-Notebook .jp-Cell')",
            timeout=60_000,
        )
        page.wait_for_function(KERNEL_READY, timeout=90_000)
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        page.wait_for_function(TITLES_CONTAIN, arg=[floor, "what-if (budget 512,"], timeout=120_000)
        verdict = page.get_by_text(expected.verdict.split(" (score")[0]).first
        assert verdict.is_visible()

        page.evaluate("() => { window.jupyterapp.shell.collapseLeft(); }")
        page.locator(".itlkit-whatif-budget .noUi-handle").first.focus()
        page.keyboard.press("ArrowRight")  # 512 -> 576 tokens: re-simulates in the kernel
        page.wait_for_function(TITLES_CONTAIN, arg=["what-if (budget 576,"], timeout=60_000)
    finally:
        page.screenshot(path=artifacts_dir / "jupyterlab_04_postmortem.png", full_page=True)
    assert not page_errors, f"uncaught errors in the page: {page_errors}; console: {console_errors}"
