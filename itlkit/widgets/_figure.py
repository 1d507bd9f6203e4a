"""Updating a FigureWidget in place without tripping plotly's widget protocol.

plotly.js echoes every trace back to the kernel after a restyle; a property that Python holds as a
numpy array comes back as a typed-array dict, and plotly's `_remove_overlapping_props` then tests
the array's truth value (`ValueError: The truth value of an array ... is ambiguous`, raised in the
kernel, shown only in JupyterLab's log console). Plain lists round-trip cleanly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

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


def update_traces(figure: go.FigureWidget, data: Iterable[Mapping]) -> None:
    """Give each trace of `figure`, in order, the properties in `data` (as plain lists)."""
    for trace, values in zip(figure.data, data, strict=True):
        trace.update(plain(values))


# plotly's FigureWidget draws itself before JupyterLab or Voila has attached it to the page, so
# an autosized figure starts at plotly's default 700 px and never hears of later size changes
# (its resize hooks are Lumino messages, which anywidget views do not get). This watcher sits in
# the explorer's box and turns every change of the box's size into the window resize event that
# responsive plotly figures listen to: right width at first draw, and after the side panel or
# the window changes.
_FIT_ESM = """
export default {
  render({ el }) {
    el.classList.add("itlkit-fit-figures");
    let frame = 0;
    const fit = () => {
      cancelAnimationFrame(frame);
      frame = requestAnimationFrame(() => window.dispatchEvent(new Event("resize")));
    };
    // the box, and each figure once drawn: a figure first drawn at 700 px is refitted at once
    const sizes = new ResizeObserver(fit);
    const seen = new WeakSet();
    const scan = (box) => box.querySelectorAll(".main-svg").forEach((svg) => {
      if (!seen.has(svg)) { seen.add(svg); sizes.observe(svg); }
    });
    let box = null, tries = 0;
    const drawn = new MutationObserver(() => scan(box));
    const watch = () => {
      // anywidget renders into a detached element: wait until it is in the page, in the box
      if (!el.isConnected) { if (tries++ < 600) requestAnimationFrame(watch); return; }
      box = el.closest(".widget-box") || el.parentElement;
      sizes.observe(box);
      drawn.observe(box, { childList: true, subtree: true });
      scan(box);
    };
    watch();
    return () => { sizes.disconnect(); drawn.disconnect(); };
  }
};
"""


class FitFiguresToWidth(anywidget.AnyWidget):
    """An invisible widget: responsive figures in the same box follow the box's width."""

    _esm = traitlets.Unicode(_FIT_ESM).tag(sync=True)
