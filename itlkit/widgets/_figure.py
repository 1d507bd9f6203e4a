"""Updating a FigureWidget in place without tripping plotly's widget protocol.

plotly.js echoes every trace back to the kernel after a restyle; a property that Python holds as a
numpy array comes back as a typed-array dict, and plotly's `_remove_overlapping_props` then tests
the array's truth value (`ValueError: The truth value of an array ... is ambiguous`, raised in the
kernel, shown only in JupyterLab's log console). Plain lists round-trip cleanly.

A redraw hands plotly only the properties that differ from what the figure holds: plotly
validates every value it is given before it finds that most of them did not change (a 200-point
curve costs about 1 ms), so a slider that moves one marker would pay for every curve.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

import anywidget
import numpy as np
import plotly.graph_objects as go
import traitlets


def plain(value):
    """`value` with every numpy array (and numpy scalar) turned into lists and Python numbers."""
    if isinstance(value, np.ndarray | np.generic):
        return value.tolist()
    if isinstance(value, Mapping):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    return value


def figure_widget(figure: go.Figure) -> go.FigureWidget:
    """A FigureWidget showing `figure`, its arrays held as lists."""
    data = [plain(trace.to_plotly_json()) for trace in figure.data]
    widget = go.FigureWidget(data=data, layout=figure.layout)
    widget._config = {"responsive": True}  # plotly.js resizes it on every window resize
    return widget


def changes(held: Mapping | None, wanted: Mapping, *, nested: bool = False) -> Iterator:
    """(dotted path, value) of each property in `wanted` that `held` does not hold already.

    A property below the top level that `held` has and `wanted` lacks comes back as None
    (removed), as plotly's `update(..., overwrite=True)` replaces a whole nested object; one at
    the top level is kept, as there. `wanted` holds plain values (see `plain`)."""
    held = held or {}
    for key, value in wanted.items():
        old = held.get(key)
        if isinstance(value, Mapping) and isinstance(old, Mapping):
            yield from ((f"{key}.{path}", v) for path, v in changes(old, value, nested=True))
        elif old != value and not (value == [] and not old):
            yield key, value
    if nested:
        yield from ((key, None) for key in held.keys() - wanted.keys())


def _apply(target, wanted: Mapping) -> None:
    # plotly keeps what the kernel set (not plotly.js's defaults) in `_props`, plain as sent
    for path, value in list(changes(target._props, wanted)):
        target[path] = value


def update_traces(figure: go.FigureWidget, data: Iterable[Mapping]) -> None:
    """Give each trace of `figure`, in order, the properties in `data` (as plain lists); only
    those that changed reach plotly."""
    for trace, values in zip(figure.data, data, strict=True):
        _apply(trace, plain(values))


def update_figure(figure: go.FigureWidget, spec: Mapping) -> None:
    """Make `figure` show `spec` ({"data": traces, "layout": ...}, same traces in the same
    order), sending only what changed; call it inside `figure.batch_update()`. Annotations are
    replaced as a whole (none in `spec`: none shown); the template is left alone."""
    update_traces(figure, [{k: v for k, v in t.items() if k != "type"} for t in spec["data"]])
    _apply(figure.layout, {"annotations": [], **plain(spec["layout"])})


# plotly's FigureWidget draws itself before JupyterLab or Voila has attached it to the page, so
# an autosized figure starts at plotly's default 700 px and never hears of later size changes
# (its resize hooks are Lumino messages, which anywidget views do not get). This watcher sits in
# the explorer's box and refits every figure in it whose drawn width differs from its container's:
# when the box or a figure changes size, and on a short schedule after each change (a figure
# drawn while still hidden ignores the first refit). A responsive figure keeps its refit handler
# on its element (`_responsiveChartHandler`); the window resize event it listens to is the
# fallback.
_FIT_ESM = """
export default {
  render({ el }) {
    el.classList.add("itlkit-fit-figures");
    let box = null, tries = 0, checks = [];
    const misfit = (gd) => {
      const svg = gd.querySelector(".main-svg"), host = gd.parentElement;
      if (!svg || !host || !gd.offsetParent) return false;
      return Math.abs(svg.getBoundingClientRect().width - host.clientWidth) > 2;
    };
    const refit = () => {
      const figures = [...box.querySelectorAll(".js-plotly-plot")].filter(misfit);
      figures.forEach((gd) => gd._responsiveChartHandler && gd._responsiveChartHandler());
      if (figures.some((gd) => !gd._responsiveChartHandler)) {
        window.dispatchEvent(new Event("resize"));
      }
    };
    const fit = () => {  // now, and again while the page settles
      checks.forEach(clearTimeout);
      checks = [0, 100, 300, 700, 1500, 3000, 6000].map((ms) => setTimeout(refit, ms));
    };
    const sizes = new ResizeObserver(fit);
    const seen = new WeakSet();
    const scan = () => box.querySelectorAll(".main-svg").forEach((svg) => {
      if (!seen.has(svg)) { seen.add(svg); sizes.observe(svg); fit(); }
    });
    const drawn = new MutationObserver(scan);
    const watch = () => {
      // anywidget renders into a detached element: wait until it is in the page, in the box
      if (!el.isConnected) { if (tries++ < 1200) requestAnimationFrame(watch); return; }
      box = el.closest(".widget-box") || el.parentElement;
      sizes.observe(box);
      drawn.observe(box, { childList: true, subtree: true });
      scan();
      fit();
    };
    watch();
    return () => { sizes.disconnect(); drawn.disconnect(); checks.forEach(clearTimeout); };
  }
};
"""


class FitFiguresToWidth(anywidget.AnyWidget):
    """An invisible widget: responsive figures in the same box follow the box's width."""

    _esm = traitlets.Unicode(_FIT_ESM).tag(sync=True)
