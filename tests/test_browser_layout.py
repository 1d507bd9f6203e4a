"""Notebooks 01 to 06 in a real JupyterLab at 1,280 and 1,920 px, JupyterLab's default
layout (file browser open): no error from a cell or a widget callback, no toast over the page,
every figure inside its output area, no clipped title or legend, no cut label, no legend over an
axis title or tick label, no marker text cut by its plot, every heatmap row labelled, round
ticks, and the explorers' figures in view below their controls; measured from the DOM. The
figures' text is also checked in states the notebooks reach after more clicks, drawn by
plotly.js in a bare page."""

from __future__ import annotations

import json
from pathlib import Path

import plotly
import plotly.io as pio
import pytest
from _lab import (
    FIGURE_PROBLEMS,
    FIRST_FIGURE_IN_VIEW,
    cell_errors,
    figure_problems,
    kernel_errors,
    layout_problems,
    open_in_lab,
    press_and_time,
    problems_of_each_figure_in_view,
    toasts,
)

pytestmark = pytest.mark.browser

# notebook, figures it draws, the main control's slider handle, the key that moves it, and the
# figure whose title that redraws
NOTEBOOKS = {
    "01_decode_floor.ipynb": (1, ".itlkit-batch .noUi-handle", "ArrowRight", 0),
    "02_chunked_prefill.ipynb": (1, ".itlkit-rate .noUi-handle", "ArrowRight", 0),
    "03_reading_the_histogram.ipynb": (1, ".itlkit-hist-batch .noUi-handle", "ArrowRight", 0),
    "04_postmortem.ipynb": (2, ".itlkit-whatif-budget .noUi-handle", "ArrowRight", 1),
    "05_interview_drill.ipynb": (1, None, None, 0),
    "06_capacity_plan.ipynb": (2, ".itlkit-itl-target .noUi-handle", "ArrowLeft", 0),
}
# The explorers whose figure shows below its controls: with the cell at the top of the notebook,
# at least FIGURE_IN_VIEW of the figure is in the window (a reader who scrolled to the controls
# sees what they drive).
FIGURE_BELOW_CONTROLS = {"01_decode_floor.ipynb", "02_chunked_prefill.ipynb"}
FIGURE_IN_VIEW = 0.5


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


@pytest.mark.parametrize("notebook", list(NOTEBOOKS))
def test_notebook_layout_and_errors(sized_page, lab_server, page_errors, artifacts_dir, notebook):
    page, width = sized_page
    figures, handle, key, redrawn = NOTEBOOKS[notebook]
    shot = artifacts_dir / f"layout-{notebook.removesuffix('.ipynb')}-{width}.png"
    try:
        open_in_lab(page, lab_server, notebook, figures=figures)
        assert page.locator(".jp-FileBrowser").first.is_visible()  # the default layout
        assert toasts(page) == []
        assert layout_problems(page) == []
        assert page.evaluate(OVERLAPPING_TEXT) == []
        assert figure_problems(page) == []
        if notebook in FIGURE_BELOW_CONTROLS:
            seen = page.evaluate(FIRST_FIGURE_IN_VIEW)
            assert seen["shown"] >= FIGURE_IN_VIEW, (
                f"{seen['shown']:.0%} of the figure in view below its controls: its top "
                f"{seen['top']:.0f} px down a {page.viewport_size['height']} px window"
            )
        # the figures follow a wider output area, then a narrower one, each seen in view (after
        # "run all" notebook 04's first figure is out of view, where JupyterLab lays nothing out)
        page.evaluate("() => { window.jupyterapp.shell.collapseLeft(); }")
        page.wait_for_timeout(800)
        assert problems_of_each_figure_in_view(page) == []
        page.evaluate("() => { window.jupyterapp.shell.expandLeft(); }")
        page.wait_for_timeout(800)
        assert problems_of_each_figure_in_view(page) == []
        if handle:
            press_and_time(page, handle, key, figure=redrawn)
            page.wait_for_timeout(1500)  # the browser's echo reaches the kernel after the redraw
            assert layout_problems(page) == []
            assert page.evaluate(OVERLAPPING_TEXT) == []
            assert figure_problems(page) == []
        assert cell_errors(page) == []
        assert kernel_errors(page) == []
        assert page_errors == []
    finally:
        plots = page.locator(".js-plotly-plot")
        if plots.count():
            plots.first.scroll_into_view_if_needed()
            page.wait_for_timeout(500)  # the notebook draws the cells scrolled into view
        page.screenshot(path=shot)


# Output-area widths of JupyterLab at 1,280 and 1,920 px with the file browser open
OUTPUT_WIDTHS_PX = (848, 1488)


def _states() -> dict[str, object]:
    """Figures as the notebooks draw them after clicks the JupyterLab test does not make: 01 at
    the sliders' ends, 02 with chunked prefill off ("now" by the left edge read "ow"), at budget
    256, overloaded at 6 requests/s, 03 with the slow mode from SGLang's and vLLM's policies, and 04
    for every bundled incident."""
    import plotly.graph_objects as go

    from itlkit.bundled import bundled_path
    from itlkit.physics.roofline import Deployment
    from itlkit.plots.decode import decode_figure, decode_view
    from itlkit.plots.postmortem import timeline_figure, whatif_figure
    from itlkit.plots.scheduler import scheduler_figure, scheduler_view
    from itlkit.sim.scheduler import SchedulerConfig
    from itlkit.widgets.histogram import HistogramExplorer
    from itlkit.widgets.postmortem import PostmortemExplorer, bundled_scenarios

    figures = {}
    deployment = Deployment.create(model="llama-3.1-8b", gpu="h100-sxm")
    for batch, context, chunk, mfu in [
        (1, 128, 0, 0.5),
        (1, 128, 64, 0.5),
        (1024, 131072, 16384, 0.5),
        (1024, 4096, 16384, 1.0),
    ]:
        at = Deployment.create(model="llama-3.1-8b", gpu="h100-sxm", mfu=mfu)
        view = decode_view(at, batch_size=batch, context_tokens=context, chunk_tokens=chunk)
        name = f"01 at batch {batch}, context {context}, chunk {chunk}, MFU {mfu:g}"
        figures[name] = decode_figure(view)
    for rate, budget, chunked in [(3.0, 2048, False), (3.0, 256, True), (6.0, 2048, True)]:
        config = SchedulerConfig(max_num_batched_tokens=budget, max_num_seqs=256,
                                 enable_chunked_prefill=chunked)  # fmt: skip
        view = scheduler_view(deployment, rate_per_second=rate, prompt_tokens=4096,
                              output_tokens=768, config=config)  # fmt: skip
        figures[f"02 at {rate:g}/s, budget {budget}, chunked {chunked}"] = scheduler_figure(view)
    data = bundled_path()
    examples = {"SGLang · prefill alone": data / "scenarios" / "sglang_prefill_stall",
                "burst": data / "synthetic-v0.11-llama-3.1-8b-h100-burst"}  # fmt: skip
    explorer = HistogramExplorer(examples=examples, batch_size=64, context_tokens=2560)
    figures["03 SGLang page, slow mode from SGLang's policy"] = go.Figure(explorer.figure)
    explorer.example.value = "burst"  # a vLLM page after it: vLLM's mixed step
    figures["03 vLLM page, slow mode from vLLM's policy"] = go.Figure(explorer.figure)
    for scenario in bundled_scenarios():
        p = PostmortemExplorer(scenario=scenario)
        figures[f"04 {scenario} timeline"] = timeline_figure(p.diagnosis)
        figures[f"04 {scenario} what-if"] = whatif_figure(p.diagnosis, p.baseline, p.prediction)
    return figures


def test_figure_text_in_more_states(browser):
    """FIGURE_PROBLEMS on each figure of `_states`, drawn by plotly.js at both widths."""
    bundle = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    specs = {name: json.loads(pio.to_json(fig)) for name, fig in _states().items()}
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    draw = """([spec, width]) => {
        const div = document.getElementById('figure');
        div.style.width = `${width}px`;
        return Plotly.newPlot(div, spec.data, spec.layout).then(() => null);
    }"""
    try:
        page.set_content(f"<script>{bundle.read_text()}</script><div id='figure'></div>")
        problems = []
        for width in OUTPUT_WIDTHS_PX:
            for name, spec in specs.items():
                page.evaluate(draw, [spec, width])
                found = page.evaluate(FIGURE_PROBLEMS) + page.evaluate(OVERLAPPING_TEXT)
                problems += [f"{name} at {width} px: {p}" for p in found]
                page.evaluate("() => Plotly.purge(document.getElementById('figure'))")
        assert not problems, "\n".join(problems)
    finally:
        page.close()
