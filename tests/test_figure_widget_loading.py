"""The figure widget under a slow page: the cause of the Voila freeze, and the fix, in a browser.

anywidget gives a model 2 s from its creation to load its ESM, then rejects the model's `ready`
promise, and every kernel message to that model awaits it: a model that loads late never applies
an update again (anywidget 0.9-0.11, `AnyModel._handle_comm_msg`). plotly's FigureWidget ships
plotly.js as its ESM, so on a busy 2-core machine the second figure of notebook 04 loaded in
3.0 s and froze (measured: the kernel's `_py2js_relayout` / `_py2js_update` messages reached the
page, the model's `_last_layout_edit_id` stayed 0, no listener ran).

Here every large JavaScript module the page imports is held back 3 s (a top-level await in
front of it), which makes the late load certain instead of 1 in 3. plotly's own FigureWidget
then freezes; itlkit's (`itlkit.widgets._figure.FigureWidget`: a small ESM, plotly's bundle
loaded once per page outside the deadline) applies every update. A second freeze is checked the
same way: after a view is removed and drawn again (a box re-filled), plotly's dead view throws
before the live view hears anything; itlkit's drops the dead view's listeners.
"""

from __future__ import annotations

import nbformat
import pytest
from _lab import TITLES, open_in_lab
from test_present import serve_voila

pytestmark = pytest.mark.browser

# Each figure: its slider sets the title to "<name> <value>"; its button re-fills its box (the
# old view is removed, a new one drawn). No functions in cells: lambdas wire the controls.
CELL = """
import ipywidgets as w
import plotly.graph_objects as go
from itlkit.widgets._figure import figure_widget

stock = go.FigureWidget(go.Figure(go.Scatter(x=[1, 2], y=[1, 2]), layout=dict(title="stock 0")))
ours = figure_widget(go.Figure(go.Scatter(x=[1, 2], y=[2, 1]), layout=dict(title="ours 0")))
rows = []
for name, fig in (("stock", stock), ("ours", ours)):
    slider, refill, box = w.IntSlider(description=name), w.Button(description="refill"), w.VBox()
    box.children = [fig]
    slider.add_class(f"slider-{name}")
    refill.add_class(f"refill-{name}")
    slider.observe(lambda change, fig=fig, name=name: setattr(fig.layout.title, "text",
                   f"{name} {change.new}"), "value")
    refill.on_click(lambda _, box=box, fig=fig: (setattr(box, "children", []),
                    setattr(box, "children", [fig])))
    rows.append(w.VBox([slider, refill, box]))
w.VBox(rows)
"""

# Every JavaScript module over 1 MB (plotly's bundle, whoever imports it) evaluates 3 s late.
SLOW_LARGE_MODULES = """(() => {
    const create = URL.createObjectURL.bind(URL);
    URL.createObjectURL = (blob) => {
        const url = create(blob);
        if (!(blob instanceof Blob) || blob.type !== 'text/javascript' || blob.size < 1e6) {
            return url;
        }
        const late = `await new Promise((r) => setTimeout(r, 3000));
export * from "${url}"; export { default } from "${url}";`;
        return create(new Blob([late], { type: 'text/javascript' }));
    };
})();"""


@pytest.fixture(scope="module")
def slow_page_url(tmp_path_factory):
    base = tmp_path_factory.mktemp("slow-figures")
    root = base / "notebooks"
    root.mkdir()
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(CELL)]),
                   root / "figures.ipynb")  # fmt: skip
    with serve_voila(root, base) as url:
        yield f"{url}/voila/render/figures.ipynb"


def _title_of(page, name: str) -> str:
    return next((t for t in page.evaluate(TITLES) if t.startswith(name)), "")


def _press(page, name: str) -> None:
    page.locator(f".slider-{name} .noUi-handle").first.focus()
    page.keyboard.press("ArrowRight")


def _settles_on(page, name: str, title: str, timeout_ms: int = 10_000) -> bool:
    try:
        page.wait_for_function("([n, t]) => [...document.querySelectorAll('.js-plotly-plot"
                               " .gtitle')].some((e) => e.textContent === t)", arg=[name, title],
                               timeout=timeout_ms)  # fmt: skip
        return True
    except Exception:  # Playwright's timeout: the title never came
        return False


def test_a_late_loading_page_freezes_plotlys_widget_and_not_ours(browser, slow_page_url):
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    page.add_init_script(SLOW_LARGE_MODULES)
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if "Error setting state" in m.text else None)
    try:
        page.goto(slow_page_url, timeout=120_000)
        # a change before plotly's bundle has loaded (the figures are not drawn yet) is held
        # and applied when it has: the figure is first drawn with its title already "ours 1"
        page.locator(".slider-ours .noUi-handle").first.wait_for(timeout=60_000)
        assert page.locator(".js-plotly-plot").count() == 0
        _press(page, "ours")
        for name, title in (("stock", "stock 0"), ("ours", "ours 1")):  # drawn 3 s late
            assert _settles_on(page, name, title, timeout_ms=60_000), page.evaluate(TITLES)
        for value in (2, 3, 4):
            _press(page, "ours")
            assert _settles_on(page, "ours", f"ours {value}"), page.evaluate(TITLES)
        # the cause: plotly's model missed anywidget's 2-s deadline and drops every update
        _press(page, "stock")
        assert not _settles_on(page, "stock", "stock 1", timeout_ms=3_000)
        assert _title_of(page, "stock") == "stock 0"
    finally:
        page.close()


def test_a_view_drawn_again_keeps_updating(browser, slow_page_url):
    page = browser.new_page(viewport={"width": 1280, "height": 1000})  # no delay this time
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if "Error setting state" in m.text else None)
    try:
        page.goto(slow_page_url, timeout=120_000)
        for name in ("ours", "stock"):
            assert _settles_on(page, name, f"{name} 0", timeout_ms=60_000)
            _press(page, name)
            assert _settles_on(page, name, f"{name} 1"), page.evaluate(TITLES)
            page.locator(f".refill-{name}").first.click()  # the old view goes, a new one comes
            page.wait_for_timeout(1_000)
            _press(page, name)
            if name == "ours":
                assert _settles_on(page, "ours", "ours 2"), page.evaluate(TITLES)
                assert errors == []  # nothing of ours threw
        # the second cause: plotly's removed view throws on its purged plot, the live one waits
        assert not _settles_on(page, "stock", "stock 2", timeout_ms=3_000)
        assert any("_guiEditing" in e for e in errors), errors
    finally:
        page.close()


# --- A model made just before plotly's bundle blocks the page ------------------------------------
# Loading plotly's bundle blocks the page's one thread for 1.4-2.5 s (traced: a long task). A
# model made before that block whose own small ESM has not loaded yet waits behind it and misses
# anywidget's 2-s deadline ("[anywidget] Failed to initialize model.": notebook 06's second
# figure and its width-fitting widget failed a fresh-clone CI run so). Here one cell makes three
# figures and a width-fitting widget some time apart, each small ESM loads in five steps (a
# model's loading takes several tasks, and after a block the deadline's timer runs before the
# next step), and the bundle starts 50 ms after it is asked for, then blocks for 2.5 s. Without
# the wait for every listed model (or without the quiet quarter second, or without the kernel's
# list), a model in flight is caught behind the block.
SPACED_CELL = """
import time
import ipywidgets as w
import plotly.graph_objects as go
from itlkit.widgets._figure import FitFiguresToWidth, figure_widget

figures = []
for i in range(3):
    figures.append(figure_widget(go.Figure(go.Scatter(x=[1, 2], y=[1, i]),
                                           layout=dict(title=f"spaced {i} 0"))))
    time.sleep(SPACING_S)
slider = w.IntSlider()
slider.add_class("slider-spaced")
slider.observe(lambda change: [setattr(f.layout.title, "text", f"spaced {i} {change.new}")
                               for i, f in enumerate(figures)], "value")
w.VBox([slider, *figures, FitFiguresToWidth()])
"""

BUNDLE_BLOCKS_SMALL_ESMS_SLOW = """(() => {
    const texts = new WeakMap();  // a module blob's source (JupyterLab's worker blobs are left be)
    const NativeBlob = Blob;
    globalThis.Blob = class extends NativeBlob {
        constructor(parts, options) {
            super(parts, options);
            if (options?.type === 'text/javascript' && typeof parts?.[0] === 'string') {
                texts.set(this, parts[0]);
            }
        }
    };
    const create = URL.createObjectURL.bind(URL);
    URL.createObjectURL = (blob) => {
        const url = create(blob);
        if (!/export *(default|\\{[^}]* as default *\\})/.test(texts.get(blob) ?? '')) return url;
        const hops = window.SMALL_ESM_MS / 5;  // loading takes tasks: one runs, then the next
        const wrapper = blob.size < 1e6
            ? `for (let hop = 0; hop < 5; hop++) await new Promise((r) => setTimeout(r, ${hops}));
export * from "${url}"; export { default } from "${url}";`
            : `await new Promise((r) => setTimeout(r, 50));
const t = performance.now(); while (performance.now() - t < 2500);
const bundle = await import("${url}"); export default bundle.default;`;
        return create(new NativeBlob([wrapper], { type: 'text/javascript' }));
    };
})();"""


# (seconds between figures, ms a small ESM takes): a model made while the first waits for its
# ESM; one made just after the first has loaded (the quiet quarter second); one whose ESM is
# still loading a quarter second after the last model loaded (only the kernel's list knows it)
@pytest.mark.parametrize(("spacing_s", "small_esm_ms"), [(0.1, 150), (0.13, 100), (0.35, 400)])
def test_models_made_before_the_bundle_blocks_the_page_load_in_time(
    browser, lab_server, spacing_s, small_esm_ms
):
    kernel = {"name": "python3", "display_name": "Python 3", "language": "python"}
    cells = [f"SPACING_S = {spacing_s}", SPACED_CELL]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    notebook.metadata["kernelspec"] = kernel
    nbformat.write(notebook, lab_server.root / "spaced.ipynb")
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    page.add_init_script(f"window.SMALL_ESM_MS = {small_esm_ms};")
    page.add_init_script(BUNDLE_BLOCKS_SMALL_ESMS_SLOW)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        open_in_lab(page, lab_server, "spaced.ipynb", figures=3)
        page.wait_for_timeout(1_000)
        assert errors == []
        page.locator(".slider-spaced .noUi-handle").first.focus()
        page.keyboard.press("ArrowRight")
        for i in range(3):  # every model hears the kernel
            assert _settles_on(page, f"spaced {i}", f"spaced {i} 1"), page.evaluate(TITLES)
    finally:
        page.close()
